"""LLMRec's text configs: the explanation extraction, the summary filter, the counts, the leakage rule."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dataset_builder.llmrec import text
from tests.dataset_builder.llmrec.fixture import build, read, synth_build, write_hand_raw

SPLITS = ("train", "validation", "test")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_text"))


def _row(user: str, asin: str, ts: int, history: tuple[str, ...] = ()) -> dict:
    return {
        "id": f"D:{user}:{ts}",
        "domain": "D",
        "user_id": user,
        "parent_asin": asin,
        "title": f"Item {asin}",
        "timestamp": ts,
        "rating": 5.0,
        "history": [{"parent_asin": h, "title": f"Item {h}", "rating": 4.0, "timestamp": 0} for h in history],
    }


def test_text_vocabulary_counts_each_review_once_and_skips_opinion_words() -> None:
    vocabulary = text.feature_vocabulary(
        ["Great scent, scent, scent.", "The scent is nice.", "Nice bottle.", "Sturdy bottle, great pump."]
    )
    assert vocabulary == {"bottle": 0, "scent": 1}  # 2 reviews each; "great"/"nice" are opinion words


def test_text_explanation_takes_the_sentence_of_the_most_frequent_feature() -> None:
    vocabulary = {"scent": 0, "bottle": 1, "pump": 2}
    review = "The pump broke after a week. The bottle is sturdy and pretty. Scent!"
    # "Scent!" is too short: the bottle sentence wins over the pump one
    assert text.explanation(review, vocabulary) == ("The bottle is sturdy and pretty.", "bottle")
    assert text.explanation("No known word in this one.", vocabulary) is None


@pytest.mark.parametrize(
    ("title", "problem"),
    [
        ("Five Stars", "star_title"),
        ("5 stars", "star_title"),
        ("One Star", "star_title"),
        ("four stars.", "star_title"),
        ("5 Stars!!!", "star_title"),
        ("5/5", "star_title"),
        ("", "empty_title"),
        (None, "empty_title"),
        ("***", "no_word"),
        ("Five stars for the scent", None),
        ("Stars aligned", None),
        ("Love it", None),
    ],
)
def test_text_summary_problem_table(title, problem) -> None:
    assert text.summary_problem(title) == problem


def test_text_rows_counts_every_review_and_leaves_out_repeated_targets() -> None:
    rated = {
        "train": [_row("u", "B", 2, ("A",))],
        "validation": [_row("u", "C", 3, ("A", "B"))],
        "test": [_row("u", "D", 4, ("A", "B", "C"))],
    }
    reviews = {
        ("u", "A"): ("Five Stars", "The scent lasts all day long."),
        ("u", "B"): ("Lovely scent", "The scent is fresh and light."),
        ("u", "C"): ("", "Ok."),
        ("u", "D"): ("Lovely scent", "This scent is fresh and light."),  # title repeats B's
    }
    pairs = [("u", "A", 1), ("u", "B", 2)]
    rows, counts = text.text_rows(rated, pairs, reviews)
    assert [r["explanation"] for r in rows["explanation"]["train"]] == ["The scent is fresh and light."]
    assert [r["explanation"] for r in rows["explanation"]["test"]] == ["This scent is fresh and light."]
    assert counts["explanation"] == {"kept_test": 1, "kept_train": 1, "no_sentence": 1}
    assert counts["summarization"] == {"empty_title": 1, "kept_train": 1, "repeated_target": 1}
    assert rows["summarization"]["train"][0]["summary"] == "Lovely scent"
    assert "rating" not in rows["summarization"]["train"][0]


def test_text_rows_vocabulary_sees_only_train_reviews() -> None:
    rated = {"test": [_row("u", "C", 3)]}
    reviews = {
        ("u", "A"): (None, "Blue towel here."),
        ("v", "A"): (None, "Red towel there."),
        ("u", "C"): (None, "The zipper zipper zipper broke. The towel is soft and warm."),
    }
    rows, _ = text.text_rows(rated, [("u", "A", 1), ("v", "A", 1)], reviews)
    # "zipper" is the test review's most frequent word but unknown to train: the towel sentence is taken
    assert rows["explanation"]["test"][0]["feature"] == "towel"


def test_build_llmrec_text_counts_add_up_in_the_manifest(synth) -> None:
    manifest = json.loads((synth / "manifest.json").read_text())
    (funnel,) = manifest["text"]["funnel"].values()
    reviews = sum(manifest["counts"]["rating"].values())
    for name in ("explanation", "summarization"):
        assert sum(funnel[name].values()) == reviews
        assert {s: funnel[name][f"kept_{s}"] for s in SPLITS} == manifest["counts"][name]
    assert funnel["summarization"]["star_title"] > 0  # synth writes "Five stars" and "Three stars"
    card = (synth / "README.md").read_text()
    assert f"| `summarization` | {funnel['summarization']['kept_train']:,} |" in card


def test_build_llmrec_text_no_test_target_text_reaches_the_users_other_rows(synth) -> None:
    for name, column in text.TARGETS.items():
        earlier: dict[str, list[str]] = {}
        for split in ("train", "validation"):
            for row in read(synth, name, split):
                earlier.setdefault(row["user_id"], []).append(row[column].casefold())
        for config in ("summarization",):
            for split in ("train", "validation"):
                for row in read(synth, config, split):
                    earlier.setdefault(row["user_id"], []).append(row["review_text"].casefold())
        test = read(synth, name, "test")
        assert test
        for row in test:
            target = row[column].casefold()
            assert not any(target in other for other in earlier.get(row["user_id"], []))
            assert all(target != item["title"].casefold() for item in row["history"])
            others = [r for r in read(synth, "rating", "test") if r["user_id"] == row["user_id"]]
            assert [r["parent_asin"] for r in others] == [row["parent_asin"]]  # the user's last item


def test_build_llmrec_text_rows_are_the_rating_rows_with_their_review(synth) -> None:
    rating = {row["id"]: row for split in SPLITS for row in read(synth, "rating", split)}
    raw = {}
    for line in (synth.parent / "raw" / "Books.jsonl").read_text().splitlines():
        review = json.loads(line)
        raw.setdefault((review["user_id"], review["parent_asin"]), review)  # synth writes no duplicate
    for row in read(synth, "summarization", "test") + read(synth, "explanation", "test"):
        assert {k: v for k, v in rating[row["id"]].items() if k != "rating"}.items() <= row.items()
        review = raw[(row["user_id"], row["parent_asin"])]
        assert row.get("summary", review["title"]) == review["title"]
        assert row.get("explanation", "") in review["text"]


def test_build_llmrec_rating_only_source_skips_the_text_tasks_in_one_line(tmp_path, caplog) -> None:
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        assert build(write_hand_raw(tmp_path / "raw"), out, "--domains", "Books", "--kcore", "3",
                     "--negatives", "3") == 0  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert "explanation" not in manifest["outputs"] and "summarization" not in manifest["outputs"]
    messages = [r.getMessage() for r in caplog.records]
    lines = [m for m in messages if "explanation and summarization skipped" in m]
    assert lines == [manifest["text"]["skipped_because"]]
    assert "Books: explanation and summarization skipped: the source has no review text" in lines[0]
    assert lines[0] in (out / "README.md").read_text()
    # evaluating every cell of such a build skips the text cells (said in a log line) and scores the rest
    from perrec_eval.cli import main

    argv = ["evaluate", "--task", "llmrec", "--data", str(out), "--engine", "fake", "--model", "constant"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    cells = json.loads((tmp_path / "run" / "scores.json").read_text())["cells"]
    assert [c["subset"] for c in cells] == ["rating", "sequential", "sequential", "direct"]  # + candidates
