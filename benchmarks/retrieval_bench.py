"""Retrieval speed and agreement: `retrieve_groups` (bm25s, lucene, per user) against per-user rank_bm25.

Synthetic benchmark-shaped rows: groups of 4 users who share a query item, each user with 50-200 earlier
reviews whose titles come from 1-3 favourite topics (Zipf-distributed topic words, shared filler words such
as "the"/"edition", an author on ~60% of items, some equal timestamps). Compared, per user:

- ``ours``: ``perrec_eval.tasks.perrecbench.retrieval.retrieve_groups`` (the runner's path).
- ``bm25s full index``: the same scores from a plain bm25s index over every token (what the query-restricted
  vocabulary saves).
- ``bm25s one shared corpus``: one bm25s index over all users' items, scores sliced per user (idf and average
  length become global, so not the same ranking; measured to decide against it).
- ``rank_bm25, our tokens``: ``BM25Okapi`` on our tokens, ranked with our tie rule (isolates the idf formula).
- ``rank_bm25, our tokens, argsort``: the same scores ranked by ``argsort(scores)[::-1]`` like ``get_top_n``.
- ``no retrieval``: the 4 most recent items (the content-blind reference for topic precision).
- ``rank_bm25, paper pipeline``: the paper's code path: each document is the rendered history item
  ("### Item Title\\n..." with author and rating) split on whitespace, the query is the rendered query block
  split on single spaces, top-4 by ``argsort(scores)[::-1]``.

Agreement with ``ours``: share of users whose top-4 *sets* are equal, whose top-4 *lists* are equal, and mean
|intersection| / 4. Quality: topic precision@4 = share of retrieved items from the query item's (hidden)
topic; a history has 1-3 topics, so a content-blind retriever scores about the share of query-topic items.
Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/retrieval_bench.py``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import platform
import random
import time
from collections.abc import Callable, Sequence

import bm25s
import numpy as np
import rank_bm25

from perrec_eval.tasks.perrecbench import retrieval
from perrec_eval.tasks.perrecbench.records import Group, HistoryItem, Query, User
from perrec_eval.tasks.perrecbench.retrieval import RETRIEVAL_INFO, retrieve_groups, tokenize

logger = logging.getLogger("retrieval_bench")

K = 4
OURS = "ours: `retrieve_groups` (bm25s lucene, per user)"
FILLER = ["the", "of", "and", "a", "edition", "book", "guide", "volume", "new", "complete", "series", "for",
          "to", "in", "novel", "paperback", "collection", "1", "2", "3"]


def synth_rows(n_users: int, seed: int) -> list[dict]:
    """Benchmark-shaped rows (group_id, query, users with history) with topic-structured synthetic titles."""
    rng = random.Random(seed)
    topics = [[f"t{t}w{w}" for w in range(150)] for t in range(20)]
    authors = [[f"Author{t}x{a} Lastname{t}x{a}" for a in range(15)] for t in range(20)]
    zipf = [1.0 / (rank + 1) for rank in range(150)]

    def title(topic: int) -> tuple[str, str | None]:
        words = rng.choices(topics[topic], weights=zipf, k=rng.randint(1, 5))
        words += rng.sample(FILLER, k=rng.randint(0, 4))
        rng.shuffle(words)
        author = rng.choice(authors[topic]) if rng.random() < 0.6 else None
        return " ".join(words).title(), author

    rows = []
    for g in range(n_users // 4):
        query_topic = rng.randrange(20)
        query_title, query_author = title(query_topic)
        users = []
        for u in range(4):
            favourites = [query_topic] + rng.sample(range(20), k=rng.randint(0, 2))
            history, stamp = [], 1_500_000_000_000
            for i in range(rng.randint(50, 200)):
                topic = rng.choice(favourites) if rng.random() < 0.8 else rng.randrange(20)
                item_title, author = title(topic)
                stamp += rng.choice([0, 0, 86_400_000, 3_600_000])  # equal timestamps happen
                history.append({"parent_asin": f"g{g}u{u}i{i}", "title": item_title, "author": author,
                                "rating": float(rng.randint(1, 5)), "timestamp": stamp, "topic": topic})
            users.append({"user_id": f"g{g}u{u}", "history": history})
        rows.append({"group_id": f"g{g}", "users": users, "query": {
            "parent_asin": f"q{g}", "title": query_title, "author": query_author, "topic": query_topic}})
    return rows


def item_text(item: dict) -> str:
    """`retrieval.item_text` of a synthetic row's query or history item."""
    return retrieval.item_text(Query(None, item["title"], item["author"]))


def as_group(row: dict) -> Group:
    """A synthetic row as the runner's typed group (the rating fields retrieval does not read are 0)."""
    users = tuple(
        User(user["user_id"], 0.0, 0, 0.0, 0.0, 0.0, tuple(
            HistoryItem(i["parent_asin"], i["title"], i["author"], i["rating"], i["timestamp"])
            for i in user["history"]
        ))
        for user in row["users"]
    )
    query = Query(row["query"]["parent_asin"], row["query"]["title"], row["query"]["author"])
    return Group(row["group_id"], "", "", query, 0, users)


def tie_rule_top_k(scores: Sequence[float], history: Sequence[dict]) -> list[int]:
    """Our order (score desc, timestamp desc, position desc) applied to any score vector."""
    positions = np.arange(len(scores))
    stamps = np.asarray([item["timestamp"] for item in history], dtype=np.int64)
    return [int(i) for i in np.lexsort((-positions, -stamps, -np.asarray(scores, dtype=np.float64)))[:K]]


def argsort_top_k(scores: Sequence[float]) -> list[int]:
    return [int(i) for i in np.argsort(scores)[::-1][:K]]


Ranker = Callable[[dict, list[dict]], list[int]]


def per_user(rows: list[dict], rank: Ranker) -> dict[tuple[str, str], list[int]]:
    return {(row["group_id"], user["user_id"]): rank(row["query"], user["history"])
            for row in rows for user in row["users"]}


def bm25s_full(query: dict, history: list[dict]) -> list[int]:
    index = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    index.index([tokenize(item_text(item)) for item in history], show_progress=False)
    query_tokens = tokenize(item_text(query))
    scores = index.get_scores(query_tokens) if query_tokens else np.zeros(len(history))
    return tie_rule_top_k(scores, history)


def bm25s_shared(rows: list[dict]) -> dict[tuple[str, str], list[int]]:
    docs, spans = [], {}
    for row in rows:
        for user in row["users"]:
            start = len(docs)
            docs.extend(tokenize(item_text(item)) for item in user["history"])
            spans[(row["group_id"], user["user_id"])] = (start, len(docs), row["query"], user["history"])
    index = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    index.index(docs, show_progress=False)
    result = {}
    for key, (start, end, query, history) in spans.items():
        # Every user of a group has the same query; a real implementation would score it once per group.
        scores = index.get_scores(tokenize(item_text(query)))
        result[key] = tie_rule_top_k(scores[start:end], history)
    return result


def rank_bm25_ours(tie_rule: bool) -> Ranker:
    def rank(query: dict, history: list[dict]) -> list[int]:
        index = rank_bm25.BM25Okapi([tokenize(item_text(item)) for item in history])
        scores = index.get_scores(tokenize(item_text(query)))
        return tie_rule_top_k(scores, history) if tie_rule else argsort_top_k(scores)

    return rank


def most_recent(query: dict, history: list[dict]) -> list[int]:
    return tie_rule_top_k([0.0] * len(history), history)


def paper_item(item: dict) -> str:
    author = f"### Item Author\n{item['author']}\n" if item["author"] else ""
    return f"### Item Title\n{item['title']}\n{author}### User Rating\n{item['rating']}"


def paper_query(query: dict) -> str:
    author = f"### Item Author\n{query['author']}\n" if query["author"] else ""
    return ("<|The Start of Query Item Information|>\n"
            f"### Item Title\n{query['title']}\n{author}<|The End of Query Item Information|>")


def rank_bm25_paper(query: dict, history: list[dict]) -> list[int]:
    index = rank_bm25.BM25Okapi([paper_item(item).split() for item in history])
    return argsort_top_k(index.get_scores(paper_query(query).split(" ")))


def timed_round_robin(contenders: dict[str, Callable[[], dict]], repeats: int) -> dict[str, tuple]:
    """Run every contender once per round, `repeats` rounds, so machine load hits all of them alike.

    Returns name -> (result, best CPU seconds of this process, best wall seconds).
    """
    best: dict[str, tuple] = {}
    for round_ in range(repeats):
        for name, fn in contenders.items():
            wall, cpu = time.perf_counter(), time.process_time()
            result = fn()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            _, best_cpu, best_wall = best.get(name, (None, float("inf"), float("inf")))
            best[name] = (result, min(best_cpu, cpu), min(best_wall, wall))
        logger.info("round %d/%d done", round_ + 1, repeats)
    return best


def topic_precision(rows: list[dict], top: dict) -> float:
    """Share of retrieved items whose hidden topic is the query's (how well related items are found)."""
    hits = [user["history"][i]["topic"] == row["query"]["topic"]
            for row in rows for user in row["users"] for i in top[(row["group_id"], user["user_id"])]]
    return float(np.mean(hits))


def agreement(ours: dict, other: dict) -> tuple[float, float, float]:
    same_set = np.mean([set(ours[key]) == set(other[key]) for key in ours])
    same_list = np.mean([ours[key] == other[key] for key in ours])
    overlap = np.mean([len(set(ours[key]) & set(other[key])) / len(ours[key]) for key in ours])
    return float(same_set), float(same_list), float(overlap)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many timings")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s forces DEBUG: a line per index built

    rows = synth_rows(args.users, args.seed)
    n_users = sum(len(row["users"]) for row in rows)
    n_items = sum(len(user["history"]) for row in rows for user in row["users"])
    logger.info("%d users, %d history items (%.0f per user)", n_users, n_items, n_items / n_users)

    groups = [as_group(row) for row in rows]

    def ours() -> dict:
        hits = retrieve_groups(groups, k=K)
        return {key: [hit.index for hit in found] for key, found in hits.items()}

    retrieve_groups(groups[:1], k=K)  # warm-up: the lazy bm25s/scipy import is not retrieval
    contenders = {
        OURS: ours,
        "bm25s full index per user (same scores)": lambda: per_user(rows, bm25s_full),
        "bm25s one shared corpus (global idf)": lambda: bm25s_shared(rows),
        "rank_bm25 BM25Okapi, our tokens, our tie rule": lambda: per_user(rows, rank_bm25_ours(True)),
        "rank_bm25 BM25Okapi, our tokens, argsort[::-1]": lambda: per_user(rows, rank_bm25_ours(False)),
        "rank_bm25 BM25Okapi, paper pipeline": lambda: per_user(rows, rank_bm25_paper),
        "no retrieval: the 4 most recent items": lambda: per_user(rows, most_recent),
    }
    timings = timed_round_robin(contenders, args.repeats)
    reference = timings[OURS][0]
    lines = [
        f"{n_users} users, {n_items / n_users:.0f} history items per user on average (50-200), k = {K}, "
        f"best of {args.repeats} round-robin runs; CPU = this process's CPU time (robust to other load), "
        f"wall = elapsed; Python {platform.python_version()}, bm25s {RETRIEVAL_INFO['version']}, "
        f"rank_bm25 {importlib.metadata.version('rank_bm25')}, OMP_NUM_THREADS=1, shared 2-core machine.",
        "",
        "| retrieval | CPU s | CPU ms / user | wall s | same top-4 set | same top-4 order | mean overlap "
        "| topic precision@4 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (result, cpu, wall) in timings.items():
        same_set, same_list, overlap = agreement(reference, result)
        label = f"**{name}**" if name == OURS else name
        lines.append(f"| {label} | {cpu:.2f} | {1000 * cpu / n_users:.2f} | {wall:.2f} | {same_set:.1%} | "
                     f"{same_list:.1%} | {overlap:.3f} | {topic_precision(rows, result):.3f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
