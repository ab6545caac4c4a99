"""`perrecbench build --task llmrec`: the k-core, the chronological order, leave-last-out, the candidates."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.dataset_builder.llmrec.fixture import GROUP_1, GROUP_2, build, read, synth_build, write_hand_raw

SPLITS = ("train", "validation", "test")


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("llmrec_hand")
    out = root / "out"
    assert (
        build(write_hand_raw(root / "raw"), out, "--domains", "Books", "--kcore", "3", "--negatives", "3")
        == 0
    )
    return out


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_build(tmp_path_factory.mktemp("llmrec_synth"))


def _all_rows(out: Path, config: str) -> list[dict]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [row for split in manifest["outputs"][config] for row in read(out, config, split)]


def _user_items(out: Path) -> dict[str, set[str]]:
    """Every item of each user the build knows: train interactions, validation and test targets."""
    items: dict[str, set[str]] = {}
    for row in (
        read(out, "interactions", "train")
        + read(out, "sequential", "validation")
        + read(out, "sequential", "test")
    ):
        items.setdefault(row["user_id"], set()).add(row["parent_asin"])
    return items


def test_build_llmrec_hand_kcore_drops_the_chain_and_untitled_items(hand) -> None:
    users = _user_items(hand)
    assert sorted(users) == sorted(GROUP_1 + GROUP_2)  # u4 went in round 2, after X in round 1
    assert users["u1"] == set("ABCD")  # Z has no title
    manifest = json.loads((hand / "manifest.json").read_text())
    assert manifest["task"] == "llmrec" and manifest["parameters"]["kcore"] == 3


def test_build_llmrec_hand_order_keeps_the_earliest_duplicate_and_breaks_ties_by_asin(hand) -> None:
    test = {row["user_id"]: row for row in read(hand, "rating", "test")}
    validation = {row["user_id"]: row for row in read(hand, "rating", "validation")}
    # u1: A (ts 1, the earliest of two reviews, rated 5), B (2), then C and D both at 5: C first
    assert (test["u1"]["parent_asin"], validation["u1"]["parent_asin"]) == ("D", "C")
    assert [h["parent_asin"] for h in test["u1"]["history"]] == ["A", "B", "C"]
    assert test["u1"]["history"][0]["rating"] == 5.0
    train = [row for row in read(hand, "rating", "train") if row["user_id"] == "u1"]
    assert [(row["parent_asin"], [h["parent_asin"] for h in row["history"]]) for row in train] == [
        ("B", ["A"])
    ]


def test_build_llmrec_hand_candidates_are_the_other_groups_items(hand) -> None:
    for row in read(hand, "direct", "test"):
        own = set("ABCD") if row["user_id"] in GROUP_1 else set("EFGH")
        negatives = set(row["candidates"]) - {row["parent_asin"]}
        assert len(row["candidates"]) == 4 and not negatives & own
        assert row["candidates"][row["target_position"]] == row["parent_asin"]


def test_build_llmrec_kcore_is_a_fixed_point(synth) -> None:
    pairs = [(u, i) for u, items in _user_items(synth).items() for i in items]
    assert pairs
    assert min(Counter(u for u, _ in pairs).values()) >= 5
    assert min(Counter(i for _, i in pairs).values()) >= 5
    catalogue = {row["parent_asin"] for row in read(synth, "items", "train")}
    assert catalogue == {i for _, i in pairs}


def test_build_llmrec_test_targets_are_each_users_last_item_and_never_shown_to_that_user(synth) -> None:
    by_user: dict[str, list[dict]] = {}
    for config in ("rating", "sequential", "direct"):
        for split in SPLITS:
            for row in read(synth, config, split):
                by_user.setdefault(row["user_id"], []).append({**row, "split": split})
    interactions: dict[str, list[dict]] = {}
    for row in read(synth, "interactions", "train"):
        interactions.setdefault(row["user_id"], []).append(row)
    for user, rows in by_user.items():
        (target,) = {row["parent_asin"] for row in rows if row["split"] == "test"}
        last = max(rows, key=lambda row: row["timestamp"])
        assert last["split"] == "test" and last["parent_asin"] == target
        for row in rows:
            assert target not in {h["parent_asin"] for h in row["history"]}
            assert row["split"] == "test" or row["parent_asin"] != target
            assert all(h["timestamp"] <= row["timestamp"] for h in row["history"])
            assert [h["timestamp"] for h in row["history"]] == sorted(h["timestamp"] for h in row["history"])
            assert 1 <= len(row["history"]) <= 10
        assert target not in {row["parent_asin"] for row in interactions[user]}


def test_build_llmrec_negatives_are_never_an_item_of_the_user(synth) -> None:
    items = _user_items(synth)
    for row in _all_rows(synth, "direct"):
        assert len(row["candidates"]) == 20 and len(set(row["candidates"])) == 20
        assert row["candidates"].count(row["parent_asin"]) == 1
        assert row["candidates"][row["target_position"]] == row["parent_asin"]
        assert not (set(row["candidates"]) - {row["parent_asin"]}) & items[row["user_id"]]


def test_build_llmrec_loads_with_datasets_and_ids_are_unique(synth) -> None:
    import datasets

    for config in ("rating", "sequential", "direct", "explanation", "summarization"):
        loaded = datasets.load_dataset(str(synth), config)
        assert set(loaded) == set(SPLITS)
        ids = [i for split in SPLITS for i in loaded[split]["id"]]
        assert len(ids) == len(set(ids))
    card = (synth / "README.md").read_text()
    assert "config_name: sequential" in card and "## Explanation and summarization" in card


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kcore", "2"], "--kcore must be >= 3"),
        (["--history-length", "0"], "--history-length must be >= 1"),
        (["--kcore", "3", "--negatives", "5"], "leaving 4 negatives; lower --negatives to 4"),
        (["--kcore", "50"], "leaves no user in Books; lower --kcore"),
    ],
)
def test_build_llmrec_bad_settings_end_in_one_line(tmp_path, capsys, args, message) -> None:
    source = write_hand_raw(tmp_path / "raw")
    assert build(source, tmp_path / "out", "--domains", "Books", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
