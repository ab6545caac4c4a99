"""Bring-your-own predictions cannot crown a leak: LLMRec's catalogue cell (sequential/sequential) never
offers a row's candidates, and answers made of them are flagged in `score` and in reports.

The case: a system that ranks each row's candidates by popularity (one script reused for direct and
sequential) scored 0.267 NDCG@10 on the catalogue cell of `make demo`'s build, bold above SASRec's 0.210.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.tasks.llmrec import data
from tests.dataset_builder.llmrec.fixture import read, synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_leak"))


def _popular_candidates(build: Path, protocol: str | None) -> list[dict]:
    """Each sequential test row answered with its candidates (the direct row of its id) by popularity."""
    counts = Counter(row["parent_asin"] for row in read(build, "interactions", "train"))
    lines = []
    for row in read(build, "direct", "test"):
        ranked = sorted(row["candidates"], key=lambda asin: (-counts[asin], asin))[:10]
        line = {"config": "sequential", "id": row["id"], "prediction": ranked}
        lines.append(line if protocol is None else {**line, "protocol": protocol})
    return lines


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _score(build: Path, predictions: Path, *extra: str) -> int:
    argv = [
        "--no-progress",
        "score",
        "--task",
        "llmrec",
        "--data",
        str(build),
        "--predictions",
        str(predictions),
    ]
    return main([*argv, *extra])


def test_catalogue_leak_sequential_rows_offer_no_candidates(build) -> None:
    row = read(build, "sequential", "test")[0]
    assert "candidates" not in row and "target_position" not in row
    (doc,) = data.load_docs(str(build), "sequential", "test", max_docs=1)
    direct = {r["id"]: r for r in read(build, "direct", "test")}
    assert doc.candidates == tuple(direct[doc.id]["candidates"])  # the candidates cell still ranks them


def test_catalogue_leak_a_line_without_its_cell_is_refused(build, tmp_path, capsys) -> None:
    assert _score(build, _write(tmp_path / "p.jsonl", _popular_candidates(build, None))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert '"protocol": "sequential" or "protocol": "sequential-candidates"' in err


def test_catalogue_leak_candidates_ranked_for_the_catalogue_cell_are_flagged(build, tmp_path, capsys) -> None:
    path = _write(tmp_path / "leak.jsonl", _popular_candidates(build, "sequential"))
    assert _score(build, path, "--out", str(tmp_path / "leak"), "--label", "pop-candidates") == 0
    printed = capsys.readouterr().out
    assert "(leak)" in printed and "Leak (pop-candidates, sequential/sequential)" in printed
    assert '"protocol": "sequential-candidates"' in printed
    (cell,) = json.loads((tmp_path / "leak" / "scores.json").read_text())["cells"]
    leak = cell["leak"]
    assert leak["flagged"] and leak["inside"] == leak["answered"] > 0
    assert leak["expected"] < 0.1 * leak["answered"]


def test_catalogue_leak_report_never_crowns_the_leak(build, tmp_path, capsys) -> None:
    path = _write(tmp_path / "leak.jsonl", _popular_candidates(build, "sequential"))
    assert _score(build, path, "--out", str(tmp_path / "leak"), "--label", "pop-candidates") == 0
    argv = ["--no-progress", "evaluate", "--task", "llmrec", "--data", str(build), "--subsets", "sequential"]
    baselines = ["--protocols", "sequential", "--engine", "baseline", "--model", "popularity"]
    assert main([*argv, *baselines, "--out", str(tmp_path / "pop")]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "--no-progress",
                "report",
                str(tmp_path / "leak"),
                str(tmp_path / "pop"),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    board = json.loads((tmp_path / "r" / "leaderboard.json").read_text())[0]
    rows = {row["label"]: row["cells"]["sequential/sequential"] for row in board["rows"]}
    leaked, honest = rows["pop-candidates"], rows["popularity"]
    assert leaked["metrics"]["ndcg@10"]["value"] > honest["metrics"]["ndcg@10"]["value"]  # it would win
    assert not leaked["metrics"]["ndcg@10"].get("best") and "leak" in leaked
    assert "leak" not in honest  # ranking the whole catalogue is not flagged
    markdown = (tmp_path / "r" / "leaderboard.md").read_text()
    assert "(leak)" in markdown and "Leak (pop-candidates, sequential/sequential)" in markdown
    assert "**" + f"{leaked['metrics']['ndcg@10']['value']:.3f}" not in markdown


def test_catalogue_leak_the_same_answers_in_the_candidates_cell_are_not_flagged(build, tmp_path) -> None:
    path = _write(tmp_path / "cands.jsonl", _popular_candidates(build, "sequential-candidates"))
    assert _score(build, path, "--out", str(tmp_path / "c")) == 0
    (cell,) = json.loads((tmp_path / "c" / "scores.json").read_text())["cells"]
    assert cell["protocol"] == "sequential-candidates" and "leak" not in cell


def test_catalogue_leak_rescoring_keeps_the_flag(build, tmp_path, capsys) -> None:
    path = _write(tmp_path / "leak.jsonl", _popular_candidates(build, "sequential"))
    assert _score(build, path, "--out", str(tmp_path / "leak")) == 0
    capsys.readouterr()
    assert main(["--no-progress", "score", str(tmp_path / "leak"), "--task", "llmrec", "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert cell["leak"]["flagged"]
