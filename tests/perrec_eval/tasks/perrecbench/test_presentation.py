"""The listwise presentation: balanced runs score any fixed answer exactly 0; the dataset's order stays."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.errors import ConfigError
from perrec_eval.ptc import compute_ptc
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.fake import _listwise_user_marker, request_kind
from perrec_eval.tasks.perrecbench.presentation import balanced_orders, true_ranks
from perrec_eval.tasks.perrecbench.records import Group, User
from perrec_eval.tasks.perrecbench.run import evaluate
from tests.benchmark_fixture import write_tiny_benchmark, write_truth_profiles


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench", n_test=8)
    profiles = write_truth_profiles(folder, folder.parent / "profiles.jsonl")
    return folder, profiles


def _config(bench, out, **kwargs) -> EvalConfig:
    folder, profiles = bench
    return EvalConfig(
        data=str(folder),
        engine="fake",
        model="scripted",
        out=str(out),
        profiles=str(profiles),
        methods=("listwise",),
        **kwargs,
    )


def fixed(permute):
    """A responder that answers every listwise request with `permute(n)`, whatever it shows."""

    def respond(request, params, sample_index):
        if request_kind(request) != "listwise":
            return constant(request, params, sample_index)
        n = len(_listwise_user_marker().findall(request.messages[-1]["content"]))
        return json.dumps({"predicted_ranking": permute(n)})

    return respond


FIXED = {
    "identity": lambda n: list(range(1, n + 1)),
    "reversed": lambda n: list(range(n, 0, -1)),
    "second-first": lambda n: [2, 1, *range(3, n + 1)],
}


@pytest.mark.parametrize("answer", sorted(FIXED))
def test_balanced_presentation_scores_fixed_answers_exactly_zero(bench, tmp_path, answer):
    scores = evaluate(_config(bench, tmp_path), FakeEngine(fixed(FIXED[answer])))
    assert [c.level for c in scores.cells] == ["easy", "medium", "hard"]
    for cell in scores.cells:
        assert cell.ptc == 0.0, cell


def test_balanced_presentation_is_recorded_and_default(bench, tmp_path):
    evaluate(_config(bench, tmp_path), FakeEngine(fixed(FIXED["identity"])))
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["presentation"] == "balanced" and info["config"]["presentation"] == "balanced"
    slots = [json.loads(line)["slot"] for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert any(len(slot) > 1 for slot in slots)  # some groups are not shown in dataset order


def test_dataset_presentation_lets_a_fixed_answer_score(bench, tmp_path):
    # The paper's presentation: the same fixed answer is rewarded or punished by the dataset's order.
    scores = evaluate(_config(bench, tmp_path, presentation="dataset"), FakeEngine(fixed(FIXED["identity"])))
    assert any(cell.ptc != 0.0 for cell in scores.cells)


def test_dataset_presentation_sends_the_dataset_order(bench, tmp_path):
    evaluate(_config(bench, tmp_path, presentation="dataset"), FakeEngine(fixed(FIXED["identity"])))
    lines = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert {tuple(line["slot"]) for line in lines} == {("list",)}
    predictions = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert all(p["prediction"] == list(range(1, len(p["references"]) + 1)) for p in predictions)


def test_paper_mode_implies_the_dataset_presentation(bench, tmp_path):
    assert _config(bench, tmp_path, paper_mode=True).presentation == "dataset"
    with pytest.raises(ConfigError, match="--presentation balanced"):
        _config(bench, tmp_path, paper_mode=True, presentation="balanced")


def test_balanced_presentation_keeps_truth_scores_one(bench, tmp_path):
    from tests.benchmark_fixture import truth_responder

    scores = evaluate(_config(bench, tmp_path), FakeEngine(truth_responder(1.0)))
    assert all(cell.ptc == pytest.approx(1.0) for cell in scores.cells)


def _groups(n_groups: int, n_users: int, seed: int) -> list[Group]:
    rng = random.Random(seed)
    groups = []
    for g in range(n_groups):
        rels = [0.7 * i for i in range(n_users)]
        rng.shuffle(rels)
        users = tuple(User(f"u{g}_{i}", 3.0, 0, 3.0 - r, 3.0, r, ()) for i, r in enumerate(rels))
        groups.append(Group(f"g{g:03d}", "Books", "x", None, 0, users))
    return groups


@pytest.mark.parametrize("n_users", [2, 3, 4])
def test_balanced_orders_cancel_every_fixed_permutation(n_users):
    groups = _groups(10, n_users, seed=n_users)
    orders = balanced_orders(groups, seed=3, level="x")
    for answer in itertools.permutations(range(1, n_users + 1)):
        # Each group's prediction in group positions: the answer's shown indices mapped back.
        predictions = [[orders[g.group_id][i - 1] + 1 for i in answer] for g in groups]
        result = compute_ptc([g.relative_ratings for g in groups], predictions, prediction_format="ranking")
        assert result["ptc"] == 0.0


def test_balanced_orders_odd_level_is_off_by_at_most_one_group():
    groups = _groups(7, 3, seed=1)
    orders = balanced_orders(groups, seed=0, level="x")
    predictions = [[orders[g.group_id][i] + 1 for i in range(3)] for g in groups]
    result = compute_ptc([g.relative_ratings for g in groups], predictions, prediction_format="ranking")
    assert abs(result["ptc"]) <= 1 / 7 + 1e-12


def test_balanced_orders_are_seeded_and_permutations():
    groups = _groups(6, 4, seed=0)
    first = balanced_orders(groups, seed=5, level="hard")
    assert first == balanced_orders(list(reversed(groups)), seed=5, level="hard")
    assert first != balanced_orders(groups, seed=6, level="hard")
    assert all(sorted(order) == [0, 1, 2, 3] for order in first.values())
    assert true_ranks([0.1, 2.0, -1.0]) == [1, 0, 2]


def test_paper_mode_outputs_are_those_of_the_runner_without_presentations(bench, tmp_path, monkeypatch):
    # --paper-mode (dataset presentation) must write what the runner wrote before presentations existed:
    # every listwise request in group order, byte for byte.
    from perrec_eval.tasks.perrecbench import presentation

    folder, profiles = bench
    config = dict(data=str(folder), engine="fake", model="constant", profiles=str(profiles), paper_mode=True)
    evaluate(EvalConfig(out=str(tmp_path / "paper"), **config), FakeEngine(constant))
    monkeypatch.setattr(presentation, "listwise_orders", lambda *args, **kwargs: None)
    evaluate(EvalConfig(out=str(tmp_path / "plain"), **config), FakeEngine(constant))
    for name in ("samples.jsonl", "predictions.jsonl", "cache.jsonl"):
        assert (tmp_path / "paper" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name
