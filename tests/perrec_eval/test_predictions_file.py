"""`perrecbench score --task NAME --data DIR --predictions FILE.jsonl`: another system's predictions scored
like a run, for every general-path family (LLMRec and RecBench+ on small synthetic builds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.registry import get
from perrec_eval.tasks.llmrec import data as llmrec_data
from perrec_eval.tasks.recbench_plus.task import load_docs as recbench_docs
from tests.dataset_builder.llmrec.fixture import synth_build
from tests.dataset_builder.recbench_plus.fixture import build, synth


@pytest.fixture(scope="module")
def llmrec(tmp_path_factory) -> Path:
    return synth_build(tmp_path_factory.mktemp("byo-llmrec"))


@pytest.fixture(scope="module")
def recbench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("byo-rb")
    return build(root / "bench", synth(root / "raw"))


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _score(capsys, task: str, bench: Path, predictions: Path, *extra: str) -> dict:
    args = ["--no-progress", "score", "--task", task, "--data", str(bench), "--predictions", str(predictions)]
    assert main([*args, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _values(scores: dict) -> dict[str, dict[str, float | None]]:
    return {c["subset"]: {k: v["value"] for k, v in c["metrics"].items()} for c in scores["cells"]}


def _llmrec_truth(bench: Path) -> list[dict]:
    lines = []
    for config in ("rating", "sequential", "direct"):
        for doc in llmrec_data.load_docs(str(bench), config, "test"):
            value = doc.truth if config == "rating" else [doc.truth]
            lines.append({"config": config, "protocol": config, "id": doc.id, "prediction": value})
    return lines


def _recbench_truth(bench: Path, config: str = "explicit") -> list[dict]:
    return [
        {
            "config": config,
            "protocol": "recommend",
            "id": doc.id,
            "prediction": [g["title"] for g in doc.truth["ground_truth"]],
        }
        for doc in recbench_docs(str(bench), config, "test")
    ]


def test_predictions_file_llmrec_truth_scores_hits_one_and_errors_zero(llmrec, tmp_path, capsys):
    scores = _values(_score(capsys, "llmrec", llmrec, _write(tmp_path / "p.jsonl", _llmrec_truth(llmrec))))
    for config in ("sequential", "direct"):
        assert scores[config]["hr@1"] == 1.0 and scores[config]["ndcg@10"] == 1.0
    assert scores["rating"]["rmse"] == 0.0 and scores["rating"]["mae"] == 0.0


def test_predictions_file_llmrec_rows_left_out_count_as_failed(llmrec, tmp_path, capsys):
    lines = [line for line in _llmrec_truth(llmrec) if line["config"] == "direct"]
    scores = _score(capsys, "llmrec", llmrec, _write(tmp_path / "p.jsonl", lines[1:]))
    (cell,) = scores["cells"]
    assert cell["subset"] == "direct" and cell["num_docs"] == len(lines) and cell["num_failed"] == 1
    assert cell["metrics"]["hr@1"]["value"] == pytest.approx((len(lines) - 1) / len(lines))


def test_predictions_file_llmrec_answer_text_is_parsed_as_a_model_answer(llmrec, tmp_path, capsys):
    docs = llmrec_data.load_docs(str(llmrec), "rating", "test")
    lines = [{"config": "rating", "id": d.id, "prediction": f"I'd say {d.truth:g} stars"} for d in docs]
    scores = _values(_score(capsys, "llmrec", llmrec, _write(tmp_path / "p.jsonl", lines)))
    assert scores["rating"]["rmse"] == 0.0


def test_predictions_file_recbench_truth_scores_recall_precision_and_match_one(recbench, tmp_path, capsys):
    scores = _values(
        _score(capsys, "recbench-plus", recbench, _write(tmp_path / "p.jsonl", _recbench_truth(recbench)))
    )
    assert scores["explicit"]["recall"] == scores["explicit"]["precision"] == 1.0
    assert scores["explicit"]["condition_match"] == 1.0 and scores["explicit"]["ftr"] == 0.0


def test_predictions_file_recbench_empty_answer_fails_and_one_item_does_not(recbench, tmp_path, capsys):
    lines = _recbench_truth(recbench)
    lines = [{**lines[0], "prediction": ""}, {**lines[1], "prediction": lines[1]["prediction"][:1]}]
    scores = _score(capsys, "recbench-plus", recbench, _write(tmp_path / "p.jsonl", lines))
    predictions = {p["id"]: p for p in _run_predictions(recbench, tmp_path, lines)}
    assert predictions[lines[0]["id"]]["prediction"] is None
    assert len(predictions[lines[1]["id"]]["prediction"]) == 1
    (cell,) = scores["cells"]
    total = cell["num_docs"]
    assert cell["metrics"]["ftr"]["value"] == pytest.approx(
        (total - 1) / total
    )  # only the one-item row answered


def _run_predictions(bench: Path, tmp_path: Path, lines: list[dict]) -> list[dict]:
    out = tmp_path / "run"
    args = ["--no-progress", "score", "--task", "recbench-plus", "--data", str(bench)]
    assert main([*args, "--predictions", str(_write(tmp_path / "q.jsonl", lines)), "--out", str(out)]) == 0
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_predictions_file_out_is_a_run_that_report_compares(recbench, tmp_path, capsys):
    truth = _write(tmp_path / "truth.jsonl", _recbench_truth(recbench))
    args = ["--no-progress", "score", "--task", "recbench-plus", "--data", str(recbench), "--predictions"]
    assert main([*args, str(truth), "--out", str(tmp_path / "a"), "--label", "oracle"]) == 0
    base = ["--no-progress", "evaluate", "--task", "recbench-plus", "--data", str(recbench)]
    assert main([*base, "--engine", "baseline", "--model", "popularity", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "--no-progress",
                "report",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    report = "".join(p.read_text() for p in (tmp_path / "r").rglob("*.md"))
    assert "oracle" in report and "popularity" in report
    rescored = _score_run(capsys, tmp_path / "a")
    assert _values(rescored)["explicit"]["recall"] == 1.0


def _score_run(capsys, run: Path) -> dict:
    assert main(["--no-progress", "score", str(run), "--task", "recbench-plus", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "is not JSON"),
        ('{"config": "explicit", "id": "x"}', '"prediction": VALUE'),
        ('{"config": "nope", "id": "x", "prediction": []}', "has no config 'nope'"),
        ('{CELL, "id": "no-such-row", "prediction": []}', "has no test row with id"),
        ('{CELL, "id": "ID", "prediction": 3}', "takes a list of titles"),
        ('{CELL, "id": "ID", "prediction": [1, 2]}', "takes a list of titles"),
        ('{"config": "explicit", "id": "ID", "prediction": NaN}', "NaN is not a finite number"),
        ('{CELL, "id": "ID", "prediction": []}\n' * 2, "is also on line 1"),
        ('{"config": "explicit", "id": "ID", "prediction": []}', '"protocol": "recommend" or "protocol": '),
        ('{"config": "explicit", "protocol": "nope", "id": "ID", "prediction": []}', "use one of recommend"),
        ('{"config": "explicit", "protocol": 3, "id": "ID", "prediction": []}', "protocol must be a string"),
    ],
)
def test_predictions_file_malformed_is_refused_in_one_line(recbench, tmp_path, capsys, line, message):
    row_id = recbench_docs(str(recbench), "explicit", "test")[0].id
    path = tmp_path / "bad.jsonl"
    cell = '"config": "explicit", "protocol": "recommend"'
    path.write_text(line.replace("ID", row_id).replace("CELL", cell), encoding="utf-8")
    args = ["--no-progress", "score", "--task", "recbench-plus", "--data", str(recbench), "--predictions"]
    assert main([*args, str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "line" in err


def test_predictions_file_llmrec_wrong_types_are_refused(llmrec, tmp_path, capsys):
    doc = llmrec_data.load_docs(str(llmrec), "rating", "test")[0]
    seq = llmrec_data.load_docs(str(llmrec), "sequential", "test")[0]
    for config, row, value, message in (
        ("rating", doc.id, [4], "takes a number 1..5"),
        ("rating", doc.id, True, "takes a number 1..5"),
        ("sequential", seq.id, 4.0, "list of parent_asin"),
    ):
        line = {"config": config, "protocol": config, "id": row, "prediction": value}
        path = _write(tmp_path / "bad.jsonl", [line])
        args = ["--no-progress", "score", "--task", "llmrec", "--data", str(llmrec), "--predictions"]
        assert main([*args, str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err


def test_predictions_file_needs_data_and_predictions_or_a_run(capsys):
    assert main(["--no-progress", "score", "--task", "llmrec", "--predictions", "p.jsonl"]) == 2
    assert "--data DIR --predictions" in capsys.readouterr().err
    assert get("llmrec").prediction_from is not None and get("recbench-plus").prediction_from is not None


@pytest.fixture
def toy_family(tmp_path):
    from perrec_eval import registry
    from tests.perrec_eval.tasks import toy

    registry.register(toy.TASK, replace=True)
    yield toy.write_data(tmp_path / "toy-data")
    registry.unregister("toy")


def test_predictions_file_a_family_without_the_hook_reads_answer_text(toy_family, tmp_path, capsys):
    from tests.perrec_eval.tasks import toy

    docs = toy.load_docs(str(toy_family), "small", "test")
    cell = {"config": "small", "protocol": "toy-rate"}
    lines = [{**cell, "id": doc.id, "prediction": str(doc.truth)} for doc in docs]
    scores = _score(capsys, "toy", toy_family, _write(tmp_path / "p.jsonl", lines))
    (cell,) = scores["cells"]
    assert cell["protocol"] == "toy-rate" and cell["metrics"]["accuracy"]["value"] == 1.0
    number = _write(tmp_path / "n.jsonl", [{**lines[0], "prediction": 3}])
    args = [
        "--no-progress",
        "score",
        "--task",
        "toy",
        "--data",
        str(toy_family),
        "--predictions",
        str(number),
    ]
    assert main(args) == 2
    assert "takes the answer text" in capsys.readouterr().err


# ------------------------------------------------------------------- PerRecBench: another system's scores


def _perrecbench_file(bench: Path, path: Path, value) -> Path:
    """One line per group of every level: `value(group)` (scores, a ranking, or None)."""
    from perrec_eval.tasks.perrecbench.context import load_groups

    lines = []
    for level in ("easy", "medium", "hard"):
        for group in load_groups(bench, level, history=False):
            lines.append({"config": level, "id": group.group_id, "prediction": value(group)})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def perrecbench(tmp_path_factory) -> Path:
    from tests.benchmark_fixture import write_tiny_benchmark

    return write_tiny_benchmark(tmp_path_factory.mktemp("byo") / "perrecbench", n_test=12)


def test_perrecbench_predictions_file_is_scored_beside_the_baselines(perrecbench, tmp_path, capsys):
    # a system that ranks each group's users in the build's order, reversed
    path = _perrecbench_file(
        perrecbench, tmp_path / "mine.jsonl", lambda g: {"ranking": list(range(len(g.users), 0, -1))}
    )
    argv = ["--no-progress", "score", "--data", str(perrecbench), "--predictions", str(path)]
    assert main([*argv, "--out", str(tmp_path / "mine"), "--label", "mine"]) == 0
    printed = capsys.readouterr().out
    assert "| mine | " in printed and "easy/pointwise" in printed
    assert main(["--no-progress", "evaluate", "--data", str(perrecbench), "--engine", "baseline", "--model",
                 "all", "--out", str(tmp_path / "baselines")]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["--no-progress", "report", str(tmp_path / "mine"), str(tmp_path / "baselines"), "--no-plots",
                 "--out", str(tmp_path / "report")]) == 0  # fmt: skip
    (section,) = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    mine = next(row for row in section["rows"] if row["label"] == "mine")
    cell = mine["cells"]["easy/pointwise"]["metrics"]["ptc"]
    assert cell["ci_low"] <= cell["value"] <= cell["ci_high"] and ("vs_best" in cell or cell.get("best"))
    info = json.loads((tmp_path / "mine" / "run.json").read_text())
    assert (
        info["engine"]["name"] == "predictions"
        and info["label"] == "mine"
        and "warning" not in info["engine"]
    )


def test_perrecbench_predictions_file_of_the_test_ratings_is_flagged_and_never_best(
    perrecbench, tmp_path, capsys
):
    path = _perrecbench_file(perrecbench, tmp_path / "leak.jsonl", lambda g: [u.rating for u in g.users])
    argv = ["--no-progress", "score", "--data", str(perrecbench), "--predictions", str(path)]
    assert main([*argv, "--out", str(tmp_path / "leak")]) == 0
    err = capsys.readouterr().err
    assert "repeat the test split's own ratings" in err
    assert main(["--no-progress", "evaluate", "--data", str(perrecbench), "--engine", "baseline", "--model",
                 "random", "--out", str(tmp_path / "random")]) == 0  # fmt: skip
    capsys.readouterr()
    assert (
        main(["--no-progress", "report", str(tmp_path / "leak"), str(tmp_path / "random"), "--no-plots"]) == 0
    )
    out = capsys.readouterr().out
    leak = next(line for line in out.splitlines() if line.startswith("| leak"))
    assert "⚠" in leak and "**" not in leak and "never marked best" in out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1.0], "give one score per user"),
        ({"ranking": [1, 1]}, "lists each of the group's"),
        ("x", "give one"),
    ],
)
def test_perrecbench_predictions_file_refuses_a_value_of_the_wrong_shape(
    perrecbench, tmp_path, capsys, value, message
):
    path = _perrecbench_file(perrecbench, tmp_path / "bad.jsonl", lambda g: value)
    assert main(["--no-progress", "score", "--data", str(perrecbench), "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1" in err and message in err


def test_perrecbench_marks_a_tie_with_equals_and_bolds_nothing(perrecbench, tmp_path, capsys):
    """Issue 45 item 4: PerRecBench's table follows the shared rule: a tie is `=`, never bold."""
    path = _perrecbench_file(
        perrecbench, tmp_path / "same.jsonl", lambda g: {"ranking": list(range(len(g.users), 0, -1))}
    )
    for label in ("first", "second"):  # the same answers under two labels: tied in every cell
        argv = ["--no-progress", "score", "--data", str(perrecbench), "--predictions", str(path)]
        assert main([*argv, "--out", str(tmp_path / label), "--label", label]) == 0
    report = tmp_path / "report"
    runs = [str(tmp_path / "first"), str(tmp_path / "second")]
    assert main(["--no-progress", "report", *runs, "--out", str(report), "--no-plots"]) == 0
    (section,) = json.loads((report / "leaderboard.json").read_text())
    assert not section["too_few_docs"]  # enough groups that a difference could have been marked
    marks = [cell["metrics"]["ptc"] for row in section["rows"] for cell in row["cells"].values()]
    assert len(marks) == 6 and not any(mark.get("best") for mark in marks)
    assert all(mark.get("tied") for mark in marks)
    table = next(part for part in (report / "leaderboard.md").read_text().split("\n\n") if "| first" in part)
    assert "**" not in table and table.count("=") >= 6
