"""RecBench+'s released demographics set: the released per-query numbers reproduced, then scored correctly.

Reads a checkout of `jiani-huang/RecAssistBench` (``git clone https://github.com/jiani-huang/RecAssistBench``;
the files used are all under 4 MiB): ``dataset/movie/DemographicsBasedQuery.json``, ``movies.dat``, each of
the seven models' responses in ``llm_results/`` and their per-query results in
``eval_results/movie-UserBasedQuery_*.json``.

1. **Reproduction**: `released.score_released(..., compat="released")` per query against the released
   results; a query counts as equal when its recall, precision, NDCG and FTR are all exactly equal (floats
   compared with ``==``). Reported as "N of M queries equal" per model.
2. **Corrected scoring** (the default of `perrecbench score`): each model's recall, precision, NDCG, FTR and
   share of titles outside MovieLens-1M with 95% percentile-bootstrap intervals over queries (a
   demographic group's queries resampled together), and paired sign-flip tests of recall and NDCG against
   the best model by corrected recall.

Run from the repository root: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recbench_released.py
--released PATH/RecAssistBench``; add ``--write`` to replace the ``## RecBench+ released files`` section of
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from metric_bench import write_section  # benchmarks/ is the script's folder, so on sys.path

from perrec_eval.evaluation import CONFIDENCE_LEVEL, N_RESAMPLES
from perrec_eval.stats import MetricSpec
from perrec_eval.tasks.recbench_plus import released

logger = logging.getLogger("recbench_released")

SECTION = "## RecBench+ released files"
QUERIES = "dataset/movie/DemographicsBasedQuery.json"
MOVIES = "dataset/movie/movies.dat"
# model -> its responses under llm_results/ (its released per-query results: `results_path`)
MODELS = {
    "GPT-4o": "gpt-4o/movie-UserBasedQuery_gpt-4o-prediction.json",
    "GPT-4o-mini": "gpt-4o-mini/movie-UserBasedQuery_gpt-4o-mini-prediction.jsonl",
    "Gemini-1.5-Pro": "gemini-1.5-pro/movie-UserBasedQuery_gemini-1.5-pro-prediction.jsonl",
    "Claude-3.5-Sonnet": (
        "claude-3-5-sonnet-20241022/movie-UserBasedQuery_claude-3-5-sonnet-20241022-prediction.jsonl"
    ),
    "Llama-3.1-70B": "llama-3.1-70b-instruct/movie-UserBasedQuery_llama-3.1-70b-instruct-prediction.jsonl",
    "DeepSeek-V3": "DeepSeek-V3/movie-UserBasedQuery_DeepSeek-V3-historyFalse-OpenaiBatchFile-0_output.jsonl",
    "DeepSeek-R1": "DeepSeek-R1/movie-UserBasedQuery_DeepSeek-R1-historyFalse-OpenaiBatchFile-0_output.jsonl",
}
CHECKED_COMMIT = "84a04de"  # the release's snapshot these numbers were measured on
SHOWN = ("recall", "precision", "ndcg", "ftr", "not_in_catalogue")
TESTED = ("recall", "ndcg")


def results_path(root: Path, responses: str) -> Path:
    """The released per-query results of a responses file (the evaluator named them after it)."""
    name = Path(responses).name.removesuffix(".jsonl").removesuffix(".json") + ".json"
    return root / "eval_results" / name


def reproduce(root: Path, queries, movies) -> list[tuple[str, int, int]]:
    """(model, queries equal, queries in the released results) per model."""
    rows = []
    for model, responses in MODELS.items():
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


def corrected(root: Path, queries, movies) -> dict[str, list[dict]]:
    """Each model's per-query records under the corrected scoring, in the query file's order."""
    return {
        model: released.score_released(
            queries, released.read_responses(str(root / "llm_results" / responses)).answers, movies
        )
        for model, responses in MODELS.items()
    }


def released_means(root: Path) -> dict[str, float]:
    """Each model's released mean recall (the plain mean of its eval_results file)."""
    out = {}
    for model, responses in MODELS.items():
        rows = json.loads(results_path(root, responses).read_text(encoding="utf-8"))
        out[model] = sum(r["recall"] for r in rows) / len(rows)
    return out


def _cell(spec: MetricSpec, values: list[float], clusters: list[str]) -> str:
    low, high = spec.interval(
        values, clusters, confidence_level=CONFIDENCE_LEVEL, n_resamples=N_RESAMPLES, seed=0
    )
    return f"{spec.value(values):.3f} [{low:.3f}, {high:.3f}]"


def markdown(reproduced, records: dict[str, list[dict]], clusters: list[str], means: dict[str, float]) -> str:
    lines = [
        f"`benchmarks/recbench_released.py` on the files of `jiani-huang/RecAssistBench` (checked at commit "
        f"{CHECKED_COMMIT}; 2 CPU cores, about 17 s).",
        "",
        "Reproduction under `--compat released` (recall, precision, NDCG and FTR all exactly equal to the "
        "released `eval_results/movie-UserBasedQuery_*.json`):",
        "",
        "| model | queries equal |",
        "|---|---:|",
        *(f"| {model} | {equal} of {total} |" for model, equal, total in reproduced),
        "",
        f"Corrected scoring (the default), {len(clusters)} queries of {len(set(clusters))} demographic "
        "groups; "
        f"{CONFIDENCE_LEVEL:.0%} percentile bootstrap over queries by group ({N_RESAMPLES:,} resamples). "
        "`not in ML-1M`: share of titles naming no MovieLens-1M item (later films included, so not a "
        "hallucination rate). `released R`: the released mean recall, for comparison.",
        "",
        "| model | recall | precision | NDCG | FTR | not in ML-1M | released R |",
        "|---|---|---|---|---|---|---:|",
    ]
    specs = {
        name: MetricSpec(name, higher_is_better=name not in ("ftr", "not_in_catalogue")) for name in SHOWN
    }
    order = sorted(records, key=lambda m: -specs["recall"].value([r["recall"] for r in records[m]]))
    for model in order:
        cells = [_cell(specs[name], [float(r[name]) for r in records[model]], clusters) for name in SHOWN]
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {means[model]:.3f} |")
    best = order[0]
    lines += [
        "",
        f"Paired sign-flip tests against the best by corrected recall ({best}), by group: difference "
        "(model − best) and two-sided p, not adjusted for the six comparisons.",
        "",
        "| model | "
        + " | ".join(f"Δ {name}" for name in TESTED)
        + " | "
        + " | ".join(f"p {n}" for n in TESTED)
        + " |",
        "|---|" + "---:|" * (2 * len(TESTED)),
    ]
    for model in order[1:]:
        tests = [
            specs[name].paired_test(
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
            + " | ".join(f"{t.difference:+.3f}" for t in tests)
            + " | "
            + " | ".join(f"{t.p_value:.4f}" for t in tests)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--released", required=True, type=Path, help="a checkout of jiani-huang/RecAssistBench"
    )
    parser.add_argument("--write", action="store_true", help=f"replace '{SECTION}' in RESULTS.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    queries = released.read_queries(str(args.released / QUERIES))
    movies = released.read_movies(str(args.released / MOVIES))
    reproduced = reproduce(args.released, queries, movies)
    clusters = [query.cluster for query in queries]
    body = markdown(
        reproduced, corrected(args.released, queries, movies), clusters, released_means(args.released)
    )
    print(body)
    if args.write:
        write_section(body, SECTION)
        logger.info("wrote %s to benchmarks/RESULTS.md", SECTION)


if __name__ == "__main__":
    main()
