"""``manifest.json``: what a build records about itself, and what makes a folder a build that may be
replaced."""

from __future__ import annotations

import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from dataset_builder.config import BuildError, BuildSpec
from perrec_eval.fileio import read_json
from perrec_eval.tasks import DEFAULT_TASK

_PACKAGES = ("perrecbench", "duckdb", "datasets", "pyarrow", "huggingface_hub", "fsspec")


def check_out(config: BuildSpec) -> None:
    """Refuse an ``--out`` whose replacement would delete something that is not an earlier build.

    ``--overwrite`` replaces the whole folder, so ``--out`` may neither be nor contain a local ``--source``
    (nor lie inside it, where it would mix with the raw files: `BuildSpec.check_source_apart`), and an
    existing non-empty ``--out`` must be a perrecbench build (its ``manifest.json`` says so) holding
    only the files that build wrote (`perrec_eval.outputs`).

    Raises:
        BuildError: an existing ``--out`` without ``--overwrite``, an ``--out`` holding the source, or a
            folder that is not a build.
        DataError: a build folder holding files the build did not write.
    """
    from perrec_eval import outputs

    out = config.out
    config.check_source_apart()
    if not out.exists():
        return
    if not is_build(out):
        raise BuildError(
            f"--out {out} is a non-empty folder that is not a perrecbench build (no build manifest.json); "
            "--overwrite replaces only an earlier build: choose another --out"
        )
    outputs.refuse_foreign(out, _build_files(out), command="build")
    if not config.overwrite:
        raise BuildError(f"{out} already exists; pass --overwrite to replace it or choose another --out")


def _build_files(out: Path) -> Callable[[PurePosixPath], bool]:
    """Whether a path in the build folder `out` is one its build wrote: the card, the statistics, the
    manifest, and every file the manifest names (any string under its ``outputs``, any ``path`` entry, such
    as PerRecBench's interactions): a family lists its files there."""
    try:
        manifest = read_json(out / "manifest.json")
    except (OSError, ValueError):
        manifest = {}  # an empty folder, or no readable manifest: `is_build` decides
    written = {"README.md", "manifest.json", "stats.json"}
    written |= set(_named_files(manifest.get("outputs") if isinstance(manifest, dict) else None))
    written |= set(_named_files(manifest, key="path"))
    return lambda path: str(path) in written


def _named_files(value: Any, key: str | None = None) -> list[str]:
    """The strings in `value` (JSON), or with `key` only those under that key.

    >>> _named_files({"easy": {"test": "easy/test-1.parquet"}, "x": [{"path": "i.parquet"}]})
    ['easy/test-1.parquet', 'i.parquet']
    >>> _named_files({"a": {"path": "i.parquet", "sha256": "ab"}}, key="path")
    ['i.parquet']
    """
    if isinstance(value, dict):
        return [
            name
            for item, inner in value.items()
            for name in (_named_files(inner) if item == key else _named_files(inner, key))
        ]
    if isinstance(value, list):
        return [name for inner in value for name in _named_files(inner, key)]
    return [value] if isinstance(value, str) and key is None else []


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
    parameters: dict[str, Any],
    results: dict[str, dict[str, Any]],
    provenance: dict[str, Any],
    outputs: dict[str, Any],
    extra: dict[str, Any] | None = None,
    *,
    task: str = DEFAULT_TASK,
) -> dict[str, Any]:
    """The family (unless it is PerRecBench, whose manifests name none), parameters, where the inputs come
    from (synthetic or not), inputs (size + content hash, computed from these bytes in this run), skipped
    lines, per-domain funnel, the family's outputs, package versions, and the family's extra entries.

    Args:
        parameters: the build's settings (a family config's ``as_manifest()``).
        results: each domain's stage (:func:`dataset_builder.stages.load`), in ``cfg.domains`` order.
        provenance: :meth:`dataset_builder.sources.Source.kind`.
        outputs: the family's entries after the funnel (PerRecBench: its split and ``outputs``, the
            ``{config: {split: relative parquet path}}`` of its files).
        extra: entries after the versions (PerRecBench: ``interactions``), or None.
        task: the family's name (``perrecbench push benchmark`` reads it to list the family's cells).
    """
    synthetic = set(provenance["synthetic_files"])
    info = {
        **({"task": task} if task != DEFAULT_TASK else {}),
        "source_kind": provenance["source_kind"],
        "parameters": parameters,
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
        **outputs,
        "versions": {"python": platform.python_version(), **{p: version(p) for p in _PACKAGES}},
    }
    return {**info, **(extra or {})}
