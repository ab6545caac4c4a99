"""Model cards that tell the truth: the recipe as run, the base model's Hub id, formats named once."""

from __future__ import annotations

import json

import pytest

from sft.card import PAPER_RECIPE, hub_base_model, model_card, recipe_overrides


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
    card = model_card(adapter_info(learning_rate=1e-3, trl_settings={"max_grad_norm": 0.3}), name="a")
    assert (
        "**not** the paper's recipe (§6): learning rate 0.001 (paper: 1e-05), `--max_grad_norm 0.3`" in card
    )
    assert "the paper's recipe (§6)." in model_card(adapter_info(), name="a")


def test_card_of_an_adapter_trained_with_the_old_trl_arg_names_it():
    card = model_card(adapter_info(trl_args=["max_grad_norm=0.3"]), name="a")
    assert "**not** the paper's recipe (§6): `--trl-arg max_grad_norm=0.3`" in card


def test_card_recipe_is_the_recipe_file_of_sft_train():
    import torch

    from sft.train import RECIPE_KEYS, recipe_defaults

    recipe = recipe_defaults(torch)
    in_file = {
        key: recipe[name] for key, name in RECIPE_KEYS.items() if name in recipe and key in PAPER_RECIPE
    }
    assert in_file == {
        key: value for key, value in PAPER_RECIPE.items() if key not in ("max_steps", "batch_size")
    }
    batch = recipe["per_device_train_batch_size"] * recipe["gradient_accumulation_steps"]
    assert batch == PAPER_RECIPE["batch_size"]


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


@pytest.mark.slow
def test_sft_train_with_base_model_id_writes_it_into_the_adapter_config(
    tiny_model_dir, pairwise_data, tmp_path
):
    from sft.card import LOCAL_INFO
    from sft.train import parse, train
    from tests.sft.conftest import tiny_args

    out = tmp_path / "adapter"
    more = ("--max_steps", "1", "--base_model_id", "org/tiny-base")
    info = train(*parse(tiny_args(tiny_model_dir, pairwise_data, out, *more)))
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
