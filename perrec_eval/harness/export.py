"""`perrecbench export lm-eval | lighteval`: the cells of some builds as a harness's tasks.

Every export writes the same request rows (`rows/`: a `datasets` folder, one config per cell, its parquet
files named by their content hash) and ``export.json``: what was exported, from which build (and its
fingerprint) and with which prompt files (each one's sha256). The harness's task files (`lmeval_tasks`,
`lighteval_tasks`) point at them, and the hooks they call refuse rows that no longer are what this
perrecbench would render (`check_export`): another build, or a prompt file changed since the export.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from perrec_eval.cliconfig import check_choices, check_seed, option
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.harness.families import adapter
from perrec_eval.harness.requests import SCHEMA, NotOneRound, Selection
from perrec_eval.registry import DEFAULT_TASK, get
from perrec_eval.task import Cell

EXPORT_FILE = "export.json"
ROWS = "rows"
# The family that stands for all three in a harness (lm-eval's group, lighteval's superset)
SUITE_GROUP = "perrecbench_suite"
ROW_COLUMNS = ("cell", "selection", "request", "doc_id", "doc_index", "slot", "system", "prompt", "messages")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportConfig:
    """Settings of `perrecbench export lm-eval | lighteval`."""

    builds: tuple[str, ...] = option(
        "benchmark folders written by `perrecbench build` (any family; or Hub dataset ids of pushed builds)",
        positional=True,
        metavar="BUILD",
    )
    split: str = option("dataset split to export", default="test")
    subsets: tuple[str, ...] | None = option(
        "export only these subsets (a family none of whose subsets is named keeps all of its own)",
        default=None,
        shown="all",
    )
    protocols: tuple[str, ...] | None = option(
        "export only these protocols (PerRecBench: methods; a family none of whose protocols is named keeps "
        "all of its own)",
        default=None,
        shown="all",
    )
    max_docs: int | None = option(
        "export N docs of each subset (PerRecBench: N groups of each level), the seeded sample `evaluate "
        "--max-docs` (`--max-groups`) takes with the same --seed",
        default=None,
        shown="all",
    )
    seed: int = option("seed of the --max-docs sample and of PerRecBench's listwise presentation", default=0)
    max_new_tokens: tuple[str, ...] = option(
        "answer budget: N for every protocol, or NAME=N per protocol (comma-separated)",
        default=(),
        shown="each protocol's, as `perrecbench evaluate`",
        repeat=True,
    )
    prompts: str | None = option(
        "a prompt variant of the families that have it (`evaluate --prompts`)",
        default=None,
        shown="each's own",
    )
    k: int | None = option(
        "PerRecBench: retrieved history items per user (BM25)", default=None, shown="the family's own (4)"
    )
    profiles: str | None = option(
        "PerRecBench: saved profiles JSONL (`perrecbench profiles`); the evaluated model cannot write them "
        "within a one-round harness",
        default=None,
        shown="no profiles",
    )
    cot: bool = option("PerRecBench: chain-of-thought prompts", default=False)
    presentation: Literal["balanced", "dataset"] = option(
        "PerRecBench: order of the users in listwise prompts (see `perrecbench evaluate --help`)",
        default="balanced",
    )
    pairwise_strategy: Literal["allpairs", "heapsort"] = option(
        "PerRecBench: allpairs (every pair in both orders); heapsort cannot be asked in one round",
        default="allpairs",
    )
    shots: int = option(
        "PerRecBench: few-shot demonstrations (0 only: a harness draws its own few-shot examples)", default=0
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_seed(self.seed)
        if not self.builds:
            raise ConfigError("give one or more BUILD folders (or Hub dataset ids) to export")
        if self.profiles is not None and not Path(self.profiles).is_file():
            raise ConfigError(
                f"--profiles {self.profiles}: no such file: write one with `perrecbench profiles --out FILE`"
            )
        for name in ("subsets", "protocols"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, tuple(part for part in value.split(",") if part))
        if self.max_docs is not None and self.max_docs < 1:
            raise ConfigError(f"--max-docs must be >= 1, got {self.max_docs}")
        if self.k is not None and self.k < 1:
            raise ConfigError(f"--k must be >= 1, got {self.k}")
        if self.shots:
            raise ConfigError(
                "--shots: the exported tasks are zero-shot (a harness's --num_fewshot would draw its own "
                "examples from the rows, which hold no answers): evaluate few-shot with `perrecbench "
                "evaluate --shots N`"
            )

    def options(self, task_name: str) -> dict[str, Any]:
        """The family's prompt options of this export (`Adapter.option_names`)."""
        from dataset_builder.manifest import file_sha256

        family = adapter(task_name)
        every = {
            "k": family.option_defaults.get("k") if self.k is None else self.k,
            "profiles": None if self.profiles is None else str(Path(self.profiles).resolve()),
            "profiles_sha256": None if self.profiles is None else file_sha256(Path(self.profiles)),
            "cot": self.cot,
            "presentation": self.presentation,
            "pairwise_strategy": self.pairwise_strategy,
            "prompts": self.prompts if self.prompts in get(task_name).prompt_variants else None,
        }
        names = family.option_names
        return {name: every[name] for name in names} | (
            {"profiles_sha256": every["profiles_sha256"]} if "profiles" in names else {}
        )


@dataclass(frozen=True, slots=True)
class Build:
    """A build as the export reads it: the local folder, as given, its Hub revision, family, fingerprint."""

    data: str
    source: str
    revision: str | None
    task: str
    fingerprint: str


def resolve_build(source: str) -> Build:
    """A local build folder, or a Hub dataset id's snapshot (downloaded once, then from the cache).

    Raises:
        ConfigError: neither a build folder nor a Hub id that can be downloaded.
    """
    from perrec_eval.cliconfig import folder_task
    from perrec_eval.evaluation import fingerprint

    folder, revision = Path(source), None
    if not folder.is_dir():
        folder, revision = _snapshot(source)
    task = folder_task(str(folder))
    if task is None and (folder / "README.md").is_file():  # a PerRecBench folder without a manifest
        task = DEFAULT_TASK
    if task is None:
        raise ConfigError(
            f"{source} is not a benchmark folder (no manifest.json): build one with `perrecbench build`"
        )
    return Build(str(folder.resolve()), source, revision, task, fingerprint(str(folder)))


def _snapshot(source: str) -> tuple[Path, str]:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", source):
        raise ConfigError(f"{source}: no such folder: pass a build folder or a Hub dataset id (ORG/NAME)")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(source, repo_type="dataset"))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as err:
        raise ConfigError(
            f"{source}: not a folder here, and the Hub dataset could not be read ({type(err).__name__}): "
            "check the id and the network (HF_HUB_OFFLINE=1 reads the cache only), or pass a build folder"
        ) from None
    return path, path.name


def templates_dir(task_name: str) -> Any:
    """The folder of a family's prompt files: ``templates/`` beside the module of its protocols."""
    protocol = next(iter(get(task_name).protocols.values()))
    package = type(protocol).__module__.rpartition(".")[0]
    return resources.files(package) / "templates"


def prompt_files(task_name: str) -> dict[str, str]:
    """Each prompt file of a family (name → sha256): what its exported rows were rendered with."""
    folder = templates_dir(task_name)
    if not folder.is_dir():
        return {}
    return {
        entry.name: hashlib.sha256(entry.read_bytes()).hexdigest()
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    }


def group_name(task_name: str) -> str:
    """A family's name in a harness: ``recbench-plus`` → ``recbench_plus``."""
    return task_name.replace("-", "_")


def cell_name(task_name: str, cell: Cell) -> str:
    """A cell's harness task name, without its family: the subset, then the protocol where it differs.

    >>> cell_name("llmrec", Cell("sequential", "sequential-candidates"))
    'sequential_sequential_candidates'
    >>> cell_name("llmrec", Cell("rating", "rating")), cell_name("perrecbench", Cell("easy", "listwise"))
    ('rating', 'easy_listwise')
    """
    parts = [cell.subset] if cell.protocol == cell.subset else [cell.subset, cell.protocol]
    return re.sub(r"[^0-9A-Za-z_]", "_", "_".join(parts))


def _chosen(wanted: tuple[str, ...] | None, own: Sequence[str]) -> tuple[str, ...] | None:
    """The family's own of `wanted` (None: all, also when none of its own is named)."""
    if wanted is None:
        return None
    mine = tuple(name for name in wanted if name in own)
    return mine or None


def plan(config: ExportConfig) -> tuple[list[tuple[Build, Cell, Selection]], list[dict[str, str]]]:
    """The cells to export (each with its build and selection), and the ones left out with the reason.

    Raises:
        ConfigError: a build that is not one, two builds of one family, a name no family has, or a cell
            a one-round harness cannot ask (the reason).
    """
    builds = [resolve_build(source) for source in dict.fromkeys(config.builds)]
    seen: dict[str, str] = {}
    for build in builds:
        if build.task in seen:
            raise ConfigError(
                f"{seen[build.task]} and {build.source} are both {build.task} builds: export one per family"
            )
        seen[build.task] = build.source
    families = [get(build.task) for build in builds]
    for name, wanted, known in (
        ("subsets", config.subsets, {s for t in families for s in t.subsets}),
        ("protocols", config.protocols, {p for t in families for p in t.protocols}),
    ):
        unknown = [value for value in wanted or () if value not in known]
        if unknown:
            raise ConfigError(
                f"--{name} {unknown[0]!r} names none of these builds': {', '.join(sorted(known))}"
            )
    variants = sorted({variant for task in families for variant in task.prompt_variants})
    if config.prompts is not None and config.prompts not in variants:
        theirs = ", ".join(variants) or "none"
        raise ConfigError(
            f"--prompts {config.prompts!r} is no prompt variant of these builds' (theirs: {theirs})"
        )
    chosen, skipped = [], []
    for build, task in zip(builds, families, strict=True):
        family = adapter(task.name)
        options = config.options(task.name)
        selection = Selection(
            task=task.name,
            data=build.data,
            source=build.source,
            revision=build.revision,
            fingerprint=build.fingerprint,
            split=config.split,
            max_docs=config.max_docs,
            seed=config.seed,
            options=options,
        )
        cells = task.cells(_chosen(config.subsets, task.subsets), _chosen(config.protocols, task.protocols))
        for cell in cells:
            why = family.unexpressible(cell, options)
            if why is not None:
                raise ConfigError(f"{task.name} {cell}: {why}")
            chosen.append((build, cell, selection))
    return chosen, skipped


def write_rows(config: ExportConfig, folder: Path, harness: str) -> dict[str, Any]:
    """Render every cell's rows into `folder` (``rows/`` and their card) and return export.json's record,
    also written there."""
    from perrec_eval import fileio
    from perrec_eval.evaluation import token_budgets

    chosen, skipped = plan(config)
    cells = []
    for build, cell, selection in chosen:
        task = get(build.task)
        family = adapter(task.name)
        try:
            requests = family.requests(selection, cell)
        except NotOneRound as err:
            raise ConfigError(f"{err}: a one-round harness cannot ask it") from None
        if not requests:  # a config the build does not have (RecBench+'s demographics from Amazon data)
            skipped.append({"task": task.name, "cell": str(cell), "why": "the build has no docs in it"})
            continue
        name = f"{group_name(task.name)}_{cell_name(task.name, cell)}"
        data, sha = _rows_parquet(task.name, cell, selection, requests)
        path = PurePosixPath(ROWS, group_name(task.name), f"{cell_name(task.name, cell)}-{sha[:12]}.parquet")
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
        budget = token_budgets(task.protocols, config.max_new_tokens)[cell.protocol]
        cells.append(
            {
                "name": name,
                "task": task.name,
                "group": group_name(task.name),
                "cell": f"{cell.subset}/{cell.protocol}",
                "selection": selection.to_json(),
                "max_new_tokens": budget,
                "metrics": [
                    {"name": m.name, "higher_is_better": m.higher_is_better, "aggregation": m.aggregation}
                    for m in family.metrics(selection, cell)
                ],
                "rows": len(requests),
                "docs": len({request.doc_id for request in requests}),
                "file": str(path),
                "sha256": sha,
            }
        )
    if not cells:
        raise DataError("nothing to export: the builds have no docs in the chosen cells")
    record = {
        "schema": SCHEMA,
        "harness": harness,
        "perrecbench": _version(),
        "prompt_files": {name: prompt_files(name) for name in dict.fromkeys(c["task"] for c in cells)},
        "cells": cells,
        "skipped": skipped,
    }
    fileio.write_json(folder / EXPORT_FILE, record)
    fileio.write_text(folder / "README.md", _card(record))
    return record


def _rows_parquet(
    task_name: str, cell: Cell, selection: Selection, requests: Sequence[Any]
) -> tuple[bytes, str]:
    """The cell's rows as parquet bytes and their sha256."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = selection.key()
    rows = []
    for request in requests:
        messages = list(request.messages)
        if (
            messages[-1]["role"] != "user"
            or len(messages) > 2
            or (len(messages) == 2 and messages[0]["role"] != "system")
        ):
            raise NotOneRound(f"{task_name} {cell}: its requests are not a system and a user message")
        slot = json.dumps(request.slot)
        rows.append(
            {
                "cell": f"{task_name}/{cell.subset}/{cell.protocol}",
                "selection": key,
                "request": f"{request.doc_id}:{slot}",
                "doc_id": request.doc_id,
                "doc_index": request.doc_index,
                "slot": slot,
                "system": messages[0]["content"] if len(messages) == 2 else "",
                "prompt": messages[-1]["content"],
                "messages": json.dumps(messages, ensure_ascii=False),
            }
        )
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    data = buffer.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def _card(record: Mapping[str, Any]) -> str:
    """The rows folder's card: one `datasets` config per exported cell (what lighteval loads)."""
    import yaml

    configs = [
        {"config_name": cell["name"], "data_files": [{"split": "test", "path": cell["file"]}]}
        for cell in record["cells"]
    ]
    header = yaml.safe_dump({"configs": configs}, sort_keys=False)
    return (
        f"---\n{header}---\n\n# perrecbench harness rows\n\nRequest rows written by `perrecbench export "
        f"{record['harness']}`: one config per cell, each row one chat request (`system`, `prompt`) as "
        "`perrecbench evaluate` sends it. The rows hold no answer; `export.json` says what they come from.\n"
    )


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("perrecbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def is_export_file(path: PurePosixPath) -> bool:
    """Whether a path in an export's rows folder is one an export writes."""
    return str(path) in (EXPORT_FILE, "README.md") or (
        path.parts[:1] == (ROWS,) and path.suffix == ".parquet"
    )


def read_export(folder: str | Path) -> dict[str, Any]:
    """export.json of an export folder, checked (`check_export`): what its hooks serve."""
    return _checked(str(Path(folder).resolve()))


@functools.cache
def _checked(folder: str) -> dict[str, Any]:
    record = _record(Path(folder))
    check_export(record, folder)
    return record


def _record(folder: Path) -> dict[str, Any]:
    path = folder / EXPORT_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise DataError(f"{path} is missing or damaged: run `perrecbench export` again") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise DataError(
            f"{path} was written by another perrecbench (schema {record.get('schema')!r}, this one reads "
            f"{SCHEMA}): run `perrecbench export` again"
        )
    return record


def check_export(record: Mapping[str, Any], where: str) -> None:
    """Refuse an export whose rows this perrecbench would no longer render so: a prompt file changed since
    (its sha256), or a build changed or gone (its fingerprint).

    Raises:
        DataError: the first difference, and the fix (export again).
    """
    from perrec_eval.evaluation import fingerprint

    again = "run `perrecbench export` again to write the tasks with this perrecbench's prompts and builds"
    for task_name, recorded in record["prompt_files"].items():
        now = prompt_files(task_name)
        changed = sorted(name for name in recorded.keys() | now.keys() if recorded.get(name) != now.get(name))
        if changed:
            raise DataError(
                f"{where}: the exported {task_name} tasks were rendered with other prompt files than this "
                f"perrecbench has ({', '.join(changed)} changed since): {again}"
            )
    for selection in {
        json.dumps(c["selection"], sort_keys=True): c["selection"] for c in record["cells"]
    }.values():
        data = Path(selection["data"])
        if not data.is_dir():
            raise DataError(
                f"{where}: the build {selection['source']} the tasks were exported from is gone: {again}"
            )
        if fingerprint(str(data)) != selection["fingerprint"]:
            raise DataError(
                f"{where}: the build {selection['source']} changed since the export (its manifest): {again}"
            )


def rows_of(folder: str | Path, name: str) -> Any:
    """The rows of an exported cell (by its harness name) as a `datasets.Dataset`, checked first."""
    import datasets
    import pyarrow.parquet as pq

    record = read_export(folder)
    cell = next((c for c in record["cells"] if c["name"] == name), None)
    if cell is None:
        raise DataError(f"{folder} exports no cell {name!r}: run `perrecbench export` again")
    path = Path(folder) / cell["file"]
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != cell["sha256"]:
        raise DataError(f"{path} is not the file the export wrote: run `perrecbench export` again")
    return datasets.Dataset(pq.read_table(io.BytesIO(data)))
