"""A trained adapter through the runner (`evaluate --engine hf --adapter NAME=PATH`), its card and upload."""

from __future__ import annotations

import json

import pytest

from perrec_eval.config import EvalConfig
from perrec_eval.run import evaluate
from sft.card import model_card, read_info
from sft.config import PushConfig
from sft.push import push, upload_files

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(trained, tiny_model_dir, sft_bench, tmp_path_factory):
    adapter, _ = trained
    out = tmp_path_factory.mktemp("runs") / "pairwise"
    config = EvalConfig(
        engine="hf",
        model=str(tiny_model_dir),
        adapter=(f"pairwise={adapter}",),
        data=str(sft_bench),
        out=str(out),
        levels=("easy",),
        max_groups=2,
        no_profile=True,
        temperature=0.0,
        engine_args=("device=cpu", "progress=false"),
        progress=False,
    )
    return out, evaluate(config)


def test_trained_adapter_is_evaluated_end_to_end_by_the_runner(run_dir, trained):
    out, scores = run_dir
    adapter, _ = trained
    run = json.loads((out / "run.json").read_text())
    assert run["engine"]["adapter"] == str(adapter) and run["engine"]["adapter_name"] == "pairwise"
    assert scores["complete"] and {(c["level"], c["method"]) for c in scores["cells"]} == {
        ("easy", "pointwise"),
        ("easy", "pairwise"),
        ("easy", "listwise"),
    }
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    pairwise = [s for s in samples if s["method"] == "pairwise"]
    assert pairwise and all(s["ok"] for s in pairwise)  # it learned to answer "[User A]" / "[User B]"


def test_model_card_renders_the_ptc_table_of_a_run(trained, run_dir):
    adapter, _ = trained
    out, scores = run_dir
    card = model_card(read_info(adapter), name="pairwise", repo="org/tiny", systems=[("pairwise", scores)])
    assert card.startswith("---\nlibrary_name: peft\n")
    assert "| System | easy point | easy pair | easy list |" in card and "\n| pairwise | " in card
    assert "--adapter pairwise=PATH_TO_THIS_FOLDER --no-profile" in card and "org/tiny" in card
    assert "{{" not in card


def test_push_dry_run_writes_the_card_and_lists_the_upload(trained, run_dir):
    adapter, _ = trained
    (adapter / "checkpoint-5").mkdir(exist_ok=True)
    (adapter / "checkpoint-5" / "optimizer.pt").write_bytes(b"x")
    files, url = push(PushConfig(adapter=str(adapter), repo="org/tiny", run=str(run_dir[0]), dry_run=True))
    assert url is None and files == upload_files(adapter)
    assert {"README.md", "adapter_config.json", "adapter_model.safetensors", "sft_train.json"} <= set(files)
    assert not any(name.startswith("checkpoint-") for name in files)
    assert "| pairwise | " in (adapter / "README.md").read_text()


def test_push_uploads_exactly_the_listed_files(trained, monkeypatch):
    import huggingface_hub

    adapter, _ = trained
    calls = {}

    class FakeApi:
        def create_repo(self, repo_id, **kwargs):
            calls["create"] = (repo_id, kwargs)
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, **kwargs):
            calls["upload"] = kwargs

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    files, url = push(PushConfig(adapter=str(adapter), repo="org/tiny", private=True))
    assert url == "https://huggingface.co/org/tiny"
    assert calls["create"] == ("org/tiny", {"repo_type": "model", "private": True, "exist_ok": True})
    assert calls["upload"]["allow_patterns"] == files and calls["upload"]["folder_path"] == str(adapter)
