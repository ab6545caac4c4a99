"""LLMRec's text tasks, explanation generation and review summarization: their protocol, answer parsing,
per-doc metric items and floor baselines.

A text doc's truth is ``{"explanation": sentence}`` or ``{"summary": title}`` (`data.TEXT_TRUTHS`).
Metrics (`textmetrics`): BLEU-1/2/4 and ROUGE-1/2/L, each in its standard implementation (``bleu-4``,
``rouge-l``) and its P5/LLMRec-compatible one (``bleu-4/p5``); summaries have no BLEU-4 (P5 scored them
with ROUGE and BLEU-2: a title of fewer than 4 words has no 4-gram, so even the truth would score 0).

Baselines, fitted on nothing but the train split: ``first-words`` answers a summary with the review's first
`FIRST_WORDS` words (the length LLMRec's prompt asks for); ``common-sentence`` answers every explanation of a
domain with its most frequent train explanation (ties: the alphabetically first).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.runner import OneShot
from perrec_eval.tasks.base import Doc, Parsed
from perrec_eval.tasks.llmrec import data as build
from perrec_eval.tasks.llmrec import prompts, textmetrics
from perrec_eval.tasks.llmrec.parsing import strip_think

TEXT_KINDS = tuple(build.TEXT_TRUTHS)
FIRST_WORDS = 4
BASELINES = ("first-words", "common-sentence")
CONSTANT = {"explanation": "This product is good.", "summarization": "Good product"}
_LABEL = re.compile(r"^(?:explanation|summary|sentence)\s*:\s*", re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def parse_text(text: str | None) -> Parsed:
    """A generated sentence: reasoning blocks, a leading ``Explanation:``/``Summary:`` label and wrapping
    quotes removed, white space collapsed; failed (``empty``) when nothing is left.

    >>> parse_text('Summary: "Smells lovely,\\n lasts long"').value
    'Smells lovely, lasts long'
    >>> parse_text("<think>hm</think>  ").reason
    'empty'
    """
    answer = " ".join(strip_think(text).split())
    answer = _LABEL.sub("", answer).strip().strip(_QUOTES).strip()
    return Parsed(True, answer) if answer else Parsed(False, reason="empty")


@dataclass(frozen=True, slots=True)
class TextAsk:
    """The one request of a text doc."""

    kind: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind}


@dataclass(frozen=True, slots=True)
class TextProtocol:
    """LLMRec's off-the-shelf prompt of a text task: render, parse, budget, true answer."""

    name: str
    max_tokens: int

    def runner(self, doc: Doc) -> OneShot:
        return OneShot(TextAsk(self.name))

    def render(self, doc: Doc, slot: Any, *, variant: str = "default") -> list[dict[str, str]]:
        """The request in prompt variant `variant` (LLMRec's, or P5's templates 3-3 and 4-1)."""
        template = prompts.variant(variant).kinds[self.name]
        if self.name == "summarization":
            return template.render(user=doc.user_id, review=doc.review_text)
        titles = prompts.title_list([item["title"] for item in doc.history])
        return template.render(user=doc.user_id, history=titles, title=doc.title, rating=f"{doc.rating:.1f}")

    def parse(self, text: str | None, slot: Any, *, policy: str = "strict") -> Parsed:
        """The answer text read back (`policy` is for ratings: a text has no range)."""
        return parse_text(text)

    def combine(self, values: Sequence[Any]) -> Any:
        """The most frequent answer of the samples (the first of equals)."""
        counts = Counter(values)
        return max(values, key=lambda value: counts[value])

    def true_answer(self, doc: Doc, slot: Any) -> str:
        return next(iter(doc.truth.values()))

    def format_answer(self, answer: Any, slot: Any) -> str:
        return str(answer)

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str:
        return self.name


PROTOCOLS = {
    "explanation": TextProtocol("explanation", 64),
    "summarization": TextProtocol("summarization", 32),
}
ANSWER_REGEX = r"[^\n]+"  # one line of text (the answer budget bounds it; no {1,N}: see task.py)


def is_text_truth(truth: Any) -> bool:
    return isinstance(truth, dict) and len(truth) == 1 and next(iter(truth)) in build.TEXT_TRUTHS.values()


def score_doc(metric: str, prediction: Any, truth: Any) -> Any:
    """A text doc's item of a text metric (a failed doc answers the empty text); None where the metric or
    the doc is not a text one, and for BLEU-4 of a summary."""
    if metric not in textmetrics.TEXT_METRICS or not is_text_truth(truth):
        return None
    ((key, reference),) = truth.items()
    if key == "summary" and metric.partition(textmetrics.P5)[0] == "bleu-4":
        return None
    return textmetrics.doc_item(metric, "" if prediction is None else str(prediction), reference)


def metric_specs() -> tuple[Any, ...]:
    """The text metrics as the family declares them: BLEU corpus-level, ROUGE means over docs."""
    from perrec_eval.stats import MetricSpec

    order = ("rouge-l", "rouge-1", "rouge-2", "bleu-1", "bleu-2", "bleu-4")  # ROUGE-L: both tasks have it
    names = [*order, *(name + textmetrics.P5 for name in order)]
    return tuple(
        MetricSpec(name, aggregation="corpus", corpus=textmetrics.corpus_function(name))
        if name.startswith("bleu")
        else MetricSpec(name)
        for name in names
    )


@functools.cache
def _common_sentences(folder: str, stamp: float) -> dict[str, str]:
    counts: dict[str, Counter] = {}
    for row in build.rows(folder, "explanation", "train"):
        counts.setdefault(row["domain"], Counter())[row["explanation"]] += 1
    return {domain: min(c, key=lambda s: (-c[s], s)) for domain, c in counts.items()}


def common_sentence(data: str, domain: str) -> str:
    """The domain's most frequent train explanation (ties: the alphabetically first)."""
    folder = Path(data).resolve()
    return _common_sentences(str(folder), (folder / "manifest.json").stat().st_mtime)[domain]


def predict_baseline(name: str, docs: Sequence[Any], *, data: str, seed: int) -> list[str] | None:
    """A text floor's answer to every doc of a cell (None: not this baseline's task)."""
    kind = docs[0].kind if docs else None
    if name == "first-words" and kind == "summarization":
        return [" ".join(doc.review_text.split()[:FIRST_WORDS]) for doc in docs]
    if name == "common-sentence" and kind == "explanation":
        return [common_sentence(data, doc.domain) for doc in docs]
    return None
