"""The benchmark's statistics: the paper's Table 4 per split and domain, the Figure 5 distributions, the
neutrality of the group choice (chosen users against every candidate of the chosen windows) and the split's
leak counts, measured on the rows written (:class:`SplitFigures` and :class:`LeakCounts` are fed the same
Arrow batches as the parquet writers, so the files are never read back)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dataset_builder.perrecbench.config import BuildConfig

if TYPE_CHECKING:
    from dataset_builder.perrecbench.splits import Split

# Figure 5 bins. Relative ratings: half-point bins; history lengths: a long tail, so widening bins.
REL_EDGES: tuple[float, ...] = tuple(x / 2 for x in range(-8, 9))
HISTORY_EDGES: tuple[int, ...] = (0, 21, 31, 51, 101, 201, 501, 1001)


def _date(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def bin_label(value: float, edges: Sequence[float]) -> str:
    """The ``[low, high)`` bin of ``value``; values past the ends go to the outermost bins.

    >>> bin_label(0.2, REL_EDGES)
    '[0.0, 0.5)'
    >>> bin_label(650, HISTORY_EDGES)
    '[501, 1001)'
    >>> bin_label(5000, HISTORY_EDGES)
    '>=1001'
    """
    if value < edges[0]:
        return f"<{edges[0]}"
    for low, high in zip(edges, edges[1:], strict=False):
        if value < high:
            return f"[{low}, {high})"
    return f">={edges[-1]}"


def table4(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Table 4 figures for groups of the ``full`` config.

    ``tokens`` counts whitespace-separated words of the history and query titles (the paper does not say
    which tokenizer it used).

    >>> row = {"group_id": "B:q", "query": {"parent_asin": "q", "title": "A B"}, "users": [
    ...     {"user_id": "u", "timestamp": 0, "history": [{"title": "C D E"}]}]}
    >>> table4([row])["tokens"], table4([row])["rating_history"]
    (5, 1)
    """
    users: set[str] = set()
    items: set[str] = set()
    groups: set[str] = set()
    reviews = history = tokens = 0
    times: list[int] = []
    for row in rows:
        items.add(row["query"]["parent_asin"])
        groups.add(row["group_id"])
        for user in row["users"]:
            users.add(user["user_id"])
            reviews += 1
            history += len(user["history"])
            times.append(user["timestamp"])
            tokens += sum(len((h["title"] or "").split()) for h in user["history"])
            tokens += len((row["query"]["title"] or "").split())
    return {
        "groups": len(groups),
        "reviews": reviews,
        "users": len(users),
        "query_items": len(items),
        "rating_history": history,
        "tokens": tokens,
        "time_range": [_date(min(times)), _date(max(times))] if times else None,
    }


def distributions(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Figure 5: actual rating, relative rating, history length and query-review year, as counts."""
    rating: Counter[str] = Counter()
    rel: Counter[str] = Counter()
    length: Counter[str] = Counter()
    year: Counter[str] = Counter()
    for row in rows:
        for user in row["users"]:
            rating[f"{user['rating']:.1f}"] += 1
            rel[bin_label(user["relative_rating"], REL_EDGES)] += 1
            length[bin_label(len(user["history"]), HISTORY_EDGES)] += 1
            year[_date(user["timestamp"])[:4]] += 1
    return _figure5(rating, rel, length, year)


def _figure5(
    rating: Counter[str], rel: Counter[str], length: Counter[str], year: Counter[str]
) -> dict[str, dict[str, int]]:
    """The distributions in the order of ``stats.json``: values sorted, bins in bin order."""
    return {
        "rating": dict(sorted(rating.items())),
        "relative_rating": _ordered(rel, REL_EDGES),
        "history_length": _ordered(length, HISTORY_EDGES),
        "query_year": dict(sorted(year.items())),
    }


def _ordered(counts: Counter[str], edges: Sequence[float]) -> dict[str, int]:
    labels = [f"<{edges[0]}"] + [f"[{a}, {b})" for a, b in zip(edges, edges[1:], strict=False)]
    labels.append(f">={edges[-1]}")
    return {label: counts[label] for label in labels if counts[label]}


def rel_figures(users: int, rel_sum: float, negatives: int) -> dict[str, Any]:
    """How many users, their mean relative rating and the share below 0 (rounded for reading).

    >>> rel_figures(4, -1.0, 3)
    {'users': 4, 'mean_relative_rating': -0.25, 'negative_share': 0.75}
    """
    if not users:
        return {"users": 0, "mean_relative_rating": None, "negative_share": None}
    return {
        "users": users,
        "mean_relative_rating": round(rel_sum / users, 4),
        "negative_share": round(negatives / users, 4),
    }


def candidate_figures(index: pa.Table, prefix: str) -> dict[str, Any]:
    """:func:`rel_figures` of the candidates of the groups in ``index`` (rows of
    :data:`dataset_builder.perrecbench.selection.INDEX_SCHEMA`): those of the chosen windows
    (``prefix="window"``) or all the items' active candidates (``"item"``)."""

    def total(name: str) -> Any:
        return pc.sum(index.column(f"{prefix}_{name}")).as_py() or 0

    return rel_figures(total("candidates"), total("rel_sum"), total("negatives"))


def compute(
    cfg: BuildConfig,
    index: pa.Table,
    level_splits: Mapping[str, Split],
    split: Split,
    figures: Mapping[str, SplitFigures],
    leaks: Mapping[str, LeakCounts],
    funnel: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """The content of a build's ``stats.json``, from figures accumulated over the written ``full`` rows.

    Args:
        cfg: the build parameters.
        index: the group index (:data:`dataset_builder.perrecbench.selection.INDEX_SCHEMA`).
        level_splits: the split of each group set (``full``, or each level of the large preset).
        split: their union.
        figures: per split (``test``, ``train`` if any), fed with every ``full`` row written to it.
        leaks: per group set, fed with its rows written.
        funnel: per domain, how many reviews/items each selection criterion kept.

    Returns:
        Table 4 per split (overall and per domain), Figure 5 distributions per split, the choice's
        neutrality per split, the funnel, the split with its leak counts, and (unless the build writes the
        earlier files) the resolution per level and the twins removed.
    """
    splits = split.as_dict()
    out: dict[str, Any] = {"splits": {}, "selection": funnel}
    for name, ids in splits.items():
        windows = index.filter(pc.is_in(index["group_id"], pa.array(ids)))
        out["splits"][name] = figures[name].result()
        out["splits"][name]["choice"]["window_candidates"] = candidate_figures(windows, "window")
        out["splits"][name]["choice"]["item_candidates"] = candidate_figures(windows, "item")
    if cfg.preset == "paper":
        out["split"] = {**split_counts(split, cfg), "leaks": leaks["full"].result()}
    else:
        levels = {
            name: {**split_counts(s, cfg), "leaks": leaks[name].result()} for name, s in level_splits.items()
        }
        out["split"] = {"rule": cfg.split_rule, "levels": levels}
    if not cfg.paper_files:
        out["resolution"] = resolution(index, splits, cfg.level_sizes(), cfg.preset)
        if not cfg.keep_twins:
            written = index.filter(
                pc.is_in(index["group_id"], pa.array(split.test + split.train, pa.string()))
            )
            out["twins"] = twin_counts(written, cfg.domains)
    return out


def split_counts(split: Split, cfg: BuildConfig) -> dict[str, Any]:
    """The rule and how many groups each domain has in test, in train and dropped from train."""

    def per_domain(ids: list[str]) -> dict[str, int]:
        counts = Counter(gid.split(":", 1)[0] for gid in ids)
        return {domain: counts[domain] for domain in cfg.domains}

    return {
        "rule": cfg.split_rule,
        "test_groups_per_domain": per_domain(split.test),
        "train_groups_per_domain": per_domain(split.train),
        "train_groups_dropped": len(split.dropped),
        "train_groups_dropped_per_domain": per_domain(split.dropped),
    }


def test_members(index: pa.Table, test: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(domain, user_id, query item)`` of every member of the ``test`` groups, from the group index."""
    rows = index.filter(pc.is_in(index["group_id"], pa.array(test, pa.string())))
    columns = rows.select(["parent_asin", "domain", "user_ids"]).to_pydict()
    return [
        (domain, user, item) for item, domain, users in zip(*columns.values(), strict=True) for user in users
    ]


def resolution(
    index: pa.Table, splits: Mapping[str, Sequence[str]], levels: Mapping[str, int], preset: str
) -> dict[str, Any]:
    """Per level and split: the groups, their query items, and the resolution a PTC cell of that size can
    have (:func:`perrec_eval.ptc.expected_resolution`: expected 95% CI half-width and minimum detectable
    paired difference at 80% power, planning variance of a system that knows nothing).

    Groups of one query item (the large preset draws several per item) may be correlated. With ``m_i``
    groups of item ``i`` the design effect is ``1 + (m̄ - 1) ρ`` with ``m̄ = Σ m_i² / Σ m_i`` and ``ρ`` the
    unknown within-item correlation of the taus; ``design_effect`` is its upper bound ``m̄`` (ρ = 1), and
    the ``*_bound`` figures use it: the truth lies between the two sets of figures.

    Args:
        index: the group index (:data:`dataset_builder.perrecbench.selection.INDEX_SCHEMA`).
        splits: group ids per split.
        levels: users per group of each level.
        preset: ``paper`` (every group gives every level) or ``large`` (each group is one level's).

    >>> t = pa.table({"group_id": ["a", "b", "c"], "level": ["easy"] * 3, "parent_asin": ["i", "i", "j"]})
    >>> r = resolution(t, {"test": ["a", "b", "c"]}, {"easy": 2}, "large")["easy"]["test"]
    >>> r["groups"], r["query_items"], r["design_effect"]
    (3, 2, 1.6667)
    """
    from perrec_eval.stats import design_effect

    out: dict[str, Any] = {}
    for level, size in levels.items():
        rows = index if preset == "paper" else index.filter(pc.equal(index["level"], level))
        out[level] = {}
        for name, ids in splits.items():
            part = rows.filter(pc.is_in(rows["group_id"], pa.array(list(ids), pa.string())))
            if not part.num_rows:
                continue
            items = part.column("parent_asin").to_pylist()
            out[level][name] = resolution_entry(size, part.num_rows, len(set(items)), design_effect(items))
    return out


def resolution_entry(size: int, groups: int, items: int, design_effect: float) -> dict[str, Any]:
    """One cell's figures: :func:`perrec_eval.ptc.expected_resolution` without and with the design effect.

    >>> resolution_entry(2, 200, 200, 1.0)["half_width"]
    0.1386
    """
    from perrec_eval.ptc import expected_resolution

    plain = expected_resolution(size, groups)
    bound = expected_resolution(size, groups, design_effect=design_effect)
    return {
        "groups": groups,
        "query_items": items,
        "design_effect": round(design_effect, 4),
        "half_width": round(plain["half_width"], 4),
        "min_detectable_difference": round(plain["min_detectable_difference"], 4),
        "half_width_bound": round(bound["half_width"], 4),
        "min_detectable_difference_bound": round(bound["min_detectable_difference"], 4),
    }


def twin_counts(index: pa.Table, domains: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per domain, over the groups written: history rows removed as twins of the query item, members
    (group slots) that had one, and groups that had one.

    >>> t = pa.table({"domain": ["B", "B"], "twins_removed": [2, 0], "twin_users": [1, 0]})
    >>> twin_counts(t, ["B"])
    {'B': {'history_rows_removed': 2, 'members_affected': 1, 'groups_affected': 1}}
    """
    columns = index.select(["domain", "twins_removed", "twin_users"]).to_pydict()
    out = {d: {"history_rows_removed": 0, "members_affected": 0, "groups_affected": 0} for d in domains}
    for domain, removed, users in zip(*columns.values(), strict=True):
        out[domain]["history_rows_removed"] += removed
        out[domain]["members_affected"] += users
        out[domain]["groups_affected"] += removed > 0
    return out


@dataclass(slots=True)
class _DomainFigures:
    """Running Table 4 sums of one domain of one split."""

    items: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)  # as many as items, but for the large preset
    users: set[str] = field(default_factory=set)
    reviews: int = 0
    history: int = 0
    titles: list[pa.StructArray] = field(default_factory=list)  # (values, counts) of title counts
    first: int | None = None  # earliest and latest query review so far
    last: int | None = None

    def merge_titles(self) -> None:
        """Sum the title counts into one (values, counts) array (bounds memory by the distinct titles)."""
        if len(self.titles) < 2:
            return
        counts = pa.Table.from_struct_array(pa.chunked_array(self.titles))
        total = counts.group_by("values", use_threads=False).aggregate([("counts", "sum")])
        columns = [total.column(name).combine_chunks() for name in ("values", "counts_sum")]
        self.titles = [pa.StructArray.from_arrays(columns, ["values", "counts"])]

    def tokens(self) -> int:
        """Whitespace-separated words of every title counted (Python's ``str.split``, as :func:`table4`)."""
        if not self.titles:
            return 0
        self.merge_titles()
        counts = self.titles[0]
        values, ns = counts.field("values").to_pylist(), counts.field("counts").to_pylist()
        return sum(len((title or "").split()) * n for title, n in zip(values, ns, strict=True))


_MERGE_TITLES = 16  # batches of title counts summed at once


class SplitFigures:
    """Table 4 (per domain and overall), Figure 5 and the chosen users' relative ratings of one split,
    accumulated from its ``full`` rows batch by batch, equal to :func:`table4` and :func:`distributions`
    over all the rows.

    History rows stay in Arrow: their titles are counted per distinct value (Arrow ``value_counts``, summed
    every few batches) and each distinct title is split once at the end (Python's ``str.split``, as in
    :func:`table4`). What is kept grows with the users, items and titles of the split, not with histories.

    >>> rows = [{"group_id": "B:q", "domain": "B", "level": "full", "window_start": 0,
    ...     "query": {"parent_asin": "q", "title": "A B"}, "users": [{"user_id": "u", "timestamp": 0,
    ...     "rating": 5.0, "relative_rating": 0.5, "history": [{"title": "C D E"}]}]}]
    >>> figures = SplitFigures(["B"])
    >>> figures.add(pa.Table.from_pylist(rows))
    >>> figures.result()["all"] == table4(rows)
    True
    """

    def __init__(self, domains: Sequence[str]) -> None:
        self._domains = {domain: _DomainFigures() for domain in domains}
        self._rating: Counter[str] = Counter()
        self._rel: Counter[str] = Counter()
        self._length: Counter[str] = Counter()
        self._year: Counter[str] = Counter()
        self._rels: list[float] = []

    def add(self, table: pa.Table) -> None:
        """Count rows of the split (any batching gives the same result)."""
        for batch in table.to_batches():
            for domain in pc.unique(batch.column("domain")).to_pylist():
                part = batch.filter(pc.equal(batch.column("domain"), domain))
                self._add(self._domains[domain], part)

    def _add(self, figures: _DomainFigures, batch: pa.RecordBatch) -> None:
        users = batch.column("users")
        members = users.flatten()
        query = batch.column("query")
        figures.items.update(query.field("parent_asin").to_pylist())
        figures.groups.update(batch.column("group_id").to_pylist())
        figures.users.update(members.field("user_id").to_pylist())
        figures.reviews += len(members)
        history = members.field("history")
        lengths = pc.list_value_length(history).to_numpy(zero_copy_only=False)
        figures.history += int(lengths.sum())
        # The query title counts once per user (as in table4), next to every history title.
        titles = pa.concat_arrays(
            [history.flatten().field("title"), query.field("title").take(pc.list_parent_indices(users))]
        )
        figures.titles.append(pc.value_counts(titles))
        if len(figures.titles) >= _MERGE_TITLES:
            figures.merge_titles()
        times = members.field("timestamp").to_pylist()
        if times:
            figures.first = min(times) if figures.first is None else min(figures.first, *times)
            figures.last = max(times) if figures.last is None else max(figures.last, *times)
        rels = members.field("relative_rating").to_pylist()
        self._rels.extend(rels)
        for rating, rel, length, timestamp in zip(
            members.field("rating").to_pylist(), rels, lengths.tolist(), times, strict=True
        ):
            self._rating[f"{rating:.1f}"] += 1
            self._rel[bin_label(rel, REL_EDGES)] += 1
            self._length[bin_label(length, HISTORY_EDGES)] += 1
            self._year[_date(timestamp)[:4]] += 1

    def result(self) -> dict[str, Any]:
        """The split's entry of ``stats.json``: ``all``, ``domains``, ``distributions``, ``choice``."""
        negatives = sum(rel < 0 for rel in self._rels)
        return {
            "all": _figures(list(self._domains.values())),
            "domains": {domain: _figures([figures]) for domain, figures in self._domains.items()},
            "distributions": _figure5(self._rating, self._rel, self._length, self._year),
            "choice": {"chosen_users": rel_figures(len(self._rels), math.fsum(self._rels), negatives)},
        }


def _figures(parts: Sequence[_DomainFigures]) -> dict[str, Any]:
    """Table 4 of the union of some domains' rows."""
    reviews = sum(p.reviews for p in parts)
    times = [t for p in parts for t in (p.first, p.last) if t is not None]
    return {
        "groups": len(set().union(*(p.groups for p in parts))),
        "reviews": reviews,
        "users": len(set().union(*(p.users for p in parts))),
        "query_items": len(set().union(*(p.items for p in parts))),
        "rating_history": sum(p.history for p in parts),
        "tokens": sum(p.tokens() for p in parts),
        "time_range": [_date(min(times)), _date(max(times))] if reviews else None,
    }


class LeakCounts:
    """Test (user, query item) reviews found in the train split, counted on the rows written to it.

    The test split's (domain, user, query item) triples are known before any row is written (from the
    group index); the test rows written must hold exactly these (checked by :meth:`result`).

    Args:
        test_members: ``(domain, user_id, parent_asin)`` of every member of every test group.
    """

    def __init__(self, test_members: Iterable[tuple[str, str, str]]) -> None:
        pairs = sorted(set(test_members))
        self._pairs = pa.table(  # typed: no test pair at all (every group in train) is a null-typed column
            {"user_id": [u for _, u, _ in pairs], "item": [i for _, _, i in pairs]},
            schema=pa.schema([("user_id", pa.string()), ("item", pa.string())]),
        )
        self._expected = set(pairs)
        self._written: set[tuple[str, str, str]] = set()
        self._test_users = {(domain, user) for domain, user, _ in pairs}
        self._train_users: set[tuple[str, str]] = set()
        self._as_query = self._in_history = 0

    def add(self, split: str, table: pa.Table) -> None:
        """Count the ``full`` rows written to ``split`` (``test`` rows are only recorded)."""
        for batch in table.to_batches():
            users = batch.column("users")
            members = users.flatten()
            parents = pc.list_parent_indices(users)
            user_ids = members.field("user_id")
            domains = batch.column("domain").take(parents).to_pylist()
            items = batch.column("query").field("parent_asin").take(parents)
            if split == "test":
                self._written.update(zip(domains, user_ids.to_pylist(), items.to_pylist(), strict=True))
                continue
            self._train_users.update(zip(domains, user_ids.to_pylist(), strict=True))
            self._as_query += self._matches(user_ids, items)
            history = members.field("history")
            self._in_history += self._matches(
                user_ids.take(pc.list_parent_indices(history)), history.flatten().field("parent_asin")
            )

    def _matches(self, user_ids: pa.Array, items: pa.Array) -> int:
        """How many (user, item) rows equal a test pair (one count per matching (domain, user, item))."""
        rows = pa.table({"user_id": user_ids, "item": items})
        return rows.join(self._pairs, ["user_id", "item"], join_type="inner").num_rows

    def result(self) -> dict[str, int]:
        """``test_reviews_as_train_queries`` (train members whose (user, query item) is a test one),
        ``test_reviews_in_train_histories`` (train history rows that are a test user's test review) and
        ``train_users_also_in_test`` (distinct (domain, user) pairs in both splits; not a leak by itself)."""
        if self._written != self._expected:
            raise RuntimeError("internal error: the test rows written differ from the test split's groups")
        shared = len(self._train_users & self._test_users)
        return dict(zip(_LEAKS, (self._as_query, self._in_history, shared), strict=True))


_LEAKS = ("test_reviews_as_train_queries", "test_reviews_in_train_histories", "train_users_also_in_test")


def format_table(stats: dict[str, Any]) -> str:
    """A human-readable summary of ``stats.json`` (Table 4 layout plus groups per domain).

    >>> stats = {"splits": {"test": {"all": table4([]), "domains": {"Books": table4([])}}}, "selection": {}}
    >>> format_table(stats).splitlines()[0].split()
    ['Statistic', 'test']
    """
    splits = list(stats["splits"])
    names = {"train": "held-out (train)"}
    header = ["Statistic"] + [names.get(s, s) for s in splits]
    lines = [header]
    for key, label in (
        ("reviews", "# Review"),
        ("users", "# User"),
        ("query_items", "# Query Item"),
        ("rating_history", "# Rating History"),
        ("tokens", "# Token (title words)"),
    ):
        lines.append([label] + [f"{stats['splits'][s]['all'][key]:,}" for s in splits])
    lines.append(
        ["Time Range"] + [" - ".join(stats["splits"][s]["all"]["time_range"] or ["-"]) for s in splits]
    )
    domains = list(next(iter(stats["splits"].values()))["domains"]) if splits else []
    for domain in domains:
        lines.append(
            [f"groups: {domain}"] + [f"{stats['splits'][s]['domains'][domain]['groups']:,}" for s in splits]
        )
    for key, label in _CHOICE_ROWS:
        if not all(key in stats["splits"][s].get("choice", {}) for s in splits):
            continue
        for figure, name in (
            ("mean_relative_rating", "mean rel. rating"),
            ("negative_share", "share rel. < 0"),
        ):
            values = [stats["splits"][s]["choice"][key][figure] for s in splits]
            lines.append([f"{label}: {name}"] + ["-" if v is None else f"{v:.3f}" for v in values])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        for row in lines
    ]
    text = [row.rstrip() for row in text]
    if stats.get("split"):
        text.append("")
        if "levels" in stats["split"]:
            rule = stats["split"]["rule"]
            text += [
                f"{level}: " + split_line({**f, "rule": rule})
                for level, f in stats["split"]["levels"].items()
            ]
        else:
            text.append(split_line(stats["split"]))
    if stats.get("resolution"):
        text.append("")
        text += resolution_lines(stats["resolution"])
    if stats.get("twins"):
        text.append("")
        text.append(twins_line(stats["twins"]))
    if stats.get("selection"):
        text.append("")
        text.append("Selection funnel (per domain):")
        for domain, counts in stats["selection"].items():
            text.append(f"  {domain}: " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
    return "\n".join(text)


_CHOICE_ROWS = (
    ("chosen_users", "chosen users"),
    ("window_candidates", "window candidates"),
    ("item_candidates", "all item candidates"),
)


def thin_train_note(split: Mapping[str, Any], train_fraction: float | None) -> str | None:
    """What to do when a ``--train-fraction`` build's split rule dropped most of its train groups
    (stats.json's ``split``); None otherwise.

    With ``--train-fraction`` most groups go to test, and the rule drops every train group that shows one
    of their users: a large build can keep a handful of thousands.

    >>> split = {"rule": "leak-free", "train_groups_per_domain": {"Books": 20}, "train_groups_dropped": 4196}
    >>> thin_train_note(split, 0.2)[:52]
    '--split-rule leak-free kept 20 of 4,216 train groups'
    >>> thin_train_note({**split, "train_groups_dropped": 3}, 0.2), thin_train_note(split, None)
    (None, None)
    """
    levels = list(split["levels"].values()) if "levels" in split else [split]
    kept = sum(n for level in levels for n in level["train_groups_per_domain"].values())
    dropped = sum(level["train_groups_dropped"] for level in levels)
    if train_fraction is None or dropped <= kept:
        return None
    return (
        f"--split-rule {split.get('rule', levels[0].get('rule'))} kept {kept:,} of {kept + dropped:,} train "
        f"groups (it drops those that show a test user, and --train-fraction {train_fraction:g} puts "
        f"{1 - train_fraction:.0%} of the groups in test): few-shot demonstrations (--shots) and "
        "`perrecbench sft data` draw from these; for more, raise --train-fraction"
    )


def split_line(split: Mapping[str, Any]) -> str:
    """One line on the split rule: what it dropped and the leaks measured.

    >>> line = split_line({"rule": "leak-free", "train_groups_dropped": 2,
    ...     "train_groups_dropped_per_domain": {"Books": 2}, "leaks": {"test_reviews_as_train_queries": 0,
    ...     "test_reviews_in_train_histories": 1, "train_users_also_in_test": 3}})
    >>> for part in line.split("; "):
    ...     print(part)
    Split rule leak-free: 2 train groups dropped (Books 2)
    test reviews in train: 0 as queries, 1 in histories
    """
    dropped = ", ".join(f"{d} {n:,}" for d, n in split["train_groups_dropped_per_domain"].items() if n)
    leaked = split["leaks"]
    return (
        f"Split rule {split['rule']}: {split['train_groups_dropped']:,} train groups dropped"
        + (f" ({dropped})" if dropped else "")
        + f"; test reviews in train: {leaked['test_reviews_as_train_queries']:,} as queries, "
        f"{leaked['test_reviews_in_train_histories']:,} in histories"
    )


def resolution_lines(resolution: Mapping[str, Any], split: str = "test") -> list[str]:
    """One line per level: groups, expected 95% CI half-width and minimum detectable paired difference.

    >>> r = {"easy": {"test": {"groups": 200, "query_items": 200, "design_effect": 1.0, "half_width": 0.1386,
    ...     "min_detectable_difference": 0.2801, "half_width_bound": 0.1386,
    ...     "min_detectable_difference_bound": 0.2801}}}
    >>> resolution_lines(r)[1]
    '  easy: 200 groups (200 items): 95% CI ±0.139, smallest detectable difference 0.280'
    """
    lines = [f"Resolution of one PTC cell on {split} (planning values, perrec_eval.ptc.expected_resolution):"]
    for level, splits in resolution.items():
        if split not in splits:
            continue
        r = splits[split]
        line = (
            f"  {level}: {r['groups']:,} groups ({r['query_items']:,} items): 95% CI ±{r['half_width']:.3f}, "
            f"smallest detectable difference {r['min_detectable_difference']:.3f}"
        )
        if r["design_effect"] > 1:
            line += (
                f" (±{r['half_width_bound']:.3f} and {r['min_detectable_difference_bound']:.3f} if the "
                f"groups of one item were perfectly correlated: design effect ≤ {r['design_effect']:.2f})"
            )
        lines.append(line)
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def twins_line(twins: Mapping[str, Mapping[str, int]]) -> str:
    """One line on the twin items removed from histories, per domain.

    >>> twins_line({"Books": {"history_rows_removed": 3, "members_affected": 2, "groups_affected": 2}})
    'Twins of the query item removed from histories: Books 3 rows (2 members, 2 groups)'
    >>> twins_line({"Books": {"history_rows_removed": 1, "members_affected": 1, "groups_affected": 1}})
    'Twins of the query item removed from histories: Books 1 row (1 member, 1 group)'
    """
    parts = [
        f"{d} {_count(t['history_rows_removed'], 'row')} ({_count(t['members_affected'], 'member')}, "
        f"{_count(t['groups_affected'], 'group')})"
        for d, t in twins.items()
    ]
    return "Twins of the query item removed from histories: " + ", ".join(parts)


def funnel_message(funnel: dict[str, dict[str, int]]) -> str:
    """Which criterion removed how many candidates, for error messages.

    >>> print(funnel_message({"Books": {"reviews": 10, "active_reviews": 0}}))
    Books: reviews=10, active_reviews=0
    """
    return "\n".join(f"{d}: " + ", ".join(f"{k}={v}" for k, v in c.items()) for d, c in funnel.items())
