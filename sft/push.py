"""Upload an adapter (or merged model) folder to the Hugging Face Hub with its model card.

The card is ``hub_cards/model_card.md`` filled from the folder's ``sft_train.json`` / ``sft_merge.json`` and,
with ``--run``, the PTC table of an evaluation run; it is written to the folder's ``README.md`` first, so
``--dry-run`` shows exactly what would be uploaded: every file of the folder except training checkpoints
(``checkpoint-*``) and hidden files.
"""

from __future__ import annotations

from pathlib import Path

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.secrets import has_secret
from sft.card import load_systems, model_card, read_info
from sft.config import PushConfig


def upload_files(folder: str | Path) -> list[str]:
    """The files an upload of `folder` sends, as sorted relative paths: no checkpoints, no hidden files."""
    folder = Path(folder)
    files = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(p.startswith(".") or p.startswith("checkpoint-") for p in parts):
            files.append("/".join(parts))
    return files


def push(config: PushConfig) -> tuple[list[str], str | None]:
    """Write the card into the folder and upload it (or, with `dry_run`, only list what would go).

    Returns:
        (the uploaded files, the repository URL; None for a dry run)
    """
    folder = Path(config.adapter)
    info = read_info(folder)
    if has_secret(info):
        raise DataError(
            f"{folder} records a secret (e.g. a --trl-arg hub_token=...) in its sft_train.json and "
            "training_args.bin: train it again without it (set HF_TOKEN instead) before uploading"
        )
    card = model_card(info, name=folder.name, repo=config.repo, systems=load_systems(config.run))
    fileio.write_text(folder / "README.md", card)
    files = upload_files(folder)
    if config.dry_run:
        return files, None
    from huggingface_hub import HfApi

    api = HfApi()
    url = api.create_repo(config.repo, repo_type="model", private=config.private, exist_ok=True)
    api.upload_folder(
        repo_id=config.repo,
        folder_path=str(folder),
        allow_patterns=files,
        commit_message=f"perrecbench sft push: {info['kind']} of {info['base_model']}",
    )
    return files, str(url)
