"""The benchmark's statistics: the paper's Table 4 per split and domain, the Figure 5 distributions, the
neutrality of the group choice (chosen users against every candidate of the chosen windows) and the split's
leak counts, measured on the written files."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataset_builder.config import MS_PER_DAY, duckdb_settings, out_of_memory

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

    >>> row = {"query": {"parent_asin": "q", "title": "A B"}, "users": [
    ...     {"user_id": "u", "timestamp": 0, "history": [{"title": "C D E"}]}]}
    >>> table4([row])["tokens"], table4([row])["rating_history"]
    (5, 1)
    """
    users: set[str] = set()
    items: set[str] = set()
    reviews = history = tokens = 0
    times: list[int] = []
    for row in rows:
        items.add(row["query"]["parent_asin"])
        for user in row["users"]:
            users.add(user["user_id"])
            reviews += 1
            history += len(user["history"])
            times.append(user["timestamp"])
            tokens += sum(len((h["title"] or "").split()) for h in user["history"])
            tokens += len((row["query"]["title"] or "").split())
    return {
        "groups": len(items),
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
    :data:`dataset_builder.selection.INDEX_SCHEMA`): those of the chosen windows (``prefix="window"``) or
    all the items' active candidates (``"item"``)."""

    def total(name: str) -> Any:
        return pc.sum(index.column(f"{prefix}_{name}")).as_py() or 0

    return rel_figures(total("candidates"), total("rel_sum"), total("negatives"))


def compute(
    files: dict[str, Path],
    domains: Sequence[str],
    funnel: dict[str, dict[str, int]],
    *,
    windows: Mapping[str, pa.Table] | None = None,
    split: Mapping[str, Any] | None = None,
    memory_limit: str = "1GB",
    threads: int | None = None,
    spill: Path | None = None,
) -> dict[str, Any]:
    """The content of ``stats.json``, computed by DuckDB over the written ``full`` parquet files.

    Equal to :func:`table4` and :func:`distributions` applied to the rows, but out of core: only grouped
    counts (per distinct title, rating, relative rating, history length, day) reach Python, in batches.

    Args:
        files: ``{"test": path, "train": path}`` of the ``full`` config (``train`` may be absent).
        domains: the built domains, in order.
        funnel: per domain, how many reviews/items each selection criterion kept.
        windows: per split, the index rows of its groups (the chosen windows' candidates); none leaves
            the window figures out.
        split: the split rule and its per-domain counts; the leak counts measured on ``files`` are added.
        memory_limit: DuckDB's memory limit.
        threads: DuckDB threads (None: all cores).
        spill: DuckDB's spill folder (removed afterwards).

    Returns:
        Table 4 per split (overall and per domain), Figure 5 distributions per split, the choice's
        neutrality per split, the split with its leak counts, and the funnel.
    """
    import duckdb

    out: dict[str, Any] = {"splits": {}, "selection": funnel}
    try:
        con = duckdb.connect(":memory:", config=duckdb_settings(memory_limit, threads, spill))
        try:
            for name, path in files.items():
                out["splits"][name] = _split_stats(con, path, domains)
                if windows is not None:
                    choice = out["splits"][name]["choice"]
                    choice["window_candidates"] = candidate_figures(windows[name], "window")
                    choice["item_candidates"] = candidate_figures(windows[name], "item")
            if split is not None:
                out["split"] = {**split, "leaks": leaks(con, files)}
        finally:
            con.close()
            if spill is not None:
                shutil.rmtree(spill, ignore_errors=True)
    except duckdb.OutOfMemoryException as err:
        raise out_of_memory(memory_limit, "statistics", err) from err
    return out


def leaks(con: Any, files: Mapping[str, Path]) -> dict[str, int]:
    """Test (user, query item) reviews found in the train split, counted on the written ``full`` files.

    Returns:
        ``test_reviews_as_train_queries`` (train members whose (user, query item) is a test one),
        ``test_reviews_in_train_histories`` (train history rows that are a test user's test review) and
        ``train_users_also_in_test`` (distinct (domain, user) pairs in both splits; not a leak by itself).
    """
    if "train" not in files:
        return dict.fromkeys(_LEAKS, 0)
    test, train = (str(files[s]).replace("'", "''") for s in ("test", "train"))
    members = "SELECT domain, query.parent_asin AS item, unnest(users) AS u FROM read_parquet('{}')"
    con.sql(f"""CREATE OR REPLACE TABLE test_pairs AS
                SELECT DISTINCT domain, u.user_id AS user_id, item FROM ({members.format(test)})""")
    con.sql(f"""CREATE OR REPLACE TABLE train_members AS
                SELECT domain, u.user_id AS user_id, item, u.history AS history
                FROM ({members.format(train)})""")
    as_query, in_history, shared = con.sql("""
        SELECT (SELECT count(*) FROM train_members JOIN test_pairs USING (user_id, item)),
               (SELECT count(*) FROM (SELECT user_id, unnest(history).parent_asin AS item FROM train_members)
                JOIN test_pairs USING (user_id, item)),
               (SELECT count(*) FROM (SELECT DISTINCT domain, user_id FROM train_members)
                JOIN (SELECT DISTINCT domain, user_id FROM test_pairs) USING (domain, user_id))
        """).fetchall()[0]
    con.sql("DROP TABLE test_pairs")
    con.sql("DROP TABLE train_members")
    return dict(zip(_LEAKS, (as_query, in_history, shared), strict=True))


_LEAKS = ("test_reviews_as_train_queries", "test_reviews_in_train_histories", "train_users_also_in_test")


def _batches(con: Any, sql: str) -> Iterator[tuple]:
    for batch in con.sql(sql).to_arrow_reader(100_000):
        yield from zip(*batch.to_pydict().values(), strict=True)


def _split_stats(con: Any, path: Path, domains: Sequence[str]) -> dict[str, Any]:
    escaped = str(path).replace("'", "''")
    con.sql(f"""
        CREATE OR REPLACE TABLE users AS
        SELECT domain, item, qtitle, u.user_id AS user_id, u.timestamp AS ts, u.rating AS rating,
               u.relative_rating AS rel, len(u.history) AS n_history
        FROM (SELECT domain, query.parent_asin AS item, query.title AS qtitle, unnest(users) AS u
              FROM read_parquet('{escaped}'))""")
    tokens: Counter[str] = Counter()
    # Words per distinct title (Python's str.split, as in table4), times how often it occurs.
    for domain, title, n in _batches(
        con,
        f"""SELECT domain, title, count(*) FROM (
                SELECT domain, h.title AS title FROM (
                    SELECT domain, unnest(u.history) AS h FROM (
                        SELECT domain, unnest(users) AS u FROM read_parquet('{escaped}')))
                UNION ALL SELECT domain, qtitle FROM users)
            GROUP BY ALL""",
    ):
        tokens[domain] += len((title or "").split()) * n

    def figures(where: str, domain: str | None) -> dict[str, Any]:
        groups, reviews, users, history, first, last = con.sql(f"""
            SELECT count(DISTINCT item), count(*), count(DISTINCT user_id), coalesce(sum(n_history), 0),
                   min(ts), max(ts)
            FROM users {where}""").fetchall()[0]
        return {
            "groups": groups,
            "reviews": reviews,
            "users": users,
            "query_items": groups,
            "rating_history": int(history),
            "tokens": tokens[domain] if domain is not None else sum(tokens.values()),
            "time_range": [_date(first), _date(last)] if reviews else None,
        }

    per_domain = {}
    for domain in domains:
        per_domain[domain] = figures(f"WHERE domain = '{domain.replace(chr(39), chr(39) * 2)}'", domain)
    rating: Counter[str] = Counter()
    rel: Counter[str] = Counter()
    length: Counter[str] = Counter()
    year: Counter[str] = Counter()
    for value, n in _batches(con, "SELECT rating, count(*) FROM users GROUP BY ALL"):
        rating[f"{value:.1f}"] += n
    for value, n in _batches(con, "SELECT rel, count(*) FROM users GROUP BY ALL"):
        rel[bin_label(value, REL_EDGES)] += n
    for value, n in _batches(con, "SELECT n_history, count(*) FROM users GROUP BY ALL"):
        length[bin_label(value, HISTORY_EDGES)] += n
    for day, n in _batches(con, f"SELECT ts // {MS_PER_DAY}, count(*) FROM users GROUP BY ALL"):
        year[_date(day * MS_PER_DAY)[:4]] += n
    users, rel_sum, negatives = con.sql(
        "SELECT count(*), coalesce(sum(rel), 0), count_if(rel < 0) FROM users"
    ).fetchall()[0]
    result = {
        "all": figures("", None),
        "domains": per_domain,
        "distributions": _figure5(rating, rel, length, year),
        "choice": {"chosen_users": rel_figures(users, rel_sum, negatives)},
    }
    con.sql("DROP TABLE users")
    return result


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
        text.append(split_line(stats["split"]))
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


def funnel_message(funnel: dict[str, dict[str, int]]) -> str:
    """Which criterion removed how many candidates, for error messages.

    >>> print(funnel_message({"Books": {"reviews": 10, "active_reviews": 0}}))
    Books: reviews=10, active_reviews=0
    """
    return "\n".join(f"{d}: " + ", ".join(f"{k}={v}" for k, v in c.items()) for d, c in funnel.items())
