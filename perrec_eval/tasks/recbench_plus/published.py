"""The released RecBench+ models' rows (published.yaml), computed from the released files, and shown as a
separate table of a RecBench+ report.

The rows are never typed: `compute` scores the seven models' released answers to the demographics queries
(and the four models' fixed-K answers) with this package's corrected scoring, and `benchmarks/
recbench_released.py --write` writes them (`dump`) with the digest of the code that computed them
(`code_digest`: the readers, the title matcher, the scoring and the statistics, comments and docstrings
left out). A test fails when that code changes and the rows were not computed again.

They were scored on the released demographics queries, not on the run's build: a report shows them only where
its runs answer the demographics config, under their own heading, never ranked with or bolded against runs.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).with_name("published.yaml")
HEADING = (
    "published rows (the released queries and answers, corrected scoring: comparable with a run on those "
    "queries, `evaluate --released-queries`, not with a rebuilt benchmark)"
)
QUERIES = "dataset/movie/DemographicsBasedQuery.json"
MOVIES = "dataset/movie/movies.dat"
# model -> its released answers to the demographics queries, under llm_results/
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
K = 5  # the fixed-K files asked for 5 titles
FIXED_K_MODELS = {  # DeepSeek-V3's fixed-K folder holds its requests only
    model: f"{folder}-k/movie-UserBasedQuery_{name}-historyFalse-k=5-OpenaiBatchFile-0_output.jsonl"
    for model, folder, name in (
        ("GPT-4o", "gpt-4o", "gpt-4o"),
        ("Gemini-1.5-Pro", "gemini-1.5-pro", "gemini-1.5-pro"),
        ("Claude-3.5-Sonnet", "claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20241022"),
        ("DeepSeek-R1", "DeepSeek-R1", "DeepSeek-R1"),
    )
}
METRICS = ("recall", "precision", "ndcg")
# What computes the rows (modules by name): a change in any of them calls for computing the rows again.
COMPUTED_BY = (
    "perrec_eval.answers",
    "perrec_eval.titles",
    "perrec_eval.stats",
    "perrec_eval.tasks.recbench_plus.metrics",
    "perrec_eval.tasks.recbench_plus.parsing",
    "perrec_eval.tasks.recbench_plus.prompts",
    "perrec_eval.tasks.recbench_plus.released",
)
SOURCE = {
    "repository": "jiani-huang/RecAssistBench",
    "commit": "84a04de",
    "files": "llm_results/<model>[-k]/movie-UserBasedQuery_*",
    "script": "benchmarks/recbench_released.py --write",
    "scoring": "corrected",
    "config": "demographics",
}


def load() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def _code(module: str) -> str:
    """A module's code without its comments and docstrings (what the rows depend on)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.unparse(tree)


def code_digest() -> str:
    """The sha256 (12 hex digits) of the code that computes the rows (`COMPUTED_BY`, and the prompts'
    answer header the reader removes)."""
    from perrec_eval.tasks.recbench_plus.prompts import answer_header

    digest = hashlib.sha256(answer_header().pattern.encode())
    for module in COMPUTED_BY:
        digest.update(_code(module).encode())
    return digest.hexdigest()[:12]


def _rows(queries: list[Any], movies: list[Any], root: Path, files: dict[str, str], k: int | None) -> list:
    from perrec_eval.evaluation import CONFIDENCE_LEVEL, N_RESAMPLES
    from perrec_eval.stats import MetricSpec
    from perrec_eval.tasks.recbench_plus import released

    clusters = [query.cluster for query in queries]
    rows = []
    for model, path in files.items():
        read = released.read_responses(str(root / "llm_results" / path))
        records = released.score_released(queries, read.answers, movies, k=k)
        row: dict[str, Any] = {"model": model}
        for name in (*METRICS, "ftr", "not_in_catalogue"):
            spec = MetricSpec(name, higher_is_better=name not in ("ftr", "not_in_catalogue"))
            values = [float(record[name]) for record in records]
            low, high = spec.interval(
                values, clusters, confidence_level=CONFIDENCE_LEVEL, n_resamples=N_RESAMPLES, seed=0
            )
            row[name] = [round(spec.value(values), 4), round(float(low), 4), round(float(high), 4)]
        row["repeated_answers"] = read.repeats
        rows.append(row)
    return sorted(rows, key=lambda row: -row["recall"][0])


def compute(root: Path) -> dict[str, Any]:
    """The published rows, computed from a checkout of the release at `root` with today's code.

    Raises:
        DataError: a released file missing or of another shape.
    """
    from perrec_eval.evaluation import CONFIDENCE_LEVEL, N_RESAMPLES
    from perrec_eval.tasks.recbench_plus import released

    queries = released.read_queries(str(root / QUERIES))
    movies = released.read_movies(str(root / MOVIES))
    rows = _rows(queries, movies, root, MODELS, None)
    for row in rows:  # the released evaluator's own mean recall, for comparison
        name = Path(MODELS[row["model"]]).name.removesuffix(".jsonl").removesuffix(".json") + ".json"
        results = json.loads((root / "eval_results" / name).read_text(encoding="utf-8"))
        row["released_recall"] = round(sum(r["recall"] for r in results) / len(results), 4)
    return {
        "source": {
            **SOURCE,
            "queries": len(queries),
            "groups": len({query.cluster for query in queries}),
            "interval": f"{CONFIDENCE_LEVEL:.0%} percentile bootstrap over queries by group, "
            f"{N_RESAMPLES:,} resamples",
        },
        "code": code_digest(),
        "metrics": list(METRICS),
        "rows": rows,
        "fixed_k": {"k": K, "rows": _rows(queries, movies, root, FIXED_K_MODELS, K)},
    }


def dump(data: dict[str, Any]) -> str:
    """published.yaml's text: a header saying where it comes from, then the data (one line per row)."""
    head = (
        "# RecBench+'s released models re-scored (corrected scoring): WRITTEN by\n"
        "# `benchmarks/recbench_released.py --released RecAssistBench --write` from the released files,\n"
        "# never by hand; `code` is the digest of the code that computed it (published.code_digest), and a\n"
        "# test fails when they differ. Values are [mean, 95% low, 95% high]. The released files are not\n"
        "# redistributable, so only these numbers are kept.\n"
    )
    rows = {"rows": data["rows"], "fixed_k": data["fixed_k"]}
    rest = {key: value for key, value in data.items() if key not in rows}
    text = yaml.safe_dump(rest, sort_keys=False, width=110)
    text += yaml.safe_dump({"rows": data["rows"]}, sort_keys=False, default_flow_style=None, width=400)
    text += yaml.safe_dump({"fixed_k": data["fixed_k"]}, sort_keys=False, default_flow_style=None, width=400)
    return head + text


def doc_table(data: dict[str, Any]) -> str:
    """The table docs/reproducing-recbench-plus.md shows, from the published rows."""
    lines = [
        "| model | recall | precision | NDCG | not in ML-1M | released recall |",
        "|---|---|---|---|---|---:|",
    ]
    for row in data["rows"]:
        cells = " | ".join(f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for v in (row[m] for m in METRICS))
        lines.append(f"| {row['model']} | {cells} | {row['not_in_catalogue'][0]:.3f} | "
                     f"{row['released_recall']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def for_cells(cells: list[str]) -> dict[str, Any] | None:
    """The published rows where a report's cells include the config they were scored on, else None."""
    data = load()
    if not any(cell.split("/", 1)[0] == data["source"]["config"] for cell in cells):
        return None
    return data


def table(rows: list[dict[str, Any]], metrics: list[str]) -> list[str]:
    """Markdown rows of a published table (its header included)."""
    lines = [
        "| model (released answers) | " + " | ".join(metrics) + " |",
        "| " + " | ".join(["---"] * (len(metrics) + 1)) + " |",
    ]
    for row in rows:
        cells = [f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for v in (row[m] for m in metrics)]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    return lines


def markdown(data: dict[str, Any]) -> list[str]:
    source, fixed = data["source"], data["fixed_k"]
    lines = [f"### {HEADING}", "", *table(data["rows"], data["metrics"])]
    lines += ["", f"Fixed K = {fixed['k']} (`recommend-k`):", "", *table(fixed["rows"], data["metrics"])]
    lines += [
        "",
        f"Another dataset: {source['queries']} released {source['config']} queries of {source['repository']} "
        f"(commit {source['commit']}), re-scored by {source['script']} ({source['scoring']} scoring; "
        f"{source['interval']}). Not ranked with the runs above.",
    ]
    return lines
