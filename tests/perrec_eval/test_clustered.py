"""Clustered groups (several groups of one query item, large-preset builds): cluster bootstrap, per-cluster
sign flips, the design-effect bound, and the runner, scores, report and leaderboard saying so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.build import build
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.synth import write_synthetic
from perrec_eval import ptc, stats
from perrec_eval.cli import main
from perrec_eval.tasks.perrecbench.records import PredictionRecord, clusters_of
from perrec_eval.tasks.perrecbench.scoring import score_cells


def duplicated(copies: int, items: int = 60, seed: int = 0):
    """`items` random 3-user groups and scores, each repeated `copies` times (perfectly correlated)."""
    rng = np.random.default_rng(seed)
    references = rng.permutation(np.tile(np.array([1.0, 0.0, -1.0]), (items, 1)), axis=1).tolist()
    scores = rng.normal(size=(items, 3)).tolist()
    clusters = [f"item{i}" for i in range(items) for _ in range(copies)]
    return (
        [r for r in references for _ in range(copies)],
        [s for s in scores for _ in range(copies)],
        clusters,
    )


def half_width(result: dict) -> float:
    return (result["ptc_ci_high"] - result["ptc_ci_low"]) / 2


def test_compute_ptc_cluster_bootstrap_is_wider_on_duplicated_groups() -> None:
    references, scores, clusters = duplicated(copies=4)
    naive = ptc.compute_ptc(references, scores, confidence_level=0.95, n_resamples=10_000)
    clustered = ptc.compute_ptc(
        references, scores, confidence_level=0.95, n_resamples=10_000, clusters=clusters
    )
    assert clustered["ptc"] == naive["ptc"]
    # Four copies of each item carry one item's information: the honest interval is about twice as wide.
    assert 1.6 < half_width(clustered) / half_width(naive) < 2.4


def test_compute_ptc_cluster_bootstrap_of_the_distinct_groups_matches_one_copy() -> None:
    references, scores, clusters = duplicated(copies=4)
    clustered = ptc.compute_ptc(
        references, scores, confidence_level=0.95, n_resamples=10_000, clusters=clusters
    )
    once, once_scores, _ = duplicated(copies=1)
    single = ptc.compute_ptc(once, once_scores, confidence_level=0.95, n_resamples=10_000)
    assert half_width(clustered) == pytest.approx(half_width(single), rel=0.1)


@pytest.mark.parametrize("invalid", ["zero", "skip"])
def test_compute_ptc_one_group_per_cluster_is_the_plain_bootstrap(invalid: str) -> None:
    references, scores, _ = duplicated(copies=1)
    scores[3] = []
    naive = ptc.compute_ptc(references, scores, invalid=invalid, confidence_level=0.95, seed=7)
    clustered = ptc.compute_ptc(
        references,
        scores,
        invalid=invalid,
        confidence_level=0.95,
        seed=7,
        clusters=[f"x{i}" for i in range(len(scores))],
    )
    assert clustered == naive


def test_compute_ptc_clusters_follow_the_skipped_groups() -> None:
    references, scores, clusters = duplicated(copies=2, items=10)
    scores[0] = scores[1] = []  # item0 fails in both copies: the cluster leaves with its groups
    result = ptc.compute_ptc(references, scores, invalid="skip", confidence_level=0.95, clusters=clusters)
    assert result["ptc_ci_low"] <= result["ptc"] <= result["ptc_ci_high"]


def test_compute_ptc_clusters_need_one_id_per_group() -> None:
    with pytest.raises(ValueError, match="one cluster id per group"):
        ptc.compute_ptc([[1.0, 0.0]] * 2, [[1.0, 0.0]] * 2, confidence_level=0.95, clusters=["a"])


def test_paired_test_flips_signs_per_cluster() -> None:
    refs = [[1.0, 0.0, -1.0]] * 8
    good, bad = [[3, 2, 1]] * 8, [[1, 2, 3]] * 8
    naive = ptc.paired_test(refs, good, bad)
    clustered = ptc.paired_test(refs, good, bad, clusters=["a"] * 4 + ["b"] * 4)
    assert naive["p_value"] == 2 / 2**8
    assert clustered["p_value"] == 2 / 2**2  # two items: all four sign patterns, two as extreme
    assert clustered["difference"] == naive["difference"] == 2.0


def test_paired_test_cluster_sums_decide_the_flip() -> None:
    # Item a: differences +2, -2 (sum 0), item b: +2, +2. Flipping per item leaves |mean| at 1 or 1.
    refs = [[1.0, -1.0]] * 4
    a = [[2.0, 1.0], [1.0, 2.0], [2.0, 1.0], [2.0, 1.0]]
    b = [[1.0, 2.0], [2.0, 1.0], [1.0, 2.0], [1.0, 2.0]]
    result = ptc.paired_test(refs, a, b, clusters=["a", "a", "b", "b"])
    assert result["difference"] == 1.0
    assert result["p_value"] == 1.0


def test_signflip_test_matches_paired_test() -> None:
    references, scores, clusters = duplicated(copies=3, items=30)
    other = [list(reversed(s)) for s in scores]
    full = ptc.paired_test(references, scores, other, clusters=clusters)
    taus = ptc.group_taus(references, scores)[0] - ptc.group_taus(references, other)[0]
    direct = stats.signflip_test(taus, clusters)
    for key in ("difference", "p_value", "ci_low", "ci_high"):
        assert getattr(direct, key) == pytest.approx(full[key], abs=1e-12)
    assert direct.num_clusters == 30


def test_design_effect_is_the_perfect_correlation_bound() -> None:
    assert stats.design_effect(["a"] * 4 + ["b"] * 4) == 4.0
    assert stats.design_effect(["a", "b", "c"]) == 1.0
    deff = stats.design_effect(["a", "a", "b"])
    resolution = ptc.expected_resolution(2, 3, design_effect=deff)
    assert resolution["half_width"] == pytest.approx(ptc.expected_resolution(2, 3)["half_width"] * deff**0.5)


def test_observed_design_effect_is_the_cluster_bootstrap_variance_over_the_plain_one() -> None:
    rng = np.random.default_rng(3)
    item_means = rng.normal(size=40)
    values = np.repeat(item_means, 5) + rng.normal(scale=0.5, size=200)  # 40 items of 5 correlated docs
    clusters = np.repeat(np.arange(40), 5).tolist()
    means = {}
    for name, codes in (("plain", None), ("cluster", np.asarray(clusters))):
        means[name] = stats._resampled_means(values, 20_000, np.random.default_rng(0), codes)
    by_bootstrap = means["cluster"].var() / means["plain"].var()
    assert stats.observed_design_effect(values, clusters) == pytest.approx(by_bootstrap, rel=0.05)
    assert 1.0 < by_bootstrap < stats.design_effect(clusters) == 5.0


def test_observed_design_effect_of_independent_docs_in_clusters_is_about_one() -> None:
    values = np.random.default_rng(4).normal(size=3000)
    clusters = [i // 6 for i in range(3000)]
    assert stats.observed_design_effect(values, clusters) == pytest.approx(1.0, abs=0.15)
    assert stats.observed_design_effect(values, None) == 1.0
    assert stats.observed_design_effect([2.0] * 6, clusters[:6]) == 1.0  # nothing varies


def test_score_cells_min_detectable_difference_carries_the_observed_design_effect() -> None:
    # 600 groups, 6 per item, each group's ranking independent of its item's others: the clustering costs
    # nothing, so the detectable difference is that of 600 independent groups, not of the bound Σm²/Σm = 6
    rng = np.random.default_rng(5)
    records = [
        record(f"q{i // 6}:{i}", f"B:q{i // 6}", 1 if rng.random() < 0.5 else -1) for i in range(600)
    ]
    clustered = score_cells(records).cells[0]
    plain = score_cells([record(r.group_id, None, int(r.prediction[0])) for r in records]).cells[0]
    assert clustered.design_effect_bound == 6.0
    assert 1.0 <= clustered.design_effect < 1.5
    assert clustered.min_detectable_difference == pytest.approx(
        plain.min_detectable_difference * clustered.design_effect**0.5
    )
    assert clustered.min_detectable_difference < 0.6 * plain.min_detectable_difference * 6**0.5


def record(group_id: str, cluster: str | None, tau_sign: int = 1) -> PredictionRecord:
    return PredictionRecord(
        "easy",
        "pointwise",
        group_id,
        "scores",
        [float(tau_sign), 0.0],
        [4.0, 3.0],
        [0.5, -0.5],
        [4.0, 3.0],
        cluster,
    )


def test_prediction_record_without_cluster_keeps_its_json_line() -> None:
    line = record("g", None).to_json()
    assert "cluster" not in line
    assert PredictionRecord.from_json(line) == record("g", None)
    assert PredictionRecord.from_json(record("g", "B:q").to_json()).cluster == "B:q"


def test_score_cells_clusters_only_runs_with_clusters() -> None:
    plain = score_cells([record(f"g{i}", None, (-1) ** i) for i in range(6)])
    assert plain.clustered_by is None and "clustered_by" not in plain.to_json()
    assert plain.cells[0].design_effect is None and "design_effect" not in plain.cells[0].to_json()
    records = [record(f"q{i // 3}:{i}", f"B:q{i // 3}", (-1) ** (i // 3)) for i in range(6)]
    clustered = score_cells(records)
    cell = clustered.cells[0]
    assert clustered.clustered_by == "query item"
    assert clustered.ci_method == "percentile cluster bootstrap over query items"
    assert (cell.num_clusters, cell.design_effect, cell.design_effect_bound) == (2, 3.0, 3.0)  # ρ = 1
    assert cell.min_detectable_difference > plain.cells[0].min_detectable_difference
    assert clusters_of(records) == ["B:q0"] * 3 + ["B:q1"] * 3


# ------------------------------------------------------------------ a large-preset build, evaluated


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clustered")
    write_synthetic(root / "raw", reviews_per_domain=6000, domains="Books", seed=1)
    config = BuildConfig(
        source=str(root / "raw"),
        out=root / "perrecbench",
        domains=("Books",),
        preset="large",
        min_history=10,
        test_groups=20,
        threads=1,
        memory_limit="1GB",
    )
    build(config)
    args = ["evaluate", "--data", str(root / "perrecbench"), "--engine", "baseline"]
    assert main([*args, "--model", "history-affinity", "--out", str(root / "runs" / "affinity")]) == 0
    assert main([*args, "--model", "random", "--out", str(root / "runs" / "random")]) == 0
    return root


def test_large_build_run_is_scored_clustered_by_query_item(large_run: Path) -> None:
    run = large_run / "runs" / "affinity"
    scores = json.loads((run / "scores.json").read_text())
    assert scores["extras"]["clustered_by"] == "query item"
    # the levels with a repeated item
    cells = [cell["extras"] for cell in scores["cells"] if "design_effect" in cell["extras"]]
    assert cells and all(cell["design_effect"] >= 1.0 for cell in cells)
    assert any(cell["design_effect_bound"] > 1.0 for cell in cells)
    lines = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    clustered = [line for line in lines if "cluster" in line]  # a level without a repeated item has none
    assert clustered and all(line["cluster"] == line["group_id"].rsplit(":", 1)[0] for line in clustered)
    assert "Clustered by query item" in (run / "report.md").read_text()


def test_large_build_leaderboard_says_clustered_by_query_item(large_run: Path) -> None:
    out = large_run / "report"
    runs = large_run / "runs"
    assert main(["report", str(runs / "affinity"), str(runs / "random"), "--out", str(out)]) == 0
    (section,) = json.loads((out / "leaderboard.json").read_text())
    assert section["extras"]["clustered"]
    assert "Clustered by query item" in (out / "leaderboard.md").read_text()
    # The levels hold different groups of the same items: Avg. is tested on the items, not on no group.
    items = {
        line.get("cluster", line["group_id"])  # unclustered levels: each group is its own cluster
        for run in ("affinity", "random")
        for line in map(json.loads, (runs / run / "predictions.jsonl").read_text().splitlines())
    }
    best, other = section["rows"]
    tested = other["average_vs_best"]
    assert tested["num_compared"] == len(items)
    assert tested["difference"] == pytest.approx(best["average"] - other["average"], abs=1e-12)
    assert tested["p_value"] is not None
    extras = section["extras"]
    for cell, shown in extras["min_detectable_difference"].items():
        assert shown <= extras["worst_case_min_detectable_difference"][cell]
        assert extras["design_effect"][cell] >= 1.0
    notes = (out / "leaderboard.md").read_text()
    assert "design effect observed on the runs" in notes and "design-effect bound" not in notes
