"""`perrecbench sft data --task llmrec`: examples from the train split only, no validation or test target."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perrec_eval.cli import main
from tests.dataset_builder.llmrec.fixture import read, synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_sft"))


def _examples(build: Path, out: Path, fmt: str) -> list[dict]:
    argv = ["sft", "data", "--task", "llmrec", "--data", str(build), "--format", fmt, "--out", str(out)]
    assert main(argv) == 0
    info = json.loads((out / "sft_data.json").read_text())
    return pq.read_table(out / info["file"]).to_pylist()


@pytest.mark.parametrize("fmt", ["rating", "sequential", "direct", "mixed"])
def test_sft_data_examples_hold_no_validation_or_test_target(build, tmp_path, fmt) -> None:
    rows = _examples(build, tmp_path / fmt, fmt)
    train_ids = {
        row["id"] for config in ("rating", "sequential", "direct") for row in read(build, config, "train")
    }
    assert rows and {row["id"] for row in rows} <= train_ids
    titles = Counter(item["title"] for item in read(build, "items", "train"))
    held_out: dict[str, set[str]] = {}  # per user: titles only a validation or test target has
    for split in ("validation", "test"):
        for row in read(build, "sequential", split):
            if titles[row["title"]] == 1:
                held_out.setdefault(row["user_id"], set()).add(row["title"])
    assert held_out
    for row in rows:
        user = row["id"].split(":")[1]
        text = json.dumps([*row["prompt"], *row["completion"]], ensure_ascii=False)
        assert not any(
            json.dumps(title, ensure_ascii=False)[1:-1] in text for title in held_out.get(user, ())
        )


def test_sft_data_formats_count_their_train_rows(build, tmp_path) -> None:
    rows = _examples(build, tmp_path / "mixed", "mixed")
    train = {config: len(read(build, config, "train")) for config in ("rating", "sequential", "direct")}
    assert Counter(row["format"] for row in rows) == train
