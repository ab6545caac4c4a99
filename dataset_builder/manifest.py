"""``manifest.json``: what a build records about itself, what makes a folder a build that may be
replaced, and the check that a build's files are still the ones it wrote.

Every family's manifest names its data files (any string under ``outputs``, any ``path`` entry); the shared
build then records each one's sha256 under ``checksums`` (`record_checksums`), so a family that plugs in
gets the check without code of its own. `check_files` is what every command that reads a build runs first
(`evaluate`, `score --predictions` and `sft data` of every family, `push benchmark`): a file missing,
replaced by another (a train file copied over the test file) or damaged, a folder without its manifest, are
refused in one line. `fingerprint`, the build's identity in every run, is computed from the files.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from dataset_builder.config import BuildError, BuildSpec
from perrec_eval.errors import DataError
from perrec_eval.fileio import read_json, write_json
from perrec_eval.registry import DEFAULT_TASK

CHECKSUMS = "checksums"
# Files named by their content (`<split>-<first 12 hex of sha256>.parquet`, PITFALLS 1): the name is the check
# of builds written before `checksums` was recorded.
_HASHED_NAME = re.compile(r"^[A-Za-z0-9_]+-([0-9a-f]{12})\.parquet$")
_REBUILD = "rebuild the benchmark with `perrecbench build --overwrite`, or copy the whole folder again"
_hashed: dict[tuple[str, int, int, int], str] = {}  # (path, size, mtime_ns, inode) → sha256, once per process
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


def data_files(manifest: Any) -> list[str]:
    """The data files a build's `manifest` names, relative to its folder: every string under ``outputs``
    and every ``path`` entry, each once.

    >>> data_files({"outputs": {"a": {"test": "a/test-1.parquet"}}, "x": {"B": {"path": "i.parquet"}}})
    ['a/test-1.parquet', 'i.parquet']
    """
    if not isinstance(manifest, dict):
        return []
    return list(dict.fromkeys([*_named_files(manifest.get("outputs")), *_named_files(manifest, key="path")]))


def record_checksums(folder: Path) -> None:
    """Add the sha256 of every data file the family's ``manifest.json`` in `folder` names (the shared
    build's last step, inherited by every family)."""
    path = folder / "manifest.json"
    recorded = read_json(path)
    recorded[CHECKSUMS] = {name: file_sha256(folder / name) for name in data_files(recorded)}
    write_json(path, recorded)


def without_checksums(text: bytes) -> bytes:
    """A manifest's bytes as they were before `record_checksums` (a build's fingerprint leaves them out:
    `fingerprint` computes what they record from the files)."""
    try:
        content = json.loads(text)
    except ValueError:
        return text
    if not isinstance(content, dict) or CHECKSUMS not in content:
        return text
    content.pop(CHECKSUMS)
    return (json.dumps(content, indent=2, ensure_ascii=False) + "\n").encode()


def check_files(data: str | os.PathLike[str], names: Iterable[str] | None = None) -> None:
    """Fail unless the data files of the local build `data` are the ones its build wrote.

    Each file the manifest names (or only `names` of them) must exist and match its recorded sha256 and the
    hash in its name (a file and its recorded sum edited together are still refused: the name holds the
    hash the build computed). A Hub id is taken as it is; a local folder without ``manifest.json`` is
    refused (a benchmark folder without it is not one `perrecbench build` wrote whole). Each file is hashed
    once per process (about 0.6 GB/s).

    Raises:
        DataError: no manifest, the manifest is not the build's JSON, or a file is missing, replaced or
            damaged; one line naming the file and the fix.
        OSError: a file cannot be read.
    """
    folder = Path(data)
    recorded = read_manifest(folder)
    if recorded is None:
        return
    listed = data_files(recorded)
    recorded_sums = recorded.get(CHECKSUMS)
    sums = {**_entry_sums(recorded), **(recorded_sums if isinstance(recorded_sums, dict) else {})}
    for name in listed if names is None else [name for name in names if name in listed]:
        file = folder / name
        if not file.is_file():
            raise DataError(f"{file} is missing (manifest.json lists it): {_REBUILD}")
        named = _HASHED_NAME.match(file.name)
        expected = [sum_ for sum_ in (sums.get(name), named.group(1) if named else None) if sum_ is not None]
        digest = file_sha256(file) if expected else None  # an unreadable file: the CLI's one line
        if not all(isinstance(sum_, str) and digest and digest.startswith(sum_) for sum_ in expected):
            raise DataError(
                f"{file} does not hold the rows the build wrote under that name (its sha256 is not the one "
                f"its name and manifest.json record): it was replaced, edited or damaged; {_REBUILD}"
            )


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of the local build `folder`, or None for what is not a local folder (a Hub id).

    Raises:
        DataError: a folder without ``manifest.json``, or one whose manifest is not the build's JSON object.
    """
    if not folder.is_dir():
        return None
    path = folder / "manifest.json"
    if not path.is_file():
        raise DataError(
            f"{folder} has no manifest.json: it is not a folder `perrecbench build` wrote, or its manifest "
            f"was removed (its files cannot be checked); {_REBUILD}"
        )
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise DataError(f"{path} is not the JSON object the build writes ({err}): {_REBUILD}") from err
    if not isinstance(recorded, dict):
        raise DataError(f"{path} is not the JSON object the build writes: {_REBUILD}")
    return recorded


def fingerprint(
    data: str | os.PathLike[str],
    names: Iterable[str] | None = None,
    *,
    leave_out: Callable[[dict[str, Any]], bool] | None = None,
) -> str:
    """The fingerprint of a build: computed from its files, so that no edit of a file and its manifest
    together keeps it.

    Every file the manifest names (or only `names`, those a run reads) is checked first (`check_files`:
    its computed sha256 must be the one in its name and in the manifest). The fingerprint is the sha256 of
    the manifest without ``checksums`` (which holds each file's name, and so its hash), followed by the
    sha256 of each file whose name holds none; so builds named by content keep the fingerprint they had
    before the files were checked this way, and any change to a file changes the fingerprint or is
    refused. `leave_out` takes entries out of the manifest first, and returns whether it changed it (a
    family's optional files that change no doc). A Hub id's fingerprint is the sha256 of the id.

    Raises:
        DataError: see `check_files` and `read_manifest`.
    """
    folder = Path(data)
    recorded = read_manifest(folder)
    if recorded is None:
        return hashlib.sha256(str(data).encode()).hexdigest()
    check_files(folder, names)
    text = without_checksums((folder / "manifest.json").read_bytes())
    if leave_out is not None:
        content = json.loads(text)
        if leave_out(content):
            text = (json.dumps(content, indent=2, ensure_ascii=False) + "\n").encode()
        recorded = content
    plain = [name for name in data_files(recorded) if not _HASHED_NAME.match(PurePosixPath(name).name)]
    digests = [f"{name} {file_sha256(folder / name)}" for name in plain if (folder / name).is_file()]
    if digests:
        text += "\n".join(digests).encode()
    return hashlib.sha256(text).hexdigest()


def _entry_sums(value: Any) -> dict[str, Any]:
    """The sha256 of every ``{"path": ..., "sha256": ...}`` entry in `value` (PerRecBench's interactions).

    >>> _entry_sums({"interactions": {"Books": {"path": "i.parquet", "sha256": "ab"}}})
    {'i.parquet': 'ab'}
    """
    if isinstance(value, dict):
        own = (
            {value["path"]: value["sha256"]}
            if isinstance(value.get("path"), str) and "sha256" in value
            else {}
        )
        return {**own, **{k: v for inner in value.values() for k, v in _entry_sums(inner).items()}}
    if isinstance(value, list):
        return {k: v for inner in value for k, v in _entry_sums(inner).items()}
    return {}


def file_sha256(path: Path) -> str:
    """sha256 of `path`, computed once per process for each version of the file."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _hashed:
        with path.open("rb") as handle:
            _hashed[key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _hashed[key]
