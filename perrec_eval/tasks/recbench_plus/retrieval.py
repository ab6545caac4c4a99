"""The ``bm25`` baseline of RecBench+: BM25 of a query's text over its domain's catalogue.

One index per domain of a catalogue, over each item's title and its kept relation values (the text a
reader of the catalogue has); the library, variant, parameters and tokenizer are PerRecBench's
(`perrec_eval.tasks.perrecbench.retrieval`: bm25s, ``method="lucene"``, k1 = 1.5, b = 0.75, lowercase
letter/digit runs, no stopwords, no stemming), so the two families' BM25 read text the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from perrec_eval.tasks.perrecbench.retrieval import BM25_B, BM25_K1, BM25_METHOD, _bm25s, tokenize

RETRIEVAL_INFO = {
    "library": "bm25s",
    "method": BM25_METHOD,
    "k1": BM25_K1,
    "b": BM25_B,
    "query_text": "the query as asked",
    "document_text": "catalogue item title + its kept relation values",
    "corpus": "the query's domain in the build's catalogue",
}


def item_text(title: str, facts: Sequence[tuple[str, str]]) -> str:
    """The text BM25 sees for a catalogue item: its title, then its relation values.

    >>> item_text("Dune", [("author", "frank herbert"), ("categories", "science fiction")])
    'Dune frank herbert science fiction'
    """
    return " ".join([title, *(value for _, value in sorted(facts))])


@cache
def _index(catalogue: Any, domain: str) -> tuple[Any, dict[str, int]]:
    """The BM25 index of one domain of a catalogue (`task.Catalogue`, loaded once per build; rows in its
    `by_domain` order) and its vocabulary."""
    asins = catalogue.by_domain[domain]
    docs = [tokenize(item_text(catalogue.titles[a], catalogue.facts[a])) for a in asins]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(t for doc in docs for t in doc))}
    index = _bm25s().BM25(method=BM25_METHOD, k1=BM25_K1, b=BM25_B)
    index.index(([[vocab[t] for t in doc] for doc in docs], vocab), show_progress=False)
    return index, vocab


def scores(doc: Any) -> np.ndarray:
    """BM25 score of every item of the doc's domain (rows in `Catalogue.by_domain` order) for its query
    text, rounded to 4 decimals so that float32 sums that differ in the last bits tie (as PerRecBench's)."""
    index, vocab = _index(doc.catalogue, doc.truth["domain"])
    query = [vocab[token] for token in tokenize(doc.row["query"]) if token in vocab]
    if not query:
        return np.zeros(len(doc.catalogue.by_domain[doc.truth["domain"]]))
    return np.round(np.asarray(index.get_scores(query), dtype=np.float64), 4)
