"""LLMRec's per-cell counts of repeated, hallucinated and off-candidate titles: scores.json and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.tasks.llmrec import data
from tests.dataset_builder.llmrec.fixture import synth_build


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_counts"))


def test_answer_counts_sum_repeats_hallucinations_and_titles_outside_the_candidates(build, tmp_path) -> None:
    docs = data.load_docs(str(build), "direct", "test", max_docs=10)
    titles = dict(data.catalogue(str(build))["Books"])
    answers = {}
    for doc in docs:
        outside = next(asin for asin in titles if asin not in doc.candidates)
        first = titles[doc.candidates[0]]
        # the first candidate twice, a made-up title, a catalogue item that is not a candidate
        answers[doc.user_id] = json.dumps([first, first, "Zzyzx Quantum Soap 3000", titles[outside]])

    def answer(request, params, i):
        return next(
            text for user, text in answers.items() if f"user {user} " in request.messages[-1]["content"]
        )

    config = TaskEvalConfig(
        task="llmrec", data=str(build), engine="fake", model="counted", out=str(tmp_path / "run"),
        subsets=("direct",), protocols=("direct",), max_docs=10,
    )  # fmt: skip
    (cell,) = evaluate(config, engine=FakeEngine(answer, model="counted")).cells
    assert cell.answer_counts == {"duplicates": 10, "unmatched": 10, "not_candidate": 10}
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["cells"][0]["answer_counts"] == {"duplicates": 10, "unmatched": 10, "not_candidate": 10}
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "p"), "--no-progress"]) == 0
    board = (tmp_path / "p" / "leaderboard.md").read_text()
    assert "- counted: direct/direct: duplicates 10, unmatched 10, not candidate 10" in board
