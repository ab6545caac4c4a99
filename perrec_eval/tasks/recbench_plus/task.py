"""RecBench+ as a task family (issue 26): the build's queries as docs, two protocols (free-length and
fixed-K), its metrics and four no-LLM baselines.

A doc is one query (`QueryDoc`: its row and the build's catalogue); its truth is JSON (query type,
ground-truth items, conditions, domain, the build's K) and its cluster its user (a user's queries are
resampled together in the intervals; a demographics query's, its group). The subsets are the query types
(`explicit`, `implicit`, `misinformed`, `interest`, `demographics`: built from MovieLens-1M only, an
Amazon build has none and the cell is left out) and the condition-count groups of the condition types
(`explicit-1`, `explicit-2`, `explicit-3-4`, ...): a query is scored in its type's cell and in its
group's. The protocols render the released prompts (`templates/recommend.yaml`): ``recommend`` asks for a
list of any length, ``recommend-k`` for K titles (the build's ``--k``) and scores the first K; both show
the user's history by default (`Recommend`). The answer is read as a list of
titles (`parsing.split_answer`) and matched to the catalogue once (`parsing.Matcher`), so every metric reads
one matched list (`metrics.value`).

Baselines answer K catalogue items outside the history shown, in every cell: ``popularity`` (the domain's
most reviewed), ``condition-filter`` (the items holding every condition, most reviewed first: a perfect
reader of an explicit query), ``bm25`` (BM25 of the query text over each item's title and relation values)
and ``history-popularity`` (items sharing the most relation values with the history shown, weighted by how
many history items hold each value, then the most reviewed).
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

import numpy as np

from perrec_eval import fileio
from perrec_eval.errors import DataError
from perrec_eval.runner import OneShot
from perrec_eval.stats import MetricSpec
from perrec_eval.task import Doc, Parsed, Task
from perrec_eval.tasks.recbench_plus import metrics, parsing, prompts, published, retrieval
from perrec_eval.tasks.recbench_plus import report as report_hooks

TYPES = ("explicit", "implicit", "misinformed", "interest", "demographics")
# each condition type, then its condition-count groups; a query is scored in both
SUBSETS = (*(s for t in TYPES[:3] for s in (t, *(f"{t}-{g}" for g in metrics.CONDITION_GROUPS))), *TYPES[3:])
OPTIONAL = ("demographics",)  # configs a build may lack (Amazon Reviews 2023 has no user attributes)
SLOT = "recommend"
RELEASED_SLOT = "recommend:released"  # a released query scored by the released evaluator's rules
RELEASED_METRICS = ("recall", "precision", "ndcg", "ftr")
FIXED_K = "recommend-k"  # the fixed-K protocol's name
DEFAULT_K = 5  # a build without a recorded --k
PHRASING_SYSTEM = "You simulate a real user who asks a recommendation assistant"  # templates/phrasing.yaml
CONSTANT_TITLES = ("Pride and Prejudice", "The Great Gatsby")  # the fake engine's `constant` answer


def _key(relation: str, value: str) -> tuple[str, str]:
    return relation, " ".join(value.split()).casefold()  # the builder's value_key on normalized values


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: `retrieval` caches an index per one
class Catalogue:
    """A build's catalogue: per domain, its items' titles, popularity and relation values, and a matcher."""

    titles: dict[str, str]
    domain_of: dict[str, str]
    popularity: dict[str, int]
    facts: dict[str, frozenset[tuple[str, str]]]
    matchers: dict[str, Any] = field(repr=False)  # domain -> its matcher (`_matcher`)
    # domain -> its asins, most reviewed first (ties by asin): the baselines' order and BM25's rows
    by_domain: dict[str, tuple[str, ...]] = field(repr=False)
    # domain -> relation value -> the rows (in `by_domain` order) of the items holding it
    holders: dict[str, dict[tuple[str, str], list[int]]] = field(repr=False)

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

    return catalogue_of(pq.read_table(path).to_pylist())


def catalogue_of(rows: Sequence[Mapping[str, Any]]) -> Catalogue:
    """The catalogue of rows ``{parent_asin, title, domain, popularity, relations}`` (the build's file)."""
    by_domain: dict[str, list[tuple[str, str, int]]] = {}
    for row in rows:
        by_domain.setdefault(row["domain"], []).append((row["parent_asin"], row["title"], row["popularity"]))
    facts = {
        r["parent_asin"]: frozenset(_key(f["relation"], f["value"]) for f in r["relations"]) for r in rows
    }
    ranked = {
        domain: tuple(asin for asin, _, _ in sorted(items, key=lambda item: (-item[2], item[0])))
        for domain, items in by_domain.items()
    }
    return Catalogue(
        titles={r["parent_asin"]: r["title"] for r in rows},
        domain_of={r["parent_asin"]: r["domain"] for r in rows},
        popularity={r["parent_asin"]: r["popularity"] for r in rows},
        facts=facts,
        matchers={domain: _matcher(domain, items) for domain, items in by_domain.items()},
        by_domain=ranked,
        holders={domain: _holders(asins, facts) for domain, asins in ranked.items()},
    )


def _matcher(domain: str, items: Sequence[tuple[str, str, int]]) -> parsing.Matcher:
    """A domain's title matcher (`parsing.Matcher`: MovieLens-1M's title forms are read in every domain)."""
    return parsing.Matcher(items)


def _holders(asins: Sequence[str], facts: Mapping[str, frozenset[tuple[str, str]]]) -> dict:
    rows: dict[tuple[str, str], list[int]] = {}
    for row, asin in enumerate(asins):
        for fact in facts[asin]:
            rows.setdefault(fact, []).append(row)
    return rows


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class QueryDoc(Doc):
    """A query: the Doc the general path scores, with its row and the catalogue its answer is matched in."""

    row: Mapping[str, Any]
    catalogue: Catalogue


def _manifest(data: str) -> dict[str, Any]:
    path = Path(data) / "manifest.json"
    try:
        recorded = fileio.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path}: {err}; pass a folder written by `perrecbench build --task recbench-plus`"
        ) from err
    if recorded.get("task") != "recbench-plus":
        raise DataError(
            f"{data} is not a RecBench+ build; build one with `perrecbench build --task recbench-plus`"
        )
    return recorded


def load_docs(data: str, subset: str, split: str, *, max_docs: int | None = None, seed: int = 0) -> list[Doc]:
    """The queries of one subset (a query type, or a type's condition-count group) and split (a seeded
    sample of `max_docs`)."""
    import pyarrow.parquet as pq

    recorded = _manifest(data)
    outputs, config, _, group = recorded["outputs"], *subset.partition("-")
    if config in OPTIONAL and split not in outputs.get(config, {}):
        return []  # not built from this source (every subset is asked by default)
    if split not in outputs.get(config, {}):
        raise DataError(
            f"{data} has no {config} {split} queries: build with more --users (or --train-users for train)"
        )
    catalogue = load_catalogue(str(Path(data) / outputs["catalogue"]["items"]))
    rows = pq.read_table(Path(data) / outputs[config][split]).to_pylist()
    if group:
        rows = [row for row in rows if metrics.condition_group(len(row["conditions"])) == group]
    k = recorded["parameters"].get("k", DEFAULT_K)  # builds before --k asked for the released K
    # a folder of released queries (`released_eval`) says which metrics its catalogue can tell
    checks = {name: recorded["parameters"].get(name, True) for name in ("condition_match", "hallucination")}
    compat = recorded["parameters"].get("compat")
    if max_docs is not None:
        rows = random.Random(seed).sample(rows, min(max_docs, len(rows)))
    return [
        QueryDoc(
            row["id"],
            {
                "type": config,
                "ground_truth": row["ground_truth"],
                "conditions": row["conditions"],
                "domain": row["domain"],
                "k": k,
                **{name: False for name, kept in checks.items() if not kept},
                **({"compat": compat, "released": row["released"]} if compat else {}),
            },
            f"{row['domain']}-{row['user_id']}",  # one user's queries are resampled together
            row=row,
            catalogue=catalogue,
        )
        for row in rows
    ]


@dataclass(frozen=True)
class Recommend:
    """Ask for the recommendations of a query with a released prompt; with `fixed_k`, ask for the build's K
    titles (the ``k`` wording) and score the first K.

    The default `variant` is ``history``, the paper's history variant: the user's last ten titles shown
    before the query. A build's condition query is one user's: the same text ("movies in the genre Drama")
    is asked by many users, each with their own ground truth (the items of *their* history holding the
    values), and only the history tells them apart. A query without a history (demographics) is asked with
    the no-history prompt. ``--prompts default`` asks every query without its history (the released
    default prompt); a build with ``--dedupe-queries`` keeps one query per text instead."""

    name: str = "recommend"
    # Every released answer of the seven models (RecAssistBench llm_results, preambles, refusals and notes
    # included; SmolLM2's tokenizer): free-length p99 228 tokens over all, 335 for Gemini-1.5-Pro, p99.9
    # 477; fixed K = 5: p99 111, p99.9 162, at most 282 (benchmarks/RESULTS.md). 512 and 256 leave room for
    # the preamble of every model but a reasoning one (DeepSeek-R1's answers alone: p99 541), which needs
    # --max-new-tokens; the released runs allowed 2000, which a small model fills with repeats.
    max_tokens: int = 512
    variant: str = "history"
    fixed_k: bool = False

    def runner(self, doc: QueryDoc) -> OneShot:
        """One request per query; the prediction is the answer matched to the catalogue (None: failed). A
        released query scored ``--compat released`` keeps the raw text (`RELEASED_SLOT`) and its prediction
        is the released evaluator's metrics of it (`released_prediction`)."""
        keep = doc.truth["k"] if self.fixed_k else None
        if doc.truth.get("compat") == "released":
            return OneShot(RELEASED_SLOT, finish=lambda text: released_prediction(doc, text, keep))
        return OneShot(
            SLOT,
            finish=lambda titles: None if titles is None else doc.catalogue.match(titles[:keep], doc.truth),
        )

    def render(self, doc: QueryDoc, slot: Any, *, variant: str | None = None) -> list[dict[str, str]]:
        history = [item["title"] for item in doc.row["history"]]
        chosen = self.variant if variant is None else variant
        if chosen == "history" and not history:  # nobody's history to show (a demographics query)
            chosen = "default"
        if self.fixed_k:  # the released K wording of the chosen variant
            chosen = {"default": "k", "history": "history-k"}.get(chosen, chosen)
        k = doc.truth["k"]
        return prompts.messages(doc.row["query"], doc.row["domain"], history, variant=chosen, k=k)

    def parse(self, text: str | None, slot: Any) -> Parsed:
        if slot == RELEASED_SLOT:  # the released rules read the text themselves (`released_prediction`)
            return Parsed(ok=True, value=text or "")
        return parsing.split_answer(text)

    def combine(self, values: Sequence[list[str]]) -> list[str]:
        counts = Counter(json.dumps(v) for v in values)
        return json.loads(counts.most_common(1)[0][0])

    def true_answer(self, doc: QueryDoc, slot: Any) -> list[str]:
        titles = [item["title"] for item in doc.truth["ground_truth"]]
        return titles[: doc.truth["k"]] if self.fixed_k else titles

    def format_answer(self, answer: list[str], slot: Any) -> str:
        return f" {prompts.SEPARATOR} ".join(answer)

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str:
        return self.name


def released_prediction(doc: QueryDoc, text: str | None, k: int | None) -> dict[str, Any]:
    """The released evaluator's recall, precision, NDCG and FTR of a released query's raw answer
    (`released.released_scores`; a failed request reads as an empty answer, as the release's did)."""
    from perrec_eval.tasks.recbench_plus import released

    rules = doc.truth["released"]
    query = released.ReleasedQuery(
        doc.id, doc.truth["type"], doc.row["query"], tuple(rules["titles"]),
        None if rules["movie_ids"] is None else tuple(rules["movie_ids"]), (), doc.cluster or doc.id,
    )  # fmt: skip
    values = released.released_scores(query, text, _movies(doc.catalogue, doc.truth["domain"]), k=k)
    return {"released": values}


@cache
def _movies(catalogue: Catalogue, domain: str) -> Any:
    """A catalogue's MovieLens movies in the released evaluator's terms (its id reading of titles)."""
    from perrec_eval.tasks.recbench_plus.released import Movie, MovieIds

    asins = sorted((a for a in catalogue.by_domain[domain] if a.isascii() and a.isdigit()), key=int)
    return MovieIds([Movie(int(a), catalogue.titles[a]) for a in asins])


def score_doc(metric: str, prediction: Any, truth: Any) -> float | None:
    """A query's value of `metric`; None where its type does not define it (`metrics.defined`)."""
    if truth.get("compat") == "released":  # the released evaluator's four metrics only
        return prediction["released"][metric] if metric in RELEASED_METRICS else None
    if not metrics.defined(metric, truth["type"]) or truth.get(metric) is False:
        return None  # `truth[metric]` False: the catalogue cannot tell it (released queries, `released_eval`)
    if metric == "condition_match" and truth["type"] == "demographics":
        return None  # a group's query is answered by taste, not by conditions (as interest queries)
    return metrics.value(metric, prediction, truth)


def prediction_from(doc: QueryDoc, protocol: str, value: Any) -> list[dict] | None:
    """Another system's answer to a query (`perrecbench score --predictions`): its titles, best first,
    matched to the catalogue as a model's are (an empty list declines the query, as a model's refusal
    does; a fixed-K cell reads the first K)."""
    if not isinstance(value, list) or not all(isinstance(title, str) for title in value):
        raise ValueError("a query takes a list of titles, best first, or the raw answer text")
    titles = [title.strip() for title in value if title.strip()]
    if protocol == FIXED_K:
        titles = titles[: doc.truth["k"]]
    return doc.catalogue.match(titles, doc.truth)


def _ranked(doc: QueryDoc, scores: Any = None, keep: Any = None) -> list[dict]:
    """The doc's K best catalogue items of its domain outside the history shown: highest `scores` (an
    array over `Catalogue.by_domain`; none: all equal), then the most reviewed, then by asin; only those
    `keep` allows."""
    catalogue, domain = doc.catalogue, doc.truth["domain"]
    asins = catalogue.by_domain[domain]
    shown = {item["parent_asin"] for item in doc.row["history"]}
    order = range(len(asins)) if scores is None else np.argsort(-scores, kind="stable")  # ties: popularity
    top: list[str] = []
    for row in order:
        asin = asins[row]
        if asin not in shown and (keep is None or keep(asin)):
            top.append(asin)
            if len(top) == doc.truth["k"]:
                break
    return catalogue.resolve([(catalogue.titles[a], a) for a in top], doc.truth)


def _history_scores(doc: QueryDoc) -> np.ndarray:
    """Each item's sum, over its relation values, of the history items shown that hold the value."""
    catalogue, domain = doc.catalogue, doc.truth["domain"]
    scores = np.zeros(len(catalogue.by_domain[domain]))
    held = Counter(
        fact for item in doc.row["history"] for fact in catalogue.facts.get(item["parent_asin"], ())
    )
    for fact, count in held.items():
        scores[catalogue.holders[domain].get(fact, [])] += count
    return scores


def predict_baseline(
    name: str, docs: Sequence[QueryDoc], *, data: str, seed: int, protocol: str | None = None
) -> list[list[dict]]:
    """``popularity``, ``condition-filter``, ``bm25`` or ``history-popularity``: K catalogue items per query
    (see the module docstring)."""
    if name == "popularity":
        return [_ranked(doc) for doc in docs]
    if name == "condition-filter":
        return [
            _ranked(doc, keep=lambda asin, doc=doc: doc.catalogue.satisfies(asin, doc.truth["conditions"]))
            for doc in docs
        ]
    if name == "bm25":
        return [_ranked(doc, scores=retrieval.scores(doc)) for doc in docs]
    if name == "history-popularity":
        return [_ranked(doc, scores=_history_scores(doc)) for doc in docs]
    raise ValueError(f"unknown RecBench+ baseline {name!r}")


_STRING = r'"([^"\\]|\\.)*"'


def answer_formats(spec: str) -> tuple[str, dict[str, Any] | None]:
    """A JSON list of titles (the parser reads it as well as the [SEP] list the prompt asks for); the empty
    list is allowed: it is how a constrained answer declines (no item fits, or the query's premise is
    false)."""
    regex = rf"\[\s*(?:{_STRING}(\s*,\s*{_STRING})*)?\s*\]"
    return regex, {"type": "array", "items": {"type": "string"}}


def constant_answer(request: Any) -> str | None:
    """The fake engine's `constant` answer to a RecBench+ request: two fixed famous titles; to a phrasing
    request of the build, the template query it shows."""
    messages = request.messages
    if messages and messages[0]["content"].startswith(PHRASING_SYSTEM):  # a build's --phrasing llm request
        return messages[-1]["content"].rpartition("Request: ")[2]  # the template's own text: it passes
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
    protocols={"recommend": Recommend(), FIXED_K: Recommend(name=FIXED_K, max_tokens=256, fixed_k=True)},
    metrics=(
        MetricSpec("recall"),
        MetricSpec("precision"),
        MetricSpec("ndcg"),
        MetricSpec("condition_match"),
        MetricSpec("hallucination", higher_is_better=False),
        MetricSpec("ftr", higher_is_better=False),
        MetricSpec("rejection"),
    ),
    baselines=("popularity", "condition-filter", "bm25", "history-popularity"),
    builder="dataset_builder.recbench_plus.builder",
    answer_formats=answer_formats,
    constant_answer=constant_answer,
    load_docs=load_docs,
    score_doc=score_doc,
    predict_baseline=predict_baseline,
    prediction_from=prediction_from,
    published_rows=published,
    prompt_variants=("history", "default"),
    report=report_hooks,
    evaluate="perrec_eval.tasks.recbench_plus.released_eval:evaluate",
    summary=(("recall", "average"),),
    # the paper's four query types, free-length answers (docs/suites.md: the hour's arithmetic)
    suite_defaults={
        "subsets": "explicit,implicit,misinformed,interest",
        "protocols": "recommend",
        "limit": 500,
    },
    suite_build={"domains": "Books"},
    # `score` also reads the released files (`released.py`); a run or a predictions file as every family's
    handlers={
        "score": "perrec_eval.tasks.recbench_plus.released:ReleasedScoreConfig:score_command",
        "evaluate": "perrec_eval.tasks.recbench_plus.released_eval:ReleasedEvalConfig:evaluate_command",
    },
)
