"""RecBench+'s released demographics set: the released per-query numbers reproduced, then scored correctly,
and the published rows of the package (`perrec_eval/tasks/recbench_plus/published.yaml`) written from it.

Reads a checkout of `jiani-huang/RecAssistBench` (``git clone https://github.com/jiani-huang/RecAssistBench``;
the files used are all under 4 MiB): ``dataset/movie/DemographicsBasedQuery.json``, ``movies.dat``, each of
the seven models' responses in ``llm_results/`` (and the four fixed-K ones in ``llm_results/<model>-k/``) and
their per-query results in ``eval_results/movie-UserBasedQuery_*.json``.

1. **Reproduction**: `released.score_released(..., compat="released")` per query against the released
   results; a query counts as equal when its recall, precision, NDCG and FTR are all exactly equal (floats
   compared with ``==``). Reported as "N of M queries equal" per model.
2. **Corrected scoring** (the default of `perrecbench score`): each model's recall, precision, NDCG, FTR and
   share of titles outside MovieLens-1M with 95% percentile-bootstrap intervals over queries (a
   demographic group's queries resampled together), free-length and fixed K = 5 (a query answered twice is
   scored by its first answer: `released.REPEATS`), and paired sign-flip tests of recall and NDCG against
   the best model by corrected recall (`published.compute`).

Run from the repository root: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recbench_released.py
--released PATH/RecAssistBench``; add ``--write`` to replace the ``## RecBench+ released files`` section of
``benchmarks/RESULTS.md``, the package's ``published.yaml`` and the table of
``docs/reproducing-recbench-plus.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path

from metric_bench import write_section  # benchmarks/ is the script's folder, so on sys.path

from perrec_eval.evaluation import N_RESAMPLES
from perrec_eval.stats import MetricSpec
from perrec_eval.tasks.recbench_plus import published, released

logger = logging.getLogger("recbench_released")

SECTION = "## RecBench+ released files"
DOC = Path(__file__).resolve().parents[1] / "docs" / "reproducing-recbench-plus.md"
README = Path(__file__).resolve().parents[1] / "README.md"
DOC_TABLE = re.compile(r"(<!-- published rows -->\n).*?(<!-- /published rows -->)", re.DOTALL)
SHOWN = ("recall", "precision", "ndcg", "ftr", "not_in_catalogue")
TESTED = ("recall", "ndcg")


def results_path(root: Path, responses: str) -> Path:
    """The released per-query results of a responses file (the evaluator named them after it)."""
    name = Path(responses).name.removesuffix(".jsonl").removesuffix(".json") + ".json"
    return root / "eval_results" / name


def reproduce(root: Path, queries, movies) -> list[tuple[str, int, int]]:
    """(model, queries equal, queries in the released results) per model."""
    rows = []
    for model, responses in published.MODELS.items():
        answers = released.read_responses(str(root / "llm_results" / responses)).answers
        ours = {r["id"]: r for r in released.score_released(queries, answers, movies, compat="released")}
        theirs = json.loads(results_path(root, responses).read_text(encoding="utf-8"))
        equal = sum(
            all(float(ours[t["id"]][name]) == float(t[name]) for name in released.COMPAT_METRICS)
            for t in theirs
        )
        rows.append((model, equal, len(theirs)))
        logger.info("%s: %d of %d queries equal", model, equal, len(theirs))
    return rows


def tests(root: Path, queries, movies, best: str) -> list[str]:
    """Paired sign-flip tests of each model against `best`, as markdown rows."""
    clusters = [query.cluster for query in queries]
    records = {
        model: released.score_released(
            queries, released.read_responses(str(root / "llm_results" / path)).answers, movies
        )
        for model, path in published.MODELS.items()
    }
    lines = []
    for model in records:
        if model == best:
            continue
        found = [
            MetricSpec(name).paired_test(
                [float(r[name]) for r in records[model]],
                [float(r[name]) for r in records[best]],
                clusters,
                n_resamples=N_RESAMPLES,
                seed=0,
            )
            for name in TESTED
        ]
        lines.append(
            f"| {model} | "
            + " | ".join(f"{t.difference:+.3f}" for t in found)
            + " | "
            + " | ".join(f"{t.p_value:.4f}" for t in found)
            + " |"
        )
    return lines


def _cell(values: list[float]) -> str:
    return f"{values[0]:.3f} [{values[1]:.3f}, {values[2]:.3f}]"


def corrected_table(rows: list[dict], *, released_recall: bool) -> list[str]:
    header = "| model | recall | precision | NDCG | FTR | not in ML-1M | repeats |"
    lines = [header + (" released R |" if released_recall else ""),
             "|---|---|---|---|---|---|---:|" + ("---:|" if released_recall else "")]  # fmt: skip
    for row in rows:
        cells = " | ".join(_cell(row[name]) for name in SHOWN)
        extra = f" {row['released_recall']:.3f} |" if released_recall else ""
        lines.append(f"| {row['model']} | {cells} | {row['repeated_answers']} |{extra}")
    return lines


def markdown(reproduced, data: dict, test_rows: list[str], seconds: float) -> str:
    source, best = data["source"], data["rows"][0]["model"]
    return "\n".join(
        [
            f"`benchmarks/recbench_released.py` on the files of `jiani-huang/RecAssistBench` (checked at "
            f"commit {source['commit']}; 2 shared CPU cores, {seconds:.0f} s); code digest {data['code']}.",
            "",
            "Reproduction under `--compat released` (recall, precision, NDCG and FTR all exactly equal to "
            "the released `eval_results/movie-UserBasedQuery_*.json`):",
            "",
            "| model | queries equal |",
            "|---|---:|",
            *(f"| {model} | {equal} of {total} |" for model, equal, total in reproduced),
            "",
            f"Corrected scoring (the default), {source['queries']} queries of {source['groups']} "
            f"demographic groups; {source['interval']}. `not in ML-1M`: share of titles naming no "
            "MovieLens-1M item (later films included, so not a hallucination rate). `repeats`: answers to a "
            "query answered before (the first answer is scored). `released R`: the released mean recall, for "
            "comparison.",
            "",
            *corrected_table(data["rows"], released_recall=True),
            "",
            f"Fixed K = {data['fixed_k']['k']} (the `-k` folders; DeepSeek-V3's holds no answers), the "
            f"first {data['fixed_k']['k']} titles of each answer:",
            "",
            *corrected_table(data["fixed_k"]["rows"], released_recall=False),
            "",
            f"Paired sign-flip tests against the best by corrected recall ({best}), by group: difference "
            "(model − best) and two-sided p, not adjusted for the six comparisons.",
            "",
            "| model | " + " | ".join(f"Δ {n}" for n in TESTED) + " | " + " | ".join(f"p {n}" for n in TESTED)
            + " |",
            "|---|" + "---:|" * (2 * len(TESTED)),
            *test_rows,
        ]
    )


def _replace(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(text)
    os.replace(handle.name, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--released", required=True, type=Path, help="a checkout of jiani-huang/RecAssistBench"
    )
    parser.add_argument(
        "--write", action="store_true",
        help=f"replace '{SECTION}' in RESULTS.md, published.yaml and the tables of the reproduction page "
        "and README",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    queries = released.read_queries(str(args.released / published.QUERIES))
    movies = released.read_movies(str(args.released / published.MOVIES))
    reproduced = reproduce(args.released, queries, movies)
    data = published.compute(args.released)
    test_rows = tests(args.released, queries, movies, data["rows"][0]["model"])
    body = markdown(reproduced, data, test_rows, time.perf_counter() - start)
    print(body)
    if args.write:
        write_section(body, SECTION)
        _replace(published.DATA, published.dump(data))
        for path in (DOC, README):
            page = path.read_text(encoding="utf-8")
            _replace(path, DOC_TABLE.sub(lambda m: m.group(1) + published.doc_table(data) + m.group(2), page))
        logger.info("wrote %s to benchmarks/RESULTS.md, published.yaml, %s and README.md", SECTION, DOC.name)


if __name__ == "__main__":
    main()
