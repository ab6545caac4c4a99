"""BLEU and ROUGE of generated texts against one reference each, in two labelled implementations.

Every value is a percentage (0-100), as P5, PETER and sacrebleu report them. Per doc, a metric gives an
item; a failed doc is scored as an empty answer.

- **standard** (names ``bleu-1``, ``bleu-2``, ``bleu-4``, ``rouge-1``, ``rouge-2``, ``rouge-l``):
  sacrebleu's corpus BLEU (its defaults: ``13a`` tokens, case kept, ``exp`` smoothing, n-gram orders up to
  1, 2 or 4), from per-doc sufficient statistics summed over the docs (exactly ``corpus_score``); and
  rouge-score's F-measure (its default tokenizer: lower case, ``[a-z0-9]`` runs, no stemming), the mean over
  docs.
- **P5/LLMRec-compatible** (the same names + ``/p5``): whitespace tokens; BLEU as tensorflow/nmt's
  ``compute_bleu`` (corpus counts of clipped n-gram matches, no smoothing, a zero precision gives 0, brevity
  penalty ``exp(1 - r/c)`` when ``c <= r``), ROUGE as tf-seq2seq's ``rouge.py`` (words split on single
  spaces, ROUGE-N from *sets* of n-grams with ``F = 2PR / (P + R + 1e-8)``, ROUGE-L from the longest common
  subsequence with ``beta = P / (R + 1e-12)``), the mean over docs. Their epsilons make an exact answer
  score 99.9999995 (ROUGE-N) rather than 100.

BLEU items are per-doc counts (packed in one int, `pack`) whose sums give the corpus value
(`MetricSpec(aggregation="corpus")`: intervals and paired tests resample docs and recompute it); ROUGE items
are per-doc F-measures.
"""

from __future__ import annotations

import functools
import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from perrec_eval.extras import require

BLEU_ORDERS = {"bleu-1": 1, "bleu-2": 2, "bleu-4": 4}
ROUGE_TYPES = {"rouge-1": "rouge1", "rouge-2": "rouge2", "rouge-l": "rougeL"}
P5 = "/p5"
STANDARD_METRICS = (*BLEU_ORDERS, *ROUGE_TYPES)
P5_METRICS = tuple(name + P5 for name in STANDARD_METRICS)
TEXT_METRICS = STANDARD_METRICS + P5_METRICS
_BY = "the explanation and summarization metrics"


def check_installed() -> None:
    """Fail in one line naming the install when sacrebleu or rouge-score is missing.

    Raises:
        MissingExtraError: ``pip install "perrecbench[text]"``.
    """
    require("sacrebleu", "text", by=_BY)
    require("rouge_score.rouge_scorer", "text", by=_BY)


@functools.cache
def _bleu(order: int):
    return require("sacrebleu.metrics", "text", by=_BY).BLEU(max_ngram_order=order)


@functools.cache
def _rouge():
    scorer = require("rouge_score.rouge_scorer", "text", by=_BY)
    logging.getLogger("absl").setLevel(logging.WARNING)  # rouge-score logs "Using default tokenizer." at INFO
    return scorer.RougeScorer(list(ROUGE_TYPES.values()), use_stemmer=False)


# A BLEU item packs a doc's counts into one int, FIELD_BITS per count: a bootstrap recomputes the corpus
# value from thousands of resamples, and `sum` over packed ints adds every count of every doc in one C loop
# (about 30 times faster than summing tuples). 64 bits hold any count summed over any corpus.
FIELD_BITS = 64
_MASK = (1 << FIELD_BITS) - 1


def pack(counts: Sequence[int]) -> int:
    """Counts as one int (`unpack` gives them back; sums of packed ints unpack to the counts' sums).

    >>> unpack(pack((1, 2)) + pack((3, 4)), 2)
    [4, 6]
    """
    return sum(count << (FIELD_BITS * i) for i, count in enumerate(counts))


def unpack(packed: int, fields: int) -> list[int]:
    """The `fields` counts of a packed int (see `pack`)."""
    return [(packed >> (FIELD_BITS * i)) & _MASK for i in range(fields)]


@functools.lru_cache(maxsize=2**16)  # BLEU-1, -2 and -4 read the same counts; so do intervals and reports
def _sacrebleu_counts(hypothesis: str, reference: str) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    score = _bleu(4).corpus_score([hypothesis], [[reference]])
    return tuple(score.counts), tuple(score.totals), score.sys_len, score.ref_len


def sacrebleu_stats(hypothesis: str, reference: str, order: int) -> tuple[int, ...]:
    """sacrebleu's sufficient statistics of one doc: matches and totals per order, then the two lengths.

    >>> sacrebleu_stats("the cat sat", "the cat sat on", 2)
    (3, 2, 3, 2, 3, 4)
    """
    counts, totals, length, reference_length = _sacrebleu_counts(hypothesis, reference)
    return (*counts[:order], *totals[:order], length, reference_length)


def sacrebleu_corpus(items: Sequence[int], order: int) -> float:
    """sacrebleu's corpus BLEU from the docs' packed `sacrebleu_stats` (the same value as ``corpus_score``).

    >>> round(sacrebleu_corpus([pack(sacrebleu_stats("the cat sat", "the cat sat on", 2))], 2), 4)
    71.6531
    """
    total = unpack(sum(items), 2 * order + 2)
    correct, possible = total[:order], total[order : 2 * order]
    bleu = require("sacrebleu.metrics", "text", by=_BY).BLEU
    return float(
        bleu.compute_bleu(correct, possible, total[-2], total[-1], "exp", max_ngram_order=order).score
    )


def rouge_score_f(hypothesis: str, reference: str, kind: str) -> float:
    """rouge-score's F-measure (``rouge1``, ``rouge2`` or ``rougeL``) of one doc, as a percentage.

    >>> rouge_score_f("The cat sat", "the cat sat on", "rouge1") == 100 * 2 * 1.0 * 0.75 / 1.75
    True
    """
    return 100.0 * _rouge_scores(hypothesis, reference)[kind].fmeasure


@functools.lru_cache(maxsize=2**16)  # one call scores ROUGE-1, -2 and -L together
def _rouge_scores(hypothesis: str, reference: str) -> dict[str, Any]:
    return _rouge().score(reference, hypothesis)


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def nmt_stats(hypothesis: str, reference: str, order: int) -> tuple[int, ...]:
    """One doc's counts for tensorflow/nmt's BLEU on whitespace tokens: clipped matches and possible
    matches per order, then the hypothesis and reference lengths.

    >>> nmt_stats("the cat the cat", "the cat sat", 2)
    (2, 1, 4, 3, 4, 3)
    """
    hyp, ref = hypothesis.split(), reference.split()
    matches = [sum((_ngrams(hyp, n) & _ngrams(ref, n)).values()) for n in range(1, order + 1)]
    possible = [max(len(hyp) - n + 1, 0) for n in range(1, order + 1)]
    return (*matches, *possible, len(hyp), len(ref))


def nmt_corpus(items: Sequence[int], order: int) -> float:
    """tensorflow/nmt's corpus BLEU (no smoothing) from the docs' packed `nmt_stats`, as a percentage.

    >>> round(nmt_corpus([pack(nmt_stats("the cat the cat", "the cat sat", 2))], 2), 4)  # sqrt(2/4 * 1/3)
    40.8248
    >>> nmt_corpus([pack(nmt_stats("", "the cat", 1))], 1)  # nothing generated (nmt would divide by zero)
    0.0
    """
    total = unpack(sum(items), 2 * order + 2)
    matches, possible = total[:order], total[order : 2 * order]
    length, reference = total[-2], total[-1]
    precisions = [m / p if p > 0 else 0.0 for m, p in zip(matches, possible, strict=True)]
    if min(precisions) <= 0 or length == 0:
        return 0.0
    geometric = math.exp(sum(math.log(p) for p in precisions) / order)
    ratio = length / reference
    penalty = 1.0 if ratio > 1.0 else math.exp(1 - 1 / ratio)
    return 100.0 * geometric * penalty


def _words(text: str) -> list[str]:
    return text.split(" ")  # tf-seq2seq splits on single spaces: "a  b" has an empty word


def _set_ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def tf_rouge_n(hypothesis: str, reference: str, n: int) -> float:
    """tf-seq2seq's ROUGE-N F1 of one doc, as a percentage (n-gram sets, ``+1e-8`` in the denominator).

    >>> round(tf_rouge_n("the cat the cat", "the cat sat", 1), 6)  # P = 2/2, R = 2/3
    80.0
    """
    hyp, ref = _set_ngrams(_words(hypothesis), n), _set_ngrams(_words(reference), n)
    overlap = len(hyp & ref)
    precision = overlap / len(hyp) if hyp else 0.0
    recall = overlap / len(ref) if ref else 0.0
    return 100.0 * 2.0 * precision * recall / (precision + recall + 1e-8)


def _lcs(x: Sequence[str], y: Sequence[str]) -> int:
    previous = [0] * (len(y) + 1)
    for a in x:
        current = [0]
        for j, b in enumerate(y, start=1):
            current.append(previous[j - 1] + 1 if a == b else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def tf_rouge_l(hypothesis: str, reference: str) -> float:
    """tf-seq2seq's sentence-level ROUGE-L F of one doc, as a percentage.

    >>> round(tf_rouge_l("the cat sat down", "the dog sat"), 4)  # LCS 2: P = 2/4, R = 2/3, beta = P / R
    54.9451
    """
    hyp, ref = _words(hypothesis), _words(reference)
    lcs = _lcs(hyp, ref)
    recall, precision = lcs / len(ref), lcs / len(hyp)
    beta = precision / (recall + 1e-12)
    return 100.0 * (1 + beta**2) * recall * precision / (recall + beta**2 * precision + 1e-12)


def doc_item(metric: str, hypothesis: str, reference: str) -> float | int:
    """A doc's item of a text metric (`TEXT_METRICS`): its packed BLEU counts or its ROUGE F-measure."""
    name, p5, _ = metric.partition(P5)
    if name in BLEU_ORDERS:
        stats = nmt_stats if p5 else sacrebleu_stats
        return pack(stats(hypothesis, reference, BLEU_ORDERS[name]))
    if p5:
        return (
            tf_rouge_l(hypothesis, reference)
            if name == "rouge-l"
            else tf_rouge_n(hypothesis, reference, int(name[-1]))
        )
    return rouge_score_f(hypothesis, reference, ROUGE_TYPES[name])


def corpus_function(metric: str):
    """The corpus function of a BLEU metric (its items are `doc_item`'s packed counts)."""
    name, p5, _ = metric.partition(P5)
    order = BLEU_ORDERS[name]
    return functools.partial(nmt_corpus if p5 else sacrebleu_corpus, order=order)
