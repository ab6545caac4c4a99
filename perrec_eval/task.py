"""What a task family is: the one small interface every benchmark of the house plugs in behind.

A family (PerRecBench, LLMRec, RecBench+) is a folder `perrec_eval/tasks/<name>/` whose module `task.py`
defines `TASK`, a `Task`. General code (engines, cache, runs, statistics, reports, publishing, fine-tuning)
speaks only of what is declared here:

- **docs**: the units scored (a PerRecBench group, an LLMRec instance, a RecBench+ query), each with an
  `id`, its `truth` and an optional `cluster` (docs of one cluster are resampled together);
- **cells**: the columns of a family's results, a subset of its docs crossed with a request protocol
  (PerRecBench: level × method), named by the family's own axis words;
- **protocols**: one object per way of asking (render, answer format, parse, budget, true answer), driven
  by lockstep runners: `pending()` requests of every doc of a cell go to the engine in one call per step;
- **metrics**: declared with their direction, aggregation, interval and paired test (`perrec_eval.stats`);
- **baselines**: no-LLM systems scored through the same runner and run folder as models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from perrec_eval.runner import Runner


@dataclass(frozen=True, slots=True)
class Doc:
    """One scored unit of a family: its id, its truth and, when docs are not independent, its cluster."""

    id: str
    truth: Any
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Parsed:
    """A reply as a protocol read it: `value` when `ok`, else `reason` (short, machine-readable) and `detail`.

    Failures are data, never exceptions: the runner counts them per cell.
    """

    ok: bool
    value: Any = None
    reason: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True, order=True)
class Cell:
    """One cell of a family's results: the docs of `subset` asked with `protocol`.

    >>> str(Cell("easy", "listwise"))
    'easy/listwise'
    """

    subset: str
    protocol: str

    def __str__(self) -> str:
        return f"{self.subset}/{self.protocol}"


class RequestProtocol(Protocol):
    """One way of asking a model about a doc: what a family's protocol object provides.

    `runner(doc)` makes the doc's lockstep state machine, whose slots `render` turns into chat messages;
    `parse` reads a reply to a slot, `combine` merges several samples' parsed values; `true_answer` and
    `format_answer` write what a correct reply to a slot is (few-shot demonstrations, SFT targets, the
    fake engine's oracle); `answer_format` names the structured-output format of a doc's answers.
    """

    name: str
    max_tokens: int

    def runner(self, doc: Doc) -> Runner: ...

    def render(self, doc: Doc, slot: Any, *, variant: str = "default") -> list[dict[str, str]]: ...

    def parse(self, text: str | None, slot: Any) -> Any: ...

    def combine(self, values: Sequence[Any]) -> Any: ...

    def true_answer(self, doc: Doc, slot: Any) -> Any: ...

    def format_answer(self, answer: Any, slot: Any) -> str: ...

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """A task family: its name, cells, protocols, metrics and baselines.

    `subsets` and `protocols` span the cells, named `subset_axis` and `protocol_axis` in tables (PerRecBench:
    level and method). `metrics` lists the family's metrics, the headline first. `builder` is the module
    of the family's builder (`perrecbench build --task NAME`). `answer_formats(spec)` gives the regex and
    JSON schema of an answer-format spec of the family's protocols (`--structured-outputs`);
    `constant_answer(request)` the fake engine's `constant` answer to a request the family rendered (None
    for any other request). `hub_description` is what the benchmark's Hub ``eval.yaml`` says it is.

    The general runs need three functions: `load_docs(data, subset, split, max_docs=, seed=)` reads the
    docs of a build, `score_doc(metric, prediction, truth)` gives a doc's value of a mean metric (or its
    item of a corpus metric; `prediction` is None for a failed doc; None for every doc of a cell: not a
    metric of that cell) and `predict_baseline(name, docs, data=, seed=, protocol=)` answers every doc of
    a cell (`protocol`: the cell's) as a no-LLM baseline (None: the baseline does not answer that cell's
    docs, which is then left out of its run).
    A family may run a command its own way instead (`handlers`); PerRecBench does, for files
    byte-identical to the ones it always wrote.
    """

    name: str
    title: str
    description: str
    subset_axis: str
    protocol_axis: str
    subsets: tuple[str, ...]
    protocols: Mapping[str, RequestProtocol]
    metrics: tuple[Any, ...]
    baselines: tuple[str, ...]
    builder: str
    answer_formats: Callable[[str], tuple[str, dict[str, Any] | None]] = field(repr=False)
    constant_answer: Callable[[Any], str | None] = field(repr=False)
    # The general runs (`perrec_eval.evaluation`): docs, each doc's metric values, the baselines' answers.
    load_docs: Callable[..., Sequence[Doc]] | None = field(default=None, repr=False)
    score_doc: Callable[[str, Any, Any], Any] | None = field(default=None, repr=False)
    predict_baseline: Callable[..., Sequence[Any]] | None = field(default=None, repr=False)
    # Commands a family runs its own way ("evaluate", "score", "sft data"): name -> "module:Config:handler"
    handlers: Mapping[str, str] = field(default_factory=dict)
    # The benchmark's description in its Hub ``eval.yaml`` (None: made from title, description and headline).
    hub_description: str | None = None
    # A family that writes its own scores reads its run.json metric part: (part, path) -> its record
    read_metric: Callable[[Mapping[str, Any], Any], Any] | None = field(default=None, repr=False)
    # The protocols that can ask about each subset (None: every protocol asks about every subset), for a
    # family whose subsets are different tasks (LLMRec: a rating protocol cannot ask a ranking subset)
    subset_protocols: Mapping[str, tuple[str, ...]] | None = None
    # Bring your own predictions (`perrecbench score --predictions`): `prediction_from(doc, protocol, value)`
    # turns a file's value that is not answer text into the doc's prediction (what the protocol's runner
    # gives; None: failed), raising ValueError that names the value it takes. A string value is always read
    # as a model's answer is (the protocol's parser), so a family without this hook takes answer text only.
    prediction_from: Callable[[Doc, str, Any], Any] | None = field(default=None, repr=False)
    # Who may read what, checked when answers come back: `leak_check(cell, docs, predictions)` (predictions
    # by doc id) flags a cell whose answers could only come from a column the cell does not show (LLMRec:
    # catalogue-wide answers made of the rows' candidates), as a JSON-ready record with ``flagged`` and the
    # counts, or None (not flagged). `score` keeps it in scores.json; reports mark the cell, never crown it.
    leak_check: Callable[[Cell, Sequence[Doc], Mapping[str, Any]], Mapping[str, Any] | None] | None = field(
        default=None, repr=False
    )
    # Published numbers of another dataset shown beside a report's runs, never ranked with them: an object
    # with `for_cells(cells) -> data | None` (None: none apply to these cells) and `markdown(data) -> lines`
    # (RecBench+: the released models' corrected rows, `tasks/recbench_plus/published.py`)
    published_rows: Any = field(default=None, repr=False)
    # What a family adds to its report section (`perrec_eval.leaderboard.family.ReportHooks`: its main
    # table's cells, its own tables and plots; None: the shared section alone)
    report: Any = field(default=None, repr=False)
    # A family whose runs once wrote another scores.json layout reads it into the shared one:
    # `legacy_scores(data, path) -> results.FamilyScores` (PerRecBench: runs before 2026-11-29)
    legacy_scores: Callable[[Mapping[str, Any], Any], Any] | None = field(default=None, repr=False)
    # A family whose predictions.jsonl lines are its own reads them as the shared `DocPrediction`s:
    # `read_predictions(run_dir, info) -> list[DocPrediction]` (None: the shared lines)
    read_predictions: Callable[[Any, Any], Sequence[Any]] | None = field(default=None, repr=False)
    # A family a one-round harness asks its own way: "module:NAME" of its harness adapter
    # (`perrec_eval.harness.requests.Adapter`; None: the general path's; PerRecBench: its rows are requests,
    # its items carry their group)
    harness: str | None = None
    # The build's fingerprint as the family's runs record it (None: `perrec_eval.evaluation.fingerprint`)
    fingerprint: Callable[[str], str] | None = field(default=None, repr=False)
    # What the average column of a report averages: "subsets" (the shown metric over one cell per subset,
    # each doc set once) or "cells" (over every main cell, PerRecBench's Avg. of the paper's Table 1)
    average_over: str = "subsets"
    # What the suite's summary table shows of the family: (metric, cell "subset/protocol" or "average")
    # pairs, each with its interval and direction (None: the headline's average)
    summary: tuple[tuple[str, str], ...] | None = None
    # The family's evaluate in Python, "module:function" taking (config, engine=None): a model's run, or
    # with engine "baseline" its baselines' runs (what `perrecbench evaluate` runs, for a suite)
    evaluate: str = "perrec_eval.evaluation:evaluate"
    # The evaluate settings that choose a run's docs and cells: a suite runs the baselines with these of
    # the model's run, and runs them once per build and these settings
    selection: tuple[str, ...] = ("split", "subsets", "protocols", "max_docs", "seed")
    # A suite's defaults of the family's evaluate settings (``limit`` for its doc limit) and build settings
    # (`perrecbench evaluate --task all`: about an hour of an 8B model on one GPU; docs/suites.md)
    suite_defaults: Mapping[str, Any] | None = None
    suite_build: Mapping[str, Any] | None = None
    # The fewest docs (clusters where docs share one) on which a report marks a cell's best run: a paired
    # sign-flip test over fewer than 6 never reaches p < 0.05 (its smallest p is 2 / 2**n)
    min_docs_to_compare: int = 6
    # Prompt variants a protocol renders (`render(..., variant=)`, `--prompts`; none: the family has one),
    # and the one `sft data` writes examples with by default (None: the protocols' own default)
    prompt_variants: tuple[str, ...] = ()
    sft_prompts: str | None = None
    # The protocols `sft data --format mixed` mixes (None: all of them)
    sft_mixed: tuple[str, ...] | None = None
    # Keys of a parsed answer (a mapping) summed per cell into scores.json's `answer_counts` and the report
    # (LLMRec: titles repeated, naming no item, naming an item outside the candidates)
    answer_counts: tuple[str, ...] = ()
    # Policies a protocol's parse takes for answers out of range (`parse(..., policy=)`, `--invalid-policy`;
    # none: the family has one)
    invalid_policies: tuple[str, ...] = ()

    def answer_regex(self, spec: str) -> str:
        """The regular expression of the family's answer-format `spec` (structured outputs)."""
        return self.answer_formats(spec)[0]

    def json_schema(self, spec: str) -> dict[str, Any] | None:
        """The JSON schema of the family's answer-format `spec`, if one fits."""
        return self.answer_formats(spec)[1]

    def __post_init__(self) -> None:
        if not self.subsets or not self.protocols or not self.metrics:
            raise ValueError(f"task {self.name!r} needs at least one subset, protocol and metric")

    @property
    def headline(self) -> Any:
        """The metric a leaderboard ranks by."""
        return self.metrics[0]

    def protocol(self, name: str) -> RequestProtocol:
        """The protocol `name`; a ValueError lists the known ones."""
        try:
            return self.protocols[name]
        except KeyError:
            known = list(self.protocols)
            raise ValueError(
                f"unknown {self.protocol_axis} {name!r} of task {self.name}; choose one of {known}"
            ) from None

    def cells(
        self, subsets: Iterable[str] | None = None, protocols: Iterable[str] | None = None
    ) -> tuple[Cell, ...]:
        """The cells of `subsets` × `protocols` (default: all), in the family's order; with
        `subset_protocols`, only the pairs it allows."""
        chosen_subsets = self.subsets if subsets is None else tuple(subsets)
        chosen = tuple(self.protocols) if protocols is None else tuple(protocols)
        allowed = self.subset_protocols
        return tuple(
            Cell(s, p) for s in chosen_subsets for p in chosen if allowed is None or p in allowed.get(s, ())
        )

    def eval_description(self) -> str:
        """What the benchmark's Hub ``eval.yaml`` says it is: `hub_description`, or one made from the rest."""
        if self.hub_description is not None:
            return self.hub_description
        direction = "higher" if getattr(self.headline, "higher_is_better", True) else "lower"
        return (
            f"{self.title}: {self.description}. Score: {self.headline.name} ({direction} is better). "
            f"One task per {self.subset_axis} (config) and {self.protocol_axis}."
        )

    def describe(self) -> dict[str, Any]:
        """What `perrecbench tasks` shows of the family (JSON-ready)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "cells": f"{self.subset_axis} × {self.protocol_axis}",
            self.subset_axis + "s": list(self.subsets),
            self.protocol_axis + "s": list(self.protocols),
            "metrics": [_metric_json(metric) for metric in self.metrics],
            "baselines": list(self.baselines),
        }


def _metric_json(metric: Any) -> dict[str, Any]:
    names = ("name", "higher_is_better", "aggregation")
    return {name: getattr(metric, name) for name in names if hasattr(metric, name)}


def check_unique_protocols(tasks: Sequence[Task]) -> None:
    """Protocol names name answer formats across families (an engine resolves a format by its name)."""
    seen: dict[str, str] = {}
    for task in tasks:
        for name in task.protocols:
            if seen.setdefault(name, task.name) != task.name:
                raise ValueError(f"protocol {name!r} is declared by tasks {seen[name]} and {task.name}")
