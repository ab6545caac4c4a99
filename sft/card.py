"""The model card of an adapter, merged adapter or merged model: the Jinja template
``hub_cards/model_card.md`` filled in by `huggingface_hub.ModelCard.from_template`.

Everything the card states comes from the folder's own record: ``sft_train.json`` (written by
`perrecbench sft train`) or ``sft_merge.json`` (written by `perrecbench sft merge`), plus, when a run folder
of `perrecbench evaluate` is given, its table of the family's headline metric per cell (`family_table`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import DataError

TRAIN_INFO = "sft_train.json"
MERGE_INFO = "sft_merge.json"
# Where `sft train --base-model-id` notes the local copy of the base model it trained from (hidden: never
# uploaded).
LOCAL_INFO = ".perrecbench_local.json"

# The paper's recipe (§6), as `sft train` records it: a recorded value that differs is an override.
PAPER_RECIPE: dict[str, Any] = {
    "lora_r": 16,
    "lora_alpha": 16,
    "lora_dropout": 0.05,
    "epochs": 2.0,
    "max_steps": -1,
    "batch_size": 32,
    "learning_rate": 1e-5,
    "lr_scheduler": "cosine",
    "warmup": 0.1,
    "max_length": 8192,
    "completion_only_loss": True,
}
_RECIPE_NAMES = {
    "lora_r": "LoRA r",
    "lora_alpha": "LoRA alpha",
    "lora_dropout": "LoRA dropout",
    "epochs": "epochs",
    "max_steps": "max steps",
    "batch_size": "effective batch",
    "learning_rate": "learning rate",
    "lr_scheduler": "schedule",
    "warmup": "warmup",
    "max_length": "max length",
    "completion_only_loss": "loss on the answer only",
}

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


def hub_base_model(info: Mapping[str, Any]) -> str:
    """The base model as others can load it: its Hub id when the record (or a merge's source) has one, else
    the recorded name (a local path, which a card then cannot offer as a Hub link)."""
    if is_hub_id(info["base_model"]):
        return info["base_model"]
    for source in info.get("sources", ()):
        if source["info"].get("base_model") and is_hub_id(source["info"]["base_model"]):
            return source["info"]["base_model"]
    return info["base_model"]


def base_model_ids(folder: str | os.PathLike) -> tuple[str, ...]:
    """Every name a run of the folder's base model may have recorded: its Hub id and the local copies the
    folder (or a merge's sources) were trained from."""
    folder = Path(folder)
    info = read_info(folder)
    names = [info["base_model"], hub_base_model(info)]
    for where in [folder, *(Path(s["path"]) for s in info.get("sources", ()) if s.get("path"))]:
        if (where / LOCAL_INFO).is_file():
            names.append(fileio.read_json(where / LOCAL_INFO)["base_model_local"])
    return tuple(dict.fromkeys(name for name in names if name))


def record_hub_base(folder: str | os.PathLike, model_id: str, local: str) -> None:
    """Point a folder trained or merged from `local` (a copy of the Hub model `model_id`) at the Hub id: its
    ``adapter_config.json`` (base_model_name_or_path) names `model_id`, and the hidden ``LOCAL_INFO`` notes
    `local`, so that runs made with the local copy are recognized as runs of the base model."""
    folder = Path(folder)
    path = folder / "adapter_config.json"
    if path.is_file():
        adapter_config = fileio.read_json(path)
        adapter_config["base_model_name_or_path"] = model_id
        fileio.write_json(path, adapter_config)
    fileio.write_json(folder / LOCAL_INFO, {"base_model_local": local})


def published_base(base: str, recorded: Sequence[str | None]) -> str:
    """The name to publish for base model `base`: itself if a Hub id, else the one Hub id that every source
    records (the local copy's original), else `base`.

    >>> published_base("/m/tiny", ["org/tiny", "org/tiny"]), published_base("/m/tiny", ["org/a", "org/b"])
    ('org/tiny', '/m/tiny')
    """
    if is_hub_id(base):
        return base
    names = set(recorded)
    if len(names) == 1 and (name := names.pop()) and is_hub_id(name):
        return name
    return base


def recipe_overrides(recipe: Mapping[str, Any]) -> list[str]:
    """The recipe's departures from the paper's, each named with both values.

    >>> recipe_overrides({**PAPER_RECIPE, "learning_rate": 1e-3})
    ['learning rate 0.001 (paper: 1e-05)']
    """
    changed = []
    for key, paper in PAPER_RECIPE.items():
        value = recipe.get(key, paper)
        if value != paper:
            changed.append(
                f"{_RECIPE_NAMES[key]} {value:g} (paper: {paper:g})"
                if isinstance(value, float)
                else f"{_RECIPE_NAMES[key]} {value} (paper: {paper})"
            )
    changed += [f"`--trl-arg {arg}`" for arg in recipe.get("trl_args", ())]  # recorded before TRL's parser
    return changed + [f"`--{name} {value}`" for name, value in recipe.get("trl_settings", {}).items()]


def formats_of(info: Mapping[str, Any]) -> list[str]:
    """The data formats an adapter was trained on (for a merge: those of its sources, in order)."""
    if info["kind"] == "adapter":
        return [info["data"]["format"]]
    if "sources" in info:
        return [fmt for source in info["sources"] for fmt in formats_of(source["info"])]
    return ["unknown"]  # an adapter trained outside perrecbench


def _formats(info: Mapping[str, Any]) -> str:
    """The formats, each named once, in order ("a", not "a, a")."""
    return ", ".join(dict.fromkeys(formats_of(info)))


def task_of(info: Mapping[str, Any]) -> str:
    """The family whose examples trained the folder's weights: the one ``task`` the examples (or a merge's
    sources) name; the default family's examples name none. Sources of several families give the default.
    """
    from perrec_eval.registry import DEFAULT_TASK

    if info["kind"] == "adapter":
        return info["data"].get("task", DEFAULT_TASK)
    sources = [source["info"] for source in info.get("sources", ()) if source["info"]["kind"] != "external"]
    names = {task_of(source) for source in sources}
    return names.pop() if len(names) == 1 else DEFAULT_TASK


def _variant(info: Mapping[str, Any]) -> str:
    if info["kind"] == "adapter":
        return info["data"].get("variant", "default")  # only PerRecBench's examples have prompt variants
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
        (
            "loss",
            "on the completion (the answer) only"
            if recipe.get("completion_only_loss", True)
            else "on the whole conversation",
        ),
        ("max length", f"{recipe['max_length']} tokens ({info['dropped_long']} longer examples left out)"),
        ("precision", f"{recipe['precision']} (weights {recipe['dtype']})"),
        ("seed", str(recipe["seed"])),
    ]
    metrics = info.get("metrics", {})
    if "train_loss" in metrics:
        rows.append(("mean training loss", f"{metrics['train_loss']:.4f} over {info['steps']} steps"))
    return "| setting | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _recipe_words(info: Mapping[str, Any]) -> str:
    changed = recipe_overrides(info["recipe"])
    if not changed:
        return "the paper's recipe (§6)"
    return "**not** the paper's recipe (§6): " + ", ".join(changed)


def _data_line(info: Mapping[str, Any]) -> str:
    data = info["data"]
    counts = ", ".join(f"{fmt} {n:,}" for fmt, n in data["examples_per_format"].items())
    if "task" in data:  # a family on the general path (`sft.family_data`)
        return (
            f"{data['examples']:,} examples ({counts}) from {data['docs']:,} train docs of "
            f"`{data['source']['data']}` ({', '.join(data['subsets'])}), written by `perrecbench sft data "
            f"--task {data['task']} --format {data['format']}`"
        )
    return (
        f"{data['examples']:,} examples ({counts}) from {data['groups']:,} train groups of "
        f"`{data['source']['data']}` (levels {', '.join(data['levels'])}; BM25 top {data['k']} history "
        "items; "
        f"prompt variant `{data['variant']}`), written by `perrecbench sft data --format {data['format']}`"
    )


def training_section(info: Mapping[str, Any]) -> str:
    """How the folder's weights came about: data and recipe, or the merge and each source's."""
    if info["kind"] == "adapter":
        no_test = (
            "Every example comes from the train split."  # the general path reads nothing else
            if "task" in info["data"]
            else "No example comes from a test group or shows a test rating."
        )
        return (
            f"TRL `SFTTrainer` with a PEFT LoRA adapter on `{hub_base_model(info)}`, {_recipe_words(info)}."
            "\n\n"
            f"Data: {_data_line(info)}. {no_test}\n\n"
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
        lines.append(f"| `{source['name']}` | {_formats(src)} | {weight:.4g} | {examples} |")
    if info["kind"] == "merged-model":
        lines += [
            "",
            f"The merged update is added into the weights of `{info['base_model']}` (a full model).",
        ]
    for source in info["sources"]:
        src = source["info"]
        if src["kind"] == "adapter":
            lines += [
                "",
                f"### `{source['name']}`",
                "",
                f"Recipe: {_recipe_words(src)}.",
                "",
                f"Data: {_data_line(src)}.",
                "",
                recipe_table(src),
            ]
    return "\n".join(lines)


def cost_line(name: str, cost: Mapping[str, Any]) -> str:
    """What a run cost, in one line (its last invocation: a resumed run counts what it still had to do).

    >>> cost_line("a", {"wall_seconds": 120.0, "requests": 60, "cache_hits": 0, "requests_per_second": 0.5,
    ...                  "prompt_tokens": 9000, "answer_tokens": 600})
    '`a`: 60 requests in 120 s (0.50 requests/s), 9,000 prompt and 600 answer tokens'
    """
    tokens = (
        f", {cost['prompt_tokens']:,} prompt and {cost['answer_tokens']:,} answer tokens"
        if cost.get("prompt_tokens") is not None and cost.get("answer_tokens") is not None
        else ""
    )
    rate = f" ({cost['requests_per_second']:.2f} requests/s)" if cost.get("requests_per_second") else ""
    cached = f", {cost['cache_hits']:,} from the cache" if cost.get("cache_hits") else ""
    return f"`{name}`: {cost['requests']:,} requests in {cost['wall_seconds']:.0f} s{rate}{tokens}{cached}"


def results_section(
    systems: Sequence[tuple[str, str | os.PathLike]],
    name: str,
    costs: Sequence[tuple[str, Mapping[str, Any]]] = (),
    task: Any = None,
) -> str:
    """The results table of the given (label, run folder)s (the base model's first when given), or how to
    produce one: PerRecBench's PTC table, or for `task` (a family on the general path) its headline metric
    per cell."""
    if not systems:
        flag = f"--task {task.name} " if task is not None else ""
        return (
            f"Not evaluated yet: run `perrecbench evaluate {flag}--engine hf --adapter NAME=PATH ...`, then "
            f"`perrecbench push adapter {name} --repo ORG/NAME --run RUN_DIR` puts its "
            f"{'results' if task is not None else 'PTC'} table here."
        )
    from perrec_eval import registry

    text = family_table(systems, task or registry.get(registry.DEFAULT_TASK))
    if len(systems) == 1:
        text += (
            "\n\nNo base-model run was given: compare with the base model's own run before relying on this."
        )
    if costs:
        text += "\n\nCost of each run: " + "; ".join(cost_line(n, c) for n, c in costs) + "."
    return text


def family_table(systems: Sequence[tuple[str, str | os.PathLike]], task: Any) -> str:
    """One row per cell of the runs' scores (general-path runs of `task`), a column per run: the family's
    headline metric with its interval.

    Raises:
        DataError: a run of another family, or scores of another shape.
    """
    from perrec_eval.results import read_family_scores, read_run_info

    scores = []
    for _, folder in systems:
        if (ran := read_run_info(folder).task) != task.name:
            raise DataError(f"{folder} is a run of task {ran}, not of {task.name}: pass a run of {task.name}")
        cells = read_family_scores(Path(folder) / "scores.json", ran).cells
        scores.append({(cell.subset, cell.protocol): cell for cell in cells})
    headline = task.headline.name
    labels = " | ".join(f"`{label}`" for label, _ in systems)
    rows = [f"| {task.subset_axis} | {task.protocol_axis} | {labels} |", "|---|---|" + "---:|" * len(systems)]
    for cell in task.cells():
        key = (cell.subset, cell.protocol)
        if any(key in run for run in scores):
            values = [_metric_text(run[key].metrics.get(headline)) if key in run else "–" for run in scores]
            rows.append(f"| {cell.subset} | {cell.protocol} | " + " | ".join(values) + " |")
    direction = "higher" if task.headline.higher_is_better else "lower"
    return (
        f"{task.title}, {headline} per cell ({task.subset_axis} × {task.protocol_axis}; {direction} is "
        "better; 95% interval in brackets).\n\n" + "\n".join(rows)
    )


def _metric_text(value: Any) -> str:
    """A metric value with its interval, or a dash when the cell had nothing to score.

    >>> from perrec_eval.results import MetricValue
    >>> _metric_text(MetricValue(value=0.5, ci_low=0.25, ci_high=0.75)), _metric_text(None)
    ('0.500 [0.250, 0.750]', '–')
    """
    if value is None or value.value is None:
        return "–"
    interval = f" [{value.ci_low:.3f}, {value.ci_high:.3f}]" if value.ci_low is not None else ""
    return f"{value.value:.3f}{interval}"


def load_systems(run: str | os.PathLike | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, scores) of each run folder at `run` (itself, or the run folders inside it), named by folder."""
    if run is None:
        return []
    from perrec_eval.leaderboard.family import load
    from perrec_eval.rundir import run_folders

    return [(folder.name, load(folder).scores.to_json()) for folder in run_folders(run)]


def model_card(
    info: Mapping[str, Any],
    *,
    name: str,
    repo: str | None = None,
    systems: Sequence[tuple[str, str | os.PathLike]] = (),
    costs: Sequence[tuple[str, Mapping[str, Any]]] = (),
    eval_results: Sequence[Any] = (),
) -> str:
    """The filled-in model card of a folder with record `info`.

    Args:
        info: the folder's ``sft_train.json`` or ``sft_merge.json``.
        name: the adapter's short name (the folder name).
        repo: its Hub repository (ORG/NAME), or None before one is chosen.
        systems: (label, run folder) of evaluation runs for the results table (a base-model row first).
        costs: (name, run.json cost) of those runs.
        eval_results: `huggingface_hub.EvalResult`s for the card's ``model-index`` metadata.
    """
    from huggingface_hub import ModelCard, ModelCardData

    from perrec_eval import registry

    family = registry.get(task_of(info))
    task = None if family.name == registry.DEFAULT_TASK else family  # a family on the general path
    base = hub_base_model(info)
    on_hub = is_hub_id(base)
    info = without_local_paths(info)  # a published card names no folder of this machine
    base = _folder_name(base)
    kind = info["kind"]
    formats = _formats(info)
    plural = "format" if "," not in formats else "formats"
    card_data = ModelCardData(
        base_model=base if on_hub else None,
        library_name="transformers" if kind == "merged-model" else "peft",
        pipeline_tag="text-generation",
        tags=["perrecbench", *(("personalization", "recommendation") if task is None else (task.name,))]
        + ["sft", "trl", "lora"],
        model_name=(repo or name) if eval_results else None,
        eval_results=list(eval_results) or None,
    )
    what = {
        "adapter": f"a LoRA adapter for `{base}` trained on {family.title}'s **{formats}** format",
        "merged-adapter": f"a LoRA adapter for `{base}` merged (`{info.get('method')}`) from adapters "
        f"trained on the {formats} {plural}",
        "merged-model": f"`{base}` with merged (`{info.get('method')}`) LoRA updates from adapters "
        f"trained on the {formats} {plural} added into its weights",
    }[kind]
    variant = _variant(info)
    flags = "--no-profile " if variant == "no_profile" else "--profiles PROFILES.jsonl "
    template = "model_card.md" if task is None else "task_model_card.md"
    card = ModelCard.from_template(
        card_data,
        template_str=resources.files("hub_cards").joinpath(template).read_text(encoding="utf-8"),
        summary=f"This is {what}, written by `perrecbench sft` (perrecbench {info.get('perrecbench')})."
        + _SYNTHETIC_NOTE * bool(source_kinds(info) & {"synthetic", "mixed"}),
        results=results_section(systems, name, costs, task),
        training=training_section(info),
        variant=variant,
        kind=kind,
        name=name,
        base=base,
        repo=repo or "ORG/NAME",
        flags=flags,
        task=family.name,
        title=family.title,
        description=family.description,
        cells=f"{family.subset_axis} ({', '.join(family.subsets)}) × {family.protocol_axis} "
        f"({', '.join(family.protocols)})",
        headline=f"{family.headline.name} ("
        f"{'higher' if family.headline.higher_is_better else 'lower'} is better)",
    )
    return f"{card}\n"  # Jinja drops the template's last newline
