"""Estimate what ``--preset large`` yields on the real Amazon Reviews 2023 paper categories, and what a full
evaluation of an 8B model on it costs with vLLM on one H100. No real data is read: this is a model, with
every assumption stated, calibrated on the one published count (the paper's 666 five-user groups).

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/large_preset_estimate.py [--reps 60]``

Model (see benchmarks/RESULTS.md, "Large preset", for the reasoning):

* An item's **densest co-purchase window** holds ``N`` active reviewers (more than 20 earlier reviews in the
  domain). Across items, ``P(N >= n) ∝ n^-a`` for ``n >= 2`` (a power-law tail, as item popularity on Amazon
  has); ``a`` is unknown and swept over 1.5 / 2 / 2.5. Reviewers outside that window are ignored (a lower
  bound: the builder also uses later windows for later draws).
* A reviewer's **relative rating**: user average ``μ ~ N(4.2, 0.45)`` clipped to [1.5, 5] (heavy reviewers'
  averages on Amazon sit around 4.2), rating ``clip(round(μ + 0.3 + e), 1, 5)`` with ``e ~ N(0, 1.1)``
  (J-shaped: ≈ 60% fives), relative rating = rating − μ. Not fitted to the synthetic data (far denser in
  groups than real data).
* ``E_k(N)``: the expected number of user-disjoint valid k-groups the builder draws among ``N`` such
  reviewers in one window — measured by running the builder's own search
  (:func:`dataset_builder.perrecbench.groups.find_groups`) on simulated windows.
* Calibration: the number of items ``I`` with ``N >= 2`` is set so that ``I · Σ_N p(N) · P(a valid 5-group
  among N)`` equals the paper's 666.
"""

from __future__ import annotations

import argparse
import random

import numpy as np

from dataset_builder.perrecbench.groups import Candidate, find_groups

PAPER_FIVE_USER_ITEMS = 666
GRID = [*range(2, 21), 25, 30, 40, 50, 70, 100, 150, 200]
N_MAX = 300
LEVELS = {"easy": 2, "medium": 3, "hard": 4, "full (5)": 5}
# 8B on one H100 (benchmarks/RESULTS.md, vLLM): prompt tokens per request, prefix-cache hit share, prefill
# and decode rates, answer tokens of a model that follows the format.
PROMPT_TOKENS, CACHE_HIT, PREFILL_PER_S, DECODE_PER_S, ANSWER_TOKENS = 700, 0.61, 25_000, 5_333, 30


def relative_ratings(n: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    mu = np.clip(rng.normal(4.2, 0.45, n), 1.5, 5.0)
    rating = np.clip(np.round(mu + 0.3 + rng.normal(0.0, noise, n)), 1, 5)
    return rating - mu


def groups_drawn(n: int, k: int, reps: int, seed: int, noise: float) -> tuple[float, float]:
    """Mean number of disjoint k-groups drawn among n reviewers of one window, and P(at least one)."""
    rng = np.random.default_rng(seed)
    counts = []
    for rep in range(reps):
        rels = relative_ratings(n, rng, noise)
        cands = [Candidate(float(r), 0, f"u{i}") for i, r in enumerate(rels)]
        drawn = find_groups(cands, window_ms=0, min_gap=0.6, group_size=k, rng=random.Random(rep))
        counts.append(len(drawn))
    return float(np.mean(counts)), float(np.mean(np.asarray(counts) > 0))


def interpolate(table: dict[int, float], n: int) -> float:
    keys = sorted(table)
    if n in table:
        return table[n]
    if n > keys[-1]:  # disjoint groups grow linearly with n
        return table[keys[-1]] * n / keys[-1]
    return float(np.interp(n, keys, [table[k] for k in keys]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=60, help="simulated windows per (N, k)")
    parser.add_argument(
        "--noise", type=float, default=1.1, help="spread of a rating around the user's average"
    )
    args = parser.parse_args()
    mean: dict[int, dict[int, float]] = {k: {} for k in LEVELS.values()}
    exists: dict[int, dict[int, float]] = {k: {} for k in LEVELS.values()}
    for k in LEVELS.values():
        for n in GRID:
            if n >= k:
                mean[k][n], exists[k][n] = groups_drawn(
                    n, k, args.reps if n <= 50 else args.reps // 4, n * 10 + k, args.noise
                )
            else:
                mean[k][n], exists[k][n] = 0.0, 0.0
    print("P(a valid group) / disjoint groups drawn, by reviewers N in the window:")
    for n in (2, 3, 4, 5, 8, 12, 20, 50, 100):
        print(
            f"  N={n:>3}: " + ", ".join(f"k={k}: {exists[k][n]:.2f} / {mean[k][n]:.1f}" for k in (2, 3, 4, 5))
        )
    ns = np.arange(2, N_MAX + 1)
    for a in (1.5, 2.0, 2.5):
        ccdf = ns.astype(float) ** -a / 2.0**-a
        p = ccdf - np.append(ccdf[1:], 0.0)  # P(N = n), n = 2..N_MAX
        p5 = sum(pn * interpolate(exists[5], int(n)) for n, pn in zip(ns, p, strict=True))
        items = PAPER_FIVE_USER_ITEMS / p5
        print(f"\na = {a}: {items:,.0f} items with >= 2 active reviewers in a window (calibrated on 666)")
        requests = answer = prompt = 0.0
        for level, k in LEVELS.items():
            groups = items * sum(pn * interpolate(mean[k], int(n)) for n, pn in zip(ns, p, strict=True))
            first = items * sum(pn * interpolate(exists[k], int(n)) for n, pn in zip(ns, p, strict=True))
            m_w = sum(pn * interpolate(mean[k], int(n)) ** 2 for n, pn in zip(ns, p, strict=True)) / sum(
                pn * interpolate(mean[k], int(n)) for n, pn in zip(ns, p, strict=True)
            )
            print(f"  {level}: {groups:,.0f} groups on {first:,.0f} items (design-effect bound {m_w:.1f})")
            if k < 5:
                per_group = k + k * (k - 1) + 1  # pointwise + pairwise (both orders) + listwise
                requests += groups * per_group
        prompt = requests * PROMPT_TOKENS * (1 - CACHE_HIT)
        answer = requests * ANSWER_TOKENS
        seconds = prompt / PREFILL_PER_S + answer / DECODE_PER_S
        print(
            f"  every group in test, 3 methods x 3 levels: {requests:,.0f} requests, "
            f"{prompt / 1e6:,.0f} M prompt tokens computed, {answer / 1e6:,.1f} M answer tokens: "
            f"~{seconds / 3600:.1f} h of one H100 for an 8B model (format-following answers)"
        )


if __name__ == "__main__":
    main()
