"""Properties of RecBench+'s per-query metrics on any ground truth and any matched answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from perrec_eval.tasks.recbench_plus import metrics

ASINS = st.sampled_from([f"i{n}" for n in range(12)])
ANSWER = st.lists(st.tuples(st.one_of(st.none(), ASINS), st.booleans()), max_size=8)


def _prediction(entries):
    seen, out = set(), []
    for asin, satisfies in entries:  # repeats of one item are kept once, as `Catalogue.resolve` does
        if asin is not None and asin in seen:
            continue
        seen.add(asin)
        out.append({"title": str(asin), "parent_asin": asin, "satisfies": satisfies and asin is not None})
    return out


@given(st.sets(ASINS, min_size=1, max_size=5), ANSWER)
def test_recbench_plus_metrics_lie_in_zero_one(truth_asins, entries):
    truth = {"ground_truth": [{"parent_asin": a} for a in sorted(truth_asins)]}
    for name in metrics.METRICS:
        assert 0.0 <= metrics.value(name, _prediction(entries), truth) <= 1.0 + 1e-12


@given(st.lists(ASINS, min_size=1, max_size=5, unique=True), st.lists(ASINS, max_size=4, unique=True))
def test_recbench_plus_ground_truth_first_scores_recall_and_ndcg_one(truth_asins, extra):
    truth = {"ground_truth": [{"parent_asin": a} for a in truth_asins]}
    answer = _prediction([(a, True) for a in [*truth_asins, *extra]])
    assert metrics.value("recall", answer, truth) == 1.0
    assert abs(metrics.value("ndcg", answer, truth) - 1.0) < 1e-12
    assert metrics.value("ftr", answer, truth) == 0.0


@given(st.sets(ASINS, min_size=1, max_size=5), ANSWER)
def test_recbench_plus_metrics_do_not_depend_on_item_ids(truth_asins, entries):
    rename = {f"i{n}": f"z{11 - n}" for n in range(12)}
    truth = {"ground_truth": [{"parent_asin": a} for a in sorted(truth_asins)]}
    renamed_truth = {"ground_truth": [{"parent_asin": rename[a]} for a in sorted(truth_asins)]}
    renamed = [(None if a is None else rename[a], s) for a, s in entries]
    for name in metrics.METRICS:
        assert metrics.value(name, _prediction(entries), truth) == metrics.value(
            name, _prediction(renamed), renamed_truth
        )
