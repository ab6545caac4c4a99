"""A harness's logged answers to exported tasks, read as they are: lm-eval's ``--log_samples`` files
(``samples_<task>_<date>.jsonl``: each line's ``doc`` is the row, ``filtered_resps`` what its
``process_results`` read) and lighteval's ``--save-details`` files (``details_<task>|<shots>_<date>.parquet``:
each row's ``doc.specific`` is the row, ``model_response.text`` the answers).

`read_harness` gives each answered row (`Answer`) with what the rows say of themselves (cell, selection);
`perrecbench score --predictions` scores them with the family's scorer (the general path:
`evaluation.read_external`; PerRecBench: `tasks.perrecbench.harness`). This module reads files only.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.errors import DataError

logger = logging.getLogger(__name__)

ROW_KEYS = ("cell", "selection", "request", "doc_id", "slot")
_LM_EVAL = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")
_LIGHTEVAL = re.compile(
    r"^details_(?P<task>.+)\|(?P<shots>\d+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.parquet$"
)


@dataclass(frozen=True, slots=True)
class Answer:
    """One answered row: its cell (``family/subset/protocol``), selection (JSON), doc, slot and answer."""

    cell: str
    selection: str
    doc_id: str
    slot: Any
    text: str
    where: str  # the file and line (or row) it came from, for messages
    max_new_tokens: int | None = None  # the answer budget the harness gave

    @property
    def task(self) -> str:
        return self.cell.split("/")[0]

    @property
    def subset(self) -> str:
        return self.cell.split("/")[1]

    @property
    def protocol(self) -> str:
        return self.cell.split("/")[2]

    @property
    def selection_json(self) -> dict[str, Any]:
        return json.loads(self.selection)


@dataclass(frozen=True, slots=True)
class HarnessOutput:
    """What one harness run logged: the harness, its files and every answered row."""

    harness: str
    files: tuple[Path, ...]
    answers: tuple[Answer, ...]

    def by_cell(self) -> dict[str, list[Answer]]:
        cells: dict[str, list[Answer]] = {}
        for answer in self.answers:
            cells.setdefault(answer.cell, []).append(answer)
        return cells


def read_harness(path: str | Path, task: str) -> HarnessOutput | None:
    """The answers to family `task`'s tasks a harness logged in `path` (a samples or details file, or a
    folder of one run's, which may answer several families), or None for a file that is neither (a
    predictions JSONL of this project's own format).

    Raises:
        DataError: a folder holding no harness output or several runs', a line that is not an exported
            row's, no answer to `task`, a row answered twice, or a run with few-shot examples.
    """
    path = Path(path)
    if not is_harness_output(path):
        return None
    files = _run_files(path) if path.is_dir() else [path]
    harness = "lighteval" if _LIGHTEVAL.match(files[0].name) else "lm-eval"
    reader = _lighteval_answers if harness == "lighteval" else _lm_eval_answers
    every = [answer for file in files for answer in reader(file)]
    answers = [answer for answer in every if answer.task == task]
    if not answers:
        found = ", ".join(sorted({answer.task for answer in every}))
        raise DataError(
            f"{path} holds no answer to {task}'s tasks (it answers {found}): pass --task and its build"
        )
    if harness == "lm-eval":
        _check_lm_eval_run(files)
    seen: dict[tuple[str, str, str], str] = {}
    for answer in answers:
        key = (answer.cell, answer.doc_id, json.dumps(answer.slot))
        if key in seen:
            raise DataError(
                f"{answer.where} answers a request {seen[key]} answers too ({answer.cell}, doc "
                f"{answer.doc_id!r}): score one run of each task (lighteval: its family or the suite, not "
                "both)"
            )
        seen[key] = answer.where
    return HarnessOutput(harness, tuple(files), tuple(answers))


def is_harness_output(path: str | Path) -> bool:
    """Whether `path` is what a harness logs (a folder of a run's, lighteval's details, lm-eval's samples of
    exported rows) rather than a predictions JSONL of this project's own format."""
    path = Path(path)
    if path.is_dir():
        return True
    return bool(_LIGHTEVAL.match(path.name) or (_LM_EVAL.match(path.name) and _is_row_line(path)))


def _is_row_line(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            first = json.loads(handle.readline() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(first, dict) and isinstance(first.get("doc"), dict) and "cell" in first["doc"]


def _run_files(folder: Path) -> list[Path]:
    """The samples (or details) files of the one run a folder holds."""
    runs: dict[tuple[str, str], list[Path]] = {}
    for file in sorted(folder.rglob("*")):
        for kind, pattern in (("lm-eval", _LM_EVAL), ("lighteval", _LIGHTEVAL)):
            found = pattern.match(file.name)
            if found and file.is_file():
                runs.setdefault((kind, found["date"]), []).append(file)
    if not runs:
        raise DataError(
            f"{folder} holds no samples_<task>_<date>.jsonl (lm_eval --log_samples) nor details_*.parquet "
            "(lighteval --save-details): pass a harness's output folder or one of its files"
        )
    if len(runs) > 1:
        dates = ", ".join(f"{kind} {date}" for kind, date in sorted(runs))
        raise DataError(f"{folder} holds the answers of {len(runs)} runs ({dates}): pass one run's files")
    return next(iter(runs.values()))


def _row(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or any(key not in doc for key in ROW_KEYS):
        raise DataError(
            f"{where} is not an answer to a task of `perrecbench export` (its doc has no "
            f"{', '.join(ROW_KEYS)}): pass the output of a run of the exported tasks"
        )
    return doc


def _lm_eval_answers(file: Path) -> Iterator[Answer]:
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{file} line {number}"
            try:
                sample = json.loads(line)
            except ValueError as err:
                raise DataError(
                    f"{where} is not JSON ({err}): pass lm-eval's samples file as written"
                ) from None
            row = _row(sample.get("doc") if isinstance(sample, dict) else None, where)
            arguments = sample.get("arguments") or {}
            budget = (
                next(iter(arguments.values()), {}).get("arg_1", {}) if isinstance(arguments, dict) else {}
            )
            text = _first_text(sample.get("filtered_resps"), where)
            yield _answer(row, text, where, budget.get("max_gen_toks") if isinstance(budget, dict) else None)


def _first_text(value: Any, where: str) -> str:
    """The answer `process_results` was given: the first of the filtered responses."""
    while isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, str):
        raise DataError(
            f"{where} has no answer text in filtered_resps: pass lm-eval's samples file as written"
        )
    return value


def _answer(row: dict[str, Any], text: str, where: str, budget: Any = None) -> Answer:
    budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else None
    return Answer(row["cell"], row["selection"], row["doc_id"], json.loads(row["slot"]), text, where, budget)


def _lighteval_answers(file: Path) -> Iterator[Answer]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except Exception as err:  # pyarrow's errors differ by version; any is a damaged file
        raise DataError(
            f"{file} cannot be read ({type(err).__name__}): pass lighteval's details file"
        ) from None
    shots = int(_LIGHTEVAL.match(file.name)["shots"])
    if shots:
        raise DataError(f"{file} is a {shots}-shot run: the exported tasks are zero-shot (run TASK|0)")
    for number, detail in enumerate(table.to_pylist()):
        where = f"{file} row {number}"
        doc = detail.get("doc") or {}
        row = _row(doc.get("specific"), where)
        texts = (detail.get("model_response") or {}).get("text") or []
        yield _answer(row, _first_text(texts or [None], where), where, doc.get("generation_size"))


def _check_lm_eval_run(files: Sequence[Path]) -> None:
    """Refuse a few-shot run, and say when the chat template was off, from the run's results file."""
    date = _LM_EVAL.match(files[0].name)["date"]
    results = files[0].with_name(f"results_{date}.json")
    if not results.is_file():
        return
    try:
        record = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    shots = {task: n for task, n in (record.get("n-shot") or {}).items() if isinstance(n, int) and n > 0}
    if shots:
        task, n = next(iter(shots.items()))
        raise DataError(
            f"{results}: {task} ran with {n} few-shot examples: the exported tasks are zero-shot (drop "
            "--num_fewshot)"
        )
    if record.get("chat_template") is None:
        logger.warning(
            "%s: lm-eval ran without --apply_chat_template: the model read each request as plain text, not "
            "as the chat messages `perrecbench evaluate` sends",
            results,
        )
