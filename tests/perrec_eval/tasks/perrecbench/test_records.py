"""Typed records: built once from a dataset row; the line records round-trip their JSON."""

from __future__ import annotations

from perrec_eval.tasks.perrecbench.records import Group, PredictionRecord, SampleRecord
from tests.benchmark_fixture import make_rows


def test_group_from_row_keeps_every_field():
    row = make_rows(1)[0]
    group = Group.from_row(row)
    assert group.group_id == row["group_id"] and group.query.title == row["query"]["title"]
    assert [u.user_id for u in group.users] == [u["user_id"] for u in row["users"]]
    assert group.relative_ratings == [u["relative_rating"] for u in row["users"]]
    assert len(group.users[0].history) == len(row["users"][0]["history"])


def test_group_from_row_drops_untitled_history_items_and_counts_them():
    row = make_rows(1)[0]
    history = row["users"][1]["history"]
    history[0]["title"] = None
    history[3]["title"] = ""
    group = Group.from_row(row)
    kept = group.users[1].history
    assert len(kept) == len(history) - 2 and group.users[1].untitled == 2
    assert [item.title for item in kept] == [item["title"] for item in history if item["title"]]
    assert group.users[0].untitled == 0


def test_sample_and_prediction_records_round_trip_their_jsonl_shape():
    sample = SampleRecord(
        group_id="g",
        level="easy",
        method="pairwise",
        step=0,
        slot=["pair", 0, 1],
        key="k" * 64,
        texts=["[User A]"],
        parsed=["A"],
        value="A",
        ok=True,
        reason=None,
        num_failed_samples=0,
        prompt_tokens=10,
        completion_tokens=2,
    )
    assert SampleRecord.from_json(sample.to_json()) == sample
    assert sample.to_json()["slot"] == ["pair", 0, 1]
    prediction = PredictionRecord("hard", "listwise", "g", "ranking", [2, 1], None, [0.5, -0.5], [5.0, 3.0])
    assert PredictionRecord.from_json(prediction.to_json()) == prediction
