"""Combine single-format LoRA adapters into one (paper §6, weight merging).

Methods (PITFALLS 8; wᵢ are the weights, normalized to sum to 1, sᵢ = αᵢ/rᵢ each adapter's scaling):

- ``cat`` (default): the exact weighted mean of the weight updates, ΔW = Σ wᵢ·sᵢ·Bᵢ·Aᵢ. PEFT's
  `add_weighted_adapter(..., combination_type="cat")` stacks the factors (A = [wᵢ·sᵢ·Aᵢ], B = [Bᵢ], scaling
  1), so the merged rank is the sum of the ranks.
- ``factor-mean``: what the paper's released `merge_model_weight.py` did: A = Σ wᵢ·Aᵢ and B = Σ wᵢ·Bᵢ,
  averaged tensor by tensor, with the first adapter's config. B·A then holds cross terms wᵢ·wⱼ·Bᵢ·Aⱼ: it is
  not the mean of the updates (with equal weights, the own terms shrink to 1/n² of the update each).
- ``linear``, ``ties``, ``svd``: PEFT's combination types of the same names (``linear``: √(wᵢ·sᵢ) on both
  factors, again not the mean update; ``ties``: trim/elect/disjoint-merge on the factors at `density`;
  ``svd``: the weighted sum of the updates truncated to `svd_rank` by SVD).

``--merge-into-base`` adds the merged update into the base weights (`merge_and_unload`) and writes a full
model with its tokenizer, for servers without LoRA support. The output folder records the method, weights
and sources in ``sft_merge.json`` and gets a model card.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from perrec_eval import fileio, outputs
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.extras import require
from sft.card import MERGE_INFO, model_card, published_base, read_info, record_hub_base
from sft.config import MergeConfig
from sft.outdir import is_empty, refuse_overlap, replaced

logger = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "default"  # PEFT saves the adapter called "default" at the top of the output folder


def adapter_config(folder: str | Path) -> dict[str, Any]:
    """The ``adapter_config.json`` of a PEFT LoRA adapter folder.

    Raises:
        DataError: the folder is not a LoRA adapter.
    """
    path = Path(folder) / ADAPTER_CONFIG
    if not path.is_file():
        raise DataError(f"{folder} is not a PEFT adapter folder (no {ADAPTER_CONFIG})")
    config = fileio.read_json(path)
    if config.get("peft_type") != "LORA":
        raise DataError(f"{folder} holds a {config.get('peft_type')} adapter; only LoRA adapters merge")
    return config


def base_model(config: MergeConfig, configs: list[dict[str, Any]]) -> str:
    """`config.model`, else the one base model every adapter was trained on."""
    if config.model:
        return config.model
    bases = {c.get("base_model_name_or_path") for c in configs}
    if len(bases) != 1 or None in bases:
        listed = ", ".join(
            f"{path} ({c.get('base_model_name_or_path')})"
            for path, c in zip(config.adapters, configs, strict=True)
        )
        raise ConfigError(
            f"the adapters name different base models: {listed}; pass --model BASE to choose one"
        )
    return bases.pop()


def factor_mean(adapters: list[str], weights: list[float], out: Path, base: str) -> dict[str, Any]:
    """Average the A and B tensors separately (the paper's script) and write the adapter to `out`.

    Returns:
        The written adapter config.
    """
    torch = require("torch", "train", by="fine-tuning")
    safetensors = require("safetensors.torch", "train", by="fine-tuning")
    configs = [adapter_config(path) for path in adapters]
    shapes = {(c["r"], c["lora_alpha"]) for c in configs}
    if len(shapes) != 1:
        raise ConfigError(
            f"factor-mean averages tensors, so every adapter needs one rank and alpha; got {sorted(shapes)}: "
            "use --method cat"
        )
    states = [safetensors.load_file(str(Path(path) / ADAPTER_WEIGHTS)) for path in adapters]
    keys = set(states[0])
    for path, state in zip(adapters[1:], states[1:], strict=True):
        if set(state) != keys or any(state[k].shape != states[0][k].shape for k in keys):
            raise ConfigError(
                f"{path} targets other modules than {adapters[0]}: factor-mean needs the same ones"
            )
    merged = {
        key: sum(weight * state[key].to(torch.float32) for weight, state in zip(weights, states, strict=True))
        .to(states[0][key].dtype)
        .contiguous()
        for key in sorted(keys)
    }
    out.mkdir(parents=True, exist_ok=True)
    safetensors.save_file(merged, str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    written = {**configs[0], "base_model_name_or_path": base}
    fileio.write_json(out / ADAPTER_CONFIG, written)
    return written


def peft_merge(config: MergeConfig, weights: list[float], base: str) -> Any:
    """The base model with every adapter loaded and their PEFT combination added as adapter ``default``."""
    transformers = require("transformers", "train", by="fine-tuning")
    peft = require("peft", "train", by="fine-tuning")
    lm = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=config.dtype)
    names = [f"source{i}" for i in range(len(config.adapters))]
    model = peft.PeftModel.from_pretrained(lm, config.adapters[0], adapter_name=names[0])
    for name, path in zip(names[1:], config.adapters[1:], strict=True):
        model.load_adapter(path, adapter_name=name)
    options: dict[str, Any] = {}
    if config.method == "ties":
        options["density"] = config.density
    if config.method == "svd":
        options["svd_rank"] = config.svd_rank
    model.add_weighted_adapter(names, weights, MERGED, combination_type=config.method, **options)
    model.set_adapter(MERGED)
    for name in names:
        model.delete_adapter(name)
    model.peft_config[MERGED].base_model_name_or_path = base
    return model


def merge_into_base(model: Any, out: Path, base: str) -> None:
    """Add the adapter ``default`` of `model` into its base weights and save the full model + tokenizer."""
    transformers = require("transformers", "train", by="fine-tuning")
    full = model.merge_and_unload()
    full.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(base).save_pretrained(out)


def _source(path: str) -> dict[str, Any]:
    try:
        info = read_info(path)
    except DataError:
        info = {"kind": "external", "base_model": adapter_config(path).get("base_model_name_or_path")}
    info = {key: value for key, value in info.items() if key != "log_history"}
    return {"path": str(path), "name": Path(path).name, "info": info}


def merge(config: MergeConfig) -> dict[str, Any]:
    """`perrecbench sft merge`: combine the adapters of `config` and write the result to `config.out`.

    Returns:
        The record written to ``sft_merge.json``.
    """
    from perrec_eval.rundir import versions

    configs = [adapter_config(path) for path in config.adapters]
    base = base_model(config, configs)
    weights = config.normalized_weights()
    out = check_out(Path(config.out), base, config.adapters)
    with replaced(out) as tmp:
        rank = _merge(config, weights, base, configs, tmp)
        # Merged from a local copy of a Hub model the sources name: the record and adapter name the Hub id.
        named = published_base(base, [c.get("base_model_name_or_path") for c in configs])
        if named != base:
            record_hub_base(tmp, named, base)
        info = _info(config, weights, named, configs, rank, versions)
        written = [path.relative_to(tmp).as_posix() for path in tmp.rglob("*") if path.is_file()]
        info["files"] = sorted({*written, MERGE_INFO, "README.md"})  # what a later merge may replace
        fileio.open_permissions(tmp)  # safetensors writes 0600
        fileio.write_json(tmp / MERGE_INFO, info)
        fileio.write_text(tmp / "README.md", model_card(info, name=out.name))
    return info


def check_out(out: Path, base: str, adapters: tuple[str, ...]) -> Path:
    """Refuse an `out` that overlaps the base model or an adapter, or holds something other than a merge;
    return it resolved (`perrec_eval.outputs`).

    An earlier merge in `out` is replaced whole (no stale weights are left beside the new ones), so it may
    hold only the files its ``sft_merge.json`` lists (merges that list none predate the list: taken whole).
    """
    out = outputs.target(out)
    refuse_overlap(out, {"--model": base, **{f"adapter {i}": path for i, path in enumerate(adapters, 1)}})
    if not is_empty(out) and not (out / MERGE_INFO).is_file():
        raise ConfigError(
            f"--out {out} holds files `perrecbench sft merge` did not write (no {MERGE_INFO}): "
            "choose another --out"
        )
    outputs.refuse_foreign(out, _merged_files(out), command="sft merge")
    return out


def _merged_files(out: Path) -> Callable[[PurePosixPath], bool]:
    """Whether a path in `out` is a file an earlier merge wrote (its ``sft_merge.json`` lists them)."""
    try:
        listed = fileio.read_json(out / MERGE_INFO).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if not isinstance(listed, list):  # a merge written before the list, or none: nothing to compare
        return lambda path: True
    return lambda path: str(path) in {*listed, MERGE_INFO}


def _merge(
    config: MergeConfig, weights: list[float], base: str, configs: list[dict[str, Any]], out: Path
) -> int:
    """Write the merged adapter (or model) into `out`; its rank."""
    if config.method == "factor-mean":
        if config.merge_into_base:
            peft = require("peft", "train", by="fine-tuning")
            transformers = require("transformers", "train", by="fine-tuning")
            with tempfile.TemporaryDirectory() as tmp:
                factor_mean(list(config.adapters), weights, Path(tmp), base)
                lm = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=config.dtype)
                merge_into_base(peft.PeftModel.from_pretrained(lm, tmp), out, base)
            rank = configs[0]["r"]
        else:
            rank = factor_mean(list(config.adapters), weights, out, base)["r"]
    else:
        model = peft_merge(config, weights, base)
        rank = model.peft_config[MERGED].r
        if config.merge_into_base:
            merge_into_base(model, out, base)
        else:
            model.save_pretrained(str(out), selected_adapters=[MERGED])
    return rank


def _info(
    config: MergeConfig,
    weights: list[float],
    base: str,
    configs: list[dict[str, Any]],
    rank: int,
    versions: Any,
) -> dict[str, Any]:
    """The record of ``sft_merge.json``."""
    return {
        "kind": "merged-model" if config.merge_into_base else "merged-adapter",
        "base_model": base,
        "perrecbench": versions("perrecbench")["perrecbench"],
        "method": config.method,
        "weights": weights,
        "density": config.density if config.method == "ties" else None,
        "svd_rank": rank if config.method == "svd" else None,
        "rank": rank,
        "sources": [_source(path) for path in config.adapters],
        "versions": versions("peft", "transformers", "torch", "safetensors"),
    }
