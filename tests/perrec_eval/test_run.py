"""The runner end to end with scripted engines on a tiny benchmark whose truth is known."""

from __future__ import annotations

import json

import pytest

from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import DataError
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from perrec_eval.tasks.perrecbench.rundir import rescore
from tests.benchmark_fixture import truth_responder, write_tiny_benchmark, write_truth_profiles


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench")
    profiles = write_truth_profiles(folder, folder.parent / "profiles.jsonl")
    return folder, profiles


def _config(bench, out, **kwargs) -> EvalConfig:
    folder, profiles = bench
    return EvalConfig(
        data=str(folder), engine="fake", model="scripted", out=str(out), profiles=str(profiles), **kwargs
    )


def _cells(scores):
    return {(c.level, c.method): c for c in scores.cells}


@pytest.mark.parametrize("strategy", ["allpairs", "heapsort"])
def test_run_truth_engine_scores_one_everywhere(bench, tmp_path, strategy):
    scores = evaluate(_config(bench, tmp_path, pairwise_strategy=strategy), FakeEngine(truth_responder(1.0)))
    assert len(scores.cells) == 9
    for cell in scores.cells:
        assert cell.ptc == pytest.approx(1.0), cell
        assert cell.num_invalid == 0 and cell.parse_failure_rate == 0.0
    assert scores.average == pytest.approx(1.0)


@pytest.mark.parametrize("strategy", ["allpairs", "heapsort"])
def test_run_reverse_engine_scores_minus_one_everywhere(bench, tmp_path, strategy):
    scores = evaluate(_config(bench, tmp_path, pairwise_strategy=strategy), FakeEngine(truth_responder(-1.0)))
    for cell in scores.cells:
        assert cell.ptc == pytest.approx(-1.0), cell


def test_run_always_user_a_allpairs_scores_exactly_zero(bench, tmp_path):
    config = _config(bench, tmp_path, methods=("pairwise",))
    scores = evaluate(config, FakeEngine(lambda request, params, i: "[User A]"))
    for cell in scores.cells:
        assert cell.ptc == 0.0


def test_run_always_user_a_heapsort_paper_mode_is_biased(bench, tmp_path):
    config = _config(bench, tmp_path, methods=("pairwise",), paper_mode=True)
    evaluate(config, FakeEngine(lambda request, params, i: "[User A]"))
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    expected = {"easy": [1, 2], "medium": [1, 3, 2], "hard": [1, 4, 3, 2]}
    assert records and all(r["prediction"] == expected[r["level"]] for r in records)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["metric"] == {"variant": "paper", "invalid": "skip"}


def test_run_makes_one_engine_call_per_one_shot_method(bench, tmp_path):
    engine = FakeEngine(truth_responder(1.0))
    evaluate(_config(bench, tmp_path), engine)
    calls = json.loads((tmp_path / "run.json").read_text())["engine_calls"]
    assert all(count == 1 for count in calls.values()), calls


def test_run_heapsort_calls_once_per_round(bench, tmp_path):
    engine = FakeEngine(lambda request, params, i: "[User A]")
    evaluate(_config(bench, tmp_path, methods=("pairwise",), pairwise_strategy="heapsort"), engine)
    calls = json.loads((tmp_path / "run.json").read_text())["engine_calls"]
    # Always-A never swaps: 1 comparison for 2 users, 3 for 3, 6 for 4 (see HeapsortRanker).
    assert calls == {"easy/pairwise": 1, "medium/pairwise": 3, "hard/pairwise": 6}


def test_run_resume_repeats_no_request(bench, tmp_path):
    class Dies(Exception):
        pass

    completed: list[str] = []  # requests whose engine call returned (so the cache holds them)
    sent = 0

    class DiesMidRun(FakeEngine):
        def generate(self, requests, params, **kwargs):
            nonlocal sent
            sent += len(requests)
            if sent > 40:
                raise Dies
            out = super().generate(requests, params, **kwargs)
            completed.extend(r.messages[-1]["content"] for r in requests)
            return out

    with pytest.raises(Dies):
        evaluate(_config(bench, tmp_path), DiesMidRun(truth_responder(1.0)))
    again: list[str] = []

    def counting(request, params, i):
        again.append(request.messages[-1]["content"])
        return truth_responder(1.0)(request, params, i)

    scores = evaluate(_config(bench, tmp_path), FakeEngine(counting))
    assert completed and again
    assert set(again).isdisjoint(completed)
    assert scores.average == pytest.approx(1.0)
    # Identical prompts recur across levels (the same pair of users), so hits can exceed `completed`.
    assert json.loads((tmp_path / "run.json").read_text())["cache"]["hits"] >= len(completed)


def test_run_rescore_paper_variant_matches_paper_mode_metric(bench, tmp_path):
    evaluate(_config(bench, tmp_path, methods=("listwise",)), FakeEngine(truth_responder(1.0)))
    default = rescore(tmp_path)
    paper = rescore(tmp_path, variant="paper")
    assert default.variant == "tau_b" and paper.variant == "paper"
    assert [c.ptc for c in paper.cells] == pytest.approx([1.0, 1.0, 1.0])


def test_run_writes_all_outputs_without_secrets(bench, tmp_path, monkeypatch):
    monkeypatch.setenv("PERREC_TEST_KEY", "sk-secret-value")
    config = _config(bench, tmp_path, methods=("pointwise",), api_key_env="PERREC_TEST_KEY")
    evaluate(config, FakeEngine(truth_responder(1.0)))
    for name in ("run.json", "samples.jsonl", "predictions.jsonl", "scores.json", "report.md", "cache.jsonl"):
        text = (tmp_path / name).read_text()
        assert text and "sk-secret-value" not in text
    sample = json.loads((tmp_path / "samples.jsonl").read_text().splitlines()[0])
    assert {"group_id", "level", "method", "key", "texts", "parsed", "ok", "reason"} <= set(sample)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["templates"] and info["dataset_fingerprint"] and info["retrieval"]


def test_run_counts_parse_failures_and_scores_failed_groups_zero(bench, tmp_path):
    scores = evaluate(
        _config(bench, tmp_path, methods=("listwise",), levels=("medium",)),
        FakeEngine(lambda request, params, i: '{"predicted_ranking": [1, 1, 2]}'),
    )
    (cell,) = scores.cells
    assert cell.ptc == 0.0 and cell.num_invalid == cell.num_groups == 6
    assert cell.parse_failure_rate == 1.0


def test_run_self_consistency_takes_the_majority(bench, tmp_path):
    def noisy(request, params, i):
        # Two of three samples are right, one reversed: the majority must be the truth.
        return truth_responder(-1.0 if i == 0 else 1.0)(request, params, i)

    scores = evaluate(
        _config(bench, tmp_path, methods=("pairwise", "listwise"), samples=3), FakeEngine(noisy)
    )
    assert all(c.ptc == pytest.approx(1.0) for c in scores.cells)


def test_run_profiles_file_missing_a_pair_is_refused_naming_the_command(bench, tmp_path):
    folder, profiles = bench
    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(profiles.read_text().splitlines(keepends=True)[1:]))
    with pytest.raises(DataError, match=r"has no profile for 1 \(group, user\) pairs.*perrecbench profiles"):
        evaluate(_config((folder, partial), tmp_path / "run"), FakeEngine(truth_responder(1.0)))


def test_run_config_rejects_bad_levels():
    with pytest.raises(ValueError, match="levels"):
        EvalConfig(data="d", engine="fake", model="m", out="o", levels=("expert",))


def test_run_few_shot_puts_true_answers_before_the_prompt(bench, tmp_path):
    seen = []

    def recording(request, params, i):
        seen.append(request.messages)
        return truth_responder(1.0)(request, params, i)

    scores = evaluate(_config(bench, tmp_path, levels=("medium",), shots=1), FakeEngine(recording))
    assert all(c.ptc == pytest.approx(1.0) for c in scores.cells)
    roles = [m["role"] for m in seen[0]]
    assert roles == ["system", "user", "assistant", "user"]
    listwise = [m for m in seen if "group of users" in m[0]["content"]][0]
    demo_answer = json.loads(listwise[2]["content"])["predicted_ranking"]
    assert sorted(demo_answer) == [1, 2, 3]


def test_run_cot_variant_changes_the_prompts_not_the_scoring(bench, tmp_path):
    seen = []

    def recording(request, params, i):
        seen.append(request.messages[-1]["content"])
        return "Let me think. The history matches.\n" + truth_responder(1.0)(request, params, i)

    scores = evaluate(_config(bench, tmp_path, levels=("easy",), cot=True), FakeEngine(recording))
    assert all(c.ptc == pytest.approx(1.0) for c in scores.cells)
    assert any("step by step" in text for text in seen)
    assert json.loads((tmp_path / "run.json").read_text())["prompt_variant"] == "cot"


def test_load_groups_hides_history_items_without_metadata(tmp_path):
    import datasets

    from dataset_builder.perrecbench.schema import FEATURES
    from perrec_eval.tasks.perrecbench.context import load_groups
    from tests.benchmark_fixture import make_rows, write_manifest

    rows = make_rows(1)
    rows[0]["users"][0]["history"][0]["title"] = None
    folder = tmp_path / "bench"
    (folder / "easy").mkdir(parents=True)
    # A file name of its own: datasets caches by folder and file name (PITFALLS 1).
    datasets.Dataset.from_list(rows, features=FEATURES).to_parquet(
        str(folder / "easy" / "test-untitled.parquet")
    )
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: easy\n  data_files:\n"
        "  - split: test\n    path: easy/test-untitled.parquet\n---\n"
    )
    write_manifest(folder)
    loaded = load_groups(folder, "easy")
    before = len(rows[0]["users"][0]["history"])
    assert len(loaded[0].users[0].history) == before - 1
    assert loaded[0].users[0].untitled == 1
    assert all(item.title for user in loaded[0].users for item in user.history)
