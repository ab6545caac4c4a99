"""Two runs of one family on the same docs, before and after (a base model and its fine-tuned adapter):
per cell, the share of failed answers and the family's metrics, each with its 95% interval, and the paired
test of each difference (sign-flip over docs; for corpus metrics such as RMSE, each run's value on the docs
it answered, and a paired bootstrap on the docs both answered).

Usage: ``python benchmarks/before_after.py BEFORE_RUN AFTER_RUN [--metrics rmse,mae,ndcg@10,hr@10]``
(prints Markdown for ``benchmarks/RESULTS.md``; `benchmarks/llmrec_sft.sh` writes the runs).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perrec_eval import stats  # noqa: E402
from perrec_eval.docrecords import read_predictions, read_samples  # noqa: E402
from perrec_eval.registry import get  # noqa: E402


def _fmt(value: float | None, low: float | None = None, high: float | None = None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" + ("" if low is None else f" [{low:.3f}, {high:.3f}]")


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--metrics", default="rmse,mae,ndcg@10,hr@10")
    args = parser.parse_args()
    runs = [Path(args.before), Path(args.after)]
    infos = [json.loads((run / "run.json").read_text()) for run in runs]
    task = get(infos[0]["config"]["task"])
    specs = {spec.name: spec for spec in task.metrics}
    wanted = [name for name in args.metrics.split(",") if name in specs]
    by_cell = [collections.defaultdict(dict) for _ in runs]
    reasons = [collections.defaultdict(collections.Counter) for _ in runs]
    for i, run in enumerate(runs):
        for record in read_predictions(run):
            by_cell[i][(record.subset, record.protocol)][record.id] = record
        for sample in read_samples(run):
            if not sample.ok:
                reasons[i][(sample.subset, sample.protocol)][sample.reason] += 1
    labels = [info["label"] or info["config"]["model"] for info in infos]
    print(f"| cell | measure | {labels[0]} | {labels[1]} | difference [95% CI] | p |")
    print("|---|---|---|---|---|---|")
    for cell in sorted(by_cell[0]):
        ids = sorted(set(by_cell[0][cell]) & set(by_cell[1][cell]))
        if not ids:
            continue
        records = [[by_cell[i][cell][doc] for doc in ids] for i in range(2)]
        name = "/".join(cell)
        failed = [[float(r.prediction is None) for r in rs] for rs in records]
        shown = [_fmt(stats.mean(f), *stats.bootstrap_interval(f, n_resamples=10_000)) for f in failed]
        test = stats.signflip_test([a - b for a, b in zip(failed[1], failed[0], strict=True)])
        print(f"| {name} ({len(ids)} docs) | failed share | {shown[0]} | {shown[1]} | "
              f"{_fmt(test.difference, test.ci_low, test.ci_high)} | {_p(test.p_value)} |")  # fmt: skip
        for metric in wanted:
            spec = specs[metric]
            items = [[task.score_doc(metric, r.prediction, r.truth) for r in rs] for rs in records]
            if all(item is None for item in items[0]):
                continue
            if spec.aggregation == "corpus":  # each run on the docs it answered (a failed doc has no error)
                own = [[item for item in run_items if item] for run_items in items]
                intervals = [stats.corpus_interval(o, spec.corpus, n_resamples=2000) for o in own if o]
                found = iter(intervals)
                values = [f"{_fmt(spec.corpus(o), *next(found))} ({len(o)})" if o else "– (0)" for o in own]
                both = [j for j in range(len(ids)) if items[0][j] and items[1][j]]
                pairs = [[items[i][j] for j in both] for i in range(2)]
                label = f"{metric} (docs answered)"
                if len(both) < 2:  # no paired test: too few docs both runs answered
                    both_note = f"– ({len(both)} docs both answered)"
                    print(f"| | {label} | {values[0]} | {values[1]} | {both_note} | – |")
                    continue
                test = stats.corpus_paired_test(pairs[1], pairs[0], spec.corpus, n_resamples=2000)
            else:
                values = [
                    _fmt(stats.mean(v), *stats.bootstrap_interval(v, n_resamples=10_000)) for v in items
                ]
                label = metric
                test = stats.signflip_test([a - b for a, b in zip(items[1], items[0], strict=True)])
            print(f"| | {label} | {values[0]} | {values[1]} | "
                  f"{_fmt(test.difference, test.ci_low, test.ci_high)} | {_p(test.p_value)} |")  # fmt: skip
    print()
    for i, label in enumerate(labels):
        for cell, counts in sorted(reasons[i].items()):
            print(f"- {label}, {'/'.join(cell)}: failures by reason {dict(counts.most_common())}")


if __name__ == "__main__":
    main()
