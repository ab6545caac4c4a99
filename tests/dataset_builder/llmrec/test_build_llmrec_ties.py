"""`--ties`: targets with the time of a history item are counted in every build, and the rule that orders
them is the user's choice (asin: P5's parent_asin order; drop: leave those users out; random: seeded)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest

from tests.dataset_builder.llmrec.fixture import GROUP_1, GROUP_2, build, read, write_hand_raw

# The hand data: u1 reviews C and D at one time, after A and B; nobody else has equal times.
ARGS = ("--domains", "Books", "--kcore", "3", "--negatives", "3")


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_hand_raw(tmp_path_factory.mktemp("ties") / "raw")


def _build(raw: Path, out: Path, *args: str) -> dict:
    assert build(raw, out, *ARGS, *args) == 0
    return json.loads((out / "manifest.json").read_text())


def _targets(out: Path, split: str = "test") -> dict[str, str]:
    return {row["user_id"]: row["parent_asin"] for row in read(out, "rating", split)}


def test_ties_asin_counts_the_tied_target_warns_and_keeps_parent_asin_order(raw, tmp_path, caplog, capsys):
    with caplog.at_level(logging.WARNING):
        recorded = _build(raw, tmp_path / "out")
    ties = recorded["ties"]
    assert (ties["rule"], ties["test_tied"], ties["test_targets"]) == ("asin", 1, 6)
    assert (ties["validation_tied"], ties["dropped_users"]) == (0, 0)  # C (5) after B (2): no tie
    assert recorded["parameters"]["ties"] == "asin"
    assert _targets(tmp_path / "out")["u1"] == "D"  # C and D at one time: D last by parent_asin
    assert any("1 of 6 test targets (16.7%)" in r.getMessage() for r in caplog.records)
    assert "tied in time with a history item: 1 of 6 (16.7%)" in capsys.readouterr().out
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| Books | 0 of 6 (0.0%) | 1 of 6 (16.7%) | 0 |" in card
    assert "ordered by `parent_asin` (`--ties asin`" in card


def test_ties_drop_leaves_out_every_row_of_a_user_whose_last_item_ties(raw, tmp_path):
    recorded = _build(raw, tmp_path / "out", "--ties", "drop")
    assert recorded["ties"]["dropped_users"] == 1 and recorded["ties"]["test_tied"] == 1  # counted first
    for config, splits in recorded["outputs"].items():
        for split in splits:
            users = {row.get("user_id") for row in read(tmp_path / "out", config, split)}
            assert "u1" not in users, (config, split)
    assert sorted(_targets(tmp_path / "out")) == sorted(GROUP_1[1:] + GROUP_2)
    assert recorded["counts"]["rating"]["test"] == 5
    assert "| Books | 0 of 6 (0.0%) | 1 of 6 (16.7%) | 1 |" in (tmp_path / "out" / "README.md").read_text()


def _random_last(seed: int) -> str:
    """The documented random rule: equal times ordered by sha256 of "seed:user:item" (first 8 bytes)."""
    key = {a: int.from_bytes(hashlib.sha256(f"{seed}:u1:{a}".encode()).digest()[:8], "big") for a in "CD"}
    return max("CD", key=key.__getitem__)


def test_ties_random_orders_equal_times_by_the_seed(raw, tmp_path):
    seeds = (0, 1, 2, 3, 4, 5)
    assert {_random_last(s) for s in seeds} == {"C", "D"}  # these seeds show both orders
    for seed in seeds:
        out = tmp_path / f"out{seed}"
        recorded = _build(raw, out, "--ties", "random", "--seed", str(seed))
        last = _random_last(seed)
        test = {row["user_id"]: row for row in read(out, "rating", "test")}
        assert test["u1"]["parent_asin"] == last
        assert [h["parent_asin"] for h in test["u1"]["history"]] == ["A", "B", "CD".replace(last, "")]
        assert _targets(out, "validation")["u1"] == "CD".replace(last, "")
        assert recorded["ties"]["test_tied"] == 1  # a tie stays a tie, whichever item comes last
        others = {u: a for u, a in _targets(out).items() if u != "u1"}
        assert others == {u: "D" for u in GROUP_1[1:]} | {u: "H" for u in GROUP_2}  # no tie: time decides


def test_ties_random_is_the_same_build_for_the_same_seed(raw, tmp_path):
    first = _build(raw, tmp_path / "a", "--ties", "random", "--seed", "7")
    second = _build(raw, tmp_path / "b", "--ties", "random", "--seed", "7")
    assert first["outputs"] == second["outputs"]  # content-named files: the same bytes


def test_ties_a_timestamp_split_counts_its_tied_targets(raw, tmp_path):
    # test from time 5: u1's C and D (both at 5, one tied), and every later item of the others (15 rows)
    recorded = _build(
        raw, tmp_path / "out", "--split", "timestamp", "--valid-from", "1600000004000",
        "--test-from", "1600000005000",
    )  # fmt: skip
    ties = recorded["ties"]
    assert (ties["test_targets"], ties["test_tied"]) == (17, 1)


def test_ties_bad_rule_is_refused_naming_the_choices(raw, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        build(raw, tmp_path / "out", *ARGS, "--ties", "latest")
    assert exit_.value.code == 2
    choices = "(choose from 'asin', 'drop', 'random')"
    assert f"--ties: invalid choice: 'latest' {choices}" in capsys.readouterr().err
