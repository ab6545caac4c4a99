"""`perrecbench export`: the rows are the requests `evaluate` sends, the task files say so to each harness,
and an export refuses to serve rows its prompt files or builds no longer match."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import DataError
from perrec_eval.harness import export
from perrec_eval.harness.export import ROW_COLUMNS, read_export, rows_of
from perrec_eval.registry import get

FAMILIES = ("perrecbench", "llmrec", "recbench-plus")


@pytest.fixture(scope="module")
def exported(builds, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "tasks"
    argv = ["export", "lm-eval", *(str(builds[f]) for f in FAMILIES), "--out", str(out), "--max-docs", "3"]
    assert main(["--no-progress", *argv]) == 0
    return out


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))


def _yaml(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)


def test_export_lm_eval_writes_a_task_per_cell_a_group_per_family_and_the_suite(exported):
    record = read_export(exported)
    assert {cell["group"] for cell in record["cells"]} == {"perrecbench", "llmrec", "recbench_plus"}
    for cell in record["cells"]:
        task = _yaml(exported / cell["group"] / f"{cell['name']}.yaml")
        assert (task["description"], task["doc_to_text"], task["doc_to_target"]) == ("system", "prompt", "")
        assert task["process_results"] == ("function", "utils.process_results")
        assert (
            task["generation_kwargs"]["max_gen_toks"]
            == get(cell["task"]).protocol(cell["cell"].split("/")[1]).max_tokens
        )
        family = {m.name: m for m in get(cell["task"]).metrics}
        for metric in task["metric_list"]:
            assert metric["higher_is_better"] is family[metric["metric"]].higher_is_better
            assert metric["aggregation"][0] == "function"
    groups = {group: _yaml(exported / group / f"_{group}.yaml") for group in ("perrecbench", "llmrec")}
    assert groups["perrecbench"]["aggregate_metric_list"][0]["metric"] == "ptc"
    assert len(groups["perrecbench"]["task"]) == 9  # three levels × three methods
    assert _yaml(exported / "_perrecbench_suite.yaml")["task"] == ["perrecbench", "llmrec", "recbench_plus"]
    utils = (exported / "llmrec" / "utils.py").read_text()
    assert "def aggregate_ndcg_10(items):" in utils and "hooks.aggregate('llmrec', 'rmse', items)" in utils


def test_export_skips_configs_the_build_lacks_and_says_why(exported, capsys):
    record = read_export(exported)
    skipped = {(entry["task"], entry["cell"]) for entry in record["skipped"]}
    assert ("recbench-plus", "demographics/recommend") in skipped  # an Amazon build has no demographics
    assert all(entry["why"] for entry in record["skipped"])


def test_export_rows_hold_requests_and_no_label(exported):
    """A row shows what the prompt shows and names its doc; the truth stays in the build (a harness that
    drew few-shot examples from the rows would otherwise show test labels)."""
    record = read_export(exported)
    for cell in record["cells"]:
        rows = pq.read_table(exported / cell["file"])
        assert tuple(rows.column_names) == ROW_COLUMNS
        assert rows.num_rows == cell["rows"]


def _sent(task: str, build: Path, tmp: Path) -> set[str]:
    """Every request `perrecbench evaluate` sends on the same docs, as JSON message lists (the run's cache
    asks a request that repeats, such as a user's pointwise prompt at two levels, once)."""
    sent: set[str] = set()

    def record(request, params, index):
        sent.add(json.dumps(list(request.messages), ensure_ascii=False))
        return "no answer"

    engine = FakeEngine(record, model="recorder")
    if task == "perrecbench":
        from perrec_eval.tasks.perrecbench.config import EvalConfig
        from perrec_eval.tasks.perrecbench.run import evaluate

        config = EvalConfig(
            data=str(build), engine="fake", model="recorder", out=str(tmp), no_profile=True, max_groups=3
        )
    else:
        from perrec_eval.evaluation import TaskEvalConfig, evaluate

        config = TaskEvalConfig(
            task=task, data=str(build), engine="fake", model="recorder", out=str(tmp), max_docs=3
        )
    evaluate(config, engine=engine)
    return sent


@pytest.mark.parametrize("task", FAMILIES)
def test_export_rows_are_the_requests_evaluate_sends(exported, builds, tmp_path, task):
    record = read_export(exported)
    rows = set(
        message
        for cell in record["cells"]
        if cell["task"] == task
        for message in rows_of(exported, cell["name"])["messages"]
    )
    assert rows == _sent(task, builds[task], tmp_path / "run")


def test_export_refuses_rows_of_a_changed_prompt_file(exported, tmp_path, monkeypatch):
    """A prompt file edited after the export: the tasks refuse their rows, naming the file and the fix."""
    copy = tmp_path / "templates"
    shutil.copytree(Path(str(export.templates_dir("llmrec"))), copy)
    (copy / "offtheshelf.yaml").write_text((copy / "offtheshelf.yaml").read_text() + "\n# edited\n")
    real = export.templates_dir
    monkeypatch.setattr(export, "templates_dir", lambda name: copy if name == "llmrec" else real(name))
    export._checked.cache_clear()
    try:
        with pytest.raises(DataError, match=r"offtheshelf\.yaml changed since.*perrecbench export"):
            rows_of(exported, "llmrec_rating")
    finally:
        export._checked.cache_clear()


def test_export_refuses_rows_of_a_changed_build(builds, tmp_path):
    build = tmp_path / "llmrec"
    shutil.copytree(builds["llmrec"], build)
    out = tmp_path / "tasks"
    assert main(["--no-progress", "export", "lm-eval", str(build), "--out", str(out), "--max-docs", "2"]) == 0
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["parameters"]["seed"] += 1  # another build's manifest
    (build / "manifest.json").write_text(json.dumps(manifest))
    export._checked.cache_clear()
    with pytest.raises(DataError, match="changed since the export"):
        rows_of(out, "llmrec_rating")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--pairwise-strategy", "heapsort"], "heapsort pairwise chooses each comparison"),
        (["--shots", "2"], "--shots: the exported tasks are zero-shot"),
        (["--subsets", "nosuch"], "--subsets 'nosuch' names none of these builds'"),
        (["--prompts", "p5"], "--prompts 'p5' is no prompt variant of these builds' (theirs: none)"),
    ],
)
def test_export_refuses_what_one_round_cannot_ask_in_one_line(builds, tmp_path, capsys, extra, message):
    argv = ["export", "lm-eval", str(builds["perrecbench"]), "--out", str(tmp_path / "t"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


def test_export_refuses_two_builds_of_a_family_and_a_folder_that_is_no_build(builds, tmp_path, capsys):
    argv = ["export", "lm-eval", str(builds["llmrec"]), str(tmp_path / "copy"), "--out", str(tmp_path / "t")]
    shutil.copytree(builds["llmrec"], tmp_path / "copy")
    assert main(argv) == 2
    assert "are both llmrec builds: export one per family" in capsys.readouterr().err
    (tmp_path / "notes").mkdir()
    assert main(["export", "lm-eval", str(tmp_path / "notes"), "--out", str(tmp_path / "t")]) == 2
    assert "is not a benchmark folder" in capsys.readouterr().err
    assert main(["export", "lm-eval", str(builds["llmrec"]), "--out", str(builds["llmrec"] / "t")]) == 2
    assert "is inside BUILD" in capsys.readouterr().err


def test_export_lighteval_writes_its_tasks_file_beside_its_rows(builds, tmp_path, capsys):
    assert main(["export", "lighteval", str(builds["llmrec"]), "--out", str(tmp_path / "t.txt")]) == 2
    assert "name the custom tasks file" in capsys.readouterr().err
    out = tmp_path / "llmrec_tasks.py"
    assert main(["--no-progress", "export", "lighteval", str(builds["llmrec"]), "--out", str(out)]) == 0
    assert (
        "llmrec_tasks_rows" in out.read_text() and (tmp_path / "llmrec_tasks_rows" / "export.json").is_file()
    )
    card = (tmp_path / "llmrec_tasks_rows" / "README.md").read_text()
    assert "config_name: llmrec_rating" in card  # what lighteval's load_dataset reads
    (tmp_path / "other.py").write_text("print('mine')\n")
    assert main(["export", "lighteval", str(builds["llmrec"]), "--out", str(tmp_path / "other.py")]) == 2
    assert "did not write" in capsys.readouterr().err


def test_export_reads_a_hub_build_through_its_snapshot(builds, tmp_path, monkeypatch, capsys):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    snapshot = tmp_path / "hub" / "0123abcd"
    shutil.copytree(builds["llmrec"], snapshot)
    asked = []

    def download(repo_id, repo_type):
        asked.append((repo_id, repo_type))
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    out = tmp_path / "tasks"
    assert (
        main(["--no-progress", "export", "lm-eval", "org/llmrec-demo", "--out", str(out), "--max-docs", "2"])
        == 0
    )
    assert asked == [("org/llmrec-demo", "dataset")]
    (selection,) = {json.dumps(cell["selection"]) for cell in read_export(out)["cells"]}
    assert (
        json.loads(selection)["source"] == "org/llmrec-demo"
        and json.loads(selection)["revision"] == "0123abcd"
    )

    def offline(repo_id, repo_type):
        raise LocalEntryNotFoundError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert main(["export", "lm-eval", "org/other", "--out", str(tmp_path / "t2")]) == 2
    assert "the Hub dataset could not be read" in capsys.readouterr().err
    assert main(["export", "lm-eval", "no/such/folder", "--out", str(tmp_path / "t2")]) == 2
    assert "no such folder" in capsys.readouterr().err
