"""Where the raw files are: local folders and ``hf://`` folders behind one fsspec interface.

DuckDB reads local paths natively; for ``hf://`` the ``huggingface_hub.HfFileSystem`` is registered with the
connection, so DuckDB never needs its httpfs extension (which it would try to download; PITFALLS 4).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fsspec
from fsspec.implementations.local import LocalFileSystem

from dataset_builder.config import (
    ALL_DOMAINS,
    AMAZON_LAYOUT,
    CATEGORIES,
    DOMAINS,
    MOVIELENS_DOMAIN,
    MOVIELENS_FILES,
    MOVIELENS_LAYOUT,
    SYNTH_MARKER,
    BuildError,
    portable_name,
)
from perrec_eval.fileio import loads

logger = logging.getLogger(__name__)

FileKind = Literal["reviews", "meta", "users"]
MAX_LISTED_BAD_LINES = 20


def hf_filesystem() -> fsspec.AbstractFileSystem:
    """The filesystem serving ``hf://`` (tests replace this function with a local one)."""
    from huggingface_hub import HfFileSystem

    return HfFileSystem()


def candidate_names(domain: str, kind: FileKind) -> list[str]:
    """Relative paths tried, in order, for one domain's file (Hub layout first, then a flat folder).

    >>> candidate_names("Books", "reviews")[:2]
    ['review_categories/Books.jsonl', 'review_categories/Books.jsonl.gz']
    """
    if kind == "reviews":
        stems = [f"review_categories/{domain}", domain]
    else:
        stems = [f"meta_categories/meta_{domain}", f"meta_categories/{domain}", f"meta_{domain}"]
    return [stem + ext for stem in stems for ext in (".jsonl", ".jsonl.gz")]


@dataclass(frozen=True, slots=True)
class InputFile:
    """One raw file: its DuckDB-readable address and size (its identity is its content hash)."""

    domain: str
    kind: FileKind
    uri: str
    size: int

    @property
    def compressed(self) -> bool:
        return self.uri.endswith(".gz")


@contextmanager
def _hub_errors(root: str) -> Iterator[None]:
    """The Hub refusing a ``--source hf://...`` (offline, not found, no access) becomes one line."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled as err:
        raise BuildError(
            f"--source {root}: the Hub is not reachable in offline mode (HF_HUB_OFFLINE): unset "
            "HF_HUB_OFFLINE, or download the files and pass their folder"
        ) from err
    except (HfHubHTTPError, FileNotFoundError) as err:
        raise BuildError(
            f"--source {root}: the Hub refused it ({' '.join(str(err).split())[:200]}): check the dataset's "
            "name, or log in with `hf auth login` for a gated or private one"
        ) from err
    except Exception as err:
        if not _network_error(err):
            raise
        said = " ".join(str(err).split())[:200]
        raise BuildError(
            f"--source {root}: the Hub is not reachable ({type(err).__name__}: {said}): check the network "
            "(or a proxy), or download the files and pass their folder"
        ) from err


# The HTTP stacks huggingface_hub has used (its client's name moved between releases): their errors are a
# connection that failed, never a bug here.
_HTTP_MODULES = frozenset({"httpx", "httpx2", "httpcore", "requests", "urllib3"})


def _network_error(err: BaseException) -> bool:
    """Whether `err` is a failed connection: the OS's, or one of an HTTP client's own errors.

    >>> _network_error(ConnectionRefusedError()), _network_error(TimeoutError()), _network_error(KeyError())
    (True, True, False)
    """
    if isinstance(err, ConnectionError | TimeoutError):
        return True
    return any(kind.__module__.partition(".")[0] in _HTTP_MODULES for kind in type(err).__mro__)


@dataclass(slots=True)
class Source:
    """A folder of raw files, local or on the Hub."""

    root: str
    fs: fsspec.AbstractFileSystem
    remote: bool
    _listing: list[str] | None = field(default=None, repr=False)
    _layout: str | None = field(default=None, repr=False)

    @classmethod
    def open(cls, root: str) -> Source:
        """Resolve ``root`` (a local folder or ``hf://...``) and check that it holds files."""
        if root.startswith("hf://"):
            fs = hf_filesystem()
            path = root[len("hf://") :].rstrip("/")
            source = cls(path, fs, remote=True)
            with _hub_errors(root):
                source.listing()
        else:
            local = Path(root).expanduser()
            if not local.is_dir():
                raise BuildError(
                    f"--source {root}: no such folder; run `perrecbench synth --out {root}` or "
                    "pass the folder holding <Category>.jsonl and meta_<Category>.jsonl"
                )
            source = cls(str(local.resolve()), LocalFileSystem(), remote=False)
        if source.remote:
            with _hub_errors(root):
                layout = source.layout
        else:
            layout = source.layout
        if layout == MOVIELENS_LAYOUT:
            return source
        if not source.listing():
            raise BuildError(
                f"--source {root} has no .jsonl or .jsonl.gz files; expected <Category>.jsonl and "
                "meta_<Category>.jsonl (or review_categories/ and meta_categories/), or MovieLens-1M's "
                "ratings.dat, movies.dat and users.dat"
            )
        return source

    @property
    def layout(self) -> str:
        """:data:`MOVIELENS_LAYOUT` when the folder holds MovieLens-1M's three files, else
        :data:`AMAZON_LAYOUT`.

        Raises:
            BuildError: some of the three MovieLens files but not all (the message names the missing ones).
        """
        if self._layout is not None:
            return self._layout
        present = [name for name in MOVIELENS_FILES.values() if self.fs.exists(f"{self.root}/{name}")]
        if not present:
            self._layout = AMAZON_LAYOUT
            return AMAZON_LAYOUT
        missing = [name for name in MOVIELENS_FILES.values() if name not in present]
        if missing:
            raise BuildError(
                f"--source {self.root} holds {', '.join(present)} but not {', '.join(missing)}: a "
                "MovieLens-1M folder needs ratings.dat, movies.dat and users.dat (GroupLens ml-1m.zip)"
            )
        self._layout = MOVIELENS_LAYOUT
        return MOVIELENS_LAYOUT

    def listing(self) -> list[str]:
        """Relative paths of all .jsonl / .jsonl.gz files (two levels deep)."""
        if self._listing is None:
            found = []
            for pattern in ("*.jsonl", "*.jsonl.gz", "*/*.jsonl", "*/*.jsonl.gz"):
                for path in self.fs.glob(f"{self.root}/{pattern}"):
                    found.append(self._relative(path))
            self._listing = sorted(set(found))
        return self._listing

    def _relative(self, path: str) -> str:
        path = self.fs._strip_protocol(path)
        root = self.fs._strip_protocol(self.root).rstrip("/")
        return path[len(root) + 1 :] if path.startswith(root + "/") else path

    def uri(self, relative: str) -> str:
        return f"hf://{self.root}/{relative}" if self.remote else f"{self.root}/{relative}"

    def domains(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        """``--domains``, with ``all`` → every Amazon Reviews 2023 category with a review file here, in the
        release's order."""
        if self.layout == MOVIELENS_LAYOUT:
            if requested not in ((ALL_DOMAINS,), DOMAINS, (MOVIELENS_DOMAIN,)):
                raise BuildError(
                    f"--source {self.root} holds MovieLens-1M files (one domain, {MOVIELENS_DOMAIN}): "
                    "leave out --domains"
                )
            return (MOVIELENS_DOMAIN,)
        if requested != (ALL_DOMAINS,):
            return requested
        present = set(self.listing())
        found = [c for c in CATEGORIES if any(name in present for name in candidate_names(c, "reviews"))]
        if not found:
            raise BuildError(
                f"--domains all: {self.uri('')[:-1]} holds no review file of an Amazon Reviews 2023 category "
                f"(found: {', '.join(self.listing()[:8])}); name the files <Category>.jsonl[.gz] with a "
                "category of the release"
            )
        return tuple(found)

    def kind(self, files: list[dict[str, Any]]) -> dict[str, Any]:
        """Whether the input files (the stages' ``files`` entries) were written by ``perrecbench synth``:
        their content hashes against its :data:`~dataset_builder.config.SYNTH_MARKER`.

        Returns:
            ``{"source_kind": "synthetic" | "mixed" | "raw", "synthetic_files": [names]}``; ``raw`` means that
            no input matches the marker (the files did not come from ``perrecbench synth``).
        """
        path = f"{self.root}/{SYNTH_MARKER}"
        marker = {}
        if self.fs.exists(path):
            with self.fs.open(path, "rb") as handle:
                marker = json.loads(handle.read())
        made = {"sha256:" + entry["sha256"] for entry in marker.get("files", {}).values()}
        synthetic = [entry["file"] for entry in files if entry["hash"] in made]
        if marker and not synthetic:
            logger.warning(
                "%s is present but matches none of the input files: not a synthetic build", SYNTH_MARKER
            )
        kind = "raw" if not synthetic else "synthetic" if len(synthetic) == len(files) else "mixed"
        return {"source_kind": kind, "synthetic_files": synthetic}

    def find(self, domain: str, kind: FileKind) -> InputFile:
        """The domain's review or metadata file (MovieLens-1M: also its users); a clear error when it is
        absent."""
        if domain == MOVIELENS_DOMAIN and self.layout == MOVIELENS_LAYOUT:
            name = MOVIELENS_FILES[kind]
            info = self.fs.info(f"{self.root}/{name}")
            return InputFile(domain, kind, self.uri(name), int(info["size"]))
        names = candidate_names(domain, kind)
        present = set(self.listing())
        found = [name for name in names if name in present]
        if len(found) > 1:  # Books.jsonl beside a Books.jsonl.gz: which one is meant is not ours to guess
            raise BuildError(
                f"{self.root} holds {len(found)} {kind} files for domain {domain} ({', '.join(found)}): keep "
                "one of them there and move the others away"
            )
        for name in found:
            info = self.fs.info(f"{self.root}/{name}")
            return InputFile(domain, kind, self.uri(name), int(info["size"]))
        shown = ", ".join(self.listing()[:8])
        raise BuildError(
            f"{self.root}: no {kind} file for domain {domain}; expected one of {', '.join(names)} "
            f"(found: {shown}). Check --domains or the --source folder."
        )

    def content_hash(self, file: InputFile) -> str:
        """``sha256:<hex>`` of the file's bytes (for a Hub LFS file its recorded sha256, no download; a file
        outside LFS is small and read)."""
        if self.remote:
            lfs = self.fs.info(self._path(file)).get("lfs") or {}
            if lfs.get("sha256"):
                return "sha256:" + lfs["sha256"]
        with self.fs.open(self._path(file), "rb") as handle:
            return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()

    def _path(self, file: InputFile) -> str:
        return file.uri[len("hf://") :] if self.remote else file.uri

    def lines(self, file: InputFile) -> Iterator[tuple[int, bytes]]:
        """``(line number, raw bytes)`` for every line, 1-based, decompressing ``.gz``."""
        with self.fs.open(self._path(file), "rb") as raw:
            stream: io.BufferedIOBase = gzip.GzipFile(fileobj=raw) if file.compressed else raw
            yield from enumerate(stream, start=1)

    def register(self, con: Any) -> None:
        """Route ``hf://`` reads of a DuckDB connection through this source's filesystem."""
        if self.remote:
            con.register_filesystem(self.fs)


# ------------------------------------------------------------------------------------------ line checks


def review_problem(record: Any) -> str | None:
    """Why one parsed review line is unusable (``None`` when it is fine); the rules of the SQL check.

    >>> review_problem({"user_id": "u", "parent_asin": "i", "rating": 4, "timestamp": 1})
    >>> review_problem({"user_id": "u", "parent_asin": "i", "rating": "five", "timestamp": 1})
    "field 'rating' must be a number in [1, 5], got 'five'"
    """
    if not isinstance(record, dict):
        return f"a review line must be a JSON object, got {type(record).__name__}"
    for name in ("user_id", "parent_asin"):
        value = record.get(name)
        if not isinstance(value, str) or not value:
            return f"field {name!r} must be a non-empty string, got {value!r}"
    rating = record.get("rating")
    if isinstance(rating, bool) or not isinstance(rating, int | float) or not 1 <= rating <= 5:
        return f"field 'rating' must be a number in [1, 5], got {rating!r}"
    timestamp = next(
        (record[k] for k in ("timestamp", "sort_timestamp", "sortTimestamp") if record.get(k) is not None),
        None,
    )
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        return f"field 'timestamp' must be a non-negative integer (milliseconds), got {timestamp!r}"
    return None


def meta_problem(record: Any) -> str | None:
    """Why one parsed metadata line is unusable (``None`` when it is fine).

    >>> meta_problem({"parent_asin": "i", "title": "T"})
    >>> meta_problem({"title": "T"})
    "field 'parent_asin' must be a non-empty string, got None"
    """
    if not isinstance(record, dict):
        return f"a metadata line must be a JSON object, got {type(record).__name__}"
    value = record.get("parent_asin")
    if not isinstance(value, str) or not value:
        return f"field 'parent_asin' must be a non-empty string, got {value!r}"
    return None


@dataclass(slots=True)
class BadLines:
    """Malformed lines of one file: how many, why, and where the first few are."""

    uri: str
    count: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": portable_name(self.uri),
            "count": self.count,
            "reasons": dict(sorted(self.reasons.items())),
            "first_lines": self.examples,
        }


def _reason_kind(reason: str) -> str:
    return reason.split(",")[0] if reason.startswith("field") else reason.split(":")[0]


def locate_bad_lines(source: Source, file: InputFile, *, stop_at_first: bool) -> BadLines:
    """Find malformed lines by parsing every line in Python (only run when the SQL check found some).

    Args:
        source: the source holding ``file``.
        file: the review or metadata file.
        stop_at_first: return after the first bad line (``--on-bad-line error``).

    Returns:
        The count, the reasons and the first :data:`MAX_LISTED_BAD_LINES` line numbers.
    """
    check = review_problem if file.kind == "reviews" else meta_problem
    found = BadLines(file.uri)
    for number, raw in source.lines(file):
        if not raw.strip():
            continue
        try:
            problem = check(loads(raw))
        except ValueError as err:  # also UnicodeDecodeError
            problem = f"not valid JSON ({err.__class__.__name__}: {err})"
        if problem is None:
            continue
        found.count += 1
        found.reasons[_reason_kind(problem)] += 1
        if len(found.examples) < MAX_LISTED_BAD_LINES:
            found.examples.append({"line": number, "problem": problem})
        if stop_at_first:
            break
    return found


def bad_line_error(file: InputFile, bad: BadLines, sql_count: int) -> BuildError:
    """The error for ``--on-bad-line error``: file, line, what is wrong, how to fix it."""
    if bad.examples:
        first = bad.examples[0]
        where = f"{file.uri}:{first['line']}: {first['problem']}"
    else:
        where = f"{file.uri}: {sql_count} line(s) failed the check but Python found none to name"
    return BuildError(
        f"{where}. Fix or delete that line, or rerun with --on-bad-line skip to count and skip bad lines "
        "(they are reported in manifest.json)."
    )
