"""Few-shot demonstrations never show a test label, whatever split rule the benchmark was built with."""

from __future__ import annotations

import json

import pytest

from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from tests.benchmark_fixture import write_tiny_benchmark
from tests.sft.conftest import write_sft_benchmark


def _config(data, out, **kwargs) -> EvalConfig:
    return EvalConfig(
        data=str(data),
        engine="fake",
        model="constant",
        out=str(out),
        no_profile=True,
        methods=("listwise",),
        **kwargs,
    )


def test_few_shot_leaves_out_held_out_groups_that_show_a_test_label(tmp_path):
    # The first train group has a test user whose history holds that user's test review (--split-rule none).
    data = write_sft_benchmark(tmp_path / "bench", n_train=4, leak=True)
    seen = []

    def record(request, params, i):
        seen.append(json.dumps(request.messages))
        return constant(request, params, i)

    evaluate(_config(data, tmp_path / "run", shots=3, levels=("hard",)), FakeEngine(record))
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["demonstration_groups_left_out"] == {"hard": 1}
    assert "h0000" not in info["demonstration_groups"]["hard/listwise"]
    assert seen and not any("the test item" in text for text in seen)


def test_few_shot_refuses_when_every_held_out_group_shows_a_test_label(tmp_path):
    data = write_tiny_benchmark(tmp_path / "bench", leaky_train=True)
    with pytest.raises(
        ConfigError, match=r"easy/train has 0 \(4 more left out: they would show a test label\)"
    ):
        evaluate(_config(data, tmp_path / "run", shots=1, levels=("easy",)), FakeEngine(constant))


def test_few_shot_on_a_leak_free_build_leaves_nothing_out(tmp_path):
    data = write_tiny_benchmark(tmp_path / "bench")
    evaluate(_config(data, tmp_path / "run", shots=2), FakeEngine(constant))
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["demonstration_groups_left_out"] == {"easy": 0, "medium": 0, "hard": 0}
