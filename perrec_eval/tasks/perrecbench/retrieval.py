"""Top-k BM25 retrieval of each user's pre-query history against the query item (PROTOCOL §3).

Choices, all recorded in `RETRIEVAL_INFO` (and so in run.json):

- **Library and variant**: bm25s (pinned in pyproject) with ``method="lucene"``, k1 = 1.5, b = 0.75 (the same
  k1 and b as rank_bm25's ``BM25Okapi``, which the paper used). Lucene's idf, ``log(1 + x)`` with
  ``x = (N - df + 0.5) / (df + 0.5)``, stays positive and decreases smoothly with df. This matters because
  every corpus is one user's history (a few dozen to a few hundred short titles): words such as an author's
  name or "edition" often occur in more than half of them, where Robertson's ``log(x)`` is negative and gets
  clamped to 0 (bm25s) or replaced by 0.25 x mean idf (rank_bm25, PITFALLS 10) — a frequent but matching word
  is then worth nothing, or an arbitrary constant that can exceed the idf of rarer words. Lucene and rank_bm25
  differ only in idf (their (k1 + 1) factor is a constant scale), close for rare words; their agreement is
  measured in ``benchmarks/retrieval_bench.py``.
- **Corpus**: one corpus per user = that user's history in the row (all reviews strictly before the query), so
  N, df and the average length are the user's own, as in the paper's per-user rank_bm25 index.
- **Text**: query = item title (+ author when present); each document = a history item's title (+ author).
  Ratings are not part of the text. A query word that occurs twice counts twice (as in bm25s and rank_bm25).
- **Tokenizer**: lowercase, then maximal runs of Unicode letters/digits (regex ``[^\\W_]+``): punctuation,
  underscores and whitespace separate tokens; single characters are kept ("Volume 2"). No stopword removal
  and no stemming: per-user idf already discounts words that are common in the user's history, stopword lists
  are language-specific, and the paper used raw whitespace tokens.
- **Order**: best score first; equal scores → the more recent review first (larger timestamp, then later
  position in the history). Recency is the natural tie-break for a preference signal, and it is what the
  paper's ``argsort(scores)[::-1]`` tends to do (later positions first among ties, though numpy's default
  sort is not stable, so there it is not guaranteed).
- **Short or unmatched histories**: a user with fewer than k items gets all of them; a user whose items share
  no token with the query (all scores 0) still gets k items — the k most recent, by the tie rule.

Only query-token columns are ever read, so each per-user index is built over the query's tokens plus one
placeholder token that stands for every other token (document lengths, N and df of the query tokens are
unchanged, so the scores are exactly those of a full bm25s index; ``tests/test_retrieval.py`` checks this).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import re
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perrec_eval import progress
from perrec_eval.tasks.perrecbench.records import Group, HistoryItem, Query, UserKey

BM25_METHOD = "lucene"
BM25_K1 = 1.5
BM25_B = 0.75
DEFAULT_K = 4

_TOKEN = re.compile(r"[^\W_]+")
# Stands for every non-query token; contains a space, so no real token can collide with it.
_OTHER = " other"

RETRIEVAL_INFO: dict[str, Any] = {
    "library": "bm25s",
    "version": importlib.metadata.version("bm25s"),
    "method": BM25_METHOD,
    "idf_method": BM25_METHOD,
    "k1": BM25_K1,
    "b": BM25_B,
    "tokenizer": "lowercase; tokens = maximal runs of Unicode letters/digits (regex [^\\W_]+); "
    "no stopwords; no stemming",
    "query_text": "query title + author (when present)",
    "document_text": "history item title + author (when present)",
    "corpus": "per user: the user's history before the query item",
    "tie_break": "score desc, then timestamp desc, then history position desc (most recent first)",
}


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One retrieved history item: its position in the user's history list and its BM25 score."""

    index: int
    score: float


def tokenize(text: str | None) -> list[str]:
    """Split a text into lowercase letter/digit runs.

    Args:
        text: any string; None counts as empty.

    Returns:
        The tokens in order, duplicates kept.

    >>> tokenize("The Hobbit: Or There and Back Again (Vol. 2)")
    ['the', 'hobbit', 'or', 'there', 'and', 'back', 'again', 'vol', '2']
    >>> tokenize("Café_au-lait") + tokenize(None)
    ['café', 'au', 'lait']
    """
    return _TOKEN.findall(text.lower()) if text else []


def item_text(item: Query | HistoryItem) -> str:
    """The text BM25 sees for a query or history item: title, then author when known.

    >>> item_text(Query(None, "Dune", "Frank Herbert")), item_text(Query(None, "Dune"))
    ('Dune Frank Herbert', 'Dune')
    """
    title = item.title or ""  # a query item without a title is matched by its author alone
    return f"{title} {item.author}" if item.author else title


def _bm25s() -> Any:
    """Import bm25s lazily (it pulls in scipy) and let the app's logging config decide what it logs."""
    import bm25s

    bm25s_logger = logging.getLogger("bm25s")
    if bm25s_logger.level == logging.DEBUG:  # set by bm25s at import: one debug line per index built
        bm25s_logger.setLevel(logging.NOTSET)
    return bm25s


def _bm25_scores(query_tokens: Sequence[str], docs: Sequence[Sequence[str]]) -> np.ndarray:
    """Lucene BM25 score of every document for the query, from a bm25s index over this corpus only."""
    vocab = {token: i for i, token in enumerate(dict.fromkeys(query_tokens))}
    other = len(vocab)
    doc_ids = [[vocab.get(token, other) for token in doc] for doc in docs]
    if not vocab or all(token_id == other for ids in doc_ids for token_id in ids):
        return np.zeros(len(docs), dtype=np.float32)
    index = _bm25s().BM25(method=BM25_METHOD, k1=BM25_K1, b=BM25_B)
    index.index((doc_ids, {**vocab, _OTHER: other}), create_empty_token=False, show_progress=False)
    # A repeated query token counts once per occurrence, as in bm25s.get_scores and rank_bm25.
    return index.get_scores([vocab[token] for token in query_tokens])


def _top_k(scores: np.ndarray, timestamps: Sequence[int], k: int) -> list[Retrieved]:
    positions = np.arange(len(scores))
    # bm25s sums in float32, so equal scores can differ in the last bits; rounding makes them true ties
    # so that the recency rule decides them.
    sort_scores = np.round(np.asarray(scores, dtype=np.float64), 4)
    # lexsort sorts by the last key first; negating every key gives descending order.
    order = np.lexsort((-positions, -np.asarray(timestamps, dtype=np.int64), -sort_scores))[:k]
    return [Retrieved(index=int(i), score=float(scores[i])) for i in order]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer (the number of history items to keep), got {k!r}")


def retrieve(
    query: Query, histories: Sequence[Sequence[HistoryItem]], k: int = DEFAULT_K
) -> list[list[Retrieved]]:
    """Retrieve each user's top-k history items for one query item, best first.

    Args:
        query: the query item.
        histories: one history per user.
        k: how many items to keep per user (fewer if the history is shorter).

    Returns:
        One list per user (same order as ``histories``) of `Retrieved`, best score first, ties broken by
        recency (see the module docstring).

    >>> history = [
    ...     HistoryItem(None, "Dune", "Frank Herbert", 5.0, 1),
    ...     HistoryItem(None, "Cooking Basics", None, 3.0, 2),
    ...     HistoryItem(None, "Dune Messiah", "Frank Herbert", 4.0, 3),
    ... ]
    >>> query = Query(None, "Children of Dune", "Frank Herbert")
    >>> [r.index for r in retrieve(query, [history], k=2)[0]]
    [0, 2]
    >>> [r.index for r in retrieve(Query(None, "Gardening"), [history], k=2)[0]]
    [2, 1]
    """
    _check_k(k)
    query_tokens = tokenize(item_text(query))
    results = []
    for history in histories:
        if not history or k == 0:
            results.append([])
            continue
        docs = [tokenize(item_text(item)) for item in history]
        results.append(_top_k(_bm25_scores(query_tokens, docs), [item.timestamp for item in history], k))
    return results


def retrieve_groups(
    groups: Iterable[Group],
    k: int = DEFAULT_K,
    *,
    memo: dict[UserKey, tuple[tuple, list[Retrieved]]] | None = None,
    keep: Container[str] = (),
    bar: Any = None,
) -> dict[UserKey, list[Retrieved]]:
    """Retrieve the top-k history of every user of every group.

    A (group_id, user_id) pair seen twice with the same query and history is retrieved once (levels share
    groups); seen twice with different data it is an error. A caller that reads groups in batches passes
    one `memo` to every call: the pairs of the groups whose id is in `keep` (those met again in a later
    batch) are kept there with their results, and checked and reused when they come back.

    Returns:
        ``{(group_id, user_id): [Retrieved, ...]}``, best first.
    """
    _check_k(k)
    groups = list(groups)
    memo = {} if memo is None else memo
    results: dict[UserKey, list[Retrieved]] = {}
    seen: dict[UserKey, tuple] = {}
    total = sum(len(g.users) for g in groups)
    with progress.bar(total=total, desc="retrieval", unit="user") if bar is None else contextlib.nullcontext(
        bar
    ) as bar:
        for group in groups:
            todo = []
            for user in group.users:
                key = (group.group_id, user.user_id)
                signature = (
                    item_text(group.query),
                    tuple((item.parent_asin, item.timestamp) for item in user.history),
                )
                earlier = seen.get(key, memo[key][0] if key in memo else None)
                if earlier is not None:
                    if earlier != signature:
                        raise ValueError(
                            f"group {key[0]!r} has user {key[1]!r} twice with different query or history; "
                            "group_id must identify one group (make it unique per level if groups differ)"
                        )
                    if key in memo:
                        results[key] = memo[key][1]
                    continue
                seen[key] = signature
                todo.append((key, user.history))
            retrieved = retrieve(group.query, [history for _, history in todo], k)
            for (key, _), hits in zip(todo, retrieved, strict=True):
                results[key] = hits
                if key[0] in keep:
                    memo[key] = (seen[key], hits)
            bar.update(len(group.users))
    return results
