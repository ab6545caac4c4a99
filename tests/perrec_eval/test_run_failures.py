"""Runs never pass for what they are not: engine errors, failed profiles, NaN cells, few-shot sources."""

from __future__ import annotations

import json

import pytest

from perrec_eval.engines.fake import FakeEngine
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from perrec_eval.tasks.perrecbench.rundir import rescore
from perrec_eval.types import Completion
from tests.benchmark_fixture import truth_responder, write_tiny_benchmark, write_truth_profiles

TRUTH = truth_responder(1.0)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench", n_test=6, n_train=4)
    profiles = write_truth_profiles(folder, folder.parent / "profiles.jsonl")
    return folder, profiles


def _config(bench, out, **kwargs) -> EvalConfig:
    folder, profiles = bench
    settings = {"profiles": str(profiles), **kwargs}
    return EvalConfig(data=str(folder), engine="fake", model="scripted", out=str(out), **settings)


def _is_pairwise(request) -> bool:
    return "pair of users" in request.messages[0]["content"]


def _failing_pairwise(request, params, i):
    if _is_pairwise(request):
        return Completion(texts=(), error="HTTP 500 from http://127.0.0.1:1/v1: overloaded")
    return TRUTH(request, params, i)


def _read(path):
    return json.loads(path.read_text())


def test_engine_errors_make_a_provisional_run_counted_apart_from_parse_failures(bench, tmp_path):
    scores = evaluate(_config(bench, tmp_path), FakeEngine(_failing_pairwise))
    assert scores.complete is False and scores.first_engine_error.startswith("HTTP 500")
    cells = {(c.level, c.method): c for c in scores.cells}
    pair, point = cells[("medium", "pairwise")], cells[("medium", "pointwise")]
    assert pair.num_engine_errors == pair.num_requests == 6 * 6 and pair.engine_error_rate == 1.0
    assert pair.parse_failure_rate == 0.0  # an error is not a parse failure
    assert point.num_engine_errors == 0 and point.ptc == pytest.approx(1.0)
    info = _read(tmp_path / "run.json")
    assert info["complete"] is False and info["engine_errors"]["requests"] == scores.num_engine_errors
    assert "(provisional)" in (tmp_path / "report.md").read_text()
    assert not any("overloaded" in line for line in (tmp_path / "cache.jsonl").read_text().splitlines())


def test_rerun_after_engine_errors_retries_only_the_failed_requests(bench, tmp_path):
    evaluate(_config(bench, tmp_path), FakeEngine(_failing_pairwise))
    failed = sum(
        1 for line in (tmp_path / "samples.jsonl").read_text().splitlines() if json.loads(line)["error"]
    )
    asked = []

    def healthy(request, params, i):
        asked.append(request)
        return TRUTH(request, params, i)

    scores = evaluate(_config(bench, tmp_path), FakeEngine(healthy))
    assert scores.complete is True and scores.average == pytest.approx(1.0)
    assert asked and all(_is_pairwise(request) for request in asked)
    # Identical pair prompts recur across levels, so the distinct retried requests are at most the failures.
    assert len(asked) <= failed
    assert _read(tmp_path / "run.json")["complete"] is True


def test_failed_profile_requests_are_engine_errors_not_a_crash(bench, tmp_path):
    def profiles_fail(request, params, i):
        if len(request.messages) == 1:  # a profile request is a single user message
            return Completion(texts=(), error="HTTP 503: profile model down")
        return TRUTH(request, params, i)

    def profiles_work(request, params, i):
        return "likes gardens" if len(request.messages) == 1 else '{"predicted_ranking": [1, 2]}'

    config = _config(bench, tmp_path, profiles=None, levels=("easy",), methods=("listwise",))
    scores = evaluate(config, FakeEngine(profiles_fail))
    assert scores.complete is False
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["error"].startswith("profile request failed: HTTP 503") for s in samples)
    assert all(s["key"] is None for s in samples)
    assert _read(tmp_path / "run.json")["profile_failures"] == 12  # 6 groups x 2 users
    # Profiles are engine requests too: the next run asks for them again and completes.
    assert evaluate(config, FakeEngine(profiles_work)).complete is True


def test_few_shot_writes_profiles_only_for_users_the_demonstrations_show(bench, tmp_path):
    profile_requests = []

    def recording(request, params, i):
        if len(request.messages) == 1:  # a profile request is a single user message
            profile_requests.append(request)
            return "likes things"
        return '{"predicted_rating": 4}'

    config = _config(bench, tmp_path, profiles=None, levels=("medium",), methods=("pointwise",), shots=2)
    evaluate(config, FakeEngine(recording))
    # 6 test groups x 3 users, plus the first user of each of the 2 demonstration groups.
    assert len(profile_requests) == 6 * 3 + 2
    info = _read(tmp_path / "run.json")
    assert len(info["demonstration_groups"]["medium/pointwise"]) == 2
    assert info["profiles"]["source"] == "generated" and len(info["profiles"]["sha256"]) == 64


def test_few_shot_on_the_train_split_never_shows_a_group_itself(bench, tmp_path):
    seen = []

    def recording(request, params, i):
        seen.append(request.messages)
        return TRUTH(request, params, i)

    config = _config(bench, tmp_path, split="train", levels=("easy",), methods=("listwise",), shots=3)
    evaluate(config, FakeEngine(recording))
    assert len(seen) == 4  # every train group once
    for messages in seen:
        evaluated, shown = messages[-1]["content"], [m["content"] for m in messages[1:-1:2]]
        assert len(shown) == 3 and evaluated not in shown


def test_paper_mode_cell_where_every_group_failed_is_null_with_a_reason(bench, tmp_path):
    config = _config(bench, tmp_path, methods=("listwise",), levels=("easy",), paper_mode=True)
    evaluate(config, FakeEngine(lambda request, params, i: "no idea"))
    text = (tmp_path / "scores.json").read_text()
    assert "NaN" not in text
    (cell,) = json.loads(text)["cells"]
    assert cell["metrics"]["ptc"]["value"] is None and "every group" in cell["extras"]["ptc_missing"]
    assert "| – |" in (tmp_path / "report.md").read_text()


def test_max_groups_is_a_seeded_sample_recorded_in_run_json(bench, tmp_path):
    evaluate(_config(bench, tmp_path, max_groups=3, methods=("pointwise",)), FakeEngine(TRUTH))
    groups = _read(tmp_path / "run.json")["groups"]
    assert len(groups["easy"]) == 3 and groups["easy"] == groups["medium"] == groups["hard"]
    other = tmp_path / "seed1"
    evaluate(_config(bench, other, max_groups=3, methods=("pointwise",), seed=1), FakeEngine(TRUTH))
    assert _read(other / "run.json")["groups"]["easy"] != groups["easy"]


def test_sample_groups_spreads_over_domains():
    from dataclasses import replace

    from perrec_eval.tasks.perrecbench.context import sample_groups
    from perrec_eval.tasks.perrecbench.records import Group
    from tests.benchmark_fixture import make_rows

    base = Group.from_row(make_rows(1)[0])
    groups = [
        replace(base, group_id=f"{d}:{i}", domain=d) for d in ("Books", "Electronics") for i in range(10)
    ]
    picked = sample_groups(groups, 6, seed=0)
    assert sorted(g.domain for g in picked) == ["Books"] * 3 + ["Electronics"] * 3
    assert picked == sorted(picked, key=groups.index)  # dataset order kept
    assert sample_groups(groups, 6, seed=0) == picked != sample_groups(groups, 6, seed=1)


def test_rescore_of_an_old_run_without_error_fields_still_works(bench, tmp_path):
    evaluate(_config(bench, tmp_path, methods=("listwise",)), FakeEngine(TRUTH))
    path = tmp_path / "samples.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in s.items() if k != "error"}) + "\n" for s in lines))
    assert rescore(tmp_path).complete is True


def test_paper_mode_rejects_an_explicit_allpairs_strategy():
    with pytest.raises(ConfigError, match="--paper-mode"):
        EvalConfig(data="d", engine="fake", model="m", out="o", paper_mode=True, pairwise_strategy="allpairs")
    config = EvalConfig(data="d", engine="fake", model="m", out="o", paper_mode=True)
    assert config.pairwise_strategy == "heapsort"


def test_baselines_run_pointwise_only_and_reject_other_methods():
    config = EvalConfig(data="d", engine="baseline", model="random", out="o")
    assert config.methods == ("pointwise",)
    with pytest.raises(ConfigError, match="pointwise only"):
        EvalConfig(data="d", engine="baseline", model="random", out="o", methods=("pairwise",))


def test_missing_local_data_folder_fails_at_once(tmp_path):
    from perrec_eval.tasks.perrecbench.context import load_groups

    with pytest.raises(DataError, match="perrecbench build"):
        load_groups(tmp_path / "typo", "easy")


def test_samples_record_the_engines_finish_reasons(bench, tmp_path):
    def cut(request, params, i):
        return Completion(texts=('{"predicted_rating": 4',), extra={"finish_reasons": ["length"]})

    evaluate(_config(bench, tmp_path, methods=("pointwise",), levels=("easy",)), FakeEngine(cut))
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["finish_reasons"] == ["length"] for s in samples)
    assert all(s["error"] is None for s in samples)  # an answer cut short is an answer, not an engine error
