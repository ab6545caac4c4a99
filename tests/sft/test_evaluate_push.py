"""A trained adapter through the runner (`evaluate --engine hf --adapter NAME=PATH`), its card and upload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard, parse_eval_result_entries

from perrec_eval.cli import main
from perrec_eval.publish import folder_files
from perrec_eval.rundir import adapter_fingerprint
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from sft.card import LOCAL_INFO, model_card, read_info
from sft.config import PushConfig
from sft.push import SKIP, push

pytestmark = pytest.mark.slow


def _evaluate(tiny_model_dir, sft_bench, out, adapter=()):
    config = EvalConfig(
        engine="hf",
        model=str(tiny_model_dir),
        adapter=adapter,
        data=str(sft_bench),
        out=str(out),
        levels=("easy",),
        max_groups=2,
        no_profile=True,
        temperature=0.0,
        engine_args=("device=cpu",),
    )
    return out, evaluate(config).to_json()


@pytest.fixture(scope="module")
def run_dir(trained, tiny_model_dir, sft_bench, tmp_path_factory):
    adapter, _ = trained
    return _evaluate(
        tiny_model_dir, sft_bench, tmp_path_factory.mktemp("runs") / "pairwise", (f"pairwise={adapter}",)
    )


@pytest.fixture(scope="module")
def base_run(tiny_model_dir, sft_bench, tmp_path_factory):
    return _evaluate(tiny_model_dir, sft_bench, tmp_path_factory.mktemp("runs") / "base")[0]


@pytest.fixture
def publishable(trained, tiny_model_dir, tmp_path_factory, tmp_path, monkeypatch):
    """A copy of the trained adapter as a user would have it: trained from a local copy of org/tiny-base
    (`--base-model-id`), its records naming relative paths; the working folder is `tmp_path`."""
    adapter, _ = trained
    monkeypatch.chdir(tmp_path)
    copy = Path("adapters") / "pairwise"
    shutil.copytree(adapter, copy)
    root = str(tmp_path_factory.getbasetemp()) + "/"
    info = json.loads((copy / "sft_train.json").read_text().replace(root, ""))
    info["base_model"] = "org/tiny-base"
    (copy / "sft_train.json").write_text(json.dumps(info))
    (copy / "README.md").write_text("the card training wrote")
    (copy / LOCAL_INFO).write_text(json.dumps({"base_model_local": str(tiny_model_dir)}))
    return copy


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_trained_adapter_is_evaluated_end_to_end_by_the_runner(run_dir, trained):
    out, scores = run_dir
    adapter, _ = trained
    run = json.loads((out / "run.json").read_text())
    assert run["engine"]["adapter"] == str(adapter) and run["engine"]["adapter_name"] == "pairwise"
    assert run["adapter_sha256"] == {"pairwise": adapter_fingerprint(adapter)}
    cost = run["cost"]
    assert cost["requests"] == len((out / "samples.jsonl").read_text().splitlines()) > 0
    assert cost["wall_seconds"] > 0 and cost["prompt_tokens"] > cost["answer_tokens"] > 0
    assert scores["complete"] and {(c["level"], c["method"]) for c in scores["cells"]} == {
        ("easy", "pointwise"),
        ("easy", "pairwise"),
        ("easy", "listwise"),
    }
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    pairwise = [s for s in samples if s["method"] == "pairwise"]
    assert pairwise and all(s["ok"] for s in pairwise)  # it learned to answer "[User A]" / "[User B]"


def test_an_adapter_retrained_in_place_is_evaluated_again(trained, tiny_model_dir, sft_bench, tmp_path):
    from safetensors.torch import load_file, save_file

    adapter = tmp_path / "adapter"
    shutil.copytree(trained[0], adapter)
    out = tmp_path / "run"
    _evaluate(tiny_model_dir, sft_bench, out, (str(adapter),))
    weights = adapter / "adapter_model.safetensors"
    save_file({k: v * 2 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    _evaluate(tiny_model_dir, sft_bench, out, (str(adapter),))
    run = json.loads((out / "run.json").read_text())
    assert run["cache"]["hits"] == 0 and run["cache"]["misses"] > 0
    assert run["adapter_sha256"] == {"adapter": adapter_fingerprint(adapter)}


def test_model_card_renders_the_ptc_table_of_a_run(trained, run_dir):
    adapter, _ = trained
    out, scores = run_dir
    card = model_card(read_info(adapter), name="pairwise", repo="org/tiny", systems=[("pairwise", out)])
    assert card.startswith("---\nlibrary_name: peft\n")
    assert "| level | method | `pairwise` |" in card and "\n| easy | pointwise | " in card
    assert "--adapter pairwise=PATH_TO_THIS_FOLDER --no-profile" in card and "org/tiny" in card
    assert "{{" not in card


def test_push_dry_run_lists_the_upload_and_writes_nothing_into_the_folder(
    publishable, run_dir, base_run, capsys
):
    before = snapshot(publishable)
    argv = ["push", "adapter", str(publishable), "--repo", "org/tiny", "--run", str(run_dir[0])]
    argv += ["--base-run", str(base_run), "--dataset", "org/perrecbench", "--dataset-revision", "abc123"]
    assert main([*argv, "--dry-run", "--stage", "staged"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dry run: would upload ") and "https://huggingface.co/org/tiny (model)" in out[0]
    listed = [line.split("  (")[0].strip() for line in out[1:] if line.startswith("  ")]
    expected = {*sorted(folder_files(publishable, skip=SKIP)), ".eval_results/perrecbench_no_profile.yaml"}
    assert listed == sorted(expected) and "adapter_model.safetensors" in listed
    assert not any(name.startswith(("checkpoint-", LOCAL_INFO, "training_args")) for name in listed)
    assert snapshot(publishable) == before
    staged = Path("staged")
    assert (
        json.loads((staged / "adapter_config.json").read_text())["base_model_name_or_path"] == "org/tiny-base"
    )
    entries = parse_eval_result_entries(yaml.safe_load((staged / listed[0]).read_text()))
    assert {e.task_id for e in entries} == {"easy_pointwise", "easy_pairwise", "easy_listwise"}
    card = ModelCard.load(staged / "README.md")
    assert card.data.base_model == "org/tiny-base" and len(card.data.eval_results) == 3
    assert {r.dataset_revision for r in card.data.eval_results} == {"abc123"}
    text = card.text
    assert "| `base (org/tiny-base)` | `pairwise` |" in text and "\n| easy | pairwise | " in text
    assert "requests in" in text
    assert 'AutoTokenizer.from_pretrained("org/tiny-base")' in text
    assert "**not** the paper's recipe (§6): max steps 10 (paper: -1), effective batch 4 (paper: 32)" in text
    assert "learning rate 0.003 (paper: 1e-05), warmup 0 (paper: 0.1)." in text


def test_push_refuses_runs_not_of_this_adapter_on_its_base(publishable, run_dir, base_run, capsys, tmp_path):
    def refused(*extra: str) -> str:
        assert main(["push", "adapter", str(publishable), "--repo", "org/tiny", *extra, "--dry-run"]) == 2
        return capsys.readouterr().err

    assert "is a run without adapter" in refused("--run", str(base_run))
    assert "ran with adapter" in refused("--run", str(run_dir[0]), "--base-run", str(run_dir[0]))
    other = tmp_path / "other"
    shutil.copytree(run_dir[0], other)
    info = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**info, "config": {**info["config"], "model": "org/other"}}))
    assert "is a run of 'org/other'" in refused("--run", str(other))
    weights = publishable / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")
    assert "not of 'pairwise'" in refused("--run", str(run_dir[0]))


def test_push_results_of_an_adapter_checks_the_run_against_its_folder(publishable, run_dir, capsys, tmp_path):
    argv = ["push", "results", str(run_dir[0]), "--repo", "org/tiny", "--adapter", str(publishable)]
    argv += ["--dataset", "org/perrecbench", "--dataset-revision", "abc123", "--dry-run"]
    assert main(argv) == 0, capsys.readouterr().err
    assert ".eval_results/perrecbench_no_profile.yaml" in capsys.readouterr().out


def test_push_refuses_a_run_of_an_adapter_retrained_since(publishable, run_dir, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir[0], run)
    info = json.loads((run / "run.json").read_text())
    info["config"]["adapter"] = [f"pairwise={publishable}"]  # the run named this very folder
    (run / "run.json").write_text(json.dumps(info))
    weights = publishable / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")  # retrained in place
    argv = ["push", "adapter", str(publishable), "--repo", "org/tiny", "--run", str(run), "--dry-run"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ran with other weights of adapters/pairwise (retrained since the run)" in err
    assert "not of" not in err


def test_push_refuses_an_adapter_whose_records_hold_absolute_paths(trained, capsys):
    adapter, _ = trained
    assert main(["push", "adapter", str(adapter), "--repo", "org/tiny", "--dry-run"]) == 2
    assert "absolute local path" in capsys.readouterr().err


def test_push_uploads_exactly_the_listed_files(publishable, monkeypatch):
    import huggingface_hub

    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = (repo_id, kwargs)

        def create_commit(self, repo_id, *, operations, commit_message, repo_type):
            calls["commit"] = [op.path_in_repo for op in operations]

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    files, url = push(PushConfig(adapter=str(publishable), repo="org/tiny", private=True))
    assert url == "https://huggingface.co/org/tiny"
    assert calls["create"] == ("org/tiny", {"repo_type": "model", "private": True, "exist_ok": True})
    assert calls["commit"] == files == sorted(folder_files(publishable, skip=SKIP))
