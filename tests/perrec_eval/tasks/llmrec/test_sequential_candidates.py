"""LLMRec's sequential candidate variant: the sequential rows ranked over the candidates of the direct rows
of the same ids (`sequential-candidates`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.task import Cell
from perrec_eval.tasks.llmrec import data
from perrec_eval.tasks.llmrec.task import TASK
from tests.dataset_builder.llmrec.fixture import read, synth_build

NEGATIVES = 19
CELL = ["--subsets", "sequential", "--protocols", "sequential-candidates"]


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_seqcand"), negatives=NEGATIVES)


def _cells(folder: Path) -> dict[tuple[str, str], dict[str, float | None]]:
    scores = json.loads((folder / "scores.json").read_text())
    return {
        (c["subset"], c["protocol"]): {k: v["value"] for k, v in c["metrics"].items()}
        for c in scores["cells"]
    }


def test_sequential_candidates_is_a_cell_of_the_sequential_config_only() -> None:
    assert Cell("sequential", "sequential-candidates") in TASK.cells()
    assert [c for c in TASK.cells() if c.protocol == "sequential-candidates"] == [
        Cell("sequential", "sequential-candidates")
    ]
    assert [c.protocol for c in TASK.cells(["sequential"])] == ["sequential", "sequential-candidates"]


def test_sequential_candidates_prompt_lists_the_candidates_and_the_ordered_history(build) -> None:
    doc = data.load_docs(str(build), "sequential", "test", max_docs=1)[0]
    protocol = TASK.protocols["sequential-candidates"]
    (slot,) = protocol.runner(doc).pending()
    titles = dict(data.catalogue(str(build))[doc.domain])
    for variant in ("default", "p5"):
        text = protocol.render(doc, slot, variant=variant)[-1]["content"]
        listed = json.loads(text.rpartition("\n")[2].removeprefix("Candidates: "))
        assert listed == [titles[asin] for asin in doc.candidates] and len(listed) == NEGATIVES + 1
        assert json.dumps([item["title"] for item in doc.history], ensure_ascii=False) in text


def test_sequential_candidates_truth_answering_engine_scores_one(build, tmp_path) -> None:
    answers = {}
    protocol = TASK.protocols["sequential-candidates"]
    for doc in data.load_docs(str(build), "sequential", "test"):
        (slot,) = protocol.runner(doc).pending()
        text = protocol.render(doc, slot)[-1]["content"]
        answers[text] = protocol.format_answer(protocol.true_answer(doc, slot), slot)
    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model="oracle", out=str(tmp_path / "o"),
        subsets=("sequential",), protocols=("sequential-candidates",),
    )  # fmt: skip
    engine = FakeEngine(lambda request, params, i: answers[request.messages[-1]["content"]], model="oracle")
    (cell,) = evaluate(config, engine=engine).cells
    assert (cell.subset, cell.protocol, cell.num_failed) == ("sequential", "sequential-candidates", 0)
    assert all(cell.metrics[m].value == 1.0 for m in ("hr@1", "hr@5", "hr@10", "ndcg@5", "ndcg@10"))


def test_sequential_candidates_from_the_cli_random_constant_and_popularity(build, tmp_path) -> None:
    argv = ["evaluate", "--task", "llmrec", "--data", str(build), "--no-progress", *CELL]
    assert main([*argv, "--engine", "baseline", "--model", "random", "--out", str(tmp_path / "r")]) == 0
    assert main([*argv, "--engine", "fake", "--model", "constant", "--out", str(tmp_path / "c")]) == 0
    (random_cell,) = _cells(tmp_path / "r").values()
    assert set(_cells(tmp_path / "r")) == {("sequential", "sequential-candidates")}
    # a uniform shuffle of 20 candidates: HR@1 about 1/20 and HR@10 about 10/20 (the full catalogue's are ~0)
    assert 0.2 / (NEGATIVES + 1) < random_cell["hr@1"] < 3 / (NEGATIVES + 1)
    assert random_cell["hr@10"] == pytest.approx(10 / (NEGATIVES + 1), abs=0.15)
    # `constant` ranks the first 10 candidates as listed: a hit wherever the target was put among them
    test = read(build, "direct", "test")  # the same rows as sequential's, with the candidates
    (constant,) = _cells(tmp_path / "c").values()
    assert constant["hr@10"] == pytest.approx(sum(r["target_position"] < 10 for r in test) / len(test))
    assert constant["hr@1"] == pytest.approx(sum(r["target_position"] == 0 for r in test) / len(test))


@pytest.mark.parametrize("name", ["random", "popularity", "item-knn", "sasrec"])
def test_sequential_candidates_baselines_rank_the_candidates_only(build, name) -> None:
    if name == "sasrec":
        pytest.importorskip("cornac")
        pytest.importorskip("torch")
    docs = data.load_docs(str(build), "sequential", "test", max_docs=40)
    ranked = TASK.predict_baseline(name, docs, data=str(build), seed=0, protocol="sequential-candidates")
    for doc, answer in zip(docs, ranked, strict=True):
        assert sorted(answer) == sorted(doc.candidates)  # every candidate once, nothing else
    catalogue = TASK.predict_baseline(name, docs, data=str(build), seed=0, protocol="sequential")
    assert any(not set(answer) <= set(doc.candidates) for doc, answer in zip(docs, catalogue, strict=True))
    assert all(len(answer) == 10 for answer in catalogue)


def test_sequential_candidates_scores_a_predictions_file(build, tmp_path, capsys) -> None:
    docs = data.load_docs(str(build), "sequential", "test")
    path = tmp_path / "truth.jsonl"
    lines = [{"config": "sequential", "id": doc.id, "prediction": [doc.truth]} for doc in docs]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["score", "--task", "llmrec", "--data", str(build), "--predictions", str(path)]
    assert main([*argv, "--protocols", "sequential-candidates", "--out", str(tmp_path / "s")]) == 0
    cells = _cells(tmp_path / "s")
    assert list(cells) == [("sequential", "sequential-candidates")]
    assert {cells["sequential", "sequential-candidates"][m] for m in ("hr@1", "hr@10", "ndcg@10")} == {1.0}
    capsys.readouterr()
    assert main([*argv, "--json"]) == 2  # without --protocols a line must name its cell: two ask sequential
    err = capsys.readouterr().err
    assert '"protocol": "sequential" or "protocol": "sequential-candidates"' in err
    assert len(err.strip().splitlines()) == 1
    named = [{**line, "protocol": "sequential-candidates"} for line in lines]
    path.write_text("".join(json.dumps(line) + "\n" for line in named))
    assert main([*argv, "--json"]) == 0
    assert [c["protocol"] for c in json.loads(capsys.readouterr().out)["cells"]] == ["sequential-candidates"]
    assert main([*argv, "--protocols", "sequential"]) == 2  # the line names a cell --protocols leaves out
    assert "names protocol sequential-candidates: add it to --protocols" in capsys.readouterr().err
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main([*argv, "--protocols", "direct"]) == 2
    err = capsys.readouterr().err
    assert "no protocol of --protocols asks about config sequential" in err
    assert len(err.strip().splitlines()) == 1


def test_sequential_candidates_sft_examples_are_asked_for_but_not_mixed_in(build, tmp_path) -> None:
    """`sft data --format sequential-candidates` writes P5's 2-7 examples; LLMRec's mix keeps its five."""
    argv = ["sft", "data", "--task", "llmrec", "--data", str(build), "--no-progress"]
    assert main([*argv, "--format", "sequential-candidates", "--out", str(tmp_path / "c")]) == 0
    info = json.loads((tmp_path / "c" / "sft_data.json").read_text())
    assert info["examples_per_format"] == {"sequential-candidates": len(read(build, "sequential", "train"))}
    assert "sequential-candidates" in TASK.protocols and "sequential-candidates" not in TASK.sft_mixed
