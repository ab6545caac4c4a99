"""PerRecBench as a one-round harness asks it (`perrec_eval.harness.requests.Adapter`).

A harness asks every request once and scores its rows one at a time; PerRecBench's PTC needs a group's
users together. So each row is one request of a group (pointwise: one per user; pairwise: every pair in
both orders; listwise: one per group), its item the answer as this family reads it (the group, the
request's slot and the parsed value), and a cell's value is computed over its rows' items: the groups'
rankers fed their answers, then `scoring.score_cells`, the scorer of every PerRecBench run.

Not expressible in one round, and refused by the export with the reason: heapsort pairwise (each
comparison is chosen by the answer before it), profiles written by the evaluated model (its profile
answers come before its ranking requests: export with a saved ``--profiles`` file, or none) and few-shot
demonstrations (a harness draws its own few-shot examples from the rows; the rows hold no answers).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from perrec_eval.harness.requests import Request, Selection, finite_or_nan
from perrec_eval.task import Cell
from perrec_eval.tasks.perrecbench import context, presentation, protocols, retrieval, systems
from perrec_eval.tasks.perrecbench.rankers import ListSlot, Prediction
from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord, SampleRecord
from perrec_eval.tasks.perrecbench.results import Scores
from perrec_eval.tasks.perrecbench.scoring import prediction_records, score_cells
from perrec_eval.tasks.perrecbench.task import TASK

HEAPSORT = (
    "heapsort pairwise chooses each comparison by the answer of the one before (an adaptive sort); a "
    "one-round harness asks every request at once: export all-pairs pairwise (every pair in both orders), "
    "or run heapsort with `perrecbench evaluate --pairwise-strategy heapsort`"
)


class PerRecBenchAdapter:
    """Levels × methods; options: ``k`` (retrieved history items), ``profiles`` (a saved profiles file,
    or None: no profile), ``cot``, ``presentation`` (listwise), ``pairwise_strategy`` (all-pairs only)."""

    task = TASK
    option_names = ("k", "profiles", "cot", "presentation", "pairwise_strategy")
    option_defaults = MappingProxyType({"k": retrieval.DEFAULT_K})

    def unexpressible(self, cell: Cell, options: Mapping[str, Any]) -> str | None:
        if cell.protocol == "pairwise" and options.get("pairwise_strategy", "allpairs") != "allpairs":
            return HEAPSORT
        return None

    def requests(self, selection: Selection, cell: Cell) -> list[Request]:
        """Each group's requests, rendered as `perrecbench evaluate` renders them (`systems.render_slot`)."""
        from perrec_eval.tasks.perrecbench.profiles import check_profiles, load_profiles

        options = selection.options
        groups = context.load_groups(
            selection.data, cell.subset, selection.split, selection.max_docs, seed=selection.seed
        )
        retrieved = retrieval.retrieve_groups(groups, options["k"])
        profiles = None
        if options.get("profiles"):
            profiles = load_profiles(options["profiles"])
            users = [(g.group_id, u.user_id) for g in groups for u in g.users]
            check_profiles(users, profiles, options["profiles"], "write them with `perrecbench profiles`")
        orders = presentation.listwise_orders(
            groups, options["presentation"], seed=selection.seed, level=cell.subset
        )
        contexts = context.contexts(groups, cell.subset, retrieved, profiles, listwise_orders=orders)
        variant = _variant(options)
        protocol = protocols.get(cell.protocol)
        out = []
        for index, ctx in enumerate(contexts):
            ranker = protocol.ranker(ctx.group.avg_ratings, listwise_order=ctx.listwise_order)
            for slot in ranker.pending():
                messages = systems.render_slot(cell.protocol, ctx, slot, variant)
                out.append(Request(ctx.group_id, index, slot.to_json(), tuple(messages)))
        return out

    def metrics(self, selection: Selection, cell: Cell) -> tuple[Any, ...]:
        # mae and rmse compare predicted ratings: pointwise only
        names = ("ptc", "mae", "rmse") if cell.protocol == "pointwise" else ("ptc",)
        return tuple(metric for metric in TASK.metrics if metric.name in names)

    def read(self, selection: Selection, cell: Cell, doc_id: str, slot: Any, text: str | None) -> dict:
        value = parse(cell, slot, text, group_sizes(selection, cell.subset)[doc_id]).value
        where = {"cell": f"{cell.subset}/{cell.protocol}", "selection": selection.key()}
        item = json.dumps({**where, "doc": doc_id, "slot": slot, "value": value})
        return {metric.name: item for metric in self.metrics(selection, cell)}

    def aggregate(self, metric: str, items: Sequence[Any]) -> float:
        """The cell's value over its rows' items (each names its cell and selection: one of each)."""
        answers: dict[str, dict[str, Any]] = {}
        where = set()
        for item in items:
            row = json.loads(item)
            where.add((row["cell"], row["selection"]))
            answers.setdefault(row["doc"], {})[json.dumps(row["slot"])] = row["value"]
        if len(where) != 1:
            return finite_or_nan(None)
        ((cell_key, selection_key),) = where
        selection = Selection.from_key(selection_key)
        records = cell_records(selection, Cell(*cell_key.split("/")), answers)
        if not records:
            return finite_or_nan(None)
        (scored,) = score_cells(records, seed=selection.seed).cells
        return finite_or_nan(getattr(scored, metric))


def _variant(options: Mapping[str, Any]) -> str:
    """The prompt variant of an export's options."""
    from perrec_eval.tasks.perrecbench.config import prompt_variant

    return prompt_variant(cot=bool(options.get("cot")), profile=bool(options.get("profiles")))


def parse(cell: Cell, slot: Any, text: str | None, n_users: int) -> Any:
    """An answer to the request `slot` of a group of `n_users` read as `perrecbench evaluate` reads it."""
    shown = {"user": 1, "pair": 2}.get(slot[0], n_users)
    return protocols.get(cell.protocol).parse(text, n_users=shown)


def group_sizes(selection: Selection, level: str) -> dict[str, int]:
    """Each group's number of users (a listwise answer is read against it)."""
    return _sizes(selection.key(), level)


@functools.cache
def _sizes(selection_key: str, level: str) -> dict[str, int]:
    return {group.group_id: len(group.users) for group in _groups(selection_key, level)}


@functools.cache
def _groups(selection_key: str, level: str) -> tuple[Group, ...]:
    """A level's groups of the selection, without their histories (what scoring reads)."""
    selection = Selection.from_key(selection_key)
    return tuple(
        context.load_groups(
            selection.data, level, selection.split, selection.max_docs, seed=selection.seed, history=False
        )
    )


def cell_records(
    selection: Selection, cell: Cell, answers: Mapping[str, Mapping[str, Any]]
) -> list[PredictionRecord]:
    """The prediction records of the groups answered in `answers` (group id → slot JSON → parsed value;
    None: failed), each group's ranker fed its answers: a request without an answer failed."""
    protocol = protocols.get(cell.protocol)
    groups = [g for g in _groups(selection.key(), cell.subset) if g.group_id in answers]
    predictions: dict[str, Prediction] = {}
    for group in groups:
        given = answers[group.group_id]
        order = _listwise_order(given, len(group.users)) if cell.protocol == "listwise" else None
        ranker = protocol.ranker(group.avg_ratings, listwise_order=order)
        ranker.feed({slot: given.get(json.dumps(slot.to_json())) for slot in ranker.pending()})
        predictions[group.group_id] = ranker.prediction()
    return prediction_records(cell.subset, cell.protocol, groups, predictions)


def _listwise_order(given: Mapping[str, Any], n_users: int) -> tuple[int, ...] | None:
    """The presentation a group's listwise request showed (its slot)."""
    for slot in given:
        return ListSlot.shown_order(json.loads(slot), n_users)
    return None


def score_answers(
    selection: Selection,
    answers: Mapping[Cell, Sequence[tuple[str, Any, str]]],
    *,
    variant: str | None = None,
    invalid: str | None = None,
) -> tuple[Scores, list[PredictionRecord], list[SampleRecord]]:
    """A harness's answers (per cell: group id, slot, text) scored as a PerRecBench run is: the records
    and samples of every cell, and `scoring.score_cells` of them all (the metric the exported tasks
    report: tau-b, failed groups 0, unless `variant` and `invalid` say otherwise)."""
    records: list[PredictionRecord] = []
    samples: list[SampleRecord] = []
    for cell, rows in answers.items():
        parsed: dict[str, dict[str, Any]] = {}
        sizes = group_sizes(selection, cell.subset)
        for group_id, slot, text in rows:
            result = parse(cell, slot, text, sizes[group_id])
            parsed.setdefault(group_id, {})[json.dumps(slot)] = result.value
            samples.append(_sample(cell, group_id, slot, text, result))
        records += cell_records(selection, cell, parsed)
    metric = {"variant": variant or "tau_b", "invalid": invalid or "zero"}
    return score_cells(records, samples, seed=selection.seed, **metric), records, samples


def _sample(cell: Cell, group_id: str, slot: Any, text: str, result: Any) -> SampleRecord:
    return SampleRecord(
        group_id=group_id,
        level=cell.subset,
        method=cell.protocol,
        step=0,
        slot=slot,
        key=None,
        texts=[text],
        parsed=[result.value],
        value=result.value,
        ok=result.ok,
        reason=None if result.ok else result.reason,
        num_failed_samples=0 if result.ok else 1,
        prompt_tokens=None,
        completion_tokens=None,
    )


ADAPTER = PerRecBenchAdapter()


def score_command(config: Any) -> int:
    """`perrecbench score --data DIR --predictions SAMPLES`: a harness's answers to exported PerRecBench
    tasks scored as a run of this family (`score_answers`); with ``--out``, written as a run folder that
    `perrecbench report` compares with the other runs on these groups."""
    import dataclasses
    import sys
    from pathlib import Path

    from perrec_eval.errors import ConfigError
    from perrec_eval.evaluation import fingerprint
    from perrec_eval.harness.samples import read_harness
    from perrec_eval.lock import folder_lock
    from perrec_eval.results import RunInfo
    from perrec_eval.rundir import check_out, claim
    from perrec_eval.tasks.perrecbench import report

    output = read_harness(config.predictions, TASK.name)
    if output is None:
        raise ConfigError(
            f"--predictions {config.predictions} is not a harness's answers: PerRecBench scores a run "
            "folder, or lm-eval's samples (--log_samples) or lighteval's details (--save-details) of "
            "`perrecbench export` tasks"
        )
    selection = _one_selection(output, config.data, fingerprint(config.data))
    answers = {
        Cell(cell.split("/")[1], cell.split("/")[2]): [(a.doc_id, a.slot, a.text) for a in cell_answers]
        for cell, cell_answers in output.by_cell().items()
    }
    scores, records, samples = score_answers(
        selection, answers, variant=config.variant, invalid=config.invalid
    )
    label = config.label or Path(config.predictions).stem
    info = RunInfo(
        config=_run_record(config, selection, output, label),
        complete=True,
        engine_errors={"requests": 0, "first": None},
        prompt_variant=_variant(selection.options),
        presentation=selection.options["presentation"],
        metric=dataclasses.replace(_metric(), variant=scores.variant, invalid=scores.invalid),
        engine={"name": output.harness, "model": label, "files": [file.name for file in output.files]},
        versions=_versions(output.harness),
        templates=_templates(),
        retrieval=retrieval.RETRIEVAL_INFO,
        dataset_fingerprint=context.dataset_fingerprint(config.data),
        groups={
            level: list(dict.fromkeys(r.group_id for r in records if r.level == level))
            for level in _levels(answers)
        },
        label=label,
    )
    where = Path(config.out) if config.out is not None else Path(label)
    if config.json:
        json.dump(scores.to_family().to_json(), sys.stdout, indent=2)
        print()
    else:
        print(report.table([report.family_run(where, info, scores, records)]))
    if config.out is not None:
        out = check_out(
            config.out, {"--data": config.data, "--predictions": config.predictions}, command="score"
        )
        with folder_lock(out):
            claim(out, info.config, overwrite=config.overwrite)
            out.mkdir(parents=True, exist_ok=True)
            report.write_scored(out, info, scores, records, samples)
        print(f"written to {config.out}/ (scores.json, predictions.jsonl, run.json)", file=sys.stderr)
    return 0


def _one_selection(output: Any, data: str, build_fingerprint: str) -> Selection:
    """The one selection the answers were exported with, on the local build `data`.

    Raises:
        DataError: answers of several exports, or of another build than `data`.
    """
    from dataclasses import replace
    from pathlib import Path

    from perrec_eval.errors import DataError

    keys = {answer.selection for answer in output.answers}
    if len(keys) != 1:
        raise DataError(
            f"{output.files[0].parent} answers tasks of {len(keys)} exports (other builds or settings): "
            "score one export's answers at a time"
        )
    selection = Selection.from_key(keys.pop())
    if selection.fingerprint != build_fingerprint:
        raise DataError(
            f"{output.answers[0].where} answers the build {selection.source}, not --data {data}: pass the "
            "build the tasks were exported from"
        )
    return replace(selection, data=str(Path(data).resolve()))


def _levels(answers: Mapping[Cell, Any]) -> list[str]:
    from perrec_eval.tasks.perrecbench.vocabulary import LEVELS

    return [level for level in LEVELS if any(cell.subset == level for cell in answers)]


def _run_record(config: Any, selection: Selection, output: Any, label: str) -> dict[str, Any]:
    """run.json's config of a harness run: the settings `perrecbench evaluate` records, as the export set
    them (greedy answers, zero-shot, all-pairs, no self-consistency)."""
    from perrec_eval.tasks.perrecbench.vocabulary import METHODS

    options = selection.options
    cells = output.by_cell()
    methods = [m for m in METHODS if any(cell.endswith(f"/{m}") for cell in cells)]
    budgets = {
        method: next(
            a.max_new_tokens for c, answers in cells.items() if c.endswith(f"/{method}") for a in answers
        )
        for method in methods
    }
    return {
        "task": TASK.name,
        "data": config.data,
        "predictions": config.predictions,
        "harness": output.harness,
        "engine": output.harness,
        "model": label,
        "label": label,
        "split": selection.split,
        "levels": _levels({Cell(*c.split("/")[1:]): None for c in cells}),
        "methods": methods,
        "max_groups": selection.max_docs,
        "seed": selection.seed,
        "k": options["k"],
        "profiles": options.get("profiles"),
        "no_profile": not options.get("profiles"),
        "cot": options.get("cot", False),
        "presentation": options["presentation"],
        "pairwise_strategy": "allpairs",
        "shots": 0,
        "samples": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "structured_outputs": False,
        "max_new_tokens": [f"{m}={n}" for m, n in budgets.items() if n is not None],
        "variant": config.variant,
        "invalid": config.invalid,
    }


def _metric() -> Any:
    from perrec_eval.tasks.perrecbench.results import Metric

    return Metric("tau_b", "zero")


def _versions(harness: str) -> dict[str, str | None]:
    from perrec_eval.rundir import versions

    return versions("perrecbench", "lm_eval" if harness == "lm-eval" else "lighteval", "datasets", "bm25s")


def _templates() -> dict[str, Any]:
    from perrec_eval.tasks.perrecbench.prompts import template_info

    return template_info()
