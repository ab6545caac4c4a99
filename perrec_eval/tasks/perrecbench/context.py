"""Groups as the prompts see them: load a level, retrieve each user's history, attach profiles.

This is the runner's boundary with the dataset: rows become `records.Group` here (and only here), with the
untitled-item rule applied once (see `perrec_eval.tasks.perrecbench.records`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.registry import DEFAULT_TASK
from perrec_eval.tasks.perrecbench.records import Group, UserKey, UserView
from perrec_eval.tasks.perrecbench.retrieval import Retrieved

BATCH_GROUPS = 256  # rows turned into Python records at a time (the builder writes row groups of 256)


def load_groups(
    data: str | os.PathLike,
    level: str,
    split: str = "test",
    max_groups: int | None = None,
    *,
    seed: int = 0,
    history: bool = True,
) -> list[Group]:
    """The groups of one level of a built benchmark folder (or Hub id), in dataset order.

    Args:
        data: a folder written by `perrecbench build`, or a Hub dataset id.
        level: easy, medium, hard (or full).
        split: test or train.
        max_groups: keep a seeded sample of N groups, as even across domains as they allow
            (`sample_groups`); the same query items at every level.
        seed: the sample's seed.
        history: read the users' histories too. Without them (``history=False``: every user's `history`
            is empty and `untitled` 0) a group is a few hundred bytes instead of ~100 KB on a large build;
            a step that needs the histories reads them batch by batch with `stream_groups`.

    Raises:
        DataError: the folder does not exist, or the level or split cannot be loaded; the message names
            the build command.
    """
    groups = [
        group
        for batch in level_batches(data, level, split, history=history)
        for group in _groups(batch)
    ]
    return groups if max_groups is None else sample_groups(groups, max_groups, seed)


def stream_groups(
    data: str | os.PathLike,
    level: str,
    split: str = "test",
    *,
    ids: Iterable[str] | None = None,
    domain: str | None = None,
) -> Iterator[list[Group]]:
    """The groups of one level with their histories, `BATCH_GROUPS` rows at a time, in dataset order:
    only those whose id is in `ids` (all when None) and, with `domain`, of that domain. Each batch's records
    are the caller's to drop: nothing is kept here between batches."""
    for batch in _chosen_batches(data, level, split, ids, domain):
        yield _groups(batch)


def stream_histories(
    data: str | os.PathLike,
    level: str,
    split: str = "test",
    *,
    ids: Iterable[str] | None = None,
    domain: str | None = None,
) -> Iterator[Histories]:
    """The groups `stream_groups` gives, as their users' histories only (`Histories`: columns, no record
    per item), a batch at a time."""
    for batch in _chosen_batches(data, level, split, ids, domain):
        yield Histories.of_batch(batch)


def _chosen_batches(
    data: str | os.PathLike, level: str, split: str, ids: Iterable[str] | None, domain: str | None
) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = None if ids is None else pa.array(list(ids), type=pa.string())
    for batch in level_batches(data, level, split, domain=domain):
        if wanted is not None:
            batch = batch.filter(pc.is_in(batch.column("group_id"), value_set=wanted))
        if domain is not None:
            batch = batch.filter(pc.equal(batch.column("domain"), domain))
        if batch.num_rows:
            yield batch


@dataclass(frozen=True, slots=True)
class Histories:
    """Some groups' users' histories as columns: each kept item's ``parent_asin`` and rating, with the
    number of users of each group and of kept items of each user (groups, users and items in dataset
    order). Items are kept as `records.User` keeps them (those with a title), so these are the histories
    of the groups' records, without a Python object per item (what the CF baselines read)."""

    group_ids: list[str]
    users: Any  # numpy int64: users per group
    lengths: Any  # numpy int64: kept history items per user
    items: Any  # pyarrow string array: each item's parent_asin (null: none)
    ratings: Any  # numpy float64

    @classmethod
    def of_groups(cls, groups: Sequence[Group]) -> Histories:
        """The histories of these records."""
        import numpy as np
        import pyarrow as pa

        users = [user for group in groups for user in group.users]
        return cls(
            group_ids=[group.group_id for group in groups],
            users=np.array([len(group.users) for group in groups], dtype=np.int64),
            lengths=np.array([len(user.history) for user in users], dtype=np.int64),
            items=pa.array([h.parent_asin for user in users for h in user.history], type=pa.string()),
            ratings=np.array([h.rating for user in users for h in user.history], dtype=np.float64),
        )

    @classmethod
    def of_batch(cls, batch: Any) -> Histories:
        """The histories of a batch of rows (a pyarrow RecordBatch of a level's file)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        users = batch.column("users")
        flat = users.flatten()  # one struct per user
        history = pc.struct_field(flat, "history")
        items = history.flatten()  # one struct per history item
        titled = pc.fill_null(pc.greater(pc.binary_length(pc.struct_field(items, "title")), 0), False)
        per_user = pc.fill_null(pc.list_value_length(history), 0).to_numpy()
        keep = titled.to_numpy(zero_copy_only=False)
        owner = np.repeat(np.arange(len(per_user)), per_user)
        return cls(
            group_ids=batch.column("group_id").to_pylist(),
            users=pc.fill_null(pc.list_value_length(users), 0).to_numpy().astype(np.int64),
            lengths=np.bincount(owner[keep], minlength=len(per_user)).astype(np.int64),
            items=pc.struct_field(items, "parent_asin").filter(titled),
            ratings=pc.struct_field(items, "rating").filter(titled).cast(pa.float64()).to_numpy(),
        )


def retrieve_streamed(
    data: str | os.PathLike,
    split: str,
    groups: Mapping[str, Sequence[Group]],
    k: int,
    *,
    sampled: bool,
) -> Iterator[tuple[str, list[Group], dict[UserKey, list[Retrieved]]]]:
    """Each level's `groups` read again with their histories, a batch at a time, with every user's retrieved
    history: (level, batch, retrieved). Retrieval results are kept only for groups met at several levels.

    Args:
        groups: the groups of each level (their histories are not read from them).
        sampled: `groups` are a sample of each level (read only those ids), not all of its groups.
    """
    from collections import Counter

    from perrec_eval import progress
    from perrec_eval.tasks.perrecbench import retrieval

    counts = Counter(g.group_id for level in groups.values() for g in level)
    shared = {gid for gid, count in counts.items() if count > 1}  # met again at another level
    memo: dict = {}
    users = sum(len(g.users) for level in groups.values() for g in level)
    with progress.bar(total=users, desc="retrieval", unit="user") as bar:
        for level, members in groups.items():
            ids = [g.group_id for g in members] if sampled else None
            for batch in stream_groups(data, level, split, ids=ids):
                yield level, batch, retrieval.retrieve_groups(batch, k, memo=memo, keep=shared, bar=bar)


def _groups(batch) -> list[Group]:  # noqa: ANN001 - a pyarrow RecordBatch
    return [Group.from_row(row) for row in batch.to_pylist()]


def level_batches(
    data: str | os.PathLike,
    level: str,
    split: str,
    *,
    history: bool = True,
    domain: str | None = None,
) -> Iterator[Any]:
    """The rows of (level, split) as Arrow record batches of at most `BATCH_GROUPS` rows, in dataset order.

    A local build is read from the parquet files its card lists for (level, split) (what `datasets` would
    read; row group by row group, so memory follows a batch, not the file); anything else (a Hub id, a card
    whose files are not plain local paths) through `datasets`. Without `history` the users' histories are
    left out of each batch; with `domain`, row groups whose statistics show no row of that domain are
    skipped (a batch may still hold other domains' rows: filter them).

    Raises:
        DataError: as `load_groups`.
    """
    check_data(data)
    check_data_files(data, level, split)
    files = _card_files(data, level, split)
    if files is None:
        for batch in _dataset_batches(data, level, split):
            yield batch if history else _without_history(batch)
    else:
        yield from _parquet_batches(files, domain, history, lambda err: _damaged(data, level, split, err))


def _card_files(data: str | os.PathLike, level: str, split: str) -> list[Path] | None:
    """The local data files the card's `configs:` list for (level, split), or None (not a local folder, not
    listed, or not plain file paths: `datasets` resolves those)."""
    folder = Path(data)
    if not folder.is_dir():
        return None
    from huggingface_hub.repocard import metadata_load

    try:
        configs = (metadata_load(folder / "README.md") or {}).get("configs") or []
    except Exception:  # an unreadable card: datasets reports it in its own words
        return None
    for config in configs:
        if not isinstance(config, dict) or config.get("config_name") != level:
            continue
        for entry in config.get("data_files") or []:
            if isinstance(entry, dict) and entry.get("split") == split:
                paths = entry.get("path")
                paths = [paths] if isinstance(paths, str) else paths
                if not isinstance(paths, list) or not paths:
                    return None
                files = [folder / str(path) for path in paths]
                return files if all(file.is_file() and file.suffix == ".parquet" for file in files) else None
    return None


def _damaged(data: str | os.PathLike, level: str, split: str, err: BaseException) -> DataError:
    return DataError(
        f"cannot read level {level!r} split {split!r} of {data} ({type(err).__name__}: "
        f"{' '.join(str(err).split())[:200]}): a data file is damaged; rebuild the benchmark with "
        "`perrecbench build --overwrite`, or copy the whole folder again"
    )


def _parquet_batches(
    files: Sequence[Path], domain: str | None, history: bool, damaged: Callable[[BaseException], DataError]
) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in files:
        try:
            reader = pq.ParquetFile(path)
            groups = [i for i in range(reader.num_row_groups) if _may_hold(reader, i, domain)]
            # Without histories their columns are not even decoded (~90% of a file).
            paths = [reader.schema.column(i).path for i in range(len(reader.schema))]
            columns = None if history else [path for path in paths if not _in_history(path)]
            batches = reader.iter_batches(
                batch_size=BATCH_GROUPS, row_groups=groups, columns=columns, use_threads=False
            )
            yield from batches
        except (pa.ArrowException, OSError) as err:
            raise damaged(err) from err


def _in_history(column: str) -> bool:
    """Whether a parquet leaf column (``users.list.element.history.list.element.title``) is a history's."""
    parts = column.split(".")
    return parts[0] == "users" and "history" in parts


def _may_hold(reader: Any, row_group: int, domain: str | None) -> bool:
    """Whether a row group may hold rows of `domain` (by its min/max statistics; True when unknown)."""
    if domain is None:
        return True
    meta = reader.metadata.row_group(row_group)
    for i in range(meta.num_columns):
        column = meta.column(i)
        if column.path_in_schema == "domain":
            stats = column.statistics
            if stats is None or not stats.has_min_max:
                return True
            return stats.min <= domain <= stats.max
    return True


def _dataset_batches(data: str | os.PathLike, level: str, split: str) -> Iterator[Any]:
    import datasets

    try:
        ds = datasets.load_dataset(str(data), level, split=split)
    except datasets.exceptions.DatasetGenerationError as err:
        raise _damaged(data, level, split, err.__cause__ or err) from err
    except (ValueError, FileNotFoundError) as err:
        raise DataError(
            f"cannot load level {level!r} split {split!r} from {data}: {err}. Build the benchmark with "
            "`perrecbench build --source RAW --out DIR` and pass that DIR as --data"
        ) from err
    yield from ds.data.table.to_batches(max_chunksize=BATCH_GROUPS)


def _without_history(batch: Any) -> Any:
    """`batch` with its users' `history` field left out (no history row is converted to Python)."""
    import pyarrow as pa

    users = batch.column("users")
    kept = [field for field in users.type.value_type if field.name != "history"]
    fields = dict(zip(users.type.value_type.names, users.values.flatten(), strict=True))
    slim = pa.StructArray.from_arrays([fields[field.name] for field in kept], fields=kept)
    return batch.set_column(
        batch.schema.get_field_index("users"), "users", pa.ListArray.from_arrays(users.offsets, slim)
    )


def check_data(data: str | os.PathLike) -> None:
    """Fail at once, naming the fix, when `data` looks like a local path but is not there.

    A Hub id is ``ORG/NAME``; anything else that does not exist (an absolute or ``./`` path, a path whose
    parent folder exists here, more than one ``/``), or any missing path while the Hub is offline, is a
    mistyped folder: without this check `datasets` would spend half a minute on Hub retries first.
    """
    text = str(data)
    if not text.strip():
        raise DataError("--data is empty: pass the folder `perrecbench build --out DIR` wrote (or a Hub id)")
    path = Path(data)
    if path.exists():
        if not (path / "README.md").is_file():  # the card's `configs:` name the levels' data files
            raise DataError(
                f"--data {text} is not a benchmark folder (no README.md listing its levels): pass the folder "
                "`perrecbench build --out DIR` wrote"
            )
        return
    hub_like = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not path.parent.is_dir()
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("", "0", "false", "no")
    if hub_like and not offline:
        return
    if hub_like:
        raise DataError(
            f"--data {text}: no such folder, and the Hub dataset {text} cannot be loaded: offline mode is on "
            "(HF_HUB_OFFLINE); unset HF_HUB_OFFLINE to load it from the Hub, or pass a local benchmark folder"
        )
    raise DataError(
        f"--data {text}: no such folder; build the benchmark with "
        f"`perrecbench build --source RAW --out {text}` (or pass an existing folder or Hub id ORG/NAME)"
    )


def check_data_files(data: str | os.PathLike, level: str, split: str) -> None:
    """Fail when a local benchmark's data files of (level, split) are not the ones the build wrote
    (`dataset_builder.manifest.check_files`, for the file this level and split read), or the folder is
    another family's build.

    Raises:
        DataError: the file is missing or changed since the build, or the build is another family's.
    """
    from dataset_builder.manifest import check_files, read_manifest

    folder = Path(data)
    recorded = read_manifest(folder)  # a local folder without one is refused
    if recorded is None:
        return
    try:
        family = recorded.get("task", DEFAULT_TASK)
        listed = recorded.get("outputs", {}).get(level, {}).get(split)
    except AttributeError as err:
        raise DataError(
            f"{folder / 'manifest.json'} is not the JSON object the build writes ({err}): rebuild the "
            "benchmark with `perrecbench build --overwrite`"
        ) from err
    if family != DEFAULT_TASK:
        raise DataError(f"{data} is a {family} build: pass --task {family}")
    if isinstance(listed, str):
        check_files(folder, [listed])


def sample_groups(groups: Sequence[Group], n: int, seed: int) -> list[Group]:
    """A seeded sample of `n` groups, spread over the domains as evenly as they allow, in input order.

    Each domain's groups are ranked by a hash of (seed, group_id), so the same query items are picked at
    every level (levels share group ids); the domains take turns until `n` are chosen.

    >>> from dataclasses import replace
    >>> base = Group("x", "A", "easy", None, 0, ())
    >>> groups = [replace(base, group_id=f"{d}:{i}", domain=d) for d in "AB" for i in range(5)] + [
    ...     replace(base, group_id="C:0", domain="C")]
    >>> sorted(g.domain for g in sample_groups(groups, 5, seed=0))
    ['A', 'A', 'B', 'B', 'C']
    """
    by_domain: dict[str, list[Group]] = {}
    for group in groups:
        by_domain.setdefault(group.domain, []).append(group)
    queues = {
        domain: sorted(members, key=lambda g: hashlib.sha256(f"{seed}:{g.group_id}".encode()).digest())
        for domain, members in sorted(by_domain.items())
    }
    chosen: set[str] = set()
    while len(chosen) < min(n, len(groups)):
        for queue in queues.values():
            if queue and len(chosen) < n:
                chosen.add(queue.pop(0).group_id)
    return [group for group in groups if group.group_id in chosen]


def dataset_fingerprint(data: str | os.PathLike) -> str:
    """The build's fingerprint, computed from its files (`dataset_builder.manifest.fingerprint`: every
    level's and split's file is checked).

    The interactions of ``build --with-interactions`` (for the CF baselines) leave the groups unchanged, so
    they are taken out first: the same build with and without them has one fingerprint, and the CF
    baselines' runs compare with LLM runs made on a build without them.
    """
    from dataset_builder import manifest

    recorded = manifest.read_manifest(Path(data))
    groups = manifest.data_files({"outputs": recorded.get("outputs")}) if recorded is not None else None

    def without_interactions(content: dict) -> bool:
        if "interactions" not in content:
            return False
        content.pop("interactions")
        parameters = content.get("parameters")
        if isinstance(parameters, dict):
            parameters.pop("with_interactions", None)
        return True

    return manifest.fingerprint(data, groups, leave_out=without_interactions)


@dataclass(frozen=True, slots=True)
class GroupContext:
    """A group as the prompts see it: the query, each user's retrieved history and profile, and the order
    a listwise prompt shows the users in (`presentation`; None: the dataset's order)."""

    group: Group
    level: str
    views: tuple[UserView, ...]
    listwise_order: tuple[int, ...] | None = None

    @property
    def group_id(self) -> str:
        return self.group.group_id


def user_views(
    group: Group,
    retrieved: Mapping[UserKey, Sequence[Retrieved]],
    profiles: Mapping[UserKey, str] | None,
    profile_failures: Mapping[UserKey, str] | None = None,
) -> tuple[UserView, ...]:
    """Per user, what a prompt shows: retrieved history best first, ratings summary, profile.

    With `profiles` None the prompts show none; a user without one gets `profile_error` (the reason from
    `profile_failures`), so the requests that need it fail as engine errors instead of being rendered.
    """
    views = []
    for user in group.users:
        key = (group.group_id, user.user_id)
        profile = None if profiles is None else profiles.get(key)
        error = None
        if profiles is not None and not profile:
            error = (profile_failures or {}).get(key, "no profile was written for this user")
        views.append(
            UserView(
                history=tuple(user.history[hit.index] for hit in retrieved[key]),
                most_common_rating=user.most_common_rating,
                avg_rating=user.avg_rating,
                profile=profile,
                profile_error=error,
            )
        )
    return tuple(views)


def contexts(
    groups: Sequence[Group],
    level: str,
    retrieved: Mapping[UserKey, Sequence[Retrieved]],
    profiles: Mapping[UserKey, str] | None,
    profile_failures: Mapping[UserKey, str] | None = None,
    *,
    listwise_orders: Mapping[str, tuple[int, ...]] | None = None,
) -> list[GroupContext]:
    """`GroupContext` of every group of one level; `listwise_orders` by group id (None: dataset order)."""
    return [
        GroupContext(
            group,
            level,
            user_views(group, retrieved, profiles, profile_failures),
            None if listwise_orders is None else listwise_orders[group.group_id],
        )
        for group in groups
    ]


@dataclass(frozen=True, slots=True)
class TestLabels:
    """The test split's labels: every (user_id, query parent_asin) whose rating a test group asks for.

    Held-out groups shown to a model (few-shot demonstrations, `sft data` examples) must show none of them,
    whatever split rule the benchmark was built with (``--split-rule none`` keeps test ratings in train
    histories): a group that shows one, as one of its users' query review or in a history, is left out.

    >>> from perrec_eval.tasks.perrecbench.records import HistoryItem, Query, User
    >>> item = HistoryItem("q1", "Dune", None, 5.0, 1)
    >>> user = User("u", 4.0, 2, 3.0, 3.0, 1.0, (item,))
    >>> group = Group("g", "Books", "easy", Query("q2", "Emma"), 0, (user,))
    >>> TestLabels(frozenset({("u", "q1")})).shows(group), TestLabels(frozenset({("v", "q1")})).shows(group)
    (True, False)
    """

    __test__ = False  # not a pytest test class, despite its name

    pairs: frozenset[tuple[str, str]]
    group_ids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, test_groups: Iterable[Group]) -> TestLabels:
        """The labels of `test_groups` (load the ``full`` level: every test user)."""
        test_groups = list(test_groups)
        return cls(
            frozenset((user.user_id, g.query.parent_asin) for g in test_groups for user in g.users),
            frozenset(g.group_id for g in test_groups),
        )

    def shows(self, group: Group) -> bool:
        """Whether `group` shows a test label: one of its users' query review or a history item."""
        for user in group.users:
            if (user.user_id, group.query.parent_asin) in self.pairs:
                return True
            if any((user.user_id, item.parent_asin) in self.pairs for item in user.history):
                return True
        return False

    def without_leaks(self, groups: Sequence[Group]) -> list[Group]:
        """`groups` minus the test groups themselves and the groups that show a test label, in order."""
        return [g for g in groups if g.group_id not in self.group_ids and not self.shows(g)]
