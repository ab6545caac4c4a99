"""``manifest.json``: what a build records about itself, and what makes a folder a build that may be
replaced."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from dataset_builder.config import BuildConfig, BuildError
from dataset_builder.perrecbench.splits import Split
from perrec_eval.fileio import read_json

_PACKAGES = ("perrecbench", "duckdb", "datasets", "pyarrow", "huggingface_hub", "fsspec")


def check_out(config: BuildConfig) -> None:
    """Refuse an ``--out`` whose replacement would delete something that is not an earlier build.

    ``--overwrite`` replaces the whole folder, so ``--out`` may neither be nor contain a local ``--source``,
    and an existing non-empty ``--out`` must be a perrecbench build (its ``manifest.json`` says so).

    Raises:
        BuildError: an existing ``--out`` without ``--overwrite``, an ``--out`` holding the source, or a
            folder that is not a build.
    """
    out = config.out
    if not config.source.startswith("hf://"):
        source = Path(config.source).expanduser().resolve()
        target = out.expanduser().resolve()
        if target == source or target in source.parents:
            relation = "is" if target == source else "contains"
            raise BuildError(
                f"--out {out} {relation} --source {config.source}, which the build would delete; "
                "choose an --out outside the source folder"
            )
    if not out.exists():
        return
    if not is_build(out):
        raise BuildError(
            f"--out {out} is a non-empty folder that is not a perrecbench build (no build manifest.json); "
            "--overwrite replaces only an earlier build: choose another --out"
        )
    if not config.overwrite:
        raise BuildError(f"{out} already exists; pass --overwrite to replace it or choose another --out")


def is_build(folder: Path) -> bool:
    """Whether `folder` is empty or holds a perrecbench build (a ``manifest.json`` with its keys)."""
    if not folder.is_dir():
        return False
    if not any(folder.iterdir()):
        return True
    try:
        manifest = read_json(folder / "manifest.json")
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and {"parameters", "outputs", "versions"} <= manifest.keys()


def version(package: str) -> str:
    """The installed version of `package`, or ``not installed``."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def manifest(
    cfg: BuildConfig,
    results: dict[str, dict[str, Any]],
    files: dict[str, dict[str, str]],
    split: Split,
    provenance: dict[str, Any],
    interactions: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """Parameters, where the inputs come from (synthetic or not), inputs (size + content hash, computed from
    these bytes in this run), skipped lines, per-domain funnel, the train groups the split rule dropped,
    output files, package versions, and the interactions files (``--with-interactions`` only).

    Args:
        cfg: the build parameters.
        results: each domain's stage (:func:`dataset_builder.stages.load`), in ``cfg.domains`` order.
        files: ``{config: {split: relative parquet path}}``.
        split: the test / train split.
        provenance: :func:`dataset_builder.sources.source_kind`.
        interactions: what :func:`dataset_builder.interactions.write_interactions` wrote, or None.
    """
    synthetic = set(provenance["synthetic_files"])
    info = {
        "source_kind": provenance["source_kind"],
        "parameters": cfg.as_manifest(),
        "inputs": [
            {**entry, "synthetic": entry["file"] in synthetic}
            for r in results.values()
            for entry in r["files"]
        ],
        "bad_lines": {
            "count": sum(b["count"] for r in results.values() for b in r["bad_lines"]),
            "files": [b for r in results.values() for b in r["bad_lines"]],
        },
        "selection": {d: r["funnel"] for d, r in results.items()},
        "split": {"rule": cfg.split_rule, "dropped_train_groups": split.dropped},
        "outputs": files,
        "versions": {"python": platform.python_version(), **{p: version(p) for p in _PACKAGES}},
    }
    if interactions is not None:
        info["interactions"] = interactions
    return info
