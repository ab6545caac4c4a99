"""Every LLM run of a table against every no-LLM baseline of it: one paired test per cell both scored.

The leaderboard tests each row against its column's best only; this answers the question a baseline row is
there for (does this model beat the floors, and the classic recommenders ``mf`` / ``item-knn``?) for every
pair. Baselines score the pointwise method only, so the pairs meet in the LLM's pointwise cells. The test is
the leaderboard's own (`board.paired_cell`: `perrec_eval.ptc.paired_test`, a sign-flip permutation test on
the per-group tau differences of the groups both runs scored); Δ = PTC(LLM) - PTC(baseline). Pairs scored
with another metric (variant or failed-group policy) are not tested. Not corrected for multiple comparisons.
"""

from __future__ import annotations

import math
from typing import Any

from perrec_eval.tasks.perrecbench.leaderboard.board import N_RESAMPLES, Table, paired_cell


def against_baselines(table: Table, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Per (LLM row, baseline row, shared cell): both PTCs and the paired test of their difference.

    Returns:
        JSON-ready records in table order (LLM rows, then baseline rows, then cells); empty when the table
        has no LLM run or no baseline.
    """
    baselines = [row for row in table.rows if row.run.is_baseline]
    models = [row for row in table.rows if not row.run.is_baseline]
    out = []
    for model in models:
        for baseline in baselines:
            if (model.run.variant, model.run.invalid) != (baseline.run.variant, baseline.run.invalid):
                continue
            for cell in table.columns:
                if cell not in model.entries or cell not in baseline.entries:
                    continue
                test = paired_cell(model.run, baseline.run, cell, n_resamples=n_resamples, seed=seed)
                if isinstance(test["p_value"], float) and math.isnan(test["p_value"]):  # no shared group
                    test["p_value"] = None
                out.append(
                    {
                        "model": model.label,
                        "baseline": baseline.label,
                        "level": cell[0],
                        "method": cell[1],
                        "model_ptc": model.entries[cell].ptc,
                        "baseline_ptc": baseline.entries[cell].ptc,
                        **test,
                    }
                )
    return out
