"""`perrecbench sft merge`: cat is the exact weighted mean of the updates; factor-mean the paper's script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from perrec_eval.errors import ConfigError, DataError
from sft.config import MergeConfig
from sft.merge import merge

pytestmark = pytest.mark.slow

WEIGHTS = (1.0, 2.0, 3.0)  # normalized to 1/6, 2/6, 3/6


def factors(folder: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor, float]]:
    """Per adapted module: (A, B, scaling) of a saved LoRA adapter."""
    config = json.loads((folder / "adapter_config.json").read_text())
    state = load_file(str(folder / "adapter_model.safetensors"))
    scale = config["lora_alpha"] / config["r"]
    modules = sorted(key.removesuffix(".lora_A.weight") for key in state if key.endswith(".lora_A.weight"))
    return {m: (state[f"{m}.lora_A.weight"], state[f"{m}.lora_B.weight"], scale) for m in modules}


def updates(folder: Path) -> dict[str, torch.Tensor]:
    """ΔW = B·A·(alpha/r) per module."""
    return {m: b @ a * scale for m, (a, b, scale) in factors(folder).items()}


def weighted(parts: list[dict[str, torch.Tensor]], weights: list[float]) -> dict[str, torch.Tensor]:
    return {m: sum(w * part[m] for w, part in zip(weights, parts, strict=True)) for m in parts[0]}


def run(adapters, out: Path, **kwargs) -> dict:
    return merge(MergeConfig(adapters=tuple(map(str, adapters)), out=str(out), **kwargs))


def test_merge_cat_is_the_weighted_mean_of_the_updates(random_adapters, tmp_path):
    # Different ranks and alphas are fine for cat: adapter a3 has r 2, alpha 6.
    sources = [random_adapters[0], random_adapters[1], random_adapters[3]]
    info = run(sources, tmp_path / "cat", weights=WEIGHTS)
    assert info["weights"] == pytest.approx([1 / 6, 2 / 6, 3 / 6]) and info["rank"] == 4 + 4 + 2
    expected = weighted([updates(a) for a in sources], info["weights"])
    merged = updates(tmp_path / "cat")
    assert merged.keys() == expected.keys()
    assert max((merged[m] - expected[m]).abs().max().item() for m in merged) < 1e-6


def test_merge_factor_mean_averages_a_and_b_separately(random_adapters, tmp_path):
    sources = random_adapters[:3]
    info = run(sources, tmp_path / "fm", method="factor-mean", weights=WEIGHTS)
    merged = factors(tmp_path / "fm")
    parts = [factors(a) for a in sources]
    for module, (a, b, scale) in merged.items():
        assert torch.allclose(
            a, sum(w * p[module][0] for w, p in zip(info["weights"], parts, strict=True)), atol=1e-7
        )
        assert torch.allclose(
            b, sum(w * p[module][1] for w, p in zip(info["weights"], parts, strict=True)), atol=1e-7
        )
        assert scale == parts[0][module][2]
    mean_update = weighted([updates(a) for a in sources], info["weights"])
    assert max((updates(tmp_path / "fm")[m] - mean_update[m]).abs().max().item() for m in merged) > 1e-2
    with pytest.raises(ConfigError, match="--method cat"):
        run([random_adapters[0], random_adapters[3]], tmp_path / "bad", method="factor-mean")


def test_merge_into_base_adds_the_merged_update_to_the_weights(random_adapters, tiny_model_dir, tmp_path):
    sources = random_adapters[:2]
    info = run(sources, tmp_path / "full", merge_into_base=True)
    assert info["kind"] == "merged-model"
    base = load_file(str(tiny_model_dir / "model.safetensors"))
    full = load_file(str(tmp_path / "full" / "model.safetensors"))
    delta = {
        m.removeprefix("base_model.model.") + ".weight": d
        for m, d in weighted([updates(a) for a in sources], info["weights"]).items()
    }
    assert full.keys() == base.keys() and delta.keys() < full.keys()
    for name, weight in full.items():
        expected = base[name] + delta[name] if name in delta else base[name]
        assert (weight - expected).abs().max().item() < 1e-6, name
    assert (tmp_path / "full" / "tokenizer.json").is_file()


@pytest.mark.parametrize("method", ["linear", "ties", "svd"])
def test_merge_peft_methods_write_an_adapter_named_in_its_card(random_adapters, tmp_path, method):
    info = run(random_adapters[:3], tmp_path / method, method=method)
    assert (tmp_path / method / "adapter_model.safetensors").is_file() and info["method"] == method
    card = (tmp_path / method / "README.md").read_text()
    assert f"with `{method}`" in card and "| `a0` |" in card
    if method == "linear":  # PITFALLS 8: not the mean of the updates
        mean_update = weighted([updates(a) for a in random_adapters[:3]], info["weights"])
        merged = updates(tmp_path / method)
        assert max((merged[m] - mean_update[m]).abs().max().item() for m in merged) > 1e-2


def test_merge_shows_no_warning_of_peft_calling_transformers(random_adapters, tmp_path):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(random_adapters[:2], tmp_path / "linear", method="linear")
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]


def test_merge_refuses_to_overwrite_a_source(random_adapters):
    with pytest.raises(ConfigError, match="new folder") as err:
        run(random_adapters[:2], random_adapters[0])
    assert str(err.value).count(str(random_adapters[0])) == 2  # --out and the adapter, each once
    assert "is adapter 1 " in str(err.value)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"weights": (1.0, float("nan"))}, "positive finite"),
        ({"weights": (1.0, float("inf"))}, "positive finite"),
        ({"method": "svd", "svd_rank": 0}, "--svd-rank must be >= 1"),
        ({"method": "cat", "svd_rank": 4}, "does not use it"),
    ],
)
def test_merge_config_refuses_weights_and_ranks_it_cannot_use(settings, says):
    with pytest.raises(ConfigError, match=says):
        MergeConfig(adapters=("a", "b"), out="o", **settings)


def test_merge_into_base_refuses_the_local_base_model_folder(random_adapters, tiny_model_dir):
    before = (tiny_model_dir / "model.safetensors").read_bytes()
    with pytest.raises(ConfigError, match="--out .* is --model"):
        run(random_adapters[:2], tiny_model_dir, merge_into_base=True)
    with pytest.raises(ConfigError, match="holds --model"):
        run(random_adapters[:2], tiny_model_dir.parent, merge_into_base=True)
    assert (tiny_model_dir / "model.safetensors").read_bytes() == before


def test_merge_replaces_an_earlier_merged_model_whole(random_adapters, tmp_path):
    out = tmp_path / "merged"
    run(random_adapters[:2], out, merge_into_base=True)
    assert (out / "model.safetensors").is_file()
    run(random_adapters[:2], out)  # now an adapter: no stale full weights may stay beside it
    assert (out / "adapter_model.safetensors").is_file() and not (out / "model.safetensors").exists()
    assert json.loads((out / "sft_merge.json").read_text())["kind"] == "merged-adapter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged"]  # no temp folder left


def test_merge_refuses_an_earlier_merge_holding_a_file_it_did_not_write(random_adapters, tmp_path):
    out = tmp_path / "merged"
    run(random_adapters[:2], out)
    listed = json.loads((out / "sft_merge.json").read_text())["files"]
    assert sorted(p.name for p in out.iterdir()) == listed
    (out / "notes.txt").write_text("mine")  # the merge replaces the folder whole (issue 29, F1)
    with pytest.raises(DataError, match="notes.txt, which `perrecbench sft merge` did not write"):
        run(random_adapters[:2], out)
    assert (out / "notes.txt").read_text() == "mine"


def test_merge_refuses_a_folder_it_did_not_write(random_adapters, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write"):
        run(random_adapters[:2], tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_merge_normalizes_huge_weights_without_overflow(random_adapters, tmp_path):
    # 1e308 + 1e308 is inf: the weights were once normalized to 0, 0 and the merged adapter did nothing
    huge = run(random_adapters[:2], tmp_path / "huge", weights=(1e308, 1e308))
    equal = run(random_adapters[:2], tmp_path / "equal")
    assert huge["weights"] == equal["weights"] == [0.5, 0.5]
    for module, update in updates(tmp_path / "huge").items():
        assert update.abs().max() > 0
        torch.testing.assert_close(update, updates(tmp_path / "equal")[module])
