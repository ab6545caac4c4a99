"""LLMRec's classic baselines: fitted on train only, and the planted sequential signal is found."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from perrec_eval.cli import main
from perrec_eval.tasks.llmrec import baselines, data
from tests.dataset_builder.llmrec.fixture import build, read

pytest.importorskip("cornac")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One synthetic domain (5,000 reviews: the item chains of `perrecbench synth`), 49 negatives."""
    root = tmp_path_factory.mktemp("llmrec_planted")
    raw = ["synth", "--out", str(root / "raw"), "--reviews-per-domain", "5000", "--domains", "Books"]
    assert main(raw) == 0
    out = root / "llmrec"
    assert build(root / "raw", out, "--domains", "Books", "--negatives", "49") == 0
    return out


def _ndcg(folder: Path) -> dict[str, float]:
    """Each cell's NDCG@10, by its protocol (sequential, sequential-candidates, direct)."""
    scores = json.loads((folder / "scores.json").read_text())
    return {cell["protocol"]: cell["metrics"]["ndcg@10"]["value"] for cell in scores["cells"]}


def test_baselines_sasrec_and_popularity_beat_random_on_the_planted_chains(planted, tmp_path) -> None:
    argv = ["evaluate", "--task", "llmrec", "--data", str(planted), "--engine", "baseline", "--no-progress"]
    found = {}
    for name in ("random", "popularity", "sasrec"):
        out = tmp_path / name
        assert main([*argv, "--model", name, "--subsets", "sequential,direct", "--out", str(out)]) == 0
        found[name] = _ndcg(out)
    assert set(found["random"]) == {"sequential", "sequential-candidates", "direct"}
    for kind in ("sequential", "sequential-candidates", "direct"):
        assert found["sasrec"][kind] > found["random"][kind] + 0.05, (kind, found)
        assert found["popularity"][kind] > found["random"][kind] + 0.05, (kind, found)


def test_baselines_truth_as_predictions_scores_one(planted) -> None:
    """The oracle of the planted data: each test row's target as its prediction (the general scoring)."""
    from perrec_eval.docrecords import DocPrediction
    from perrec_eval.evaluation import score
    from perrec_eval.tasks.llmrec.task import TASK

    predictions = [
        DocPrediction(kind, kind, doc.id, [doc.truth], doc.truth, doc.cluster)
        for kind in ("sequential", "direct")
        for doc in data.load_docs(str(planted), kind, "test")
    ]
    for cell in score(TASK, predictions, (), seed=0).cells:
        assert {cell.metrics[m].value for m in ("hr@1", "hr@10", "ndcg@5", "ndcg@10")} == {1.0}


def test_baselines_rating_means_are_the_train_interactions_means(planted) -> None:
    train = read(planted, "interactions", "train")
    docs = data.load_docs(str(planted), "rating", "test")
    items: dict[str, list[float]] = {}
    for row in train:
        items.setdefault(row["parent_asin"], []).append(row["rating"])
    overall = float(np.mean([row["rating"] for row in train]))
    expected = [float(np.mean(items[d.parent_asin])) if d.parent_asin in items else overall for d in docs]
    assert baselines.predict("item-mean", docs, data=str(planted), seed=0) == pytest.approx(expected)


def test_baselines_fit_ignores_validation_and_test_targets(planted, tmp_path) -> None:
    """A copy of the build whose validation and test rows carry other ratings: every fit is the same."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "copy"
    shutil.copytree(planted, copy)
    outputs = json.loads((copy / "manifest.json").read_text())["outputs"]
    for config in ("rating", "sequential", "direct"):
        for split in ("validation", "test"):
            table = pq.read_table(copy / outputs[config][split])
            if "rating" in table.column_names:
                flipped = pa.array([6.0 - r for r in table["rating"].to_pylist()])
                table = table.set_column(table.column_names.index("rating"), "rating", flipped)
            pq.write_table(table, copy / outputs[config][split])
    for kind, names in (("rating", ("item-mean", "mf")), ("direct", ("item-knn", "bpr"))):
        for name in names:
            answers = [
                baselines.predict(name, data.load_docs(str(d), kind, "test"), data=str(d), seed=0)
                for d in (planted, copy)
            ]
            assert answers[0] == answers[1], name


def test_baselines_sequential_answers_leave_out_the_users_earlier_items(planted) -> None:
    docs = data.load_docs(str(planted), "sequential", "test", max_docs=40)
    for name in ("popularity", "item-knn", "bpr", "sasrec"):
        for doc, answer in zip(docs, baselines.predict(name, docs, data=str(planted), seed=0), strict=True):
            assert len(answer) == 10 and not set(answer) & data.seen_before(str(planted), doc)


def test_baselines_direct_answers_rank_every_candidate_once(planted) -> None:
    docs = data.load_docs(str(planted), "direct", "test", max_docs=40)
    for name in baselines.RANKING:
        for doc, answer in zip(docs, baselines.predict(name, docs, data=str(planted), seed=0), strict=True):
            assert sorted(answer) == sorted(doc.candidates)


def test_baselines_without_cornac_answer_no_cell_and_say_why(planted, monkeypatch, caplog) -> None:
    monkeypatch.setitem(sys.modules, "cornac", None)  # `import cornac` raises ImportError
    baselines._cornac_ready.cache_clear()
    docs = data.load_docs(str(planted), "direct", "test", max_docs=5)
    with caplog.at_level(logging.WARNING):
        assert baselines.predict("sasrec", docs, data=str(planted), seed=0) is None
    assert "perrecbench[cf]" in caplog.text
    baselines._cornac_ready.cache_clear()
