"""One report for every family: the honesty rules of `perrec_eval.leaderboard.family` on LLMRec and RecBench+
runs (baselines, fake-engine runs with failures, a predictions file, two identical systems under two labels,
3-doc runs), the report folder's files and plots, and `score` printing the table `evaluate` prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.leaderboard import family
from perrec_eval.registry import get
from perrec_eval.tasks.llmrec import data as llmrec_data
from tests.dataset_builder.llmrec.fixture import synth_build
from tests.dataset_builder.recbench_plus.fixture import build as recbench_build
from tests.dataset_builder.recbench_plus.fixture import synth as recbench_synth

LLMREC_CELLS = dict(subsets=("rating", "direct"), protocols=("rating", "direct"))


@pytest.fixture(scope="module")
def llmrec(tmp_path_factory) -> Path:
    return synth_build(tmp_path_factory.mktemp("report-llmrec"))


@pytest.fixture(scope="module")
def recbench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-rb")
    return recbench_build(root / "bench", recbench_synth(root / "raw"))


def _llmrec_config(llmrec: Path, out: Path, **settings) -> TaskEvalConfig:
    return TaskEvalConfig(task="llmrec", data=str(llmrec), out=str(out), **{**LLMREC_CELLS, **settings})


def _half_failing(request, params, i) -> str:
    """The constant answer to about half the requests (by their text), an empty answer to the rest."""
    text = request.messages[-1]["content"]
    if sum(map(ord, text)) % 2:
        return ""
    from perrec_eval.engines.fake import constant

    return constant(request, params, i)


@pytest.fixture(scope="module")
def llmrec_runs(llmrec, tmp_path_factory) -> Path:
    """Baselines, a fake run failing about half its docs, one failing every rating doc, on 30 docs."""
    runs = tmp_path_factory.mktemp("llmrec-runs")
    for name in ("global-mean", "popularity"):
        evaluate(_llmrec_config(llmrec, runs / name, engine="baseline", model=name, max_docs=30))
    evaluate(
        _llmrec_config(llmrec, runs / "half", engine="fake", model="half", max_docs=30),
        engine=FakeEngine(_half_failing, model="half"),
    )
    evaluate(
        _llmrec_config(llmrec, runs / "mute", engine="fake", model="mute", max_docs=30),
        engine=FakeEngine(lambda request, params, i: "no idea", model="mute"),
    )
    return runs


def _section(*folders: Path) -> dict:
    (section,) = family.report(folders, n_resamples=200)
    return section


def _row(section: dict, label: str) -> dict:
    return next(row for row in section["rows"] if row["label"] == label)


def test_failed_docs_are_in_sight_and_all_failed_is_not_not_run(llmrec_runs) -> None:
    section = _section(llmrec_runs)
    text = family.markdown(section)
    half = _row(section, "half")["cells"]["direct/direct"]
    assert 0 < half["num_failed"] < half["num_docs"]
    assert f"({half['num_failed']}/{half['num_docs']} failed" in text
    mute = next(line for line in text.splitlines() if line.startswith("| mute |"))
    assert "all 30 failed" in mute  # not the dash that says "not run"
    baseline = next(line for line in text.splitlines() if line.startswith("| global-mean |"))
    assert baseline.count("–") == 1  # global-mean answers no direct doc: that cell alone is "not run"


def test_a_metric_of_the_answered_docs_shows_its_coverage_and_is_never_best(llmrec_runs) -> None:
    section = _section(llmrec_runs)
    rating = _row(section, "half")["cells"]["rating/rating"]
    assert rating["num_failed"] and rating["metrics"]["rmse"]["answered_only"]
    answered = rating["num_docs"] - rating["num_failed"]
    assert f"(answered {answered}/{rating['num_docs']})" in family.markdown(section)
    assert not rating["metrics"]["rmse"].get("best")
    ranking = _row(section, "popularity")["cells"]["direct/direct"]["metrics"]["ndcg@10"]
    assert not ranking.get("answered_only")  # a failed ranking scores 0: every doc is counted


def test_headings_name_each_columns_metric_and_the_average_mixes_no_directions(llmrec_runs) -> None:
    section = _section(llmrec_runs)
    text = family.markdown(section)
    header = text.splitlines()[2]
    assert "rating/rating: rmse (lower is better)" in header
    assert "direct/direct: ndcg@10 (higher is better)" in header
    assert not text.startswith("## LLMRec: ndcg@10")  # the heading names no one metric over an RMSE column
    assert section["average"] is None or "rating/rating" not in section["average"]["cells"]
    assert "average ndcg@10" not in header or "rmse" not in header.rpartition("average")[2]


def test_llmrec_average_counts_each_subset_once_and_one_metric(llmrec, tmp_path) -> None:
    cells = dict(subsets=("rating", "sequential", "direct"), protocols=("rating", "sequential",
                 "sequential-candidates", "direct"))  # fmt: skip
    for name in ("popularity", "global-mean"):
        evaluate(_llmrec_config(llmrec, tmp_path / name, engine="baseline", model=name, max_docs=20, **cells))
    section = _section(tmp_path / "popularity", tmp_path / "global-mean")
    assert section["average"] == {
        "metric": "ndcg@10",
        "higher_is_better": True,
        "over": "subsets",
        "cells": ["sequential/sequential", "direct/direct"],  # sequential's docs once, no RMSE
    }
    row = _row(section, "popularity")
    values = [row["cells"][cell]["metrics"]["ndcg@10"]["value"] for cell in section["average"]["cells"]]
    assert row["average"] == pytest.approx(sum(values) / 2)


def test_two_identical_systems_tie_and_nothing_is_bold(llmrec, tmp_path) -> None:
    for label in ("twin-a", "twin-b"):
        config = _llmrec_config(
            llmrec, tmp_path / label, engine="fake", model="constant", max_docs=30, label=label
        )
        evaluate(config)
    section = _section(tmp_path / "twin-a", tmp_path / "twin-b")
    text = family.markdown(section)
    table = "\n".join(line for line in text.splitlines() if line.startswith("| "))
    assert "**" not in table and "direct/direct" in section["tied"]
    for twin in ("twin-a", "twin-b"):  # a tie is one mark: "=", never "= †" (a test against a twin)
        line = next(line for line in text.splitlines() if line.startswith(f"| {twin} |"))
        assert " =" in line and "†" not in line


def test_three_docs_are_too_few_to_compare(llmrec, tmp_path) -> None:
    for name in ("popularity", "random"):
        evaluate(_llmrec_config(llmrec, tmp_path / name, engine="baseline", model=name, max_docs=3))
    section = _section(tmp_path / "popularity", tmp_path / "random")
    text = family.markdown(section)
    table = "\n".join(line for line in text.splitlines() if line.startswith("| "))
    assert "**" not in table and "†" not in table
    assert "Too few docs to compare (3)" in text and section["too_few_docs"]["direct/direct"] == 3


def test_llmrec_report_folder_has_every_file_plots_and_secondary_metrics(llmrec_runs, tmp_path) -> None:
    out = tmp_path / "report"
    assert main(["--no-progress", "report", str(llmrec_runs), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {*family_files(), "plots"}
    plots = {p.name for p in (out / "plots").iterdir()}
    assert {"t1_llmrec_ndcg-10.png", "t1_llmrec_rmse.png", "t1_llmrec_at_k.png"} <= plots
    page = (out / "index.html").read_text()
    assert "<title>LLMRec leaderboard</title>" in page and 'src="plots/t1_llmrec_at_k.png"' in page
    board = (out / "leaderboard.md").read_text()
    for metric in ("hr@1 (higher is better)", "hr@5", "ndcg@5", "mae (lower is better)"):
        assert metric in board
    assert "Ranking at k" in board
    rows = (out / "leaderboard.csv").read_text().splitlines()
    assert rows[0].startswith("task,table,run_dir,label") and any(",hr@5," in row for row in rows)
    assert "\\toprule" in (out / "leaderboard.tex").read_text()


def family_files() -> set[str]:
    return {"leaderboard.md", "leaderboard.json", "leaderboard.csv", "leaderboard.tex", "index.html"}


@pytest.fixture(scope="module")
def recbench_runs(recbench, tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("rb-runs")
    base = ["--no-progress", "evaluate", "--task", "recbench-plus", "--data", str(recbench)]
    for name in ("popularity", "condition-filter"):
        assert main([*base, "--engine", "baseline", "--model", name, "--out", str(runs / name)]) == 0
    config = TaskEvalConfig(task="recbench-plus", data=str(recbench), engine="fake", model="half",
                            out=str(runs / "half"))  # fmt: skip
    evaluate(config, engine=FakeEngine(_half_failing, model="half"))
    return runs


def test_recbench_report_shows_types_in_the_main_table_and_condition_counts_apart(recbench_runs, tmp_path):
    out = tmp_path / "report"
    assert main(["--no-progress", "report", str(recbench_runs), "--out", str(out)]) == 0
    (section,) = json.loads((out / "leaderboard.json").read_text())
    assert {cell.partition("/")[0] for cell in section["main_cells"]} <= {
        "explicit", "implicit", "misinformed", "interest"
    }  # fmt: skip
    assert any(cell.startswith("explicit-1/") for cell in section["cells"])
    board = (out / "leaderboard.md").read_text()
    assert "Recall by condition count" in board and "explicit, 1 condition(s)" in board
    assert "failed" in next(line for line in board.splitlines() if line.startswith("| half |"))
    plots = {p.name for p in (out / "plots").iterdir()}
    assert "t1_recbench-plus_recall.png" in plots
    assert any(name.startswith("t1_recbench-plus_conditions_") for name in plots)
    for metric in ("precision", "condition_match", "hallucination (lower is better)", "ftr"):
        assert metric in board


def test_a_report_over_another_familys_report_leaves_only_its_own_files(llmrec_runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["--no-progress", "report", str(llmrec_runs), "--out", str(out)]) == 0
    before = {p.relative_to(out) for p in out.rglob("*")}
    toy = tmp_path / "other"
    shutil.copytree(llmrec_runs / "popularity", toy / "popularity")
    assert main(["--no-progress", "report", str(toy), "--out", str(out), "--no-plots"]) == 0
    after = {str(p.relative_to(out)) for p in out.rglob("*") if not p.name.startswith(".")}
    assert after == family_files()  # the earlier report's plots went with it
    assert before - {Path(name) for name in after}
    assert "popularity" in (out / "leaderboard.md").read_text()
    assert "half" not in (out / "leaderboard.md").read_text()


def test_score_infers_the_family_prints_the_table_and_json_on_request(llmrec_runs, capsys) -> None:
    run = llmrec_runs / "half"
    capsys.readouterr()
    assert main(["--no-progress", "score", str(run)]) == 0  # no --task: run.json names the family
    out = capsys.readouterr().out
    assert out.startswith("## LLMRec") and "| half |" in out and "rating/rating: rmse" in out
    assert "ndcg@10" not in out.split("rating/rating: rmse", 1)[1].split("|", 1)[0]
    assert main(["--no-progress", "score", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task"] == "llmrec"
    assert main(["--no-progress", "score", str(run), "--task", "recbench-plus"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--task llmrec" in err


def test_evaluate_infers_the_family_from_the_benchmark_folder(llmrec, tmp_path, capsys) -> None:
    argv = ["--no-progress", "evaluate", "--data", str(llmrec), "--engine", "baseline", "--model",
            "popularity", "--subsets", "direct", "--protocols", "direct", "--max-docs", "5", "--out",
            str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    assert json.loads((tmp_path / "r" / "run.json").read_text())["config"]["task"] == "llmrec"
    assert main([*argv[:2], "--task", "perrecbench", *argv[2:]]) == 2
    assert "--task llmrec" in capsys.readouterr().err


def test_report_refuses_a_task_the_runs_are_not_of(llmrec_runs, tmp_path, capsys) -> None:
    out = tmp_path / "report"
    for task in ("perrecbench", "recbench-plus"):
        assert main(["--no-progress", "report", str(llmrec_runs), "--task", task, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "pass --task llmrec" in err
        assert not out.exists()  # nothing written under the wrong family's name
    assert main(["--no-progress", "report", str(llmrec_runs), "--task", "llmrec", "--out", str(out)]) == 0
    assert (out / "leaderboard.md").read_text().startswith("# LLMRec")


def _direct_predictions(llmrec: Path, path: Path, rows: int | None = None) -> Path:
    docs = llmrec_data.load_docs(str(llmrec), "direct", "test")[:rows]
    lines = [{"config": "direct", "id": doc.id, "prediction": list(doc.candidates)} for doc in docs]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_predictions_beside_baselines_with_the_same_max_docs_and_seed(llmrec, tmp_path, capsys) -> None:
    base = tmp_path / "base"
    config = TaskEvalConfig(task="llmrec", data=str(llmrec), out=str(base), engine="baseline",
                            model="popularity", subsets=("direct",), protocols=("direct",),
                            max_docs=12)  # fmt: skip
    evaluate(config)
    predictions = _direct_predictions(llmrec, tmp_path / "mine.jsonl")
    score = ["--no-progress", "score", "--task", "llmrec", "--data", str(llmrec), "--predictions"]
    score.append(str(predictions))
    assert main([*score, "--out", str(tmp_path / "all")]) == 0
    capsys.readouterr()
    assert main(["--no-progress", "report", str(base), str(tmp_path / "all")]) == 2
    err = capsys.readouterr().err
    assert "--limit 12" in err and "score --predictions" in err  # the flag that aligns them
    assert main([*score, "--max-docs", "12", "--seed", "0", "--out", str(tmp_path / "aligned")]) == 0
    capsys.readouterr()
    assert main(["--no-progress", "report", str(base), str(tmp_path / "aligned")]) == 0
    out = capsys.readouterr().out
    assert "| mine |" in out and "| popularity |" in out
    kept = [json.loads(line) for line in (tmp_path / "aligned" / "predictions.jsonl").open()]
    expected = {doc.id for doc in llmrec_data.load_docs(str(llmrec), "direct", "test", max_docs=12, seed=0)}
    assert {p["id"] for p in kept} == expected


def test_a_predictions_file_of_a_few_rows_shows_its_failures(llmrec, tmp_path, capsys) -> None:
    predictions = _direct_predictions(llmrec, tmp_path / "few.jsonl", rows=2)
    score = ["--no-progress", "score", "--task", "llmrec", "--data", str(llmrec), "--predictions"]
    score.append(str(predictions))
    assert main(score) == 0
    total = len(llmrec_data.load_docs(str(llmrec), "direct", "test"))
    assert f"({total - 2}/{total} failed" in capsys.readouterr().out


def test_published_rows_hook_still_reaches_the_report() -> None:
    data = family._published(get("recbench-plus"), ["demographics/recommend"])
    assert data and family._published(get("llmrec"), ["demographics/recommend"]) == {}


def test_g6_an_llmrec_report_over_a_perrecbench_report_leaves_no_perrecbench_file(llmrec_runs, tmp_path):
    from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import pointwise_records, write_run

    ids = [f"g{i}" for i in range(8)]
    perrecbench = write_run(tmp_path / "pb" / "m", pointwise_records(ids, [True] * 6 + [False] * 2))
    out = tmp_path / "rep"
    assert main(["--no-progress", "report", str(perrecbench), "--out", str(out)]) == 0
    assert "PerRecBench leaderboard" in (out / "index.html").read_text()
    pictures = {p.name for p in (out / "plots").iterdir()}
    assert main(["--no-progress", "report", str(llmrec_runs), "--out", str(out)]) == 0
    assert "<title>LLMRec leaderboard</title>" in (out / "index.html").read_text()
    assert "PTC" not in (out / "leaderboard.csv").read_text() + (out / "leaderboard.tex").read_text()
    now = {p.name for p in (out / "plots").iterdir()}
    assert not pictures & now and all(name.startswith("t1_llmrec_") for name in now)
    from perrec_eval.publish import leaderboard_upload

    card = leaderboard_upload(out, "org/board").files["README.md"].decode()
    assert "title: LLMRec leaderboard" in card and "PTC" not in card  # the Space says whose report it is
    assert main(["--no-progress", "report", str(perrecbench), "--out", str(out), "--no-plots"]) == 0
    assert not (out / "plots").exists()  # and back: the LLMRec plots went with their report
    assert "LLMRec" not in (out / "leaderboard.md").read_text()
    assert set(leaderboard_upload(out, "org/board").files) == {*family_files(), "README.md"}


def test_perrecbench_shows_the_failed_share_whenever_a_group_failed(tmp_path, capsys) -> None:
    import dataclasses

    from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import pointwise_records, write_run

    ids = [f"g{i}" for i in range(10)]
    records = pointwise_records(ids, [True] * 10)
    records[0] = dataclasses.replace(records[0], prediction=None, predicted_ratings=None)
    run = write_run(tmp_path / "m", records)
    assert main(["--no-progress", "report", str(run), "--out", str(tmp_path / "rep"), "--no-plots"]) == 0
    board = (tmp_path / "rep" / "leaderboard.md").read_text()
    assert "(1/10 failed, 10%)" in board  # one group of ten: shown, though far from "mostly failed"
    assert "(n/N failed): docs without a usable answer" in board


def test_published_rows_are_a_table_of_their_own_on_the_page_and_in_leaderboard_md() -> None:
    from perrec_eval.leaderboard import document

    cell = "demographics/recommend"
    entry = {"num_docs": 20, "num_failed": 0, "num_engine_errors": 0, "num_clusters": None,
             "metrics": {"recall": {"value": 0.2, "ci_low": 0.1, "ci_high": 0.3}}}  # fmt: skip
    section = {
        "task": "recbench-plus", "title": "RecBench+", "headline": "recall", "higher_is_better": True,
        "subset_axis": "query type", "protocol_axis": "protocol", "min_docs_to_compare": 6,
        "cells": [cell], "main_cells": [cell], "shown": {cell: "recall"},
        "cell_metrics": {cell: [{"name": "recall", "higher_is_better": True}]}, "average": None,
        "too_few_docs": {}, "tied": [], "rows": [{"label": "mine", "path": "r", "cells": {cell: entry}}],
        **family._published(get("recbench-plus"), [cell]),
    }  # fmt: skip
    blocks = family.document([section])
    text = document.markdown(blocks)
    runs, published = text.split("published rows (the released queries and answers, corrected scoring", 1)
    assert "| mine |" in runs and "DeepSeek-R1" in published and "| mine |" not in published
    page = document.page(blocks, "t")
    assert page.count("<table") == 4  # the runs', the cell's every metric, the published rows' (both Ks)


def _relabelled(run: Path, out: Path, label: str) -> Path:
    """A copy of `run` whose rows are named `label` (two identical systems under two labels)."""
    shutil.copytree(run, out)
    info = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**info, "label": label}))
    return out


def test_recbench_identical_systems_tie_and_the_average_counts_each_type_once(recbench_runs, tmp_path):
    twin = _relabelled(recbench_runs / "popularity", tmp_path / "twin", "popularity-again")
    section = _section(recbench_runs / "popularity", twin)
    table = "\n".join(line for line in family.markdown(section).splitlines() if line.startswith("| "))
    assert "**" not in table
    # every cell ties, or has too few queries to compare (a condition-count group of few queries)
    assert set(section["tied"]) | set(section["too_few_docs"]) == set(section["cells"]) and section["tied"]
    average = section["average"]
    assert average["metric"] == "recall" and len(average["cells"]) == len(
        {cell.partition("/")[0] for cell in average["cells"]}
    )  # one protocol per query type
    assert not any("-" in cell.partition("/")[0] for cell in average["cells"])  # no condition-count group


def test_recbench_three_docs_are_too_few_to_compare(recbench, tmp_path, capsys) -> None:
    base = ["--no-progress", "evaluate", "--task", "recbench-plus", "--data", str(recbench), "--max-docs",
            "3", "--subsets", "explicit", "--protocols", "recommend", "--engine", "baseline"]  # fmt: skip
    for name in ("popularity", "condition-filter"):
        assert main([*base, "--model", name, "--out", str(tmp_path / name)]) == 0
    section = _section(tmp_path / "popularity", tmp_path / "condition-filter")
    text = family.markdown(section)
    assert "Too few docs to compare (3)" in text
    assert "**" not in "\n".join(line for line in text.splitlines() if line.startswith("| "))


def test_h10_report_refuses_an_edited_scores_json_and_score_a_repeated_row(llmrec, tmp_path, capsys) -> None:
    run = tmp_path / "a"
    evaluate(_llmrec_config(llmrec, run, engine="baseline", model="global-mean", max_docs=20))
    edited = json.loads((run / "scores.json").read_text())
    for cell in edited["cells"]:
        for value in cell["metrics"].values():
            if value["value"] is not None:
                value["value"] = 0.999
    (run / "scores.json").write_text(json.dumps(edited))
    assert main(["--no-progress", "report", str(run), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"score {run} --write" in err
    assert "outside its own interval" in err or "but its predictions give" in err
    assert main(["--no-progress", "score", str(run), "--write"]) == 0  # the fix the line names
    assert main(["--no-progress", "report", str(run), "--no-plots"]) == 0
    lines = (run / "predictions.jsonl").read_text().splitlines()
    (run / "predictions.jsonl").write_text("\n".join([*lines, *lines[:5]]) + "\n")
    capsys.readouterr()
    assert main(["--no-progress", "score", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repeats row" in err


def test_h10_report_refuses_a_perrecbench_value_its_predictions_do_not_give(tmp_path, capsys) -> None:
    from tests.perrec_eval.tasks.perrecbench.leaderboard.synthetic import pointwise_records, write_run

    run = write_run(tmp_path / "m", pointwise_records([f"g{i}" for i in range(10)], [True] * 5 + [False] * 5))
    edited = json.loads((run / "scores.json").read_text())
    edited["cells"][0]["metrics"]["ptc"] |= {"value": 0.9, "ci_low": 0.8, "ci_high": 1.0}  # inside its CI
    (run / "scores.json").write_text(json.dumps(edited))
    assert main(["--no-progress", "report", str(run), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "ptc is 0.9, but its predictions give 0.0" in err and f"score {run} --write" in err
