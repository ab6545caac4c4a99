"""`perrecbench build --task NAME`: the registry of builder families, the shared reading of the raw files
(review title and text, item store, categories and details) and the shared build, through a toy family."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builder import tasks
from perrec_eval.cli import main as cli_main

REVIEWS = [  # U1 reviewed I1 twice: the earliest review is kept
    {"rating": 5.0, "title": "Great", "text": "Loved it.", "parent_asin": "I1", "user_id": "U1",
     "timestamp": 1_600_000_000_000},
    {"rating": 2.0, "title": "Later", "text": "Changed my mind.", "parent_asin": "I1", "user_id": "U1",
     "timestamp": 1_600_000_500_000},
    {"rating": 3.0, "title": 7, "text": "A number as title.", "parent_asin": "I2", "user_id": "U2",
     "timestamp": 1_600_000_100_000},
]  # fmt: skip
META = [
    {"parent_asin": "I1", "title": "Book One", "author": {"name": "Ann"}, "store": "Ann's Store",
     "categories": ["Books", "Fiction"], "details": {"Publisher": "P", "Language": "English"}},
    {"parent_asin": "I2", "title": "Book Two", "store": None, "categories": "not a list", "details": []},
]  # fmt: skip


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the toy family (tests/dataset_builder/toy_family.py) as ``--task toy``."""
    module = "tests.dataset_builder.toy_family"
    monkeypatch.setitem(tasks._FAMILIES, "toy", tasks._Family(f"{module}:ToyConfig", f"{module}:BUILDER"))


def write_raw(folder: Path) -> Path:
    folder.mkdir()
    for name, rows in (("Books.jsonl", REVIEWS), ("meta_Books.jsonl", META)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def help_of(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli_main(args)
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_build_tasks_unknown_task_ends_in_one_line_listing_the_known_ones(capsys) -> None:
    assert cli_main(["build", "--task", "nope", "--source", "raw", "--out", "bench"]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()  # the known families are listed, the default first
    assert line.startswith("perrecbench: error: unknown task 'nope': choose one of perrecbench")
    assert line.endswith("(`perrecbench tasks` lists them)")


def test_build_tasks_help_shows_the_named_family_options(toy, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    default = help_of(["build", "--help"], capsys)
    assert "--window-days" in default and "--min-rating" not in default
    text = help_of(["build", "--task", "toy", "--help"], capsys)
    assert "--min-rating" in text and "--window-days" not in text
    assert "a test family" in text and "--work-dir" in text  # its description and the shared settings


def test_build_tasks_toy_family_builds_through_the_shared_build(toy, tmp_path: Path, capsys, caplog) -> None:
    source = write_raw(tmp_path / "raw")
    out = tmp_path / "bench"
    args = ["build", "--task", "toy", "--source", str(source), "--out", str(out), "--domains", "Books"]
    assert cli_main(args) == 0
    assert capsys.readouterr().out.strip() == f"toy built in {out}"
    reviews = pq.read_table(out / "Books-reviews.parquet").to_pylist()
    assert [(r["user_id"], r["parent_asin"], r["rating"], r["title"], r["text"]) for r in reviews] == [
        ("U1", "I1", 5.0, "Great", "Loved it."),  # the earliest of U1's two reviews of I1
        ("U2", "I2", 3.0, None, "A number as title."),  # a title that is not text is missing, not bad
    ]
    meta = {row["parent_asin"]: row for row in pq.read_table(out / "Books-meta.parquet").to_pylist()}
    assert (meta["I1"]["author"], meta["I1"]["store"], meta["I1"]["categories"]) == (
        "Ann",
        "Ann's Store",
        ["Books", "Fiction"],
    )
    assert json.loads(meta["I1"]["details"]) == {"Publisher": "P", "Language": "English"}
    assert (meta["I2"]["store"], meta["I2"]["categories"], meta["I2"]["details"]) == (None, None, None)
    recorded = json.loads((out / "manifest.json").read_text())
    assert recorded["selection"]["Books"]["duplicates"] == 1
    assert recorded["parameters"] == {"source": "raw", "min_rating": 1.0}
    assert recorded["task"] == "toy"  # PerRecBench's manifests name no task, as before families existed
    caplog.set_level("INFO", logger="dataset_builder.stages")
    assert cli_main([*args, "--overwrite"]) == 0  # the stage cache serves the toy family too
    assert "Books: inputs unchanged since the last run, reusing stage" in caplog.text
    assert cli_main([*args, "--overwrite", "--min-rating", "4"]) == 0  # its own setting is in the key
    assert len(pq.read_table(out / "Books-reviews.parquet")) == 1
