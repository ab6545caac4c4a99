"""Twin items: the title key, planted twins in the synthetic data, their removal from histories and counts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builder.build import build
from dataset_builder.config import BuildError
from dataset_builder.perrecbench.twins import are_twins, title_key
from dataset_builder.synth import write_synthetic
from tests.dataset_builder.build_fixture import DAY, QUERY, T0, Scenario, config


@pytest.mark.parametrize(
    ("query", "item", "twins"),
    [
        (("The Hobbit (Paperback)", "J.R.R. Tolkien"), ("The Hobbit: Kindle Edition", None), True),
        (("The Hobbit", "J.R.R. Tolkien"), ("THE HOBBIT [Mass Market Paperback]", "j r r tolkien"), True),
        (("Alien [Blu-ray]", None), ("Alien (DVD)", None), True),
        (("Café Society - 2nd Edition", None), ("Cafe Society", None), True),
        (("Saga, Volume 1", None), ("Saga, Volume 2", None), False),
        (("Poems", "Ann Lee"), ("Poems", "Bo Yu"), False),
        (("Alien", None), ("Aliens", None), False),
        (("USB Cable - 6ft for CD Player", None), ("USB Cable - 3ft for CD Player", None), False),
        ((None, None), (None, None), False),
    ],
)
def test_twins_are_twins_table(query, item, twins) -> None:
    assert are_twins(query, item) is twins


def test_twins_title_key_is_empty_without_words() -> None:
    assert title_key("(Paperback)") == "" and title_key("") == ""


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    write_synthetic(folder, reviews_per_domain=6000, domains="Books", seed=1, twins=True)
    return folder


def rows(folder: Path, name: str = "full") -> list[dict]:
    outputs = json.loads((folder / "manifest.json").read_text())["outputs"][name]
    return [row for path in outputs.values() for row in pq.read_table(folder / path).to_pylist()]


def twin_rows(groups: list[dict]) -> int:
    query = lambda g: (g["query"]["title"], g["query"]["author"])  # noqa: E731
    return sum(
        are_twins(query(g), (h["title"], h["author"])) and h["parent_asin"] != g["query"]["parent_asin"]
        for g in groups
        for u in g["users"]
        for h in u["history"]
    )


def test_twins_synth_plants_twins_only_when_asked(raw: Path, tmp_path: Path) -> None:
    truth = json.loads((raw / "synth_truth.json").read_text())["domains"]["Books"]
    assert truth["twin_items"] > 0 and truth["twin_reviews"] > 0
    plain = tmp_path / "plain"
    write_synthetic(plain, reviews_per_domain=6000, domains="Books", seed=1)
    assert "twins" not in json.loads((plain / "synth_truth.json").read_text())["domains"]["Books"]
    twin_ids = set(truth["twins"].values())
    with (plain / "Books.jsonl").open() as handle:
        assert not any(json.loads(line)["parent_asin"] in twin_ids for line in handle)


def test_twins_removed_from_histories_and_counted(raw: Path, tmp_path: Path) -> None:
    kept = build(config(raw, tmp_path / "kept", min_history=10, test_groups=5, keep_twins=True))
    removed = build(config(raw, tmp_path / "removed", min_history=10, test_groups=5))
    planted = twin_rows(rows(kept))
    assert planted > 0  # the planted twins reach the histories when kept (the paper's behaviour)
    assert twin_rows(rows(removed)) == 0
    stats = json.loads((removed / "stats.json").read_text())
    assert stats["twins"]["Books"]["history_rows_removed"] == planted
    assert "twins" not in json.loads((kept / "stats.json").read_text())
    # the selection is unchanged: same groups, same users, histories shorter by the twins only
    before = {g["group_id"]: g for g in rows(kept)}
    after = {g["group_id"]: g for g in rows(removed)}
    assert before.keys() == after.keys()
    lost = sum(
        len(u["history"]) - len(v["history"])
        for gid, g in before.items()
        for u, v in zip(g["users"], after[gid]["users"], strict=True)
    )
    assert lost == planted
    card = (removed / "README.md").read_text()
    assert "Twin items removed" in card and f"Books {planted:,}" in card


def test_twins_removed_in_the_large_preset_too(raw: Path, tmp_path: Path) -> None:
    out = build(config(raw, tmp_path / "large", preset="large", min_history=10, test_groups=5))
    assert twin_rows(rows(out)) == 0
    assert json.loads((out / "stats.json").read_text())["twins"]["Books"]["history_rows_removed"] > 0


def test_twins_a_history_of_only_twins_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    scenario = Scenario()
    scenario.item("TWIN", f"title of {QUERY} (Paperback)")
    scenario.review("A", "TWIN", 3.0, T0 - DAY)
    scenario.add_user("A", [], 5.0)  # relative rating 2 (average 3, over the twin only)
    scenario.add_user("B", [3.0], 1.0)  # relative rating -2
    source = scenario.write(tmp_path / "raw")
    settings = {"min_history": 0, "group_size": 2}
    with pytest.raises(BuildError, match="only twins of the query item.*--keep-twins"):
        build(config(source, tmp_path / "out", **settings))
    kept = build(config(source, tmp_path / "kept", keep_twins=True, **settings))
    assert [len(u["history"]) for u in rows(kept)[0]["users"]] == [1, 1]
