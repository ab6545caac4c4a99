"""lm-evaluation-harness running the exported tasks: `lm_eval --model hf` with the tests' tiny model on every
family, and a scripted model through lm-eval's own evaluator; each cell's numbers equal `perrecbench score`
of the logged samples to 1e-9. Skipped without the [harness] extra (`.ci/run` installs it and makes a
missing lm_eval a failure)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.errors import DataError
from perrec_eval.harness import export
from tests.perrec_eval.harness import scripted
from tests.perrec_eval.harness.conftest import harness
from tests.perrec_eval.harness.outputs import assert_same, cell_metrics, lm_eval_results, scored

FAMILIES = ("perrecbench", "llmrec", "recbench-plus")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def lm_eval():
    return harness("lm_eval")


@pytest.fixture(scope="module")
def exported(builds, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export_lm_eval") / "tasks"
    argv = ["export", "lm-eval", *(str(builds[f]) for f in FAMILIES), "--out", str(out), "--max-docs", "2"]
    assert main(["--no-progress", *argv, "--max-new-tokens", "8"]) == 0
    return out


@pytest.mark.slow
def test_lm_eval_hf_run_of_every_family_equals_perrecbench_score(
    lm_eval, exported, builds, tiny_model_dir, tmp_path
):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    model = f"pretrained={tiny_model_dir},dtype=float32"
    command = [
        sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", model,
        "--include_path", str(exported), "--tasks", "perrecbench_suite", "--apply_chat_template",
        "--log_samples", "--output_path", str(out), "--device", "cpu", "--batch_size", "16",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = lm_eval_results(out)
    assert {"perrecbench", "llmrec", "recbench_plus", "perrecbench_suite"} <= set(results)
    for task in FAMILIES:
        cells = cell_metrics(exported, task)
        assert set(cells) <= set(results)  # every exported cell ran
        assert assert_same(results, scored(task, builds[task], out), cells) >= len(cells)


class _Scripted:
    """An lm-eval model answering each request's row with `scripted.answer` (made on first use)."""

    @staticmethod
    def make(lm_eval):
        from lm_eval.api.model import LM

        class Scripted(LM):
            tokenizer_name = "scripted"

            def apply_chat_template(self, chat_history, add_generation_prompt=True):
                return json.dumps(chat_history)

            def chat_template(self, chat_template=False):
                return "json"

            def generate_until(self, requests, disable_tqdm=False):
                return [scripted.answer(dict(request.doc)) for request in requests]

            def loglikelihood(self, requests, disable_tqdm=False):
                raise NotImplementedError

            def loglikelihood_rolling(self, requests, disable_tqdm=False):
                raise NotImplementedError

        return Scripted()


def test_lm_eval_scripted_run_numbers_equal_perrecbench_score(lm_eval, exported, builds, tmp_path):
    from lm_eval.evaluator import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    out = tmp_path / "out"
    tracker = EvaluationTracker(output_path=str(out))
    results = simple_evaluate(
        model=_Scripted.make(lm_eval),
        tasks=["perrecbench", "llmrec", "recbench_plus"],
        task_manager=TaskManager(include_path=str(exported)),
        log_samples=True,
        apply_chat_template=True,
        evaluation_tracker=tracker,
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    reported = lm_eval_results(out)
    assert 0 < reported["perrecbench_hard_pairwise"]["ptc"] < 1
    for task in FAMILIES:
        cells = cell_metrics(exported, task)
        assert assert_same(reported, scored(task, builds[task], out), cells) >= len(cells)
    # the family's group is its headline averaged over its cells, as this project's reports average it
    ptc = [reported[name]["ptc"] for name in cell_metrics(exported, "perrecbench")]
    assert abs(reported["perrecbench"]["ptc"] - sum(ptc) / len(ptc)) <= 1e-9


def test_lm_eval_task_manager_refuses_an_export_whose_prompt_file_changed(
    lm_eval, exported, tmp_path, monkeypatch
):
    from lm_eval.tasks import TaskManager

    copy = tmp_path / "templates"
    shutil.copytree(Path(str(export.templates_dir("perrecbench"))), copy)
    (copy / "listwise.yaml").write_text((copy / "listwise.yaml").read_text().replace("Analyze", "Analyse", 1))
    real = export.templates_dir
    monkeypatch.setattr(export, "templates_dir", lambda name: copy if name == "perrecbench" else real(name))
    export._checked.cache_clear()
    try:
        with pytest.raises(DataError, match=r"listwise\.yaml changed since"):
            TaskManager(include_path=str(exported)).load(["perrecbench_easy_listwise"])
    finally:
        export._checked.cache_clear()
