"""Publishing speaks of tasks, cells and metrics: a family made in the tests (`tasks/toy.py`) gets its own
``eval.yaml`` tasks and ``.eval_results`` entries, one per cell with its headline metric. Offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from huggingface_hub import parse_eval_result_entries

from perrec_eval import registry
from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.publish import eval_yaml
from tests.perrec_eval.tasks import toy

DATASET, REVISION = "org/toy", "0123456789abcdef0123456789abcdef01234567"
PUSH = ["--repo", "org/model", "--dataset", DATASET, "--dataset-revision", REVISION, "--dry-run"]


@pytest.fixture
def toy_run(tmp_path, monkeypatch) -> Path:
    """A toy build and an oracle run of it recorded as one of org/model, named by relative paths."""
    registry.register(toy.TASK, replace=True)
    monkeypatch.chdir(tmp_path)
    toy.write_data(Path("data"))
    config = TaskEvalConfig(task="toy", data="data", engine="fake", model="oracle", out="run")
    evaluate(config, engine=FakeEngine(toy.oracle, model="oracle"))
    # The fake engine stands in for a real one here: record the run as one of org/model.
    info = json.loads(Path("run/run.json").read_text())
    info["engine"] = {"name": "openai", "model": "org/model", "adapter": None}
    info["config"]["model"] = "org/model"
    Path("run/run.json").write_text(json.dumps(info), encoding="utf-8")
    yield Path("run")
    registry.unregister("toy")


def push(capsys, *argv: str) -> tuple[int, list[str], str]:
    """(exit code, the listed files, stderr) of `perrecbench push ...`."""
    capsys.readouterr()
    code = main(["push", *argv])
    out, err = capsys.readouterr()
    return code, [line.split("  (")[0].strip() for line in out.splitlines() if line.startswith("  ")], err


def test_publish_family_eval_yaml_has_one_task_per_cell_of_the_family():
    spec = yaml.safe_load(eval_yaml(toy.TASK, ["small", "large"]))
    assert spec["name"] == "Toy" and spec["evaluation_framework"] == "perrecbench"
    assert "Score: accuracy (higher is better)" in spec["description"]
    assert spec["tasks"] == [
        {"id": f"{subset}_{protocol}", "config": subset, "split": "test"}
        for subset in ("small", "large")
        for protocol in ("toy-rate", "toy-check")
    ]


def test_publish_family_results_have_one_entry_per_cell_with_the_headline_metric(toy_run, capsys):
    code, names, _ = push(capsys, "results", str(toy_run), "--task", "toy", *PUSH, "--stage", "staged")
    assert code == 0 and names == [".eval_results/toy.yaml"]
    entries = parse_eval_result_entries(yaml.safe_load(Path("staged", names[0]).read_text()))
    scores = json.loads((toy_run / "scores.json").read_text())
    ids = {task["id"] for task in yaml.safe_load(eval_yaml(toy.TASK, toy.SUBSETS))["tasks"]}
    assert len(entries) == len(scores["cells"]) == 4
    for entry, cell in zip(entries, scores["cells"], strict=True):
        accuracy = cell["metrics"]["accuracy"]
        assert entry.task_id == f"{cell['subset']}_{cell['protocol']}" and entry.task_id in ids
        assert (entry.dataset_id, entry.dataset_revision) == (DATASET, REVISION)
        assert entry.value == round(accuracy["value"], 4) == 1.0
        interval = f"[{accuracy['ci_low']:.4f}, {accuracy['ci_high']:.4f}]"
        ci = f"accuracy 1.0000 (higher is better), 95% CI {interval} over 12 docs"
        assert entry.notes.startswith(f"{ci} (0 failed); default prompts, one sample per request; ")
        assert "fingerprint sha256:" in entry.notes


def test_publish_family_push_results_reads_the_family_from_the_run(toy_run, capsys):
    code, names, _ = push(capsys, "results", str(toy_run), *PUSH)  # no --task: the run's run.json names it
    assert code == 0 and names == [".eval_results/toy.yaml"]
    code, names, err = push(capsys, "results", str(toy_run), "--task", "perrecbench", *PUSH)
    assert code == 2 and not names
    assert err.strip() == (
        f"perrecbench: error: {toy_run} is toy's (--task perrecbench given): pass --task toy or none"
    )


def test_publish_family_refuses_a_run_whose_build_changed_since(toy_run, capsys):
    toy.write_data(Path("data"), seed=1)
    code, _, err = push(capsys, "results", str(toy_run), "--task", "toy", *PUSH)
    assert code == 2 and "the benchmark at data changed since the run; evaluate again" in err


def write_manifest(folder: Path, task: str) -> None:
    """A manifest naming `task` and listing the toy build's files, as a family's build writes it."""
    outputs = {s: {split: f"{s}/{split}.jsonl" for split in ("train", "test")} for s in toy.SUBSETS}
    (folder / "manifest.json").write_text(json.dumps({"task": task, "outputs": outputs}))


def test_publish_family_push_benchmark_lists_the_family_cells(toy_run, capsys):
    write_manifest(Path("data"), "toy")
    code, names, _ = push(capsys, "benchmark", "data", "--repo", "org/toy", "--dry-run", "--stage", "staged")
    assert code == 0
    assert names == ["eval.yaml", "large/test.jsonl", "large/train.jsonl", "manifest.json",
                     "small/test.jsonl", "small/train.jsonl"]  # fmt: skip
    assert Path("staged/eval.yaml").read_text() == eval_yaml(toy.TASK, toy.SUBSETS)


def test_publish_family_push_benchmark_refuses_a_build_of_an_unknown_task(toy_run, capsys):
    write_manifest(Path("data"), "nope")
    code, _, err = push(capsys, "benchmark", "data", "--repo", "org/x", "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "data/manifest.json names task 'nope', not one this perrecbench can publish (perrecbench" in err


@pytest.fixture(scope="module")
def llmrec_build(tmp_path_factory) -> Path:
    from tests.dataset_builder.llmrec.fixture import synth_build

    return synth_build(tmp_path_factory.mktemp("publish-llmrec"))


def _llmrec_run(build: Path, out: Path, engine: dict, model: str) -> Path:
    """A fake-engine LLMRec run (rating and sequential, 8 docs) recorded as one of `engine` and `model`."""
    argv = ["--no-progress", "evaluate", "--task", "llmrec", "--data", str(build), "--engine", "fake"]
    cells = ["--subsets", "rating,sequential", "--protocols", "rating,sequential", "--max-docs", "8"]
    assert main([*argv, "--model", "constant", *cells, "--out", str(out)]) == 0
    info = json.loads((out / "run.json").read_text())
    info["engine"] = engine
    info["config"]["model"] = model
    (out / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return out


def _entries(folder: str, names: list[str]) -> dict[str, object]:
    (name,) = names
    return {e.task_id: e for e in parse_eval_result_entries(yaml.safe_load(Path(folder, name).read_text()))}


def test_publish_family_llmrec_files_every_cell_with_its_own_metric(llmrec_build, tmp_path, capsys):
    engine = {"name": "openai", "model": "org/model", "adapter": None}
    run = _llmrec_run(llmrec_build, tmp_path / "run", engine, "org/model")
    push_args = ["results", str(run), "--task", "llmrec", *PUSH, "--stage", str(tmp_path / "s")]
    capsys.readouterr()
    assert main(["push", *push_args]) == 0
    out = capsys.readouterr().out
    entries = _entries(str(tmp_path / "s"), [line.split("  (")[0].strip() for line in out.splitlines()
                                             if line.startswith("  ")])  # fmt: skip
    scores = {c["subset"]: c["metrics"] for c in json.loads((run / "scores.json").read_text())["cells"]}
    assert set(entries) == {"rating_rating", "sequential_sequential"}  # the rating cell is not left out
    assert entries["rating_rating"].value == round(scores["rating"]["rmse"]["value"], 4)
    assert (
        entries["rating_rating"].notes.startswith("rmse ")
        and "(lower is better)" in entries["rating_rating"].notes
    )
    assert entries["sequential_sequential"].notes.startswith("ndcg@10 ")
    assert "the cell's own metric" in out and "left out" not in out


def test_publish_family_names_a_cell_it_leaves_out(llmrec_build, tmp_path, capsys):
    run = _llmrec_run(llmrec_build, tmp_path / "run", {"name": "openai", "model": "org/model"}, "org/model")
    scores = json.loads((run / "scores.json").read_text())
    for cell in scores["cells"]:
        if cell["subset"] == "rating":  # every doc failed: no metric has a value
            cell["num_failed"] = cell["num_docs"]
            cell["metrics"] = {k: {"value": None, "ci_low": None, "ci_high": None} for k in cell["metrics"]}
    (run / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    capsys.readouterr()
    assert main(["push", "results", str(run), "--task", "llmrec", *PUSH]) == 0
    out = capsys.readouterr().out
    assert "left out: rating/rating (no metric has a value: all 8 docs failed)" in out


def test_publish_family_a_gguf_run_is_not_filed_as_the_original_model(llmrec_build, tmp_path, capsys):
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    engine = {"name": "hf", "model": f"models/{gguf}", "gguf_file": gguf}
    run = _llmrec_run(llmrec_build, tmp_path / "run", engine, f"models/{gguf}")
    original = ["--repo", "org/model", "--model", f"models/{gguf}"]
    argv = ["push", "results", str(run), "--task", "llmrec", *original, *PUSH[2:]]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"ran the GGUF file {gguf} (quantized weights)" in err
    assert "--quantized" in err
    assert main([*argv, "--quantized", "--stage", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    names = [line.split("  (")[0].strip() for line in out.splitlines() if line.startswith("  ")]
    assert names == [".eval_results/llmrec_gguf.yaml"]  # never the original's file
    for entry in _entries(str(tmp_path / "s"), names).values():
        assert (
            f"weights: the GGUF file {gguf} (quantized weights), not the original checkpoint" in entry.notes
        )
    converted = {"name": "vllm", "model": "models/smol", "converted_from": gguf}
    run = _llmrec_run(llmrec_build, tmp_path / "run2", converted, "models/smol")
    assert main(["push", "results", str(run), "--task", "llmrec", "--model", "models/smol", *PUSH]) == 2
    assert "a folder converted from the GGUF file" in capsys.readouterr().err
