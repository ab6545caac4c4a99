"""Upload an adapter (or merged model) folder to the Hugging Face Hub with its model card.

The card is ``hub_cards/model_card.md`` (``task_model_card.md`` for an adapter of a family on the general
path) filled from the folder's ``sft_train.json`` / ``sft_merge.json`` and, with ``--run``, the results table
of a run of exactly this adapter on its base model, on the family it was trained for (``--base-run``: the
base model's column beside it); with ``--dataset``/``--dataset-revision`` (PerRecBench runs) also the
card's ``model-index`` and the ``.eval_results/`` entries. The upload is built in memory
(`perrec_eval.publish.Upload`): every file of the folder except checkpoints (``checkpoint-*``),
``training_args.bin`` and hidden files, the card as ``README.md`` and ``adapter_config.json`` naming the
base model's Hub id. Nothing is written into the folder, dry run or not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.publish import Upload, check_run_of_model, folder_files, results_files
from perrec_eval.publish import push as send
from perrec_eval.registry import DEFAULT_TASK
from perrec_eval.results import RunInfo, read_run_info
from perrec_eval.secrets import has_secret
from sft.card import base_model_ids, hub_base_model, model_card, read_info, task_of
from sft.config import PushConfig

# Never uploaded: training checkpoints, and the trainer's pickled arguments (local paths, maybe a token; the
# recipe is in sft_train.json).
SKIP = ("checkpoint-", "training_args.bin")


def _run(path: str, *, ids: tuple[str, ...], adapter: Path | None, task: str) -> tuple[Path, RunInfo]:
    """(run folder, run.json) of one checked run: of this model (and adapter), on the adapter's family."""
    from perrec_eval.rundir import one_run_folder

    run_dir = one_run_folder(path)
    info = read_run_info(run_dir)
    if info.task != task:
        raise DataError(
            f"{run_dir} is a run of task {info.task}; the adapter was trained on task {task}'s examples: "
            f"pass a run of `perrecbench evaluate --task {task}`"
        )
    check_run_of_model(run_dir, info, model_ids=ids, adapter=adapter)
    return run_dir, info


def _eval_results(scores: dict[str, Any], dataset: str, revision: str) -> list[Any]:
    """The card's model-index results (`huggingface_hub.EvalResult`), one per scored cell: a task per level
    (the dataset config), a PTC metric per method (its ``config``)."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type="text-generation",
            task_name=f"PerRecBench {cell['subset']}",
            dataset_type=dataset,
            dataset_name="PerRecBench",
            dataset_config=cell["subset"],
            dataset_split="test",
            dataset_revision=revision,
            metric_type="ptc",
            metric_name=f"PTC {cell['protocol']}",
            metric_value=round(float(cell["metrics"]["ptc"]["value"]), 4),
            metric_config=cell["protocol"],
        )
        for cell in scores["cells"]
        if cell["metrics"]["ptc"]["value"] is not None
    ]


def adapter_upload(config: PushConfig) -> tuple[Upload, str]:
    """(the upload of `config.adapter`, its card), built offline; the folder is not touched.

    Raises:
        DataError: a run that is not of this adapter on its base model (or a base run that is not of the
            base model alone), or an adapter folder not written by `perrecbench sft`.
    """
    from perrec_eval.leaderboard.family import load

    folder = Path(config.adapter)
    info = read_info(folder)
    if has_secret(info):
        raise DataError(
            f"{folder} records a secret (e.g. a hub_token setting) in its sft_train.json and "
            "training_args.bin: train it again without it (set HF_TOKEN instead) before uploading"
        )
    ids, task = base_model_ids(folder), task_of(info)
    if config.dataset and task != DEFAULT_TASK:
        raise ConfigError(
            f"--dataset: `.eval_results` entries are written for {DEFAULT_TASK} runs only so far; push this "
            f"adapter of task {task} without --dataset and --dataset-revision (its card still has the table)"
        )
    systems, costs, eval_results = [], [], []
    files: dict[str, Any] = dict(folder_files(folder, skip=SKIP))
    if config.base_run:
        base_dir, base_info = _run(config.base_run, ids=ids, adapter=None, task=task)
        systems.append((f"base ({hub_base_model(info)})", base_dir))
        costs += [(systems[-1][0], base_info.cost)] if base_info.cost else []
    if config.run:
        run_dir, run_info = _run(config.run, ids=ids, adapter=folder, task=task)
        systems.append((folder.name, run_dir))
        costs += [(folder.name, run_info.cost)] if run_info.cost else []
        if config.dataset and config.dataset_revision:
            scores = load(run_dir).scores.to_json()
            eval_results = _eval_results(scores, config.dataset, config.dataset_revision)
            files |= results_files(
                run_dir,
                dataset=config.dataset,
                revision=config.dataset_revision,
                model_ids=ids,
                adapter=folder,
            )
    card = model_card(
        info, name=folder.name, repo=config.repo, systems=systems, costs=costs, eval_results=eval_results
    )
    files["README.md"] = card.encode()
    if (folder / "adapter_config.json").is_file():
        adapter_config = fileio.read_json(folder / "adapter_config.json")
        adapter_config["base_model_name_or_path"] = hub_base_model(info)
        files["adapter_config.json"] = (
            json.dumps(adapter_config, indent=2, ensure_ascii=False) + "\n"
        ).encode()
    if info["kind"] != "merged-model" and "adapter_model.safetensors" not in files:
        raise DataError(f"{folder} has no adapter_model.safetensors: pass the folder `sft train` wrote")
    upload = Upload(
        repo=config.repo,
        repo_type="model",
        files=files,
        commit_message=f"perrecbench push adapter: {info['kind']} of {hub_base_model(info)}",
    )
    return upload, card


def push(config: PushConfig) -> tuple[list[str], str | None]:
    """Upload the folder with its card (or, with `dry_run`, only check and list what would go).

    Returns:
        (the uploaded files, the repository URL; None for a dry run)
    """
    upload, _ = adapter_upload(config)
    url = send(upload, dry_run=config.dry_run, private=config.private)
    return sorted(upload.files), url
