"""`perrecbench push ...`: each upload listed file by file in --dry-run, staged files read back with
huggingface_hub's own parsers, refusals of other models' runs and of anything local or secret. Offline."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from huggingface_hub import DatasetCard, SpaceCard, parse_eval_result_entries
from huggingface_hub.repocard import metadata_load

from perrec_eval import metric_path, ptc, registry, stats
from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.publish import Upload, check_publishable, eval_yaml, push, scan
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate, evaluate_baselines
from tests.benchmark_fixture import truth_responder, write_tiny_benchmark, write_truth_profiles

DATASET, REVISION = "org/perrecbench", "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder holding a tiny benchmark, a model's run and a baseline run, all named by relative paths
    from it (as a user's commands would: the pushed files then hold no absolute path)."""
    root = tmp_path_factory.mktemp("publish")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        write_truth_profiles(write_tiny_benchmark(Path("bench")), Path("profiles.jsonl"))
        outputs: dict[str, dict[str, str]] = {}  # the file list a build's manifest.json holds
        for path in sorted(Path("bench").glob("*/*.parquet")):
            split = path.name.split("-")[0]
            outputs.setdefault(path.parent.name, {})[split] = f"{path.parent.name}/{path.name}"
        (Path("bench") / "manifest.json").write_text(
            json.dumps({"source_kind": "synthetic", "outputs": outputs}), encoding="utf-8"
        )
        config = EvalConfig(
            data="bench",
            engine="fake",
            model="scripted",
            out="runs/model",
            profiles="profiles.jsonl",
        )
        evaluate(config, FakeEngine(truth_responder(1.0)))
        # The fake engine stands in for a real one here: record the run as one of org/model.
        info = json.loads(Path("runs/model/run.json").read_text())
        info["engine"] = {"name": "openai", "model": "org/model", "adapter": None}
        info["config"]["model"] = "org/model"
        info["label"] = "org/model"
        Path("runs/model/run.json").write_text(json.dumps(info), encoding="utf-8")
        baseline = EvalConfig(data="bench", engine="baseline", model="random", out="runs/random")
        evaluate_baselines(baseline, ["random"])
        assert main(["--no-progress", "report", "runs/model", "--out", "report", "--no-plots"]) == 0
    return root


@pytest.fixture
def at(workdir, monkeypatch) -> Path:
    monkeypatch.chdir(workdir)
    return workdir


def dry_run(capsys, *argv: str) -> tuple[str, list[str]]:
    """(the first line, the listed file names) of `perrecbench push ... --dry-run`."""
    capsys.readouterr()
    assert main(["push", *argv, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split("  (")[0].strip() for line in lines[1:] if line.startswith("  ")]
    return lines[0], names


def refusal(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(["push", *argv, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


def test_push_metric_dry_run_lists_the_module_as_a_gradio_space(capsys, tmp_path):
    head, names = dry_run(capsys, "metric", "--repo", "org/ptc", "--stage", str(tmp_path / "stage"))
    assert (
        head == "dry run: would upload 7 files to https://huggingface.co/spaces/org/ptc (space, sdk gradio):"
    )
    assert names == [
        "README.md",
        "app.py",
        "perrec_eval/__init__.py",
        "perrec_eval/ptc.py",
        "perrec_eval/stats.py",
        "ptc.py",
        "requirements.txt",
    ]
    for name in ("README.md", "app.py", "ptc.py"):
        assert (tmp_path / "stage" / name).read_bytes() == (Path(metric_path()) / name).read_bytes()
    assert (tmp_path / "stage" / "perrec_eval/ptc.py").read_bytes() == Path(ptc.__file__).read_bytes()
    assert (tmp_path / "stage" / "perrec_eval/stats.py").read_bytes() == Path(stats.__file__).read_bytes()
    card = SpaceCard.load(tmp_path / "stage" / "README.md")
    assert (card.data.sdk, card.data.app_file) == ("gradio", "app.py")
    assert "perrecbench" not in (tmp_path / "stage" / "requirements.txt").read_text().split("\n", 1)[1]


@pytest.mark.slow
def test_push_metric_space_runs_on_its_own(capsys, tmp_path):
    """The staged Space loads with evaluate and imports the bundled math, not an installed perrecbench."""
    import os
    import subprocess
    import sys

    dry_run(capsys, "metric", "--repo", "org/ptc", "--stage", str(tmp_path / "space"))
    script = (
        "import evaluate, json, perrec_eval.ptc as p; m = evaluate.load('ptc.py', cache_dir='../cache'); "
        "out = m.compute(references=[[0.5, -1.2]], predictions=[[0.9, 0.1]]); "
        "print(json.dumps([p.__file__, out['ptc']]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "HF_MODULES_CACHE": str(tmp_path / "m")
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path / "space",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    path, value = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(path).resolve() == (tmp_path / "space" / "perrec_eval" / "ptc.py").resolve() and value == 1.0


def test_push_leaderboard_dry_run_is_the_report_as_a_static_space(capsys, at, tmp_path):
    head, names = dry_run(
        capsys, "leaderboard", "report", "--repo", "org/board", "--stage", str(tmp_path / "s")
    )
    assert head.endswith("https://huggingface.co/spaces/org/board (space, sdk static):")
    report = sorted(
        p.relative_to(at / "report").as_posix()
        for p in (at / "report").rglob("*")
        if p.is_file() and not p.name.startswith(".")  # the report's lock file stays home
    )
    assert names == sorted([*report, "README.md"])
    card = SpaceCard.load(tmp_path / "s" / "README.md")
    assert (card.data.sdk, card.data.app_file) == ("static", "index.html")
    assert (tmp_path / "s" / "index.html").read_bytes() == (at / "report" / "index.html").read_bytes()


def test_push_leaderboard_publishes_a_report_of_runs_on_absolute_paths(capsys, at, tmp_path):
    # a run on an absolute --data path, named by absolute paths: the report names the build by its
    # fingerprint and the runs by paths relative to the report, so it pushes as written
    run = tmp_path / "abs-run"
    config = EvalConfig(
        data=str(at / "bench"), engine="baseline", model="random", out=str(run), levels=("easy",)
    )
    evaluate_baselines(config, ["random"])
    assert main(["--no-progress", "report", str(run), "--out", str(tmp_path / "r")]) == 0
    assert str(tmp_path) not in "".join(p.read_text() for p in (tmp_path / "r").glob("leaderboard.*"))
    head, names = dry_run(capsys, "leaderboard", str(tmp_path / "r"), "--repo", "org/board")
    assert head.startswith("dry run: would upload") and "index.html" in names


def test_push_results_dry_run_writes_eval_results_the_hub_parses(capsys, at, tmp_path):
    argv = [
        "results",
        "runs/model",
        "--repo",
        "org/model",
        "--dataset",
        DATASET,
        "--dataset-revision",
        REVISION,
    ]
    head, names = dry_run(capsys, *argv, "--stage", str(tmp_path / "s"))
    assert head.startswith("dry run: would upload 1 file to https://huggingface.co/org/model (model)")
    assert names == [".eval_results/perrecbench.yaml"]
    data = yaml.safe_load((tmp_path / "s" / names[0]).read_text())
    entries = parse_eval_result_entries(data)
    scores = json.loads((at / "runs/model/scores.json").read_text())
    spec = yaml.safe_load(eval_yaml(registry.get("perrecbench"), ["easy", "medium", "hard"]))
    ids = {task["id"] for task in spec["tasks"]}
    assert len(entries) == len(scores["cells"]) == 9
    for entry, cell in zip(entries, scores["cells"], strict=True):
        assert (entry.dataset_id, entry.dataset_revision) == (DATASET, REVISION)
        assert entry.task_id == f"{cell['subset']}_{cell['protocol']}" and entry.task_id in ids
        assert entry.value == round(cell["metrics"]["ptc"]["value"], 4)
        assert f"over {cell['num_docs']} docs" in entry.notes and "95% CI [" in entry.notes
        assert "fingerprint sha256:" in entry.notes and "default prompts" in entry.notes


@pytest.mark.parametrize(
    ("run", "repo", "extra", "message"),
    [
        ("runs/model", "org/other", [], "is a run of 'org/model', not of 'org/other'"),
        ("runs/random", "org/model", [], "no-LLM baseline 'random'"),
        ("runs", "org/model", [], "holds 2 runs"),
    ],
)
def test_push_results_refuses_runs_of_anything_else(capsys, at, run, repo, extra, message):
    err = refusal(
        capsys, "results", run, "--repo", repo, "--dataset", DATASET, "--dataset-revision", REVISION, *extra
    )
    assert message in err


def test_push_results_refuses_a_run_of_another_task_in_one_line(capsys, at):
    from tests.perrec_eval.tasks import toy

    registry.register(toy.TASK, replace=True)
    try:
        err = refusal(
            capsys, "results", "runs/model", "--task", "toy", "--repo", "org/model", "--dataset", DATASET,
            "--dataset-revision", REVISION,
        )  # fmt: skip
    finally:
        registry.unregister("toy")
    assert err.endswith("runs/model is perrecbench's (--task toy given): pass --task perrecbench or none")


def test_push_results_refuses_a_run_whose_benchmark_changed(capsys, at, tmp_path, monkeypatch):
    import shutil

    shutil.copytree(at / "runs" / "model", tmp_path / "model")
    shutil.copytree(at / "bench", tmp_path / "bench")
    (tmp_path / "bench" / "manifest.json").write_text('{"source_kind": "raw"}', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    err = refusal(
        capsys, "results", "model", "--repo", "org/model", "--dataset", DATASET, "--dataset-revision", "r"
    )
    assert "changed since the run" in err


def test_push_benchmark_dry_run_adds_an_eval_yaml_of_its_configs(capsys, at, tmp_path):
    head, names = dry_run(capsys, "benchmark", "bench", "--repo", DATASET, "--stage", str(tmp_path / "s"))
    assert head.endswith(f"https://huggingface.co/datasets/{DATASET} (dataset):")
    assert "eval.yaml" in names and "README.md" in names and "manifest.json" in names
    spec = yaml.safe_load((tmp_path / "s" / "eval.yaml").read_text())
    configs = {c["config_name"] for c in DatasetCard.load(tmp_path / "s" / "README.md").data.configs}
    assert spec["name"] == "PerRecBench" and len(spec["tasks"]) == 9
    assert all(task["config"] in configs and task["split"] == "test" for task in spec["tasks"])


def _bench_copy(at, tmp_path, monkeypatch) -> Path:
    import shutil

    shutil.copytree(at / "bench", tmp_path / "bench")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "bench"


def test_push_benchmark_refuses_a_build_missing_a_listed_file(capsys, at, tmp_path, monkeypatch):
    import shutil

    shutil.rmtree(_bench_copy(at, tmp_path, monkeypatch) / "easy")
    err = refusal(capsys, "benchmark", "bench", "--repo", DATASET)
    assert "easy/test-" in err and "is missing" in err


def test_push_benchmark_refuses_a_data_file_copied_over_another(capsys, at, tmp_path, monkeypatch):
    bench = _bench_copy(at, tmp_path, monkeypatch)
    (hard,) = (bench / "hard").glob("test-*.parquet")
    (medium,) = (bench / "medium").glob("test-*.parquet")
    hard.write_bytes(medium.read_bytes())
    err = refusal(capsys, "benchmark", "bench", "--repo", DATASET)
    assert "does not hold the rows the build wrote" in err


def test_push_benchmark_refuses_interactions_changed_since_the_build(capsys, at, tmp_path, monkeypatch):
    import hashlib

    bench = _bench_copy(at, tmp_path, monkeypatch)
    (bench / "interactions").mkdir()
    (bench / "interactions" / "Books-0.parquet").write_bytes(b"edited rows")
    manifest = json.loads((bench / "manifest.json").read_text())
    entry = {"path": "interactions/Books-0.parquet", "sha256": hashlib.sha256(b"built rows").hexdigest()}
    (bench / "manifest.json").write_text(json.dumps({**manifest, "interactions": {"Books": entry}}))
    line = refusal(capsys, "benchmark", "bench", "--repo", DATASET)
    assert "does not hold the rows the build wrote" in line


def test_push_benchmark_refuses_a_manifest_without_its_file_list(capsys, at, tmp_path, monkeypatch):
    bench = _bench_copy(at, tmp_path, monkeypatch)
    (bench / "manifest.json").write_text('{"source_kind": "raw"}', encoding="utf-8")
    assert "lists no data files" in refusal(capsys, "benchmark", "bench", "--repo", DATASET)


def test_scan_refuses_secrets_environment_values_and_the_machine_name(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "s3cr3t-value-123")
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-node-17.example.org")
    upload = Upload("org/x", "model", {"a.md": b"fine"}, "m")
    check_publishable(upload)
    for content, what in [
        (b"uses s3cr3t-value-123 here", "$MY_SERVICE_TOKEN"),
        (b"trained on gpu-node-17", "machine's name"),
        (b"token hf_" + b"a" * 34, "Hugging Face token"),
        (b"http://user:pw@host/v1", "password inside a URL"),
        (b"C:\\Users\\ann\\bench", "absolute local path"),
    ]:
        with pytest.raises(ValueError, match=what.replace("$", r"\$")):
            check_publishable(Upload("org/x", "model", {"a.md": content}, "m"))
    assert scan("ok.md", b"see https://huggingface.co/datasets/org/perrecbench/tree/main/easy", []) is None


def test_push_sends_one_commit_of_exactly_the_listed_files(monkeypatch):
    import huggingface_hub

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = (repo_id, kwargs)

        def create_commit(self, repo_id, *, operations, commit_message, repo_type):
            calls["commit"] = (repo_id, [op.path_in_repo for op in operations], repo_type)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    upload = Upload("org/ptc", "space", {"b.py": b"x", "README.md": b"y"}, "m", space_sdk="gradio")
    assert push(upload, dry_run=False, private=True) == "https://huggingface.co/spaces/org/ptc"
    assert calls["create"] == (
        "org/ptc",
        {"repo_type": "space", "private": True, "exist_ok": True, "space_sdk": "gradio"},
    )
    assert calls["commit"] == ("org/ptc", ["README.md", "b.py"], "space")
    calls.clear()
    assert push(upload, dry_run=True) is None and not calls


def test_push_the_hub_refuses_is_one_config_error_naming_the_fix():
    upload = Upload("org/ptc", "space", {"README.md": b"y"}, "m", space_sdk="gradio")
    with pytest.raises(ConfigError, match="cannot upload to org/ptc .*offline mode.*hf auth login"):
        push(upload, dry_run=False)  # the tests run with HF_HUB_OFFLINE=1: the Hub client refuses


def test_model_index_of_an_adapter_card_parses_with_huggingface_hub(tmp_path):
    from huggingface_hub import EvalResult, ModelCard

    from sft.card import model_card

    info = {
        "kind": "adapter",
        "base_model": "org/base",
        "perrecbench": "0.1.0",
        "data": {
            "format": "pointwise",
            "variant": "no_profile",
            "examples": 4,
            "groups": 2,
            "examples_per_format": {"pointwise": 4},
            "levels": ["easy"],
            "k": 4,
            "source": {"data": "bench", "source_kind": "synthetic"},
        },
        "recipe": {
            "lora_r": 16,
            "lora_alpha": 16,
            "lora_dropout": 0.05,
            "target_modules": ["q_proj"],
            "epochs": 2.0,
            "max_steps": -1,
            "batch_size": 32,
            "per_device_batch_size": 4,
            "gradient_accumulation": 8,
            "world_size": 1,
            "learning_rate": 1e-5,
            "lr_scheduler": "cosine",
            "warmup": 0.1,
            "max_length": 8192,
            "precision": "fp32",
            "dtype": "auto",
            "seed": 0,
            "trl_args": [],
        },
        "dropped_long": 0,
    }
    result = EvalResult(
        task_type="text-generation",
        dataset_type=DATASET,
        dataset_name="PerRecBench",
        metric_type="ptc",
        metric_value=0.25,
        dataset_config="easy",
        dataset_split="test",
        dataset_revision=REVISION,
        metric_config="pointwise",
    )
    text = model_card(info, name="a", repo="org/a", eval_results=[result])
    (tmp_path / "README.md").write_text(text)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.base_model == "org/base"
    (parsed,) = card.data.eval_results
    assert (parsed.dataset_type, parsed.dataset_revision, parsed.metric_value) == (DATASET, REVISION, 0.25)
    assert metadata_load(tmp_path / "README.md")["model-index"][0]["name"] == "org/a"
    assert "the paper's recipe (§6)." in text


def test_build_push_to_hub_sends_eval_yaml_and_deletes_stale_parquet(at, monkeypatch):
    import huggingface_hub

    from dataset_builder.build import push_to_hub

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = kwargs["repo_type"]

        def list_repo_files(self, repo_id, repo_type):
            return ["README.md", "easy/test-000000000000.parquet", "notes.txt"]

        def create_commit(self, repo_id, *, operations, commit_message, repo_type):
            calls["ops"] = {(type(op).__name__, op.path_in_repo) for op in operations}

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    push_to_hub(Path("bench"), DATASET, synthetic=True)
    assert calls["create"] == "dataset"
    assert ("CommitOperationAdd", "eval.yaml") in calls["ops"] and (
        "CommitOperationAdd",
        "README.md",
    ) in calls["ops"]
    assert ("CommitOperationDelete", "easy/test-000000000000.parquet") in calls["ops"]
    assert not any(path == "notes.txt" for _, path in calls["ops"])


def test_run_json_records_the_cost_and_the_leaderboard_shows_it(at):
    cost = json.loads((at / "runs/model/run.json").read_text())["cost"]
    requests = len((at / "runs/model/samples.jsonl").read_text().splitlines())
    assert cost["requests"] == requests > 0 and cost["wall_seconds"] > 0
    assert cost["requests_per_second"] == pytest.approx(requests / cost["wall_seconds"], rel=1e-2)
    ((row,),) = (section["rows"] for section in json.loads((at / "report/leaderboard.json").read_text()))
    assert row["cost"] == cost
    board = (at / "report/leaderboard.md").read_text()
    assert "### Cost (each run's last invocation)" in board and f"| org/model | {requests:,} | " in board


def test_push_create_pr_opens_a_pull_request_without_creating_the_repo(monkeypatch):
    import types

    import huggingface_hub

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = repo_id

        def create_commit(self, repo_id, *, operations, commit_message, repo_type, **kwargs):
            calls["commit"] = kwargs
            return types.SimpleNamespace(pr_url="https://huggingface.co/org/m/discussions/3", commit_url="c")

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    upload = Upload("org/m", "model", {".eval_results/perrecbench.yaml": b"[]"}, "m")
    assert push(upload, dry_run=False, create_pr=True) == "https://huggingface.co/org/m/discussions/3"
    assert calls == {"commit": {"create_pr": True}}


def test_push_results_refuses_a_run_of_another_hub_dataset(capsys, at, tmp_path, monkeypatch):
    import shutil

    shutil.copytree(at / "runs" / "model", tmp_path / "model")
    info = json.loads((tmp_path / "model" / "run.json").read_text())
    info["config"]["data"] = "other/bench"
    (tmp_path / "model" / "run.json").write_text(json.dumps(info), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    err = refusal(
        capsys, "results", "model", "--repo", "org/model", "--dataset", DATASET, "--dataset-revision", "r"
    )
    assert "evaluated the Hub dataset 'other/bench', not 'org/perrecbench'" in err


@pytest.mark.parametrize(
    "path",
    [
        b"/workspace/alice/perrec",
        b"/nfs/users/alice/x",
        b"D:\\data\\alice",
        b'"D:\\\\data\\\\alice"',
        b"C:/x/y",
    ],
)
def test_scan_refuses_any_absolute_path(path):
    with pytest.raises(DataError, match="absolute local path"):
        check_publishable(Upload("org/x", "space", {"leaderboard.md": b"data: " + path + b"\n"}, "m"))


@pytest.mark.parametrize(
    "text",
    [
        b"runs/base and/or 1/2/3",
        b"https://huggingface.co/org/x/tree/main",
        b"<td>a</td></tr><br/>",
        b"x // y",
    ],
)
def test_scan_passes_relative_paths_urls_and_markup(text):
    assert scan("a.md", text, []) is None


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"Authorization: Basic YWxpY2U6UFdTRUNSRVQxMTE=", "HTTP Basic credential"),
        (b"ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub token"),
        (b"key sk-proj-AbC_123-xyz", "OpenAI project key"),
        (b"http://alice:pa'ss999@127.0.0.1:18004/v1", "password inside a URL"),
        (b"http://alice:PW SECRET@127.0.0.1:18004/v1", "password inside a URL"),
    ],
)
def test_scan_refuses_basic_credentials_github_and_openai_project_tokens(content, what):
    assert what in scan("a.md", content, [])


def test_scan_refuses_the_machine_name_in_any_case(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-node-17")
    with pytest.raises(DataError, match="machine's name"):
        check_publishable(Upload("org/x", "space", {"a.md": b"trained on GPU-NODE-17"}, "m"))


def test_scan_reads_every_byte_of_a_file_above_50_mb(tmp_path):
    large = tmp_path / "leaderboard.md"
    with large.open("wb") as handle:
        handle.truncate(60 * 2**20)
        handle.seek(0, 2)
        handle.write(b"\nhf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\n")
    with pytest.raises(DataError, match="Hugging Face token"):
        check_publishable(Upload("org/x", "space", {"leaderboard.md": large}, "m"))


def test_push_leaderboard_uploads_only_the_files_report_wrote(capsys, at, tmp_path):
    import shutil

    report = shutil.copytree(at / "report", tmp_path / "report")
    (report / "notes.txt").write_text("my notes")
    (report / "plots").mkdir(exist_ok=True)
    (report / "plots" / "extra.txt").write_text("more notes")
    _, names = dry_run(capsys, "leaderboard", str(report), "--repo", "org/b")
    assert "index.html" in names and "leaderboard.json" in names
    assert "notes.txt" not in names and "plots/extra.txt" not in names


def test_push_benchmark_uploads_only_the_files_build_wrote(capsys, at, tmp_path):
    (at / "bench" / "notes.txt").write_text("my notes")
    try:
        _, names = dry_run(capsys, "benchmark", "bench", "--repo", DATASET)
    finally:
        (at / "bench" / "notes.txt").unlink()
    assert "notes.txt" not in names and "manifest.json" in names
    assert any(name.startswith("easy/") for name in names)


def test_push_refuses_a_stage_folder_inside_the_pushed_folder(capsys, at):
    err = refusal(capsys, "benchmark", "bench", "--repo", DATASET, "--stage", "bench/stage")
    assert "inside the folder being pushed" in err
    assert not (at / "bench" / "stage").exists()
