"""Run folders made once per session with the fake engine and the baselines on a tiny benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from dataset_builder.perrecbench.stats import distributions, table4
from perrec_eval.engines.fake import FakeEngine, constant
from perrec_eval.tasks.perrecbench.baselines import BASELINES
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate, evaluate_baselines
from perrec_eval.types import Completion
from tests.benchmark_fixture import truth_responder, write_tiny_benchmark, write_truth_profiles

N_TEST = 6


def _write_stats(folder: Path) -> None:
    """A stats.json like the builder's (Table 4 figures and Fig. 5 distributions of the test split)."""
    (path,) = (folder / "full").glob("test-*.parquet")
    rows = datasets.Dataset.from_parquet(str(path)).to_list()
    stats = {"splits": {"test": {"all": table4(rows), "distributions": distributions(rows)}}}
    (folder / "stats.json").write_text(json.dumps(stats), encoding="utf-8")


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> tuple[Path, Path]:
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("lb_bench") / "perrecbench", n_test=N_TEST)
    _write_stats(folder)
    return folder, write_truth_profiles(folder, folder.parent / "profiles.jsonl")


def eval_config(bench, out: Path, **kwargs) -> EvalConfig:
    folder, profiles = bench
    settings = {"profiles": str(profiles), **kwargs}
    return EvalConfig(data=str(folder), engine="fake", model="scripted", out=str(out), **settings)


def always_a(request, params, sample_index):
    return "[User A]"


def cut_pairwise(request, params, sample_index):
    """The truth, but pairwise answers report the whole token budget (answers cut at the limit)."""
    text = truth_responder(1.0)(request, params, sample_index)
    if "pair of users" in request.messages[0]["content"]:
        return Completion(texts=(text,), prompt_tokens=100, completion_tokens=params.max_tokens)
    return text


@pytest.fixture(scope="session")
def runs(bench, tmp_path_factory) -> dict[str, Path]:
    """Run folders by name: truth (all pairs), heapsort, paper (paper mode), reverse, always_a (pairwise
    only), cut (pairwise answers at the token limit), few4 (--max-groups 4), baselines (a folder of four)."""
    root = tmp_path_factory.mktemp("lb_runs")
    made = {
        "truth": (eval_config(bench, root / "truth"), truth_responder(1.0)),
        "heapsort": (
            eval_config(bench, root / "heapsort", pairwise_strategy="heapsort"),
            truth_responder(1.0),
        ),
        "paper": (eval_config(bench, root / "paper", paper_mode=True), truth_responder(1.0)),
        "reverse": (eval_config(bench, root / "reverse"), truth_responder(-1.0)),
        "always_a": (eval_config(bench, root / "always_a", methods=("pairwise",)), always_a),
        "cut": (eval_config(bench, root / "cut", methods=("pairwise",), levels=("easy",)), cut_pairwise),
        "few4": (eval_config(bench, root / "few4", max_groups=4), truth_responder(1.0)),
        "no_profile": (eval_config(bench, root / "no_profile", profiles=None, no_profile=True), constant),
        "constant": (eval_config(bench, root / "constant"), constant),
    }
    for config, responder in made.values():
        evaluate(config, FakeEngine(responder))
    folder, _ = bench
    baselines = EvalConfig(data=str(folder), engine="baseline", model="all", out=str(root / "baselines"))
    evaluate_baselines(baselines, BASELINES)
    return {name: Path(config.out) for name, (config, _) in made.items()} | {"baselines": root / "baselines"}
