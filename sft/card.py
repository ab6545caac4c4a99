"""The model card of an adapter, merged adapter or merged model: ``hub_cards/model_card.md`` filled in.

Everything the card states comes from the folder's own record: ``sft_train.json`` (written by
`perrecbench sft train`) or ``sft_merge.json`` (written by `perrecbench sft merge`), plus, when a run folder
of `perrecbench evaluate` is given, its PTC table (`perrec_eval.report.table`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dataset_builder.card import render
from perrec_eval import fileio
from perrec_eval.errors import DataError

TRAIN_INFO = "sft_train.json"
MERGE_INFO = "sft_merge.json"

MERGE_METHODS: dict[str, str] = {
    "cat": "the exact weighted mean of the sources' weight updates, ΔW = Σ wᵢ·(αᵢ/rᵢ)·Bᵢ·Aᵢ (PEFT "
    '`add_weighted_adapter(..., combination_type="cat")`: the LoRA factors are concatenated, so its rank is '
    "the sum of the sources' ranks)",
    "factor-mean": "the paper's released merging script: A = Σ wᵢ·Aᵢ and B = Σ wᵢ·Bᵢ averaged separately. "
    "This is **not** the mean of the weight updates: B·A picks up the cross terms wᵢ·wⱼ·Bᵢ·Aⱼ",
    "linear": 'PEFT `combination_type="linear"`: A = Σ √(wᵢ·sᵢ)·Aᵢ and B = Σ √(wᵢ·sᵢ)·Bᵢ (sᵢ = αᵢ/rᵢ), '
    "not the mean of the weight updates (cross terms)",
    "ties": 'PEFT `combination_type="ties"` on the LoRA factors (trim to density {density}, elect signs, '
    "disjoint mean)",
    "svd": 'PEFT `combination_type="svd"`: the weighted sum of the weight updates, truncated to rank {rank} '
    "by SVD",
}


_SYNTHETIC_NOTE = (
    "\n\n> **Trained on synthetic data** (`perrecbench synth`), not Amazon reviews: it exists to test the "
    "pipeline, and its scores say nothing about real users."
)


def read_info(folder: str | os.PathLike) -> dict[str, Any]:
    """The record of a folder written by `perrecbench sft train` or `perrecbench sft merge`.

    Raises:
        DataError: the folder has neither ``sft_train.json`` nor ``sft_merge.json``.
    """
    folder = Path(folder)
    for name in (TRAIN_INFO, MERGE_INFO):
        if (folder / name).is_file():
            return fileio.read_json(folder / name)
    raise DataError(
        f"{folder} has no {TRAIN_INFO} or {MERGE_INFO}: pass a folder written by `perrecbench sft train` "
        "or `perrecbench sft merge`"
    )


def is_hub_id(model: str) -> bool:
    """Whether `model` reads as a Hub model id (ORG/NAME or NAME) rather than a local path.

    >>> is_hub_id("Qwen/Qwen2.5-0.5B-Instruct"), is_hub_id("/tmp/tiny"), is_hub_id("./model")
    (True, False, False)
    """
    return not model.startswith(("/", ".", "~")) and model.count("/") <= 1 and not Path(model).exists()


def without_local_paths(info: Any) -> Any:
    """`info` with every local path (base model, data folder, source adapter) cut to its folder name.

    A card is published: the folders of the machine that trained the adapter mean nothing to a reader and
    say where that machine keeps its files. Hub ids stay as they are.

    >>> without_local_paths({"base_model": "/home/me/models/tiny", "data": {"path": "Qwen/Q"}})
    {'base_model': 'tiny', 'data': {'path': 'Qwen/Q'}}
    """
    if isinstance(info, Mapping):
        return {
            key: _folder_name(value) if key in _PATH_KEYS else without_local_paths(value)
            for key, value in info.items()
        }
    if isinstance(info, list):
        return [without_local_paths(value) for value in info]
    return info


_PATH_KEYS = frozenset({"base_model", "path", "data"})


def _folder_name(value: Any) -> Any:
    if isinstance(value, str) and value and not is_hub_id(value):
        return Path(value).name or value
    return without_local_paths(value)


def formats_of(info: Mapping[str, Any]) -> list[str]:
    """The data formats an adapter was trained on (for a merge: those of its sources, in order)."""
    if info["kind"] == "adapter":
        return [info["data"]["format"]]
    if "sources" in info:
        return [fmt for source in info["sources"] for fmt in formats_of(source["info"])]
    return ["unknown"]  # an adapter trained outside perrecbench


def _variant(info: Mapping[str, Any]) -> str:
    if info["kind"] == "adapter":
        return info["data"]["variant"]
    if "sources" not in info:
        return "unknown"
    variants = {_variant(source["info"]) for source in info["sources"]}
    return variants.pop() if len(variants) == 1 else "mixed"


def source_kinds(info: Mapping[str, Any]) -> set[str]:
    """The kinds of benchmark data (amazon, synthetic, mixed) the folder's weights were trained on."""
    if info["kind"] == "adapter":
        return {info["data"]["source"].get("source_kind") or "unknown"}
    return {kind for source in info.get("sources", ()) for kind in source_kinds(source["info"])}


def recipe_table(info: Mapping[str, Any]) -> str:
    """The training recipe of one adapter as a markdown table."""
    recipe = info["recipe"]
    rows = [
        ("LoRA", f"r {recipe['lora_r']}, alpha {recipe['lora_alpha']}, dropout {recipe['lora_dropout']}"),
        ("target modules", ", ".join(recipe["target_modules"])),
        (
            "epochs",
            f"{recipe['epochs']:g}"
            + (f" (stopped at step {recipe['max_steps']})" if recipe["max_steps"] > 0 else ""),
        ),
        (
            "effective batch",
            f"{recipe['batch_size']} = {recipe['per_device_batch_size']} per device × "
            f"{recipe['gradient_accumulation']} accumulation × {recipe['world_size']} "
            + ("process" if recipe["world_size"] == 1 else "processes"),
        ),
        (
            "learning rate",
            f"{recipe['learning_rate']:g}, {recipe['lr_scheduler']}, warmup {recipe['warmup']:g}",
        ),
        ("loss", "on the completion (the answer) only"),
        ("max length", f"{recipe['max_length']} tokens ({info['dropped_long']} longer examples left out)"),
        ("precision", f"{recipe['precision']} (weights {recipe['dtype']})"),
        ("seed", str(recipe["seed"])),
    ]
    metrics = info.get("metrics", {})
    if "train_loss" in metrics:
        rows.append(("mean training loss", f"{metrics['train_loss']:.4f} over {info['steps']} steps"))
    return "| setting | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _data_line(info: Mapping[str, Any]) -> str:
    data = info["data"]
    counts = ", ".join(f"{fmt} {n:,}" for fmt, n in data["examples_per_format"].items())
    return (
        f"{data['examples']:,} examples ({counts}) from {data['groups']:,} train groups of "
        f"`{data['source']['data']}` (levels {', '.join(data['levels'])}; BM25 top {data['k']} history "
        "items; "
        f"prompt variant `{data['variant']}`), written by `perrecbench sft data --format {data['format']}`"
    )


def training_section(info: Mapping[str, Any]) -> str:
    """How the folder's weights came about: data and recipe, or the merge and each source's."""
    if info["kind"] == "adapter":
        return (
            f"TRL `SFTTrainer` with a PEFT LoRA adapter on `{info['base_model']}`, the paper's recipe "
            "(§6).\n\n"
            f"Data: {_data_line(info)}. No example comes from a test group or shows a test rating.\n\n"
            + recipe_table(info)
        )
    method = MERGE_METHODS[info["method"]].format(density=info.get("density"), rank=info.get("svd_rank"))
    lines = [
        f"Merged from {len(info['sources'])} single-format adapters with `{info['method']}` (rank "
        f"{info['rank']}): {method}.",
        "",
        "| source | format | weight | examples |",
        "|---|---|---:|---:|",
    ]
    for source, weight in zip(info["sources"], info["weights"], strict=True):
        src = source["info"]
        examples = src["data"]["examples"] if src["kind"] == "adapter" else "–"
        lines.append(f"| `{source['name']}` | {', '.join(formats_of(src))} | {weight:.4g} | {examples} |")
    if info["kind"] == "merged-model":
        lines += [
            "",
            f"The merged update is added into the weights of `{info['base_model']}` (a full model).",
        ]
    for source in info["sources"]:
        src = source["info"]
        if src["kind"] == "adapter":
            lines += ["", f"### `{source['name']}`", "", f"Data: {_data_line(src)}.", "", recipe_table(src)]
    return "\n".join(lines)


def results_section(systems: Sequence[tuple[str, Mapping[str, Any]]], name: str) -> str:
    """The PTC table of the given runs, or how to produce one."""
    from perrec_eval.report import legend, table

    if not systems:
        return (
            "Not evaluated yet: run `perrecbench evaluate --engine hf --adapter NAME=PATH ...`, then "
            f"`perrecbench sft push {name} --repo ORG/NAME --run RUN_DIR` puts its PTC table here."
        )
    return f"PerRecBench test split, PTC per level and method.\n\n{table(systems)}\n\n{legend(systems)}"


def load_systems(run: str | os.PathLike | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, scores) of each run folder at `run` (itself, or the run folders inside it), named by folder."""
    if run is None:
        return []
    from perrec_eval.rundir import load_run, run_folders

    return [(folder.name, load_run(folder)[1]) for folder in run_folders(run)]


def usage_section(info: Mapping[str, Any], name: str, repo: str, flags: str) -> str:
    base = info["base_model"]
    if info["kind"] == "merged-model":
        return (
            "A full model (no adapter): evaluate or serve it like its base model.\n\n```bash\n"
            "perrecbench evaluate --data PERRECBENCH_DIR --engine hf "
            f"--model {repo} {flags}--out runs/{name}\n```"
        )
    return f"""Evaluate it on the benchmark (the base model loaded once, one run folder per adapter):

```bash
perrecbench evaluate --data PERRECBENCH_DIR --engine hf --model {base} \\
    --adapter {name}=PATH_TO_THIS_FOLDER {flags}--out runs/{name}
```

With PEFT directly:

```python
from peft import AutoPeftModelForCausalLM
from transformers import AutoTokenizer

model = AutoPeftModelForCausalLM.from_pretrained("{repo}")
tokenizer = AutoTokenizer.from_pretrained("{base}")
```

vLLM serves it as a LoRA module (`vllm serve {base} --enable-lora --lora-modules {name}={repo}`, with
`--max-lora-rank` at least the adapter's rank); `perrecbench sft merge --merge-into-base` writes a full
model for servers without LoRA support."""


def model_card(
    info: Mapping[str, Any],
    *,
    name: str,
    repo: str | None = None,
    systems: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> str:
    """The filled-in model card of a folder with record `info`.

    Args:
        info: the folder's ``sft_train.json`` or ``sft_merge.json``.
        name: the adapter's short name (the folder name).
        repo: its Hub repository (ORG/NAME), or None before one is chosen.
        systems: (name, scores) of evaluation runs for the results table.
    """
    on_hub = is_hub_id(info["base_model"])
    info = without_local_paths(info)
    base = info["base_model"]
    kind = info["kind"]
    formats = formats_of(info)
    header: dict[str, Any] = {}
    if on_hub:
        header["base_model"] = base
    header["library_name"] = "transformers" if kind == "merged-model" else "peft"
    header["pipeline_tag"] = "text-generation"
    header["tags"] = ["perrecbench", "personalization", "recommendation", "sft", "trl", "lora"]
    what = {
        "adapter": f"a LoRA adapter for `{base}` trained on PerRecBench's **{formats[0]}** format",
        "merged-adapter": f"a LoRA adapter for `{base}` merged (`{info.get('method')}`) from adapters "
        "trained "
        f"on the {', '.join(formats)} formats",
        "merged-model": f"`{base}` with merged (`{info.get('method')}`) LoRA updates from adapters "
        "trained on "
        f"the {', '.join(formats)} formats added into its weights",
    }[kind]
    variant = _variant(info)
    flags = "--no-profile " if variant == "no_profile" else "--profiles PROFILES.jsonl "
    variant_note = {
        "no_profile": "trained without user profiles (prompt variant `no_profile`): evaluate with "
        "`--no-profile`.",
        "default": "trained with LLM-written user profiles (prompt variant `default`): evaluate with "
        "profiles "
        "(`perrecbench profiles`, then `--profiles PATH`).",
    }.get(variant, "its sources were trained on different prompt variants.")
    values = {
        "yaml_header": yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip("\n"),
        "title": f"{name}: PerRecBench fine-tuning of {base}",
        "summary": f"This is {what}, written by `perrecbench sft` (perrecbench {info.get('perrecbench')})."
        + _SYNTHETIC_NOTE * bool(source_kinds(info) & {"synthetic", "mixed"}),
        "results": results_section(systems, name),
        "training": training_section(info),
        "variant_note": variant_note,
        "usage": usage_section(info, name, repo or "ORG/NAME", flags),
    }
    template = resources.files("hub_cards").joinpath("model_card.md").read_text(encoding="utf-8")
    return render(template, values)
