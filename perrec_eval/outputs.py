"""Where a command may write: one rule for every output of perrecbench, checked before anything is written.

Every command that writes a folder (evaluate, sweep, report, build, synth, profiles, sft data / train /
merge, convert-gguf) calls these before it takes its lock (`perrec_eval.lock`), so a refusal leaves nothing
behind, not even a lock file:

- :func:`target`: the output is named (not empty), its name leaves room for the temp siblings, it is no
  symlink loop or symlink to nowhere, and it is none of the folders whose loss no one survives: the current
  folder or one above it, the home folder or one above it (``/`` among them). It comes back resolved, so
  the lock and the writes reach the real output under whatever name (symlink) it was given.
- :func:`refuse_overlap`: the output is not an input (``--source``, ``--data``, a model or an adapter),
  not inside one and does not hold one.
- :func:`refuse_foreign`: an existing folder holds only files this command writes (each command says
  which): a folder of something else is refused, never mixed with new files nor deleted.
- :func:`file_target`: the same rule for an output that is one file (``profiles --out``, ``score
  --per-query``): named, not a folder, not an input, never a FIFO, device or socket (`refuse_special`),
  and an existing file only if it is a regular file the command wrote (each command says how it knows its
  own).
- :func:`replaced`: a folder written whole is written into a temp sibling and swapped in when complete
  (`fileio.swap_in`): a kill leaves the old folder or the new one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from perrec_eval import fileio
from perrec_eval.errors import ConfigError, DataError

NAME_MAX = 200
"""Longest file or folder name (bytes) an output may have: its ``.NAME.tmp-PID`` and ``.NAME.old-PID``
siblings and ``.NAME.perrecbench.lock`` must stay under the 255 bytes of common file systems."""

_TRANSIENT = re.compile(r"^\..+\.(tmp|old)-\d+$|(^|\.)perrecbench\.lock$")
_SYSTEM = frozenset((".DS_Store", "Thumbs.db", "desktop.ini"))  # a file browser's, nothing to lose


def target(out: str | os.PathLike[str], *, flag: str = "--out", folder: bool = True) -> Path:
    """Check an output path and return it resolved (symlinks followed).

    Args:
        out: the output as the user gave it.
        flag: its option, for the messages.
        folder: whether the output is a folder (a file output may sit in the current folder).

    Returns:
        The absolute path with every symlink resolved.

    Raises:
        ConfigError: `out` is empty, has a name that is too long, or is the current folder, the home
            folder, or a folder above one of them.
        DataError: `out` is a symlink loop or a symlink to nothing.

    >>> str(target("/tmp/a/../results"))
    '/tmp/results'
    """
    text = os.fspath(out)
    what = "folder" if folder else "file"
    if not text.strip():
        raise ConfigError(f"{flag} is empty: name a new {what} for the output")
    try:
        path = Path(text).expanduser()
    except RuntimeError as err:  # ~name of no known user
        raise ConfigError(f"{flag} {out}: {err}; choose another {flag}") from err
    for part in path.parts:
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            raise ConfigError(
                f"{flag} names {part[:24]}... of {len(part.encode('utf-8', 'surrogateescape'))} bytes: a "
                f"name may have at most {NAME_MAX}; choose a shorter {flag}"
            )
    try:
        resolved = path.resolve()
    except RuntimeError as err:  # a symlink loop (OSError from Python 3.13 on)
        raise DataError(f"{flag} {out} is a symlink loop: remove it or choose another {flag}") from err
    except OSError as err:
        reason = err.strerror or err
        raise DataError(f"{flag} {out} cannot be read ({reason}): choose another {flag}") from err
    _refuse_dangling(path if folder else path.parent, flag)  # a link to a file yet to be written is fine
    if folder:
        _refuse_precious(resolved, out, flag)
    return resolved


def _refuse_dangling(path: Path, flag: str) -> None:
    """Refuse a path through a symlink whose target does not exist (mkdir would fail with "File exists")."""
    for step in (path.absolute(), *path.absolute().parents):
        if step.is_symlink() and not step.exists():
            raise DataError(
                f"{flag} {path}: {step} is a symlink to {os.readlink(step)}, which does not exist: create "
                f"it, remove the link, or choose another {flag}"
            )


def _refuse_precious(resolved: Path, out: str | os.PathLike[str], flag: str) -> None:
    """Refuse the root, the current folder, the home folder, and any folder above the last two."""
    if resolved == Path(resolved.anchor):
        raise ConfigError(
            f"{flag} {out} is the root folder: name a new folder for the output, e.g. {flag} results"
        )
    try:
        cwd = Path.cwd().resolve()
    except OSError:  # the current folder was deleted: nothing of it to protect
        cwd = None
    if cwd is not None and (resolved == cwd or resolved in cwd.parents):
        raise ConfigError(
            f"{flag} {out} is the current folder or one above it: name a new folder for the output, "
            f"e.g. {flag} results"
        )
    try:
        home = Path.home().resolve()
    except (KeyError, RuntimeError):  # no home folder known
        return
    if resolved == home or resolved in home.parents:
        raise ConfigError(
            f"{flag} {out} is the home folder or one above it: name a new folder for the output, "
            f"e.g. {flag} ~/results"
        )


def refuse_overlap(
    out: str | os.PathLike[str],
    inputs: Mapping[str, str | os.PathLike[str] | None],
    *,
    flag: str = "--out",
    holds: bool = True,
    existing: bool = True,
) -> None:
    """Refuse an `out` that is, is inside, or holds any local file or folder of `inputs` (``{flag: path}``).

    Hub ids and missing paths are not local and never overlap (with `existing` off, missing paths are
    compared too: outputs yet to be written). With `holds` off, an `out` that holds an input is taken (a
    folder the command only adds its own subfolders to).

    Raises:
        ConfigError: the overlap, named with both flags.

    >>> refuse_overlap("/tmp/new-adapter", {"--model": "Qwen/Qwen2.5-0.5B-Instruct"})
    """
    here = Path(out).expanduser().resolve()
    for name, path in inputs.items():
        if not path or (existing and not Path(path).expanduser().exists()):
            continue
        local = Path(path).expanduser().resolve()
        if here == local or local in here.parents or (holds and here in local.parents):
            where = "is" if here == local else "is inside" if local in here.parents else "holds"
            raise ConfigError(f"{flag} {out} {where} {name} {path}: write to a new folder outside it")


def transient(relative: PurePosixPath) -> bool:
    """Whether a path in an output is a lock or a temp / moved-aside sibling of a perrecbench writer (or a
    file browser's index, such as ``.DS_Store``): never the user's work, never a reason to refuse.

    >>> transient(PurePosixPath(".run.json.tmp-123")), transient(PurePosixPath("a/.perrecbench.lock"))
    (True, True)
    >>> transient(PurePosixPath("notes.tmp"))
    False
    """
    return relative.name in _SYSTEM or any(_TRANSIENT.search(part) for part in relative.parts)


def foreign_files(
    folder: Path, owned: Callable[[PurePosixPath], bool], *, limit: int | None = None
) -> list[PurePosixPath]:
    """The files under `folder` (relative) that `owned` does not claim, locks and temp files aside: each
    folder's files in name order, then its subfolders'; the first `limit` only (a large folder of something
    else need not be walked whole).

    Symlinks count as files (never followed), and so do folders that cannot be read; empty folders hold
    nothing to lose.
    """
    found: list[PurePosixPath] = []

    def unreadable(err: OSError) -> None:
        if Path(err.filename) == folder:
            raise DataError(f"cannot read {folder} ({err.strerror or err}): choose another --out")
        found.append(PurePosixPath(Path(err.filename).relative_to(folder).as_posix()))

    for root, dirs, files in os.walk(folder, onerror=unreadable):
        dirs.sort()
        base = Path(root)
        links = [name for name in dirs if (base / name).is_symlink()]
        for name in sorted([*files, *links]):
            relative = PurePosixPath((base / name).relative_to(folder).as_posix())
            if not transient(relative) and not owned(relative):
                found.append(relative)
        if limit is not None and len(found) >= limit:
            break
    return found[:limit]


def refuse_foreign(
    out: Path, owned: Callable[[PurePosixPath], bool], *, command: str, flag: str = "--out"
) -> None:
    """Refuse an existing `out` that is a file, or a folder holding files `owned` does not claim.

    Args:
        out: the output folder (need not exist).
        owned: whether a path (relative to `out`) is one the command writes.
        command: the command, as the user types it after ``perrecbench``.
        flag: the output's option, for the message.

    Raises:
        DataError: the first few files the command did not write, and the fix.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise DataError(
            f"{flag} {out} is a file: `perrecbench {command}` writes a folder; choose another {flag}"
        )
    foreign = foreign_files(out, owned, limit=4)
    if foreign:
        shown = ", ".join(str(path) for path in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise DataError(
            f"{flag} {out} holds {shown}, which `perrecbench {command}` did not write: it refuses a folder "
            f"of something else (nothing there would be safe); choose a new or empty {flag}"
        )


def file_target(
    out: str | os.PathLike[str],
    *,
    inputs: Mapping[str, str | os.PathLike[str] | None],
    owned: Callable[[Path], bool],
    command: str,
    flag: str = "--out",
) -> Path:
    """Check an output that is one file and return it resolved: `target`, `refuse_overlap`, and no
    existing file the command did not write (it is replaced whole: nothing of it would be kept).

    Args:
        out: the output file as the user gave it.
        inputs: the command's input files and folders, ``{flag: path}``.
        owned: whether an existing file at the (resolved) path is one the command wrote (an empty file
            holds nothing to lose and is taken too).
        command: the command, as the user types it after ``perrecbench``.
        flag: the output's option, for the messages.

    Raises:
        ConfigError: `out` is empty, too long a name, or an input.
        DataError: `out` is a folder, or a file of something else.
    """
    path = target(out, flag=flag, folder=False)
    if path.is_dir():
        raise DataError(
            f"{flag} {out} is a folder: `perrecbench {command}` writes a file there; name a new file"
        )
    refuse_special(path, flag=flag)
    refuse_overlap(path, inputs, flag=flag)
    try:  # an empty regular file holds nothing to lose
        mine = not path.exists() or path.stat().st_size == 0 or owned(path)
    except (OSError, UnicodeDecodeError, ValueError):
        mine = False
    if not mine:
        raise DataError(
            f"{flag} {out} is a file `perrecbench {command}` did not write: it refuses to replace it "
            f"(nothing of it would be kept); name a new file for {flag}"
        )
    return path


def refuse_special(path: Path, *, flag: str = "--out") -> None:
    """Refuse a `path` that exists and is neither a regular file nor a folder: a FIFO, a device
    (``/dev/null``, which a replacement would turn into a regular file for every program), a socket. A file
    output replaces only a missing path or a regular file; it never writes through such a file either.

    >>> refuse_special(Path("/nonexistent/file.jsonl"))
    >>> refuse_special(Path("/dev/null"), flag="-o")
    Traceback (most recent call last):
    ...
    perrec_eval.errors.DataError: -o /dev/null is a character device, not a regular file: name a new file
    """
    kind = fileio.special_kind(path)
    if kind is not None:
        raise DataError(f"{flag} {path} is {kind}, not a regular file: name a new file")


@contextmanager
def replaced(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temp sibling of `out`; when the block succeeds it replaces `out` whole.

    The old `out` is moved aside before the new one is renamed in and removed after, so a kill leaves
    either the old folder or the new one (and at most a hidden ``.NAME.old-PID``/``.NAME.tmp-PID`` sibling,
    which the next writer clears: `fileio.remove_stale`).
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fileio.remove_stale(out)  # what a killed writer left beside it
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        fileio.swap_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
