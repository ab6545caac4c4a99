"""`perrecbench build --task llmrec` options: the timestamp split, popularity negatives, the candidates of
sequential rows and the target's recorded position."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dataset_builder.llmrec.config import TEST_FROM, VALID_FROM
from perrec_eval.cli import main
from tests.dataset_builder.llmrec.fixture import build, read, write_hand_raw

SPLITS = ("train", "validation", "test")


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llmrec_options") / "raw"
    assert main(["synth", "--out", str(folder), "--reviews-per-domain", "2000", "--domains", "Books"]) == 0
    return folder


@pytest.fixture(scope="module")
def timed(raw: Path) -> Path:
    out = raw.parent / "timed"
    assert build(raw, out, "--domains", "Books", "--negatives", "19", "--split", "timestamp") == 0
    return out


@pytest.fixture(scope="module")
def popular(raw: Path) -> Path:
    out = raw.parent / "popular"
    assert (
        build(raw, out, "--domains", "Books", "--negatives", "19", "--negative-sampling", "popularity") == 0
    )
    return out


def test_build_llmrec_timestamp_split_cuts_every_target_at_the_global_points(timed) -> None:
    bounds = {"train": (0, VALID_FROM), "validation": (VALID_FROM, TEST_FROM), "test": (TEST_FROM, 2**62)}
    for config in ("rating", "sequential", "direct"):
        for split in SPLITS:
            low, high = bounds[split]
            assert all(low <= row["timestamp"] < high for row in read(timed, config, split))
    assert all(row["timestamp"] < VALID_FROM for row in read(timed, "interactions", "train"))


def test_build_llmrec_timestamp_split_never_shows_a_test_target_before_test(timed) -> None:
    tests: dict[str, set[str]] = {}
    for row in read(timed, "sequential", "test"):
        tests.setdefault(row["user_id"], set()).add(row["parent_asin"])
        history = [h["parent_asin"] for h in row["history"]]
        assert row["parent_asin"] not in history
        assert all(h["timestamp"] <= row["timestamp"] for h in row["history"])
    assert tests
    earlier = read(timed, "sequential", "train") + read(timed, "sequential", "validation")
    for row in earlier:
        shown = {row["parent_asin"], *(h["parent_asin"] for h in row["history"])}
        assert not shown & tests.get(row["user_id"], set())
    for row in read(timed, "interactions", "train"):
        assert row["parent_asin"] not in tests.get(row["user_id"], set())


def _user_items(out: Path) -> dict[str, set[str]]:
    items: dict[str, set[str]] = {}
    for split in SPLITS:
        for row in read(out, "sequential", split):
            items.setdefault(row["user_id"], set()).update(
                [row["parent_asin"], *(h["parent_asin"] for h in row["history"])]
            )
    return items


@pytest.mark.parametrize("which", ["timed", "popular"])
def test_build_llmrec_negatives_of_either_sampler_are_never_an_item_of_the_user(which, request) -> None:
    out = request.getfixturevalue(which)
    items = _user_items(out)
    for split in SPLITS:
        for row in read(out, "direct", split):
            negatives = set(row["candidates"]) - {row["parent_asin"]}
            assert len(negatives) == 19 and not negatives & items[row["user_id"]]


def test_build_llmrec_popularity_negatives_favour_popular_items(raw, popular) -> None:
    uniform = raw.parent / "uniform"
    assert build(raw, uniform, "--domains", "Books", "--negatives", "19") == 0
    counts = Counter(row["parent_asin"] for row in read(popular, "interactions", "train"))

    def mean_count(out: Path) -> float:
        drawn = [
            a for row in read(out, "direct", "test") for a in row["candidates"] if a != row["parent_asin"]
        ]
        return sum(counts[a] for a in drawn) / len(drawn)

    assert mean_count(popular) > 1.2 * mean_count(uniform)


def test_build_llmrec_direct_rows_carry_the_candidates_and_the_targets_position(popular) -> None:
    for split in SPLITS:
        for row in read(popular, "direct", split):
            assert row["candidates"][row["target_position"]] == row["parent_asin"]
            assert row["candidates"].count(row["parent_asin"]) == 1
    positions = Counter(row["target_position"] for row in read(popular, "direct", "train"))
    assert len(positions) > 10  # shuffled: the target is not always in one place


def test_build_llmrec_bad_options_end_in_one_line(tmp_path, capsys) -> None:
    source = write_hand_raw(tmp_path / "raw")
    args = ["--domains", "Books", "--split", "timestamp", "--valid-from", "5", "--test-from", "5"]
    assert build(source, tmp_path / "out", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--valid-from must be >= 0 and before --test-from" in err[0]


def test_build_llmrec_a_category_without_reviews_ends_in_one_line(tmp_path, capsys) -> None:
    source = write_hand_raw(tmp_path / "raw")
    (source / "Books.jsonl").write_text("")
    assert build(source, tmp_path / "out", "--domains", "Books") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Books" in err[0], err


def test_build_llmrec_sequential_rows_are_the_direct_rows_without_their_candidates(popular) -> None:
    """The catalogue cell's rows never offer the candidates cell's list: only direct's rows carry it."""
    for split in SPLITS:
        direct = read(popular, "direct", split)
        sequential = read(popular, "sequential", split)
        assert [row["id"] for row in sequential] == [row["id"] for row in direct]
        for seq, row in zip(sequential, direct, strict=True):
            assert "candidates" not in seq and "target_position" not in seq
            assert seq == {key: value for key, value in row.items() if key in seq}
