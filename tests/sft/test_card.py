"""Model cards that tell the truth: the recipe as run, the base model's Hub id, formats named once."""

from __future__ import annotations

import json

import pytest

from perrec_eval.errors import ConfigError
from sft.card import PAPER_RECIPE, hub_base_model, model_card, recipe_overrides
from sft.config import TrainConfig


def adapter_info(fmt: str = "pointwise", base: str = "org/base", **recipe) -> dict:
    return {
        "kind": "adapter",
        "base_model": base,
        "perrecbench": "0.1.0",
        "data": {
            "format": fmt,
            "variant": "no_profile",
            "examples": 4,
            "groups": 2,
            "examples_per_format": {fmt: 4},
            "levels": ["easy"],
            "k": 4,
            "source": {"data": "bench", "source_kind": "raw"},
        },
        "recipe": {
            **PAPER_RECIPE,
            "target_modules": ["q_proj"],
            "per_device_batch_size": 4,
            "gradient_accumulation": 8,
            "world_size": 1,
            "precision": "fp32",
            "dtype": "auto",
            "seed": 0,
            **recipe,
        },
        "dropped_long": 0,
    }


def merge_info(*sources: dict, base: str) -> dict:
    return {
        "kind": "merged-adapter",
        "base_model": base,
        "method": "cat",
        "rank": 32,
        "weights": [1 / len(sources)] * len(sources),
        "sources": [{"name": f"s{i}", "path": f"adapters/s{i}", "info": s} for i, s in enumerate(sources)],
    }


def test_card_names_every_override_and_never_calls_it_the_papers_recipe():
    card = model_card(adapter_info(learning_rate=1e-3, trl_args=["max_grad_norm=0.3"]), name="a")
    assert (
        "**not** the paper's recipe (§6): learning rate 0.001 (paper: 1e-05), `--trl-arg max_grad_norm=0.3`"
        in card
    )
    assert "the paper's recipe (§6)." in model_card(adapter_info(), name="a")


def test_recipe_overrides_lists_nothing_for_the_papers_recipe():
    assert recipe_overrides(PAPER_RECIPE) == []
    assert recipe_overrides({**PAPER_RECIPE, "epochs": 1.0, "lora_r": 8}) == [
        "LoRA r 8 (paper: 16)",
        "epochs 1 (paper: 2)",
    ]


def test_card_of_a_merge_of_two_pointwise_adapters_names_the_format_once():
    card = model_card(merge_info(adapter_info(), adapter_info(), base="org/base"), name="m")
    assert "trained on the pointwise format" in card and "pointwise, pointwise" not in card
    mixed = model_card(merge_info(adapter_info(), adapter_info("pairwise"), base="org/base"), name="m")
    assert "trained on the pointwise, pairwise formats" in mixed


def test_card_uses_the_hub_id_of_a_merge_made_from_a_local_base(tmp_path):
    local = str(tmp_path)  # a folder that exists: not a Hub id
    info = merge_info(adapter_info(base="org/base"), adapter_info(base="org/base"), base=local)
    assert hub_base_model(info) == "org/base"
    card = model_card(info, name="m", repo="org/m")
    assert "base_model: org/base" in card and local not in card


def test_train_config_refuses_a_base_model_id_that_is_not_a_hub_id():
    with pytest.raises(ConfigError, match="--base-model-id must be a Hub id"):
        TrainConfig(model="m", data="d", out="o", base_model_id="/models/base")


@pytest.mark.slow
def test_sft_train_with_base_model_id_writes_it_into_the_adapter_config(
    tiny_model_dir, pairwise_data, tmp_path
):
    from sft.card import LOCAL_INFO
    from sft.train import train

    out = tmp_path / "adapter"
    config = TrainConfig(
        model=str(tiny_model_dir),
        base_model_id="org/tiny-base",
        data=str(pairwise_data),
        out=str(out),
        max_steps=1,
        batch_size=4,
        per_device_batch_size=4,
        activation_checkpointing=False,
        save_strategy="no",
        progress=False,
    )
    info = train(config)
    assert info["base_model"] == "org/tiny-base"
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "org/tiny-base"
    assert json.loads((out / LOCAL_INFO).read_text()) == {"base_model_local": str(tiny_model_dir)}
    card = (out / "README.md").read_text()
    assert "base_model: org/tiny-base" in card and str(tiny_model_dir) not in card


@pytest.mark.slow
def test_sft_merge_from_a_local_copy_records_the_sources_hub_id(random_adapters, tiny_model_dir, tmp_path):
    import shutil

    from sft.card import LOCAL_INFO, base_model_ids, record_hub_base
    from sft.config import MergeConfig
    from sft.merge import merge

    sources = []
    for i, adapter in enumerate(random_adapters[:2]):
        sources.append(shutil.copytree(adapter, tmp_path / f"s{i}"))
        record_hub_base(sources[-1], "org/tiny-base", str(tiny_model_dir))
    out = tmp_path / "merged"
    info = merge(MergeConfig(adapters=tuple(map(str, sources)), out=str(out), model=str(tiny_model_dir)))
    assert info["base_model"] == "org/tiny-base"
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "org/tiny-base"
    assert json.loads((out / LOCAL_INFO).read_text()) == {"base_model_local": str(tiny_model_dir)}
    assert set(base_model_ids(out)) == {"org/tiny-base", str(tiny_model_dir)}
