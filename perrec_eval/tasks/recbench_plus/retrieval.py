"""The ``bm25`` baseline of RecBench+: BM25 of a query's text over its domain's catalogue.

One index per domain of a catalogue, over each item's title and its kept relation values (the text a
reader of the catalogue has); the library, variant, parameters and tokenizer are PerRecBench's
(`perrec_eval.tasks.perrecbench.retrieval`: bm25s, ``method="lucene"``, k1 = 1.5, b = 0.75, lowercase
letter/digit runs, no stemming), so the two families' BM25 read text the same way. The query drops
English stop words (bm25s's list) and the words of the build's query templates and of requests
(`query_stopwords`: "recommend", "some", "you", "movies", ...): they name no condition, and left in they
match titles that contain them ("Some Mother's Son" for every "Can you recommend some ...").
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
    "query_text": "the query as asked, less stop words and template words (query_stopwords)",
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


# Words of requests that name no condition, beyond the templates' own (LLM-phrased queries use them).
REQUEST_WORDS = frozenset(
    "i i'm im me my we our you your can could would please recommend recommendations suggest suggestions "
    "some any more other others looking look find want like love loved enjoy enjoyed also really "
    "movie movies film films book books item items album albums people something".split()
)


@cache
def query_stopwords() -> frozenset[str]:
    """The query words BM25 ignores: bm25s's English stop words, `REQUEST_WORDS` and every word of the
    builder's query templates (their placeholders aside).

    >>> {"some", "you", "recommend", "written", "genre", "the"} <= query_stopwords()
    True
    >>> "lee" in query_stopwords()
    False
    """
    import string

    from bm25s.stopwords import STOPWORDS_EN

    from dataset_builder.recbench_plus import demographics, queries

    templates = [queries.QUERY, queries.MISINFORMED, queries.INTEREST, demographics.TEMPLATE]
    templates += [*queries.EXPLICIT_PHRASES.values(), *queries.IMPLICIT_PHRASES.values()]
    words = set(STOPWORDS_EN) | REQUEST_WORDS
    for text in templates:
        literal = "".join(part for part, *_ in string.Formatter().parse(text))
        words.update(tokenize(literal))
    return frozenset(words)


def scores(doc: Any) -> np.ndarray:
    """BM25 score of every item of the doc's domain (rows in `Catalogue.by_domain` order) for its query
    text, rounded to 4 decimals so that float32 sums that differ in the last bits tie (as PerRecBench's)."""
    index, vocab = _index(doc.catalogue, doc.truth["domain"])
    ignored = query_stopwords()
    query = [vocab[t] for t in tokenize(doc.row["query"]) if t in vocab and t not in ignored]
    if not query:
        return np.zeros(len(doc.catalogue.by_domain[doc.truth["domain"]]))
    return np.round(np.asarray(index.get_scores(query), dtype=np.float64), 4)
