"""lighteval running the exported custom tasks: its transformers backend with the tests' tiny model, and a
scripted model, through lighteval's own pipeline; each cell's numbers equal `perrecbench score` of the saved
details to 1e-9. Skipped without the [harness] extra (`.ci/run` installs it and makes a missing lighteval a
failure).

lighteval 0.13 cannot load its own task registry beside this project's pins (docs/harnesses.md): loading it
imports every built-in task module, and two of them fail at import, `mt_bench` (it calls
``HfApi.list_models(model_name=...)``, gone from huggingface_hub 1.0, and datasets 5.2 needs 1.31 or later)
and, offline, `tiny_benchmarks` (it downloads a pickle from GitHub). These tests load the custom tasks only
(`_custom_tasks_only`); everything else is lighteval's own code path."""

from __future__ import annotations

import pytest

from perrec_eval.cli import main
from tests.perrec_eval.harness import scripted
from tests.perrec_eval.harness.conftest import harness
from tests.perrec_eval.harness.outputs import assert_same, cell_metrics, lighteval_results, scored

FAMILIES = ("perrecbench", "llmrec", "recbench-plus")
TASKS = "perrecbench|0,llmrec|0,recbench_plus|0"


@pytest.fixture
def lighteval(monkeypatch):
    """lighteval, its custom tasks loaded alone; torch's autograd on again afterwards (lighteval's
    transformers model turns it off for the whole process when imported, and again when it loads a model)."""
    import torch

    module = harness("lighteval")
    _custom_tasks_only(monkeypatch)
    enabled = torch.is_grad_enabled()
    yield module
    torch.set_grad_enabled(enabled)


def _custom_tasks_only(monkeypatch) -> None:
    from lighteval.tasks.registry import Registry

    monkeypatch.setattr(Registry, "_load_from_files", staticmethod(lambda files, module_prefix: {}))
    monkeypatch.setattr(Registry, "_load_from_subdirs", staticmethod(lambda subdirs: {}))


@pytest.fixture(scope="module")
def exported(builds, tmp_path_factory):
    out = tmp_path_factory.mktemp("export_lighteval") / "perrec_tasks.py"
    argv = ["export", "lighteval", *(str(builds[f]) for f in FAMILIES), "--out", str(out), "--max-docs", "2"]
    subsets = "easy,hard,rating,direct,explanation,explicit"
    assert main(["--no-progress", *argv, "--max-new-tokens", "8", "--subsets", subsets]) == 0
    return out


def _rows(exported):
    return exported.with_name(exported.stem + "_rows")


@pytest.mark.slow
def test_lighteval_transformers_run_equals_perrecbench_score(
    lighteval, exported, builds, tiny_model_dir, tmp_path
):
    from lighteval.main_accelerate import accelerate

    out = tmp_path / "out"
    accelerate(
        model_args=f"model_name={tiny_model_dir},dtype=float32,batch_size=16",
        tasks=TASKS,
        custom_tasks=str(exported),
        save_details=True,
        output_dir=str(out),
    )
    results = lighteval_results(out)
    for task in FAMILIES:
        cells = cell_metrics(_rows(exported), task)
        assert set(cells) <= set(results)  # every exported cell ran
        assert assert_same(results, scored(task, builds[task], out), cells) >= len(cells)


def test_lighteval_scripted_run_numbers_equal_perrecbench_score(lighteval, exported, builds, tmp_path):
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.dummy.dummy_model import DummyModel, DummyModelConfig
    from lighteval.models.model_output import ModelResponse
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    class Scripted(DummyModel):
        def greedy_until(self, docs):
            return [ModelResponse(text=[scripted.answer(dict(doc.specific))]) for doc in docs]

    out = tmp_path / "out"
    pipeline = Pipeline(
        tasks=TASKS,
        pipeline_parameters=PipelineParameters(
            launcher_type=ParallelismManager.ACCELERATE, custom_tasks_directory=str(exported)
        ),
        evaluation_tracker=EvaluationTracker(output_dir=str(out), save_details=True),
        model=Scripted(DummyModelConfig(model_name="scripted")),
    )
    pipeline.evaluate()
    pipeline.save_and_push_results()
    results = lighteval_results(out)
    assert 0 < results["perrecbench_hard_pairwise"]["ptc"] < 1
    for task in FAMILIES:
        cells = cell_metrics(_rows(exported), task)
        assert assert_same(results, scored(task, builds[task], out), cells) >= len(cells)
