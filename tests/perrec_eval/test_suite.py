"""`perrecbench evaluate --task all`: one model on every family beside the baselines, in one folder, one
report (a summary first, every model drawn in every chart), one card; resumable after SIGKILL, counted by
--dry-run before it is spent, and the same in Python (`perrec_eval.suite.evaluate`)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import ConfigError
from perrec_eval.suite import SuiteConfig, evaluate
from tests.perrec_eval.suite_driver import varied

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = """
perrecbench:
  levels: easy,medium
  methods: pointwise,listwise
  build: {domains: Books, test_groups: 8, min_history: 3, with_interactions: false}
llmrec:
  subsets: rating,direct
  build: {kcore: 5, negatives: 9}
recbench-plus:
  subsets: explicit,misinformed
  build: {users: 30, train_users: 0}
"""
FAMILIES = ("perrecbench", "llmrec", "recbench-plus")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> tuple[Path, Path]:
    """A suite folder of the fake engine's `constant` script, every family built from raw files; and its
    --config file."""
    root = tmp_path_factory.mktemp("suite")
    argv = ["--no-progress", "synth", "--out", str(root / "raw"), "--reviews-per-domain", "3000"]
    assert main([*argv, "--domains", "Books"]) == 0
    (root / "suite.yaml").write_text(SECTIONS)
    argv = ["--no-progress", "evaluate", "--task", "all", "--source", str(root / "raw"), "--config"]
    argv += [str(root / "suite.yaml"), "--engine", "fake", "--model", "constant", "--limit", "6"]
    assert main([*argv, "--out", str(root / "suite"), "--no-plots"]) == 0
    return root / "suite", root / "suite.yaml"


def _sections(config: Path) -> dict:
    import yaml

    return yaml.safe_load(config.read_text())


def test_suite_runs_each_family_and_its_baselines_into_one_folder_and_one_report(suite):
    folder, _ = suite
    record = json.loads((folder / "suite.json").read_text())
    assert list(record["families"]) == list(FAMILIES)
    for name in FAMILIES:
        entry = record["families"][name]
        assert entry["data"] == f"data/{name}" and (folder / entry["data"] / "manifest.json").is_file()
        run = entry["models"]["fake:constant"]
        assert (folder / run["run"] / "run.json").is_file() and (folder / run["baselines"]).is_dir()
    sections = json.loads((folder / "report" / "leaderboard.json").read_text())
    assert [s["task"] for s in sections["sections"]] == list(FAMILIES)
    for section in sections["sections"]:  # the model beside every baseline of its family, on its docs
        assert len(section["rows"]) > 2 and section["number"] is None
    summary = sections["summary"]
    assert [row["label"] for row in summary["rows"]] == ["fake:constant"]
    columns = [(c["task"], c["metric"], c["cell"]) for c in summary["columns"]]
    assert columns == [
        ("perrecbench", "ptc", "average"),
        ("llmrec", "ndcg@10", "direct/direct"),
        ("llmrec", "rmse", "rating/rating"),
        ("recbench-plus", "recall", "average"),
    ]
    values = summary["rows"][0]["values"]
    assert all(v is not None and v["ci_low"] <= v["value"] <= v["ci_high"] for v in values.values())
    board = (folder / "report" / "leaderboard.md").read_text()
    assert board.index("## Summary") < board.index("## PerRecBench") < board.index("## LLMRec")
    assert "(higher is better)" in board.split("## PerRecBench")[0] and "(lower is better)" in board


def test_suite_limit_is_every_familys_doc_limit(suite):
    folder, _ = suite
    for name in FAMILIES:
        run = json.loads((folder / "runs" / name / "fake-constant" / "run.json").read_text())
        limit = run["config"].get("max_groups", run["config"].get("max_docs"))
        assert limit == 6 and "limit" not in {k for k, v in run["config"].items() if v is not None}
        assert all(len(ids) == 6 for ids in run["groups"].values())


def test_limit_and_its_old_spellings_are_one_setting(tmp_path):
    from perrec_eval.evaluation import TaskEvalConfig
    from perrec_eval.tasks.perrecbench.config import EvalConfig

    common = dict(data="d", engine="baseline", model="random", out=str(tmp_path))
    assert EvalConfig(**common, limit=5).max_groups == EvalConfig(**common, max_groups=5).max_groups == 5
    assert TaskEvalConfig(task="llmrec", **common, limit=5).max_docs == 5
    with pytest.raises(ConfigError, match="--limit 5 and --max-groups 4 are one setting"):
        EvalConfig(**common, limit=5, max_groups=4)


def test_suite_second_model_reuses_the_baselines_and_every_chart_draws_both(suite, tmp_path):
    import shutil

    source, config = suite
    folder = tmp_path / "suite"
    shutil.copytree(source, folder)
    baselines = sorted(folder.glob("runs/*/baselines/*/*/run.json"))
    before = {path: path.stat().st_mtime_ns for path in baselines}
    settings = dict(task="all", out=str(folder), engine="fake", model="varied")  # its builds: SUITE/data
    settings |= {"engine": FakeEngine(varied, model="varied")}  # an engine object, as lm-eval takes an LM
    result = evaluate(**settings, label="varied", limit=6, sections=_sections(config))
    assert set(result["results"]) == set(FAMILIES) and result["summary"]["rows"][1]["label"] == "varied"
    assert {path: path.stat().st_mtime_ns for path in baselines} == before  # reused, not run again
    assert sorted(folder.glob("runs/*/baselines/*/*/run.json")) == baselines
    board = json.loads((folder / "report" / "leaderboard.json").read_text())
    models = {"fake:constant", "varied"}
    for section in board["sections"]:
        charts = [plot for plot in section["plots"] if plot["kind"] == "cells"]
        assert charts, section["task"]
        for plot in section["plots"]:
            drawn = set(plot["series"])
            if plot["kind"] in ("cells", "at_k", "by_group_size", "by_method"):
                assert models <= drawn, (section["task"], plot["path"])  # both models in every chart
        for plot in charts:  # its legend lists only runs with a value in its cells
            metric = plot["path"].rsplit("_", 1)[1].removesuffix(".png")
            cells = [c for c in section["main_cells"] if section["shown"][c].replace("@", "-") == metric]
            with_value = {
                row["label"]
                for row in section["rows"]
                for c in cells
                if row["cells"].get(c) and row["cells"][c]["num_failed"] < row["cells"][c]["num_docs"]
            }
            assert set(plot["series"]) == with_value, plot["path"]


def test_suite_dry_run_counts_what_the_run_then_records_and_writes_nothing(suite, tmp_path, capsys):
    import shutil

    source, config = suite
    folder = tmp_path / "suite"
    shutil.copytree(source, folder)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    argv = [
        "--no-progress",
        "evaluate",
        "--task",
        "all",
        "--data",
        str(folder / "data"),
        "--config",
        str(config),
    ]
    argv += [
        "--engine",
        "fake",
        "--model",
        "constant",
        "--label",
        "again",
        "--limit",
        "6",
        "--out",
        str(folder),
    ]
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == files  # nothing written
    counted = {}
    for line in printed.splitlines():
        parts = [part.strip() for part in line.strip("|").split("|")]
        if parts and parts[0] in (*FAMILIES, "total"):
            counted[parts[0]] = [int(part.replace(",", "")) for part in parts[1:4]]
    assert set(counted) == {*FAMILIES, "total"} and "counted with words" in printed
    assert main([*argv, "--no-plots"]) == 0
    record = json.loads((folder / "suite.json").read_text())
    for name in FAMILIES:
        cost = record["families"][name]["models"]["again"]["cost"]
        assert [cost["requests"], cost["prompt_tokens"], cost["answer_budget"]] == counted[name], name
        assert cost["requests"] > 0 and cost["wall_seconds"] > 0
    report = (folder / "report" / "leaderboard.md").read_text()
    assert "### Cost of each family's model run" in report and "| again | llmrec |" in report


def _results(folder: Path) -> dict[str, object]:
    """Every family's scores and predictions (the bytes) and the report's sections but their paths."""
    out: dict[str, object] = {}
    for name in FAMILIES:
        run = folder / "runs" / name / "varied"
        out[f"{name} scores"] = json.loads((run / "scores.json").read_text())
        out[f"{name} predictions"] = (run / "predictions.jsonl").read_bytes()
    board = json.loads((folder / "report" / "leaderboard.json").read_text())
    for section in board["sections"]:
        for row in section["rows"]:
            row.pop("cost", None)
        out[f"{section['task']} section"] = section
    return out


def _driver(folder: Path, data: Path, config: Path, log: Path, delay: float) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "tests.perrec_eval.suite_driver", str(folder), str(data), str(config)]
    return subprocess.Popen([*command, str(log), str(delay)], env=env, cwd=ROOT)


def test_suite_killed_during_each_family_resumes_to_what_an_uninterrupted_run_gives(suite, tmp_path):
    source, config = suite
    data = source / "data"
    whole = tmp_path / "whole"
    child = _driver(whole, data, config, tmp_path / "whole.log", 0.0)
    assert child.wait(timeout=600) == 0
    folder, log = tmp_path / "killed", tmp_path / "killed.log"
    for family in FAMILIES:  # a SIGKILL while the model answers each family's requests, then a restart
        child = _driver(folder, data, config, log, 0.05)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and child.poll() is None:
            seen = log.read_text().splitlines() if log.is_file() else []
            if seen.count(family) >= 3:
                break
            time.sleep(0.05)
        assert child.poll() is None, f"the suite ended before {family} was killed"
        child.send_signal(signal.SIGKILL)
        child.wait()
    child = _driver(folder, data, config, log, 0.0)
    assert child.wait(timeout=600) == 0
    asked = log.read_text().splitlines()
    assert _results(folder) == _results(whole)
    # (a kill may lose the one answer it interrupted, and only it: every answer is cached as it comes)
    whole_asked = (tmp_path / "whole.log").read_text().splitlines()
    for family in FAMILIES:
        assert asked.count(family) <= whole_asked.count(family) + 2, family


def test_push_results_of_a_suite_is_one_commit_with_every_familys_entries(suite, tmp_path, capsys):
    import shutil

    source, _ = suite
    folder = tmp_path / "suite"
    shutil.copytree(source, folder)
    for name in FAMILIES:  # the fake engine stands in for a real one: record the runs as org/model's
        path = folder / "runs" / name / "fake-constant" / "run.json"
        info = json.loads(path.read_text())
        info["engine"] = {"name": "openai", "model": "org/model", "adapter": None}
        info["config"]["model"] = "org/model"
        path.write_text(json.dumps(info))
    datasets = "perrecbench=org/pb@r1,llmrec=org/lr@r2,recbench-plus=org/rb@r3"
    argv = ["push", "results", str(folder), "--repo", "org/model", "--dataset", datasets, "--dry-run"]
    capsys.readouterr()
    assert main([*argv, "--stage", str(tmp_path / "staged")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("dry run: would upload 3 files to https://huggingface.co/org/model (model)")
    listed = sorted(line.split("  (")[0].strip() for line in lines[1:] if line.startswith("  "))
    assert listed == [f".eval_results/{name}.yaml" for name in ("llmrec", "perrecbench", "recbench-plus")]
    import yaml
    from huggingface_hub import parse_eval_result_entries

    for name, dataset, revision in (("perrecbench", "org/pb", "r1"), ("recbench-plus", "org/rb", "r3")):
        text = (tmp_path / "staged" / ".eval_results" / f"{name}.yaml").read_text()
        entries = parse_eval_result_entries(yaml.safe_load(text))
        assert {(e.dataset_id, e.dataset_revision) for e in entries} == {(dataset, revision)}
    assert main(["push", "leaderboard", str(folder / "report"), "--repo", "org/board", "--dry-run"]) == 0
    for name in FAMILIES:  # each build the suite made is pushed as its benchmark, with its eval.yaml
        staged = tmp_path / f"bench-{name}"
        argv = ["push", "benchmark", str(folder / "data" / name), "--repo", f"org/{name}", "--dry-run"]
        assert main([*argv, "--stage", str(staged)]) == 0
        eval_yaml = yaml.safe_load((staged / "eval.yaml").read_text())
        assert eval_yaml["evaluation_framework"] == "perrecbench" and eval_yaml["tasks"]


def test_suite_refuses_a_section_that_is_no_mapping_and_a_baseline_engine(tmp_path):
    with pytest.raises(ConfigError, match="the llmrec section must be a mapping"):
        SuiteConfig(
            task="perrecbench,llmrec", out=str(tmp_path), source="raw", engine="fake", model="constant",
            sections={"llmrec": ["subsets"]},
        )  # fmt: skip
    with pytest.raises(ConfigError, match="choose --engine fake, hf, openai or vllm"):
        SuiteConfig(task="all", out=str(tmp_path), source="raw", engine="baseline", model="all")
    with pytest.raises(ConfigError, match="no build of llmrec"):
        SuiteConfig(task="llmrec", out=str(tmp_path), engine="fake", model="constant")


def test_dry_run_marks_what_depends_on_the_models_answers_as_an_estimate():
    from perrec_eval import suite
    from perrec_eval.tasks.perrecbench.config import EvalConfig

    written = EvalConfig(data="d", out="o", engine="hf", model="m")
    assert suite._writes_profiles(written)
    assert not suite._writes_profiles(dataclasses.replace(written, no_profile=True))
    assert not suite._writes_profiles(dataclasses.replace(written, profiles="p.jsonl"))
    entry = {"requests": 4, "prompt_tokens": 100, "answer_budget": 8, "written_profiles": True}
    figures = {"families": {"perrecbench": entry}, "total": entry, "prompt_tokens_counted_by": "x"}
    text = suite.dry_run_text(figures)
    assert "| perrecbench | 4 | 100 (estimate: the model's profiles" in text


def test_push_results_of_a_quantized_suite_needs_quantized_and_says_what_each_family_files(
    suite, tmp_path, capsys
):
    import shutil

    source, _ = suite
    folder = tmp_path / "suite"
    shutil.copytree(source, folder)
    for name in FAMILIES:  # the runs of a GGUF file of org/model (the hf engine records which file)
        path = folder / "runs" / name / "fake-constant" / "run.json"
        info = json.loads(path.read_text())
        info["engine"] = {"name": "hf", "model": "org/model", "adapter": None, "gguf_file": "m.Q4_1.gguf"}
        info["config"]["model"] = "org/model"
        path.write_text(json.dumps(info))
    datasets = "perrecbench=org/pb@r1,llmrec=org/lr@r2,recbench-plus=org/rb@r3"
    argv = ["push", "results", str(folder), "--repo", "org/model", "--dataset", datasets, "--dry-run"]
    capsys.readouterr()
    assert main(argv) != 0
    assert "pass --quantized" in capsys.readouterr().err
    assert main([*argv, "--quantized", "--stage", str(tmp_path / "staged")]) == 0
    out = capsys.readouterr().out
    staged = sorted(p.name for p in (tmp_path / "staged" / ".eval_results").iterdir())
    assert staged == [f"{name}_gguf.yaml" for name in ("llmrec", "perrecbench", "recbench-plus")]
    for name in FAMILIES:
        assert f"{name}: weights: the GGUF file m.Q4_1.gguf (quantized weights)" in out
        assert f"{name}: one entry per scored cell" in out


def test_suite_without_the_engines_extra_stops_before_building_anything(suite, tmp_path, monkeypatch, capsys):
    """A missing engine extra is the one-line error naming the pip command, before the builds and baselines
    that would otherwise run first (minutes to hours at Amazon size) and nothing is written."""
    import importlib.util

    real = importlib.util.find_spec
    gone = lambda name, *a: None if name == "vllm" else real(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", gone)
    raw = suite[0].parent / "raw"
    argv = ["--no-progress", "evaluate", "--task", "all", "--source", str(raw), "--engine", "vllm"]
    assert main([*argv, "--model", "some/model", "--out", str(tmp_path / "suite")]) == 2
    assert 'pip install "perrecbench[vllm]"' in capsys.readouterr().err
    assert not (tmp_path / "suite").exists()
