"""The benchmark's statistics: the paper's Table 4 per split and domain, and the Figure 5 distributions."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dataset_builder.config import MS_PER_DAY, duckdb_settings

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


def compute(
    files: dict[str, Path],
    domains: Sequence[str],
    funnel: dict[str, dict[str, int]],
    *,
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
        memory_limit: DuckDB's memory limit.
        threads: DuckDB threads (None: all cores).
        spill: DuckDB's spill folder (removed afterwards).

    Returns:
        Table 4 per split (overall and per domain), Figure 5 distributions per split, and the funnel.
    """
    import duckdb

    out: dict[str, Any] = {"splits": {}, "selection": funnel}
    con = duckdb.connect(":memory:", config=duckdb_settings(memory_limit, threads, spill))
    try:
        for split, path in files.items():
            out["splits"][split] = _split_stats(con, path, domains)
    finally:
        con.close()
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    return out


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
    result = {
        "all": figures("", None),
        "domains": per_domain,
        "distributions": _figure5(rating, rel, length, year),
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
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        for row in lines
    ]
    text = [row.rstrip() for row in text]
    if stats.get("selection"):
        text.append("")
        text.append("Selection funnel (per domain):")
        for domain, counts in stats["selection"].items():
            text.append(f"  {domain}: " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
    return "\n".join(text)


def funnel_message(funnel: dict[str, dict[str, int]]) -> str:
    """Which criterion removed how many candidates, for error messages.

    >>> print(funnel_message({"Books": {"reviews": 10, "active_reviews": 0}}))
    Books: reviews=10, active_reviews=0
    """
    return "\n".join(f"{d}: " + ", ".join(f"{k}={v}" for k, v in c.items()) for d, c in funnel.items())
