"""LLMRec as a task family: rating, sequential and direct recommendation, explanation generation and review
summarization asked with LLMRec's off-the-shelf prompts, one request per user (`TASK`).

Cells: subset = the build's config (rating, sequential, direct, explanation, summarization) × protocol =
the way of asking (one per config, named like it; the sequential config also has ``sequential-candidates``,
its rows' candidates ranked as direct's are: `SUBSET_PROTOCOLS`). Metrics, headline first:

- ``ndcg@10`` (headline): the ranking tasks' graded metric at the list length the prompts ask for; it
  rewards the rank of the hit, which HR@10 ignores, and it is P5's and LLMRec's reported metric;
- ``ndcg@5``, ``hr@1``, ``hr@5``, ``hr@10``: means over users (a failed answer scores 0), intervals by
  bootstrap over users, paired sign-flip tests;
- ``rmse``, ``mae``: over every user whose rating parsed (corpus metrics, paired bootstrap tests). A rating
  outside 1..5 or none at all fails the doc: it adds no error and is counted in the cell's failures, never
  clipped (P5 silently dropped predictions outside 1.0-4.9).

- ``rouge-l``, ``rouge-1``, ``rouge-2``, ``bleu-1``, ``bleu-2``, ``bleu-4`` and the same with ``/p5``: the
  text tasks' metrics, standard (rouge-score, sacrebleu) and P5/LLMRec-compatible (`text`, `textmetrics`).

A cell has only its task's metrics (the others are None). Sequential answers are titles mapped to the
domain's catalogue, direct and sequential-candidates answers titles mapped to the row's candidates
(`parsing`).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perrec_eval.runner import OneShot
from perrec_eval.stats import MetricSpec, rmse
from perrec_eval.task import Doc, Parsed, Task
from perrec_eval.tasks.llmrec import baselines, leaks, metrics, prompts
from perrec_eval.tasks.llmrec import data as build
from perrec_eval.tasks.llmrec import report as report_hooks
from perrec_eval.tasks.llmrec import text as text_tasks
from perrec_eval.tasks.llmrec.parsing import TitleIndex, parse_ranking, parse_rating, resolve

KINDS = prompts.KINDS
RANKING = ("sequential", "direct")
CANDIDATE_PROTOCOLS = ("direct", "sequential-candidates")  # the protocols that rank the row's candidates
SUBSET_PROTOCOLS = {kind: (kind,) for kind in KINDS} | {"sequential": ("sequential", "sequential-candidates")}
LIST_LENGTH = 10  # the prompts ask for 10 items
RANKING_METRICS = {"ndcg@10": 10, "ndcg@5": 5, "hr@1": 1, "hr@5": 5, "hr@10": 10}


@dataclass(frozen=True, slots=True)
class Ask:
    """The one request of a doc: its task, and the titles its answer is mapped back with (ranking)."""

    kind: str
    index: TitleIndex | None = None
    catalogue: TitleIndex | None = None  # direct: tells titles outside the candidates from hallucinations
    title: str | None = None  # rating: the item's title, masked in the answer (its year is no rating)
    user: str | None = None  # rating: the user's id, masked too ("user MLU196 will rate it 4")

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind}


def _titles(doc: build.RecDoc) -> dict[str, str]:
    """Every item's title in the doc's domain."""
    return dict(build.catalogue(doc.source)[doc.domain])


@dataclass(frozen=True, slots=True)
class Protocol:
    """LLMRec's off-the-shelf prompt of one task: render, parse, budget, true answer."""

    name: str
    max_tokens: int

    def _slot(self, doc: build.RecDoc) -> Ask:
        if self.name == "rating":
            return Ask("rating", title=doc.title, user=doc.user_id)
        if self.name in CANDIDATE_PROTOCOLS:
            titles = _titles(doc)
            candidates = TitleIndex((asin, titles[asin]) for asin in doc.candidates)
            return Ask(self.name, candidates, build.title_index(doc.source, doc.domain))
        return Ask("sequential", build.title_index(doc.source, doc.domain))

    def runner(self, doc: Doc) -> OneShot:
        """One request; a ranking's prediction is its ranked items (a rating's, the rating)."""
        slot = self._slot(doc)
        if slot.kind == "rating":
            return OneShot(slot)
        return OneShot(
            slot, finish=lambda answer: None if answer is None else resolve(answer["items"], doc.truth)
        )

    def render(self, doc: Doc, slot: Any, *, variant: str = "default") -> list[dict[str, str]]:
        """The request in prompt variant `variant` (`prompts.VARIANTS`: LLMRec's, or P5's templates)."""
        template = prompts.variant(variant).kinds[self.name]
        titles = [item["title"] for item in doc.history]
        if self.name == "rating":
            return template.render(
                user=doc.user_id,
                history=prompts.rated_lines(doc.history),
                title=doc.title,
                category=doc.domain.replace("_", " "),
            )
        if self.name == "sequential":
            return template.render(user=doc.user_id, history=prompts.title_list(titles))
        titled = _titles(doc)
        candidates = prompts.title_list([titled[asin] for asin in doc.candidates])
        return template.render(user=doc.user_id, history=prompts.title_list(titles), candidates=candidates)

    def parse(self, text: str | None, slot: Any, *, policy: str = "strict") -> Parsed:
        """The answer read back; `policy` (``strict`` or ``p5``, `--invalid-policy`) for a rating."""
        if slot.kind == "rating":
            return parse_rating(text, policy, title=slot.title, user=slot.user)
        return parse_ranking(text, slot.index, slot.catalogue)

    def combine(self, values: Sequence[Any]) -> Any:
        """The most frequent answer of the samples (the first of equals)."""
        keys = [json.dumps(value, sort_keys=True) for value in values]
        return values[keys.index(Counter(keys).most_common(1)[0][0])]

    def true_answer(self, doc: Doc, slot: Any) -> Any:
        """The target's rating, or a list holding the target's title (P5's one-item target)."""
        return doc.truth if self.name == "rating" else [doc.title]

    def format_answer(self, answer: Any, slot: Any) -> str:
        return f"{answer:g}" if self.name == "rating" else prompts.title_list(answer)

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str:
        return self.name


# Default answer budgets (tokens, SmolLM2's tokenizer), from how instruct models answer, preamble included
# (benchmarks/RESULTS.md, "Answer budgets"): a bare rating is 1-3 tokens, but SmolLM2-135M's free answers
# reach their number after 13-20 tokens ("I predict that user MLU196 will rate "Toy Story (1995)" a 4." is
# 25), so 64; every released RecBench+ answer of seven models (lists of about 10 titles, preambles, notes
# and refusals included) has p99 228 tokens, 335 for Gemini-1.5-Pro, p99.9 477, so 512 for every list. A
# reasoning model needs more (--max-new-tokens). Text budgets: the text module's.
RATING_BUDGET, LIST_BUDGET = 64, 512
PROTOCOLS = {
    "rating": Protocol("rating", RATING_BUDGET),
    "sequential": Protocol("sequential", LIST_BUDGET),
    "direct": Protocol("direct", LIST_BUDGET),
    "sequential-candidates": Protocol("sequential-candidates", LIST_BUDGET),
    **text_tasks.PROTOCOLS,
}


def score_doc(metric: str, prediction: Any, truth: Any) -> Any:
    """A doc's value of a ranking metric (0 for a failed doc), or its rating error (none when failed);
    None where the metric is not its task's (a ranking metric of a rating doc, and the reverse); a text
    doc's items come from `text.score_doc`."""
    if text_tasks.is_text_truth(truth) or metric in text_tasks.textmetrics.TEXT_METRICS:
        return text_tasks.score_doc(metric, prediction, truth)
    ranking = isinstance(truth, str)
    if metric in RANKING_METRICS:
        if not ranking:
            return None
        if prediction is None:
            return 0.0
        scorer = metrics.ndcg_at if metric.startswith("ndcg") else metrics.hit_at
        return scorer(list(prediction), truth, RANKING_METRICS[metric])
    if ranking:
        return None
    return [] if prediction is None else [float(prediction) - float(truth)]


def prediction_from(doc: Doc, protocol: str, value: Any) -> Any:
    """Another system's prediction of a doc (`perrecbench score --predictions`): a rating 1..5 (outside
    it fails the doc, as a model's answer does), or the ``parent_asin``s it ranks, best first (repeats kept
    once; an empty list fails)."""
    if doc.kind == "rating":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"a rating row takes a number 1..5 or the answer text, not {_kind(value)}")
        return float(value) if 1.0 <= value <= 5.0 else None
    if doc.kind in RANKING:
        if not isinstance(value, list) or not all(isinstance(asin, str) for asin in value):
            raise ValueError(
                f"a {doc.kind} row takes a list of parent_asin strings, best first, or the answer text, "
                f"not {_kind(value)}"
            )
        return list(dict.fromkeys(value)) or None
    raise ValueError(f"a {doc.kind} row takes the answer text (a string), not {_kind(value)}")


def _kind(value: Any) -> str:
    return {bool: "true/false", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def predict_baseline(
    name: str, docs: Sequence[build.RecDoc], *, data: str, seed: int, protocol: str | None = None
) -> list[Any] | None:
    """A no-LLM baseline's answer to every doc of a cell (None: it does not answer this task): the text
    tasks' floors (`text`), the rating and ranking baselines (`baselines`; the cell's `protocol` says
    whether a sequential doc's candidates or the whole catalogue are ranked)."""
    if docs and (name in text_tasks.BASELINES or docs[0].kind in text_tasks.TEXT_KINDS):
        return text_tasks.predict_baseline(name, docs, data=data, seed=seed)
    return baselines.predict(name, docs, data=data, seed=seed, candidates=protocol in CANDIDATE_PROTOCOLS)


# A JSON string (escaped quotes included) of any length: the answer budget bounds it. No bounded repetition
# such as {1,300}: an engine's regex index (outlines-core) holds a state per character of the bound, each
# allowing almost the whole vocabulary, which cost gigabytes for a 135M model (benchmarks/RESULTS.md,
# "Structured outputs' memory").
_TITLE_REGEX = r'"(?:[^"\\\n]|\\.)+"'
_LIST_REGEX = rf"\[ ?{_TITLE_REGEX}(, ?{_TITLE_REGEX}){{0,9}} ?\]"


RATING_REGEX = r"([1-4](\.[0-9])?|5(\.0)?)"  # 1 to 5, one decimal at most
RATING_SCHEMA = {"type": "number", "minimum": 1, "maximum": 5}


def answer_formats(spec: str) -> tuple[str, dict[str, Any] | None]:
    """The structured-output format of a protocol's answers: a rating in 1..5 (one decimal at most; its
    JSON schema: a number in range), a JSON list of at most 10 titles, or one line of text (no schema fits
    a list or a line the way the regex does)."""
    if spec.partition(":")[0] == "rating":
        return RATING_REGEX, RATING_SCHEMA
    if spec.partition(":")[0] in text_tasks.TEXT_KINDS:
        return text_tasks.ANSWER_REGEX, None
    return _LIST_REGEX, None


@functools.cache
def _systems() -> dict[str, str]:
    return {template.system: kind for kind, template in prompts.load().kinds.items()}


def constant_answer(request: Any) -> str | None:
    """The fake engine's `constant` answer to an LLMRec request: a rating of 4; for direct and
    sequential-candidates the first 10 candidates as listed; for sequential the history's titles as listed
    (all well-formed title lists)."""
    messages = request.messages
    kind = _systems().get(messages[0]["content"]) if messages else None
    if kind is None:
        return None
    if kind == "rating":
        return "4"
    if kind in text_tasks.TEXT_KINDS:
        return text_tasks.CONSTANT[kind]
    text = messages[-1]["content"]
    marker = "Candidates: " if kind in CANDIDATE_PROTOCOLS else "chronological order: "
    listed = text.rpartition(marker)[2].splitlines()[0]
    return prompts.title_list(json.loads(listed)[:LIST_LENGTH])


TASK = Task(
    name="llmrec",
    title="LLMRec",
    description=(
        "rating, sequential and direct recommendation, explanation and review summarization with LLMRec's "
        "prompts (Amazon Reviews 2023)"
    ),
    subset_axis="task",
    protocol_axis="protocol",
    subsets=KINDS,
    protocols=PROTOCOLS,
    metrics=(
        *(MetricSpec(name) for name in RANKING_METRICS),
        MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=rmse),
        MetricSpec("mae", higher_is_better=False, aggregation="corpus", corpus=metrics.mae),
        *text_tasks.metric_specs(),
    ),
    baselines=(*baselines.BASELINES, *text_tasks.BASELINES),
    builder="dataset_builder.llmrec.builder",
    answer_formats=answer_formats,
    constant_answer=constant_answer,
    load_docs=build.load_docs,
    score_doc=score_doc,
    predict_baseline=predict_baseline,
    prediction_from=prediction_from,
    leak_check=leaks.leak_check,
    subset_protocols=SUBSET_PROTOCOLS,
    prompt_variants=tuple(prompts.VARIANTS),
    sft_prompts="p5",
    sft_mixed=tuple(kind for kind in PROTOCOLS if kind != "sequential-candidates"),  # LLMRec's five tasks
    answer_counts=("duplicates", "unmatched", "not_candidate"),
    invalid_policies=("strict", "p5"),
    report=report_hooks,
    summary=(("ndcg@10", "direct/direct"), ("rmse", "rating/rating")),
    # the rating and ranking tasks (docs/suites.md: the hour's arithmetic)
    suite_defaults={"subsets": "rating,sequential,direct", "limit": 1000},
    suite_build={"domains": "Books", "kcore": 10},
    hub_description=(
        "LLMRec's five tasks (rating, sequential and direct recommendation, explanation, review "
        "summarization) rebuilt from Amazon Reviews 2023 (leave-last-out per user). Score: NDCG@10 for "
        "sequential and direct (higher is better), RMSE for rating (lower is better), ROUGE-L for the text "
        "tasks. One task per config."
    ),
)
