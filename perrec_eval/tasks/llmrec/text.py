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

from perrec_eval.answers import (
    MAX_ANSWER_CHARS,
    TOO_LONG,
    closes_like_chat,
    opens_like_chat,
    strip_think,
    too_long,
)
from perrec_eval.runner import OneShot
from perrec_eval.task import Doc, Parsed
from perrec_eval.tasks.llmrec import data as build
from perrec_eval.tasks.llmrec import prompts, textmetrics

TEXT_KINDS = tuple(build.TEXT_TRUTHS)
FIRST_WORDS = 4
BASELINES = ("first-words", "common-sentence")
CONSTANT = {"explanation": "This product is good.", "summarization": "Good product"}
_LABEL = re.compile(
    r"^(?:(?:a |the |my |\d++-word |short |one-sentence )*+"
    r"(?:explanation|summary|sentence|answer|review summary))\s*+:\s*+",
    re.IGNORECASE,
)
_OPENER = re.compile(r"(?:sure|certainly|of course|absolutely|okay|ok|alright|great)[!.,]++\s*+", re.I)
_QUOTES = "\"'`“”‘’"


def parse_text(text: str | None) -> Parsed:
    """A generated sentence: reasoning blocks removed; chat around it dropped (a heading such as "## Summary",
    a label such as "**Explanation:**" or "Summary:", a lead-in ending in a colon such as "Sure! Here's a
    10-word explanation:", an opener such as "Sure!", a closing such as "Let me know if you need anything
    else!"); wrapping quotes removed, white space collapsed. Failed (``empty``) when nothing is left,
    ``too_long`` for an answer over `perrec_eval.answers.MAX_ANSWER_CHARS` characters.

    >>> parse_text('Summary: "Smells lovely,\\n lasts long"').value
    'Smells lovely, lasts long'
    >>> parse_text("Sure! Here's a short explanation:\\n\\nSoft and warm.\\n\\nLet me know if you need more!")
    Parsed(ok=True, value='Soft and warm.', reason=None, detail=None)
    >>> parse_text("<think>hm</think>  ").reason
    'empty'
    """
    if too_long(text):
        return Parsed(False, reason=TOO_LONG, detail=f"over {MAX_ANSWER_CHARS:,} characters")
    lines = [_OPENER.sub("", _plain(line)) for line in strip_think(text).splitlines()]
    lines = [line for line in lines if line]
    while len(lines) > 1 and _is_chat(lines[0], lead=True):
        lines.pop(0)
    while len(lines) > 1 and _is_chat(lines[-1], lead=False):
        lines.pop()
    answer = _OPENER.sub("", " ".join(" ".join(lines).split()))
    head, colon, rest = answer.partition(": ")
    if colon and rest and (opens_like_chat(head + ":") or _LABEL.fullmatch(head + ": ")):
        answer = rest  # "Sure! Here's a 10-word explanation: Soft and warm."
    answer = _LABEL.sub("", answer).strip().strip(_QUOTES).strip()
    return Parsed(True, answer) if answer else Parsed(False, reason="empty")


def _plain(line: str) -> str:
    """A line without markdown heading marks and emphasis around it."""
    return line.replace("**", "").strip().lstrip("#>").strip().strip("*_").strip()


def _is_chat(line: str, *, lead: bool) -> bool:
    """Whether a line before (`lead`) or after the text is chat: a lead-in or label ending in a colon, a
    heading or label on its own ("Summary", "Explanation"), or after the text a closing ("I hope this
    helps!")."""
    if line.endswith(":") or _LABEL.fullmatch(line + ": "):
        return True
    return not lead and closes_like_chat(line)


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


# Budgets with room for a preamble and a closing around the sentence ("Sure! Here's a 10-word explanation:"
# and "Let me know if you need anything else!" are about 25 tokens): SmolLM2-135M's explanations took 16-32
# tokens and its summaries 9-15 ("The sentence is: "…"").
PROTOCOLS = {
    "explanation": TextProtocol("explanation", 96),
    "summarization": TextProtocol("summarization", 64),
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
