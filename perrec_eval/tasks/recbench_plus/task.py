"""RecBench+ as a task family (issue 26): the build's queries as docs, one protocol (`recommend`), its metrics
and two no-LLM baselines.

A doc is one query (`QueryDoc`: its row and the build's catalogue); its truth is JSON (ground-truth items,
conditions, domain) and its cluster its user (a user's queries are resampled together in the intervals). The
protocol renders the released prompts (`templates/recommend.yaml`), reads the answer as a list of titles
(`parsing.split_answer`) and its runner matches them to the catalogue once (`parsing.Matcher`), so every
metric reads one matched list (`metrics.value`). Baselines: ``popularity`` (the domain's most reviewed items
outside the history shown) and ``condition-filter`` (the catalogue items holding every condition, most
reviewed first: a perfect reader of an explicit query), each `BASELINE_LENGTH` items.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError
from perrec_eval.runner import OneShot
from perrec_eval.stats import MetricSpec
from perrec_eval.tasks import Doc, Parsed, Task
from perrec_eval.tasks.recbench_plus import metrics, parsing, prompts

SUBSETS = ("explicit", "implicit")
SLOT = "recommend"
BASELINE_LENGTH = 10
CONSTANT_TITLES = ("Pride and Prejudice", "The Great Gatsby")  # the fake engine's `constant` answer


def _key(relation: str, value: str) -> tuple[str, str]:
    return relation, " ".join(value.split()).casefold()  # the builder's value_key on normalized values


@dataclass(frozen=True, slots=True)
class Catalogue:
    """A build's catalogue: per domain, its items' titles, popularity and relation values, and a matcher."""

    titles: dict[str, str]
    domain_of: dict[str, str]
    popularity: dict[str, int]
    facts: dict[str, frozenset[tuple[str, str]]]
    matchers: dict[str, parsing.Matcher] = field(repr=False)

    def satisfies(self, asin: str, conditions: Sequence[Mapping[str, str]]) -> bool:
        held = self.facts.get(asin, frozenset())
        return all(_key(c["relation"], c["value"]) in held for c in conditions)

    def resolve(
        self, asins_or_titles: Sequence[tuple[str, str | None]], truth: Mapping[str, Any]
    ) -> list[dict]:
        """(title, parent_asin) pairs → the prediction records, repeats kept once."""
        seen: set[str] = set()
        records = []
        for title, asin in asins_or_titles:
            key = asin or "title:" + parsing.normalize_title(title)
            if key in seen:
                continue
            seen.add(key)
            satisfies = asin is not None and self.satisfies(asin, truth["conditions"])
            records.append({"title": title, "parent_asin": asin, "satisfies": satisfies})
        return records

    def match(self, titles: Sequence[str], truth: Mapping[str, Any]) -> list[dict]:
        """A model's titles matched in the query's domain; a title several items share is read as the one
        the query wants (a ground-truth item, else one holding the conditions, else the most popular)."""
        matcher, relevant = self.matchers[truth["domain"]], {g["parent_asin"] for g in truth["ground_truth"]}

        def pick(asins: tuple[str, ...]) -> str | None:
            wanted = [a for a in asins if a in relevant] or [
                a for a in asins if self.satisfies(a, truth["conditions"])
            ]
            return (wanted or list(asins) or [None])[0]

        return self.resolve([(title, pick(matcher.match(title))) for title in titles], truth)


@cache
def load_catalogue(path: str) -> Catalogue:
    """The catalogue file of a build (its name carries its content hash, so caching by path is safe)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    by_domain: dict[str, list[tuple[str, str, int]]] = {}
    for row in rows:
        by_domain.setdefault(row["domain"], []).append((row["parent_asin"], row["title"], row["popularity"]))
    return Catalogue(
        titles={r["parent_asin"]: r["title"] for r in rows},
        domain_of={r["parent_asin"]: r["domain"] for r in rows},
        popularity={r["parent_asin"]: r["popularity"] for r in rows},
        facts={
            r["parent_asin"]: frozenset(_key(f["relation"], f["value"]) for f in r["relations"]) for r in rows
        },
        matchers={domain: parsing.Matcher(items) for domain, items in by_domain.items()},
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class QueryDoc(Doc):
    """A query: the Doc the general path scores, with its row and the catalogue its answer is matched in."""

    row: Mapping[str, Any]
    catalogue: Catalogue


def _outputs(data: str) -> dict[str, Any]:
    path = Path(data) / "manifest.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path}: {err}; pass a folder written by `perrecbench build --task recbench-plus`"
        ) from err
    if recorded.get("task") != "recbench-plus":
        raise DataError(
            f"{data} is not a RecBench+ build; build one with `perrecbench build --task recbench-plus`"
        )
    return recorded["outputs"]


def load_docs(data: str, subset: str, split: str, *, max_docs: int | None = None, seed: int = 0) -> list[Doc]:
    """The queries of one config and split (a seeded sample of `max_docs`)."""
    import pyarrow.parquet as pq

    outputs = _outputs(data)
    if split not in outputs.get(subset, {}):
        raise DataError(
            f"{data} has no {subset} {split} queries: build with more --users (or --train-users for train)"
        )
    catalogue = load_catalogue(str(Path(data) / outputs["catalogue"]["items"]))
    rows = pq.read_table(Path(data) / outputs[subset][split]).to_pylist()
    if max_docs is not None:
        rows = random.Random(seed).sample(rows, min(max_docs, len(rows)))
    return [
        QueryDoc(
            row["id"],
            {"ground_truth": row["ground_truth"], "conditions": row["conditions"], "domain": row["domain"]},
            f"{row['domain']}-{row['user_id']}",  # one user's queries are resampled together
            row=row,
            catalogue=catalogue,
        )
        for row in rows
    ]


@dataclass(frozen=True)
class Recommend:
    """Ask for the recommendations of a query (the released prompt; `variant` default, k or history)."""

    name: str = "recommend"
    max_tokens: int = 512
    variant: str = "default"
    k: int = 5

    def runner(self, doc: QueryDoc) -> OneShot:
        """One request per query; the prediction is the answer matched to the catalogue (None: failed)."""
        return OneShot(SLOT, finish=lambda titles: doc.catalogue.match(titles, doc.truth) if titles else None)

    def render(self, doc: QueryDoc, slot: Any, *, variant: str | None = None) -> list[dict[str, str]]:
        history = [item["title"] for item in doc.row["history"]]
        chosen = self.variant if variant is None else variant
        return prompts.messages(doc.row["query"], doc.row["domain"], history, variant=chosen, k=self.k)

    def parse(self, text: str | None, slot: Any) -> Parsed:
        return parsing.split_answer(text)

    def combine(self, values: Sequence[list[str]]) -> list[str]:
        counts = Counter(json.dumps(v) for v in values)
        return json.loads(counts.most_common(1)[0][0])

    def true_answer(self, doc: QueryDoc, slot: Any) -> list[str]:
        return [item["title"] for item in doc.truth["ground_truth"]]

    def format_answer(self, answer: list[str], slot: Any) -> str:
        return f" {prompts.SEPARATOR} ".join(answer)

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str:
        return self.name


def score_doc(metric: str, prediction: Any, truth: Any) -> float:
    return metrics.value(metric, prediction, truth)


def prediction_from(doc: QueryDoc, protocol: str, value: Any) -> list[dict] | None:
    """Another system's answer to a query (`perrecbench score --predictions`): its titles, best first,
    matched to the catalogue as a model's are (an empty list is a failed query)."""
    if not isinstance(value, list) or not all(isinstance(title, str) for title in value):
        raise ValueError("a query takes a list of titles, best first, or the raw answer text")
    titles = [title.strip() for title in value if title.strip()]
    return doc.catalogue.match(titles, doc.truth) if titles else None


def _ranked(doc: QueryDoc, keep: Any) -> list[dict]:
    catalogue, domain = doc.catalogue, doc.truth["domain"]
    shown = {item["parent_asin"] for item in doc.row["history"]}
    pool = [a for a, d in catalogue.domain_of.items() if d == domain and a not in shown and keep(a)]
    pool.sort(key=lambda a: (-catalogue.popularity[a], a))
    return catalogue.resolve([(catalogue.titles[a], a) for a in pool[:BASELINE_LENGTH]], doc.truth)


def predict_baseline(name: str, docs: Sequence[QueryDoc], *, data: str, seed: int) -> list[list[dict]]:
    """``popularity`` or ``condition-filter``: `BASELINE_LENGTH` catalogue items per query."""
    if name == "popularity":
        return [_ranked(doc, lambda asin: True) for doc in docs]
    if name == "condition-filter":
        return [
            _ranked(doc, lambda asin, doc=doc: doc.catalogue.satisfies(asin, doc.truth["conditions"]))
            for doc in docs
        ]
    raise ValueError(f"unknown RecBench+ baseline {name!r}")


_STRING = r'"([^"\\]|\\.)*"'


def answer_formats(spec: str) -> tuple[str, dict[str, Any] | None]:
    """A JSON list of titles (the parser reads it as well as the [SEP] list the prompt asks for)."""
    regex = rf"\[\s*{_STRING}(\s*,\s*{_STRING})*\s*\]"
    return regex, {"type": "array", "items": {"type": "string"}, "minItems": 1}


def constant_answer(request: Any) -> str | None:
    """The fake engine's `constant` answer to a RecBench+ request: two fixed famous titles."""
    messages = request.messages
    if not messages or "recommender system. You are given a" not in messages[0]["content"]:
        return None
    return f" {prompts.SEPARATOR} ".join(CONSTANT_TITLES)


TASK = Task(
    name="recbench-plus",
    title="RecBench+",
    description="recommend catalogue items that satisfy a user's stated conditions (Huang et al., 2025)",
    subset_axis="query type",
    protocol_axis="protocol",
    subsets=SUBSETS,
    protocols={"recommend": Recommend()},
    metrics=(
        MetricSpec("recall"),
        MetricSpec("precision"),
        MetricSpec("ndcg"),
        MetricSpec("condition_match"),
        MetricSpec("hallucination", higher_is_better=False),
        MetricSpec("ftr", higher_is_better=False),
    ),
    baselines=("popularity", "condition-filter"),
    builder="dataset_builder.recbench_plus.builder",
    answer_formats=answer_formats,
    constant_answer=constant_answer,
    load_docs=load_docs,
    score_doc=score_doc,
    predict_baseline=predict_baseline,
    prediction_from=prediction_from,
    # `score` also reads the released files (`released.py`); a run or a predictions file as every family's
    handlers={"score": "perrec_eval.tasks.recbench_plus.released:ReleasedScoreConfig:score_command"},
)
