"""`perrecbench push ...`: what goes to the Hugging Face Hub, built offline, checked, then sent in one commit.

Each kind of upload is an `Upload` (the repository, its type, and every file by its path in the repository),
built without network by one function here:

- `metric_upload`: the PTC `evaluate` module as a Gradio Space (module, card with the Space header,
  ``app.py``: the files `perrec_eval.metric_path()` ships with the package; ``requirements.txt`` and the
  math it imports, ``perrec_eval/ptc.py`` and ``stats.py``, so that the Space runs on its own);
- `leaderboard_upload`: a report folder (`perrecbench report`) as a static Space (its ``index.html``);
- `results_upload`: a run's cells as ``.eval_results/<task>.yaml`` entries of a model repository
  (`huggingface_hub.EvalResultEntry`, the Hub's beta Eval Results format), one per cell with the family's
  headline metric, pinned to the benchmark's dataset repository and revision, with the interval and the
  counts in each entry's notes; a PerRecBench run and a run of any family through the general path alike;
- `benchmark_upload`: a build folder as the benchmark's dataset repository, with its ``eval.yaml``: one task
  per cell of the family its ``manifest.json`` names (`eval_yaml`, `task_id`, from the family's `Task`);
- adapters: `sft.push.adapter_upload`.

`check_publishable` refuses an upload that would publish a secret, an absolute local path or this machine's
name (every byte of every file is scanned); a report or build folder sends only the files the command wrote
(`written_files`); `push` sends an upload (or, for a dry run, nothing): every upload of perrecbench goes
through it. Which runs may be published as a model's results
is decided by `check_run_of_model`: a finished run of exactly that model (and adapter), not a baseline, on
a benchmark whose fingerprint it recorded.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from perrec_eval import fileio, registry, secrets
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.results import (
    FamilyMetric,
    FamilyScores,
    RunInfo,
    read_run_info,
)
from perrec_eval.task import Cell, Task

logger = logging.getLogger(__name__)

RepoType = Literal["model", "dataset", "space"]
Content = bytes | Path

EVAL_RESULTS_FOLDER = ".eval_results"
# Files are scanned in pieces of this size (weights of several GB too), each with the end of the one before.
SCAN_CHUNK = 16 * 2**20
_OVERLAP = 4096

# The rest of a path: up to a space, a quote, a bracket or a byte that is not printable ASCII.
_PATH_TAIL = rb"[^\s\"'<>)\]\x00-\x1f\x7f-\xff]*"
_SEGMENT = rb"[A-Za-z0-9._~+@%$-]+"
_ROOTS = rb"home|root|tmp|Users|mnt|media|work|workspace|scratch|private|data|nfs|gpfs|lustre|var/folders|opt"
# Where any byte pair occurs (parquet, weights): the usual roots of local folders only.
_ABSOLUTE_BINARY = re.compile(
    rb"(?<![\w.:/~-])(?:/(?:" + _ROOTS + rb")/|[A-Za-z]:\\\\?(?:Users|home|data)\\)" + _PATH_TAIL
    + rb"|\bfile://(?:localhost)?/" + _PATH_TAIL  # any absolute path inside a file:// URL
)
# In text, also any other absolute path three folders deep (/cluster/ann/x; a tokenizer's vocabulary holds
# pieces such as /api/v, hardly ever three), and any Windows drive path (D:\data, C:/x).
_ABSOLUTE_TEXT = re.compile(
    _ABSOLUTE_BINARY.pattern
    + rb"|(?<![\w.:/~%@$\\-])/" + _SEGMENT + rb"/" + _SEGMENT + rb"/" + _SEGMENT + _PATH_TAIL
    + rb"|(?<![\w\\])[A-Za-z]:(?:\\{1,2}|/)[A-Za-z0-9._$ -]*[A-Za-z0-9_$]" + _PATH_TAIL
)
_SECRET_ENV = re.compile(r"(?i)(token|key|secret|password|passwd|credential)")


@dataclass(frozen=True, slots=True)
class Upload:
    """One commit to one Hub repository: every file it sends, by its path in the repository."""

    repo: str
    repo_type: RepoType
    files: dict[str, Content]
    commit_message: str
    space_sdk: str | None = None
    delete_patterns: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())  # what the upload says about itself (e.g. what it leaves out)

    @property
    def url(self) -> str:
        prefix = {"model": "", "dataset": "datasets/", "space": "spaces/"}[self.repo_type]
        return f"https://huggingface.co/{prefix}{self.repo}"

    def describe(self) -> list[str]:
        """One line per file: its path in the repository and its size (sorted by path)."""
        return [f"{name}  ({_size(content)})" for name, content in sorted(self.files.items())]


def _size(content: Content) -> str:
    size = len(content) if isinstance(content, bytes) else content.stat().st_size
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def check_repo_id(repo: str, flag: str = "--repo", *, fix: str = "") -> str:
    """`repo` if it reads as ORG/NAME; else a ConfigError that ends with `fix` (if any).

    >>> check_repo_id("org/ptc")
    'org/ptc'
    """
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name or any(c.isspace() for c in repo):
        raise ConfigError(f"{flag} must be ORG/NAME, got {repo!r}" + (f": {fix}" if fix else ""))
    return repo


# --------------------------------------------------------------------------------------------- the scan


def _local_markers() -> list[tuple[bytes, str]]:
    """Strings of this machine that must not be published: its name, the home and working folders, and
    the values of environment variables named like secrets."""
    markers: list[tuple[bytes, str]] = []
    host = socket.gethostname().split(".")[0]
    # A name with a digit or a dash (gpu-node-17, ip-10-0-0-5): a plain word ("main", "test") would also be
    # found in any card's prose.
    if len(host) >= 5 and re.search(r"[\d-]", host):
        markers.append((host.encode(), "this machine's name"))
    for folder in {str(Path.home()), os.getcwd(), tempfile.gettempdir()}:
        if len(folder) > 1:
            markers.append((folder.encode(), "an absolute local path"))
    for name, value in os.environ.items():
        if _SECRET_ENV.search(name) and len(value) >= 8 and not value.startswith(("/", "http")):
            markers.append((value.encode(), f"the value of ${name}"))
    return markers


def scan(
    name: str, data: bytes, markers: list[tuple[bytes, str]] | None = None, *, text: bool | None = None
) -> str | None:
    """Why the file `name` with content `data` must not be published, or None.

    Args:
        name: the file's name (in the answer).
        data: its content, or a piece of it.
        markers: see `_local_markers` (None: this machine's).
        text: whether it is text, where any absolute path is one (None: no NUL byte in its first 8 KB).

    >>> scan("a.md", b"see https://huggingface.co/org/x and runs/base", [])
    >>> scan("a.json", b'{"data": "/workspace/ann/bench"}', [])
    'a.json holds an absolute local path (/workspace/ann/bench)'
    >>> scan("b.txt", b"api_key = abcdefghijklmnop1234", [])
    'b.txt holds a key or token assignment'
    """
    what = secrets.find(data.decode("latin-1"))  # the shapes redaction knows (`perrec_eval.secrets`)
    if what is not None:
        return f"{name} holds {what}"
    for marker, what in markers if markers is not None else _local_markers():
        literal = re.escape(marker)  # first, so that the engine searches for it fast
        found = re.search(rb"(?i)" + literal + rb"(?<![\w-]" + literal + rb")(?![\w-])" + _PATH_TAIL, data)
        if found:
            shown = found.group().decode(errors="replace")[:80] if what.endswith("path") else ""
            return f"{name} holds {what}" + (f" ({shown})" if shown else "")
    text = b"\0" not in data[:8192] if text is None else text
    found = (_ABSOLUTE_TEXT if text else _ABSOLUTE_BINARY).search(data)
    if found:
        return f"{name} holds an absolute local path ({found.group().decode(errors='replace')[:80]})"
    return None


def scan_file(name: str, path: Path, markers: list[tuple[bytes, str]] | None = None) -> str | None:
    """`scan` of the file at `path`, however large, piece by piece (text or binary by its first piece)."""
    markers = _local_markers() if markers is None else markers
    text, tail = None, b""
    with open(path, "rb") as handle:
        while piece := handle.read(SCAN_CHUNK):
            text = b"\0" not in piece[:8192] if text is None else text
            reason = scan(name, tail + piece, markers, text=text)
            if reason:
                return reason
            tail = piece[-_OVERLAP:]
    return None


def check_publishable(upload: Upload) -> None:
    """Refuse an upload that would publish a secret, an absolute local path or this machine's name (every
    byte of every file is scanned).

    Raises:
        DataError: naming the first offending file and what it holds.
    """
    markers = _local_markers()
    for name, content in sorted(upload.files.items()):
        if isinstance(content, Path):
            reason = scan_file(name, content, markers)
        else:
            reason = scan(name, content, markers)
        if reason:
            raise DataError(
                f"refusing to push to {upload.repo}: {reason}; remove it (or re-run with relative paths "
                "and Hub ids) and push again"
            )


@contextmanager
def hub_errors(repo: str) -> Iterator[None]:
    """The Hub refusing an upload (no token, no write access, offline) becomes one line naming the fix."""
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    try:
        yield
    except (HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled) as err:
        raise ConfigError(
            f"cannot upload to {repo} ({' '.join(str(err).split())[:300]}): log in with `hf auth login` "
            "(a token that may write there), check the repository name, or unset HF_HUB_OFFLINE"
        ) from err


def push(upload: Upload, *, dry_run: bool, private: bool = False, create_pr: bool = False) -> str | None:
    """Check `upload` and send it as one commit (creating the repository if needed), or as a pull request
    to an existing repository (`create_pr`: one you cannot write to, such as the base model's).

    Returns:
        The commit's (or pull request's) URL, which names the new revision; the repository's URL when the
        Hub answers none; None for a dry run (which touches no network and writes nothing).
    """
    check_publishable(upload)
    if dry_run:
        return None
    with hub_errors(upload.repo):
        from huggingface_hub import CommitOperationAdd, HfApi

        api = HfApi()
        if not create_pr:
            api.create_repo(
                upload.repo,
                repo_type=upload.repo_type,
                private=private,
                exist_ok=True,
                **({"space_sdk": upload.space_sdk} if upload.space_sdk else {}),
            )
        operations: list[Any] = [
            CommitOperationAdd(
                path_in_repo=name, path_or_fileobj=content if isinstance(content, bytes) else str(content)
            )
            for name, content in sorted(upload.files.items())
        ]
        if upload.delete_patterns:
            from huggingface_hub import CommitOperationDelete

            existing = api.list_repo_files(upload.repo, repo_type=upload.repo_type)
            stale = [
                name
                for name in existing
                if name not in upload.files and any(Path(name).match(p) for p in upload.delete_patterns)
            ]
            operations += [CommitOperationDelete(path_in_repo=name) for name in stale]
        commit = api.create_commit(
            upload.repo,
            operations=operations,
            commit_message=upload.commit_message,
            repo_type=upload.repo_type,
            **({"create_pr": True} if create_pr else {}),
        )
    return getattr(commit, "pr_url", None) or getattr(commit, "commit_url", None) or upload.url


def stage_files(upload: Upload, folder: str | os.PathLike) -> Path:
    """Write the files of `upload` into a new `folder`, as the repository would hold them (to read them);
    return it resolved. The files go into a temp sibling first (`outputs.replaced`): a kill leaves no
    half-staged folder.

    Raises:
        ConfigError, DataError: `folder` exists already (nothing is overwritten), is inside a folder being
            pushed, or breaks the output rule (`outputs.target`).
    """
    import shutil

    from perrec_eval import outputs

    target = outputs.target(folder, flag="--stage")
    if target.exists() or target.is_symlink():
        raise ConfigError(f"--stage {folder} exists: name a new folder")
    inside = [path for path in upload.files.values() if isinstance(path, Path)]
    if any(target.is_relative_to(path.resolve().parent) for path in inside):
        raise ConfigError(
            f"--stage {folder} is inside the folder being pushed (the next push would send the copy): "
            "name a folder outside it"
        )
    with outputs.replaced(target) as tmp:
        for name, content in sorted(upload.files.items()):
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                shutil.copyfile(content, path)
    return target


def folder_files(folder: Path, *, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every file under `folder` by its relative path: no hidden files or folders, none starting with
    one of `skip`."""
    files = {}
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(p.startswith((".", *skip)) for p in parts):
            files["/".join(parts)] = path
    return files


def written_files(folder: Path, written: Callable[[str], bool]) -> dict[str, Content]:
    """The files of `folder` (`folder_files`) that the command which made it wrote, by `written` (their
    relative path); the others (notes, copies, a staged upload) stay home, with a warning naming them."""
    files = folder_files(folder)
    foreign = sorted(name for name in files if not written(name))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        logger.warning("not uploading %s: perrecbench did not write them into %s", shown, folder)
    return {name: path for name, path in files.items() if written(name)}


def front_matter(header: Mapping[str, Any], body: str) -> bytes:
    """A card: the YAML header between ``---`` lines, then `body`."""
    text = yaml.safe_dump(dict(header), sort_keys=False, allow_unicode=True)
    return f"---\n{text}---\n\n{body.lstrip()}".encode()


def split_card(text: str) -> tuple[dict[str, Any], str]:
    """(YAML header, body) of a card; an empty header when it has none."""
    if text.startswith("---\n"):
        head, sep, body = text[4:].partition("\n---\n")
        if sep:
            return yaml.safe_load(head) or {}, body
    return {}, text


_SIZE_CATEGORIES = ("n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B")


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` label of a dataset card for `n` rows (labels of ``DatasetCardData``).

    >>> size_category(999), size_category(1_000), size_category(2_000_000)
    ('n<1K', '1K<n<10K', '1M<n<10M')
    """
    for power, label in enumerate(_SIZE_CATEGORIES[:-1], start=3):
        if n < 10**power:
            return label
    return _SIZE_CATEGORIES[-1]


# ------------------------------------------------------------------------------------------ the metric


SPACE_REQUIREMENTS = """# The Space runs the module with the math it imports (perrec_eval/ptc.py, stats.py).
evaluate==0.4.6
numpy>=1.26
"""
_SPACE_PACKAGE = '"""The PTC math of perrecbench (ptc.py, stats.py), bundled with the metric Space."""\n'


def metric_upload(repo: str) -> Upload:
    """The PTC `evaluate` module as a Gradio Space, from the files the installed package ships.

    The module imports its math from `perrec_eval.ptc`; the Space bundles that file and the statistics it
    imports (as ``perrec_eval/ptc.py`` and ``perrec_eval/stats.py``, numpy their only dependency), so the
    Space runs without perrecbench installed.
    """
    from importlib import resources

    from perrec_eval import metric_path

    folder = Path(metric_path())
    files: dict[str, Content] = {name: folder / name for name in ("ptc.py", "README.md", "app.py")}
    missing = [name for name, path in files.items() if not Path(path).is_file()]
    if missing:
        raise DataError(
            f"the installed metric module in {folder} lacks {', '.join(missing)}: reinstall perrecbench"
        )
    header, _ = split_card((folder / "README.md").read_text(encoding="utf-8"))
    if header.get("sdk") != "gradio" or header.get("app_file") != "app.py":
        raise DataError(f"{folder / 'README.md'} has no Space header (sdk: gradio, app_file: app.py)")
    files["requirements.txt"] = SPACE_REQUIREMENTS.encode()
    files["perrec_eval/__init__.py"] = _SPACE_PACKAGE.encode()
    for name in ("ptc.py", "stats.py"):
        files[f"perrec_eval/{name}"] = resources.files("perrec_eval").joinpath(name).read_bytes()
    return Upload(
        repo=check_repo_id(repo),
        repo_type="space",
        files=files,
        commit_message="perrecbench push metric: the PTC evaluate module",
        space_sdk="gradio",
    )


# ------------------------------------------------------------------------------------- the leaderboard


def leaderboard_upload(report: str | os.PathLike, repo: str, *, title: str | None = None) -> Upload:
    """A report folder (`perrecbench report`) as a static Space: its files, with a Space card titled
    `title` (default: the report page's own title, which names its family)."""
    folder = Path(report)
    if not (folder / "index.html").is_file() and (folder / "leaderboard.json").is_file():
        raise DataError(
            f"{folder} is a report without a page (index.html): its family's report writes leaderboard.md "
            "and .json only, and a Space shows index.html; publish the leaderboard.md table another way"
        )
    if not (folder / "index.html").is_file():
        from perrec_eval.leaderboard.folder import own_files

        families = sorted(
            child.name for child in folder.iterdir() if child.is_dir() and own_files(child) is not None
        ) if folder.is_dir() else []  # fmt: skip
        if families:  # a report of several families: one report folder each
            raise DataError(
                f"{folder} holds one report per family ({', '.join(f'{n}/' for n in families)}): push each "
                f"as its own Space, e.g. `perrecbench push leaderboard {folder / families[0]} --repo ...`"
            )
        raise DataError(
            f"{folder} has no index.html: write a report first "
            f"(`perrecbench report RUN_DIR ... --out {folder}`)"
        )
    if title is None:
        import html
        import re

        found = re.search(r"<title>([^<]*)</title>", (folder / "index.html").read_text(encoding="utf-8"))
        title = html.unescape(found.group(1)) if found else "PerRecBench leaderboard"
    from perrec_eval.leaderboard.folder import FILES

    files: dict[str, Content] = written_files(
        folder, lambda name: name in FILES or (name.startswith("plots/") and name.endswith(".png"))
    )
    header = {
        "title": title,
        "emoji": "📊",
        "colorFrom": "blue",
        "colorTo": "green",
        "sdk": "static",
        "app_file": "index.html",
        "pinned": False,
        "tags": ["perrecbench", "leaderboard", "personalization", "recommendation"],
    }
    body = (
        f"# {title}\n\nEvery compared system's scores with 95% intervals and paired tests: open "
        "`index.html` (the Space's page). The same tables are in "
        "`leaderboard.md`, `.csv`, `.json` and `.tex`. Written by `perrecbench report` and published with "
        "`perrecbench push leaderboard`.\n"
    )
    files["README.md"] = front_matter(header, body)
    return Upload(
        repo=check_repo_id(repo),
        repo_type="space",
        files=files,
        commit_message="perrecbench push leaderboard",
        space_sdk="static",
        delete_patterns=("plots/*.png",),
    )


# ------------------------------------------------------------------------------------------- the benchmark


def eval_yaml(task: Task, configs: Sequence[str]) -> str:
    """The benchmark's ``eval.yaml``: one task per cell of `task` in `configs` (each subset a config of the
    repository, its test split), named by `task_id`.

    >>> from perrec_eval import registry
    >>> family = registry.get(registry.DEFAULT_TASK)
    >>> spec = yaml.safe_load(eval_yaml(family, family.subsets[:1]))
    >>> spec["name"] == family.title, len(spec["tasks"]) == len(family.protocols)
    (True, True)
    """
    spec = {
        "name": task.title,
        "description": task.eval_description(),
        "evaluation_framework": "perrecbench",
        "tasks": [
            {"id": task_id(cell), "config": cell.subset, "split": "test"} for cell in task.cells(configs)
        ],
    }
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)


def task_id(cell: Cell) -> str:
    """The ``eval.yaml`` task of a cell: its subset and protocol.

    >>> task_id(Cell("small", "rate"))
    'small_rate'
    """
    return f"{cell.subset}_{cell.protocol}"


def _family_of_build(folder: Path, manifest: Mapping[str, Any]) -> Task:
    """The family a build's manifest names (builds of PerRecBench, the default family, name none)."""
    name = manifest.get("task", registry.DEFAULT_TASK)
    if not isinstance(name, str) or name not in registry.evaluable():
        raise DataError(
            f"{folder}/manifest.json names task {name!r}, not one this perrecbench can publish "
            f"({', '.join(registry.evaluable())}): push it with the perrecbench that built it"
        )
    return registry.get(name)


def check_build_files(folder: Path, manifest: Mapping[str, Any]) -> None:
    """Every data file `manifest` lists is in `folder`, readable and holds what the build wrote: the check
    `evaluate` makes of a build (`dataset_builder.manifest.check_files`), for every family.

    Raises:
        DataError: no file listed, or a file missing, unreadable or changed since the build (one line naming
            the fix).
    """
    from dataset_builder.manifest import check_files

    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise DataError(f"{folder}/manifest.json lists no data files: rebuild it with `perrecbench build`")
    check_files(folder)


def benchmark_upload(bench: str | os.PathLike, repo: str) -> Upload:
    """A build folder as the benchmark's dataset repository: its files and ``eval.yaml`` (the cells of the
    family its ``manifest.json`` names, PerRecBench when it names none)."""
    folder = Path(bench)
    if not (folder / "manifest.json").is_file():
        raise DataError(f"{folder} is not a build folder (no manifest.json): run `perrecbench build` first")
    manifest = fileio.read_json(folder / "manifest.json")
    check_build_files(folder, manifest)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("outputs"), dict):
        raise DataError(f"{folder}/manifest.json lists no outputs: push a folder `perrecbench build` wrote")
    task = _family_of_build(folder, manifest)
    built = {"manifest.json", "stats.json", "README.md"}
    built |= {path for splits in manifest["outputs"].values() for path in splits.values()}
    built |= {entry["path"] for entry in (manifest.get("interactions") or {}).values()}
    files: dict[str, Content] = written_files(folder, built.__contains__)
    subsets = [subset for subset in task.subsets if (folder / subset).is_dir()]
    files["eval.yaml"] = eval_yaml(task, subsets).encode()
    synthetic = manifest.get("source_kind") not in (None, "raw")
    return Upload(
        repo=check_repo_id(repo),
        repo_type="dataset",
        files=files,
        commit_message="perrecbench build (synthetic data)" if synthetic else "perrecbench build",
        delete_patterns=("*/*.parquet",),
    )


# ------------------------------------------------------------------------------------------- the results


def _same_path(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return a == b or Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def _data_fingerprint(info: RunInfo, data: str) -> str:
    """The fingerprint of the build at `data` as the run's family computes it (`Task.fingerprint`)."""
    from perrec_eval.evaluation import build_fingerprint

    return build_fingerprint(registry.get(info.task), data)


def check_run_of_model(
    run_dir: Path,
    info: RunInfo,
    *,
    model_ids: tuple[str, ...],
    adapter: Path | None,
) -> None:
    """Refuse a run that is not a finished run of this model (and adapter) on a fingerprinted benchmark.

    Args:
        run_dir: the run folder (named in errors).
        info: its ``run.json``.
        model_ids: the names the model may be recorded under (its Hub id, the local copy it was run from).
        adapter: the adapter folder the run must have used, or None for a run without adapter.

    Raises:
        DataError: one line saying what the run is and what was expected.
    """
    from perrec_eval.rundir import adapter_fingerprint

    engine, config = info.engine, info.config
    if engine.get("name") == "baseline":
        raise DataError(f"{run_dir} is the no-LLM baseline {engine.get('model')!r}, not a run of a model")
    if engine.get("name") == "fake":
        raise DataError(f"{run_dir} is a run of the scripted fake engine, not of a model")
    from perrec_eval.evaluation import PREDICTIONS_ENGINE

    if engine.get("name") == PREDICTIONS_ENGINE:
        raise DataError(
            f"{run_dir} was scored from the predictions file {engine.get('file')!r} (`perrecbench score "
            "--predictions`), not run with a model: push results publishes `perrecbench evaluate` runs"
        )
    if not info.complete:  # None: a run from before completeness was recorded
        raise DataError(f"{run_dir} is incomplete (engine errors): finish it (run the same evaluate again)")
    if not info.dataset_fingerprint:
        raise DataError(f"{run_dir} recorded no dataset fingerprint: re-run it with this perrecbench")
    data = config.get("data")
    if data and Path(data).is_dir() and _data_fingerprint(info, data) != info.dataset_fingerprint:
        raise DataError(f"{run_dir}: the benchmark at {data} changed since the run; evaluate again")
    model = config.get("model") or engine.get("model")
    if not any(_same_path(model, candidate) for candidate in model_ids):
        raise DataError(f"{run_dir} is a run of {model!r}, not of {' / '.join(map(repr, model_ids))}")
    specs = list(config.get("adapter") or ())
    if adapter is None:
        if specs:
            raise DataError(f"{run_dir} ran with adapter {specs[0]!r}: push it with its adapter folder")
        return
    if len(specs) != 1:
        raise DataError(f"{run_dir} is a run without adapter {adapter.name!r}: pass the adapter's own run")
    _, _, path = specs[0].rpartition("=")
    # The adapter's weights as the run recorded them; runs from before that record compare the path.
    digest = next(iter((info.adapter_sha256 or {}).values()), None)
    same_path = _same_path(path, str(adapter))
    if digest and same_path and digest != adapter_fingerprint(adapter):
        raise DataError(
            f"{run_dir} ran with other weights of {adapter} (retrained since the run): evaluate it again"
        )
    if not (digest == adapter_fingerprint(adapter) if digest else same_path):
        named = f"{adapter.name!r} ({adapter})" if adapter.name != str(adapter) else repr(adapter.name)
        raise DataError(f"{run_dir} is a run of adapter {specs[0]!r}, not of {named}")


def quantized_weights(info: RunInfo) -> str | None:
    """What a run's weights were when they are not a checkpoint's own: a GGUF file (quantized, dequantized by
    transformers) or a folder `convert-gguf` wrote from one; None for a checkpoint.

    >>> run = RunInfo(config={"model": "m/x.Q4_1.gguf"}, metric=FamilyMetric("llmrec", "ndcg@10"), engine={})
    >>> quantized_weights(run)
    'the GGUF file x.Q4_1.gguf (quantized weights)'
    >>> quantized_weights(RunInfo(config={"model": "Org/Model"}, metric=run.metric, engine={})) is None
    True
    """
    engine, model = info.engine, str(info.config.get("model") or "")
    gguf = engine.get("gguf_file") or (Path(model).name if model.endswith(".gguf") else None)
    if gguf:
        return f"the GGUF file {gguf} (quantized weights)"
    source = engine.get("converted_from")
    return None if source is None else f"a folder converted from the GGUF file {source} (quantized weights)"


def run_setup(info: RunInfo) -> tuple[str, str]:
    """(file slug, words) of what distinguishes a run's setup: prompt variant, shots, CoT, metric variant.

    >>> from types import SimpleNamespace
    >>> metric = SimpleNamespace(variant="tau_b")  # a family's own metric record (PerRecBench's)
    >>> run_setup(RunInfo(config={"shots": 2}, prompt_variant="no_profile", metric=metric, engine={}))
    ('no_profile_2shot', 'prompt variant no_profile, 2-shot')
    """
    config = info.config
    slug, words = _family_setup(config) if isinstance(info.metric, FamilyMetric) else _perrecbench_setup(info)
    if quantized_weights(info) is not None:
        slug = "_".join(part for part in (slug, "gguf") if part)
    return slug, words


def _perrecbench_setup(info: RunInfo) -> tuple[str, str]:
    """`run_setup` of a PerRecBench run."""
    config = info.config
    slug, words = [], []
    variant = info.prompt_variant or "default"
    if variant != "default":
        slug.append(variant)
        words.append(f"prompt variant {variant}")
    if config.get("shots"):
        slug.append(f"{config['shots']}shot")
        words.append(f"{config['shots']}-shot")
    if config.get("cot"):
        slug.append("cot")
        words.append("chain of thought")
    metric = info.metric.variant
    if metric != "tau_b":
        slug.append(metric)
        words.append(f"metric variant {metric}")
    return "_".join(slug), ", ".join(words) or "default prompts (with profiles), zero-shot"


def _family_setup(config: Mapping[str, Any]) -> tuple[str, str]:
    """`run_setup` of a run through the general path: its self-consistency samples and structured outputs.

    >>> _family_setup({"samples": 5, "structured_outputs": True})
    ('5samples_structured', '5 samples per request, structured outputs')
    """
    slug, words = [], []
    if config.get("samples", 1) > 1:
        slug.append(f"{config['samples']}samples")
        words.append(f"{config['samples']} samples per request")
    if config.get("structured_outputs"):
        slug.append("structured")
        words.append("structured outputs")
    return "_".join(slug), ", ".join(words) or "default prompts, one sample per request"


def eval_result_entries(
    run_dir: Path, info: RunInfo, scores: FamilyScores, *, dataset: str, revision: str
) -> list[Any]:
    """One `huggingface_hub.EvalResultEntry` per scored cell of a run: the cell's own headline metric
    (`cell_metric`), the task of its cell (`task_id`), the metric, its interval, the counts and, for
    quantized weights, what they were in its notes."""
    from huggingface_hub import EvalResultEntry

    _, words = run_setup(info)
    weights = quantized_weights(info)
    if weights is not None:
        words += f"; weights: {weights}, not the original checkpoint"
    date = datetime.fromtimestamp((run_dir / "run.json").stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    version = (info.versions or {}).get("perrecbench")
    fingerprint = f"dataset fingerprint sha256:{info.dataset_fingerprint[:16]}; perrecbench {version}"
    scored = _family_cells(scores, registry.get(scores.task), words)
    entries = [
        EvalResultEntry(
            dataset_id=dataset,
            task_id=task_id(cell),
            value=round(float(value), 4),
            dataset_revision=revision,
            date=date,
            notes=f"{notes}; {fingerprint}",
        )
        for cell, value, notes in scored
    ]
    if not entries:
        raise DataError(f"{run_dir} has no scored cell to publish")
    return entries


def cell_metric(task: Task, cell: Any) -> Any:
    """The metric a cell of a run is published with: the family's headline where the cell has it, else the
    first of the family's metrics with a value there (LLMRec's rating cell: RMSE; its text cells: ROUGE-L),
    as reports show it; None where no metric has a value (every doc failed)."""
    valued = [name for name, metric in cell.metrics.items() if metric.value is not None]
    return next((spec for spec in (task.headline, *task.metrics) if spec.name in valued), None)


def _family_cells(scores: FamilyScores, task: Task, words: str) -> Iterator[tuple[Cell, float, str]]:
    """(cell, value of its metric, notes) of each scored cell of a run."""
    for cell in scores.cells:
        spec = cell_metric(task, cell)
        if spec is None:
            continue
        metric = cell.metrics[spec.name]
        interval = (
            f"[{metric.ci_low:.4f}, {metric.ci_high:.4f}]"
            if metric.ci_low is not None and metric.ci_high is not None
            else "n/a"
        )
        direction = "higher is better" if spec.higher_is_better else "lower is better"
        notes = (
            f"{spec.name} {metric.value:.4f} ({direction}), {scores.confidence_level:.0%} CI {interval} over "
            f"{cell.num_docs} docs ({cell.num_failed} failed); {words}"
        )
        yield Cell(cell.subset, cell.protocol), metric.value, notes


def left_out(scores: FamilyScores) -> list[str]:
    """The cells of a run that `push results` files no entry for, each with the reason."""
    task = registry.get(scores.task)
    return [
        f"{cell.subset}/{cell.protocol} (no metric has a value: all {cell.num_docs} docs failed)"
        for cell in scores.cells
        if cell_metric(task, cell) is None
    ]


def results_files(
    run: str | os.PathLike,
    *,
    dataset: str,
    revision: str,
    model_ids: tuple[str, ...],
    adapter: Path | None,
    task: str | None = None,
    quantized: bool = False,
) -> dict[str, bytes]:
    """``.eval_results/<task>[_<setup>].yaml`` of one checked run folder (see `check_run_of_model`): one
    entry per scored cell (`eval_result_entries`).

    Args:
        task: the family the run must be of (None: any).
        quantized: the run's weights may be a GGUF file of the model (or a folder converted from one):
            every entry then says so (`quantized_weights`); without it such a run is refused.

    Raises:
        ConfigError: a run of another family than `task`, or of quantized weights without `quantized`.
        DataError: a run that may not be published as this model's (`check_run_of_model`), or without
            scores.
    """
    _, files, _ = _run_results(
        run, dataset=dataset, revision=revision, model_ids=model_ids, adapter=adapter, task=task,
        quantized=quantized,
    )  # fmt: skip
    return files


def _run_results(
    run: str | os.PathLike,
    *,
    dataset: str,
    revision: str,
    model_ids: tuple[str, ...],
    adapter: Path | None,
    task: str | None,
    quantized: bool = False,
) -> tuple[RunInfo, dict[str, bytes], list[str]]:
    """The run's info, its results file and the cells it leaves out (`left_out`)."""
    from huggingface_hub import eval_result_entries_to_yaml

    from perrec_eval.rundir import one_run_folder

    run_dir = one_run_folder(run)
    info = read_run_info(run_dir)
    if task is not None and info.task != task:
        raise ConfigError(f"{run_dir} is a run of task {info.task}, not {task}: pass --task {info.task}")
    check_run_of_model(run_dir, info, model_ids=model_ids, adapter=adapter)
    weights = quantized_weights(info)
    if weights is not None and not quantized:
        raise ConfigError(
            f"{run_dir} ran {weights}, not the checkpoint of {model_ids[0]}: pass --quantized to file its "
            "results as those weights' (every entry says so), or push them to the GGUF file's own repository"
        )
    if weights is None and quantized:
        raise ConfigError(f"--quantized: {run_dir} ran a checkpoint, not a GGUF file: leave --quantized out")
    data = info.config.get("data")
    if data and not Path(data).exists() and data != dataset:
        raise DataError(
            f"{run_dir} evaluated the Hub dataset {data!r}, not {dataset!r}: name it in --dataset"
        )
    scores = _load_scores(run_dir, info)
    entries = eval_result_entries(run_dir, info, scores, dataset=dataset, revision=revision)
    slug, _ = run_setup(info)
    name = f"{EVAL_RESULTS_FOLDER}/{info.task}{'_' + slug if slug else ''}.yaml"
    text = yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True)
    return info, {name: text.encode()}, left_out(scores)


def _load_scores(run_dir: Path, info: RunInfo) -> FamilyScores:
    """The scores of a finished run, checked against its predictions and its run.json's metric as every
    report checks them (`perrec_eval.leaderboard.family.load`).

    Raises:
        DataError: no scores.json, one of another metric than run.json's, or one its predictions do not give.
    """
    from perrec_eval.leaderboard.family import load

    return load(run_dir).scores


def _headline(info: RunInfo) -> str:
    """The name of the metric a run is ranked by, as its acronym (PTC, RMSE, NDCG@10)."""
    if isinstance(info.metric, FamilyMetric):
        return info.metric.headline.upper()
    return registry.get(info.task).headline.name.upper()


def results_upload(
    run: str | os.PathLike,
    repo: str,
    *,
    dataset: str,
    revision: str,
    model: str | None = None,
    adapter: str | os.PathLike | None = None,
    task: str | None = None,
    quantized: bool = False,
) -> Upload:
    """A run's results into the model repository `repo` (``.eval_results/``), for that model only.

    Args:
        run: a run folder of `perrecbench evaluate`.
        repo: the model repository (ORG/NAME) of the evaluated model or adapter.
        dataset, revision: the benchmark's dataset repository and the revision (commit) the run used.
        model: the name the run recorded for the model when it is not `repo` (a local copy of it).
        adapter: the adapter folder, when `repo` holds an adapter: the run must have used exactly it, on
            its base model.
        task: the task family the run must be of (None: any).
        quantized: the run's weights may be a GGUF file of the model (see `results_files`).
    """
    check_repo_id(
        repo,
        fix=f"the model's Hub repository; a run of a local copy of it takes --repo ORG/NAME --model {repo}",
    )
    check_repo_id(dataset, "--dataset")
    if not revision or any(c.isspace() for c in revision):
        raise ConfigError(f"--dataset-revision must be a revision of {dataset} (a commit), got {revision!r}")
    if adapter is not None:
        from sft.card import base_model_ids

        folder = Path(adapter)
        ids = base_model_ids(folder)
    else:
        folder, ids = None, (repo, *((model,) if model else ()))
    info, files, skipped = _run_results(
        run, dataset=dataset, revision=revision, model_ids=ids, adapter=folder, task=task, quantized=quantized
    )
    return Upload(
        repo=repo,
        repo_type="model",
        files=dict(files),
        commit_message=f"perrecbench push results: {_headline(info)} on {dataset}@{revision}",
        notes=tuple(upload_notes(info, skipped)),
    )


def upload_notes(info: RunInfo, skipped: Sequence[str], family: str | None = None) -> list[str]:
    """What `push results` says it files for one run: each cell's own metric, the cells it leaves out
    (`left_out`) and quantized weights (`quantized_weights`); `family` names the run's family in a suite."""
    of = f"{family}: " if family else ""
    notes = [f"{of}one entry per scored cell, with the cell's own metric (its notes name it and its CI)"]
    notes += [f"{of}left out: {cell}" for cell in skipped]
    weights = quantized_weights(info)
    if weights is not None:
        notes.append(f"{of}weights: {weights}; every entry says so")
    return notes


def parse_datasets(spec: str, revision: str | None) -> dict[str | None, tuple[str, str]]:
    """``--dataset`` of `push results`: one Hub dataset (``ORG/NAME``), or one per family of a suite
    (``FAMILY=ORG/NAME[@REV],...``), each with its revision (``@REV``, else ``--dataset-revision``).

    Returns:
        {family (None: the one dataset): (dataset, revision)}.

    Raises:
        ConfigError: a malformed entry, or a dataset without a revision.

    >>> parse_datasets("perrecbench=org/pb@abc,llmrec=org/lr", "def")
    {'perrecbench': ('org/pb', 'abc'), 'llmrec': ('org/lr', 'def')}
    """
    out: dict[str | None, tuple[str, str]] = {}
    for entry in (part.strip() for part in spec.split(",") if part.strip()):
        family, sep, rest = entry.rpartition("=")
        dataset, _, own = rest.partition("@")
        chosen = own or revision
        if not chosen or any(c.isspace() for c in chosen):
            raise ConfigError(
                f"--dataset {entry}: give its revision (a commit) as {rest.partition('@')[0]}@REV or with "
                "--dataset-revision REV"
            )
        check_repo_id(dataset, "--dataset")
        out[family if sep else None] = (dataset, chosen)
    if not out:
        raise ConfigError("--dataset names no dataset: pass ORG/NAME, or FAMILY=ORG/NAME@REV,... for a suite")
    return out


def suite_results_upload(
    suite_dir: str | os.PathLike,
    repo: str,
    *,
    datasets: Mapping[str | None, tuple[str, str]],
    model: str | None = None,
    quantized: bool = False,
) -> Upload:
    """Every family's results of one model in a suite folder (`perrec_eval.suite`) into the model's
    repository, in one commit: each family's ``.eval_results`` entries with its own dataset and revision.

    Raises:
        ConfigError: a family of the suite without its dataset in `datasets`.
        DataError: no run of this model in the suite, or a run that may not be published as its.
    """
    from perrec_eval.suitedir import model_runs

    check_repo_id(repo, fix="the model's Hub repository; a run of a local copy of it takes --model NAME")
    ids = (repo, *((model,) if model else ()))
    runs = model_runs(suite_dir, ids)
    files: dict[str, Any] = {}
    headlines, notes = [], []
    for family, run_dir in runs.items():
        if family not in datasets and None not in datasets:
            raise ConfigError(
                f"{suite_dir} holds a {family} run: name its dataset with --dataset {family}=ORG/NAME@REV"
            )
        dataset, revision = datasets.get(family) or datasets[None]
        info, found, skipped = _run_results(
            run_dir, dataset=dataset, revision=revision, model_ids=ids, adapter=None, task=family,
            quantized=quantized,
        )  # fmt: skip
        files |= found
        notes += upload_notes(info, skipped, family)
        headlines.append(f"{_headline(info)} on {dataset}@{revision}")
    return Upload(
        repo=repo,
        repo_type="model",
        files=files,
        commit_message="perrecbench push results: " + "; ".join(headlines),
        notes=tuple(notes),
    )
