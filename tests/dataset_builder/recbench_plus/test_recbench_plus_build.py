"""`perrecbench build --task recbench-plus` on synthetic metadata: the queries' guarantees, the card and the
manifest, the graph's normalization and thresholds, and the one-line refusal when no query can be made."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from dataset_builder.recbench_plus import kg, queries
from perrec_eval.cli import main
from perrec_eval.tasks.recbench_plus.parsing import normalize_title
from tests.dataset_builder.recbench_plus.fixture import build, synth


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return synth(tmp_path_factory.mktemp("rb-raw") / "raw")


@pytest.fixture(scope="module")
def bench(raw, tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("rb") / "bench", raw)


def _rows(bench: Path, config: str, split: str = "test") -> list[dict]:
    outputs = json.loads((bench / "manifest.json").read_text())["outputs"]
    return pq.read_table(bench / outputs[config][split]).to_pylist()


def _facts(bench: Path) -> dict[str, set[tuple[str, str]]]:
    return {
        row["parent_asin"]: {(f["relation"], kg.value_key(f["value"])) for f in row["relations"]}
        for row in _rows(bench, "catalogue", "items")
    }


@pytest.mark.parametrize("config", ["explicit", "implicit"])
def test_recbench_plus_build_every_ground_truth_item_satisfies_every_condition(bench, config):
    facts, rows = _facts(bench), _rows(bench, config) + _rows(bench, config, "train")
    assert rows and {len(r["conditions"]) for r in rows} == {1, 2}
    for row in rows:
        wanted = {(c["relation"], kg.value_key(c["value"])) for c in row["conditions"]}
        assert len(row["ground_truth"]) >= 2
        assert all(wanted <= facts[item["parent_asin"]] for item in row["ground_truth"])


def test_recbench_plus_build_no_implicit_query_names_its_hidden_value(bench):
    rows = _rows(bench, "implicit")
    assert rows
    for row in rows:
        assert not queries.leaks(row["query"], [queries.Fact(**c) for c in row["conditions"]])
        assert [r["relation"] for r in row["references"]] == [c["relation"] for c in row["conditions"]]
        assert all(f'"{ref["title"]}"' in row["query"] for ref in row["references"])


def test_recbench_plus_build_implicit_references_hold_the_value_outside_the_answer(bench):
    facts = _facts(bench)
    for row in _rows(bench, "implicit"):
        truth = {item["parent_asin"] for item in row["ground_truth"]}
        shown = {item["parent_asin"] for item in row["history"]}
        for ref, condition in zip(row["references"], row["conditions"], strict=True):
            assert (condition["relation"], kg.value_key(condition["value"])) in facts[ref["parent_asin"]]
            assert ref["parent_asin"] not in truth | shown


@pytest.mark.parametrize("config", ["explicit", "implicit"])
def test_recbench_plus_build_history_shown_never_holds_a_ground_truth_item(bench, config):
    for row in _rows(bench, config) + _rows(bench, config, "train"):
        truth = {item["parent_asin"] for item in row["ground_truth"]}
        assert truth.isdisjoint(item["parent_asin"] for item in row["history"])
        titles = {normalize_title(item["title"]) for item in row["ground_truth"]}
        assert titles.isdisjoint(normalize_title(item["title"]) for item in row["history"])


def test_recbench_plus_build_explicit_query_names_every_condition_value(bench):
    for row in _rows(bench, "explicit"):
        assert all(c["value"] in row["query"] for c in row["conditions"])


def test_recbench_plus_build_ids_are_unique_and_test_train_users_disjoint(bench):
    for config in ("explicit", "implicit"):
        test, train = _rows(bench, config), _rows(bench, config, "train")
        ids = [row["id"] for row in test + train]
        assert len(ids) == len(set(ids))
        assert {r["user_id"] for r in test}.isdisjoint(r["user_id"] for r in train)


def test_recbench_plus_build_card_configs_name_every_file_and_the_manifest_the_task(bench):
    card = (bench / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    named = {f["path"] for c in header["configs"] for f in c["data_files"]}
    assert {c["config_name"] for c in header["configs"]} == {"explicit", "implicit", "catalogue"}
    assert all((bench / path).is_file() for path in named)
    assert "template-v1" in card and "misinformed" in card  # the phrasing, and what is not built yet
    manifest = json.loads((bench / "manifest.json").read_text())
    assert manifest["task"] == "recbench-plus" and manifest["source_kind"] == "synthetic"


def test_recbench_plus_build_no_usable_relation_ends_in_one_line(raw, tmp_path, capsys):
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(raw), "--out",
            str(tmp_path / "b"), "--domains", "Books", "--threads", "1", "--max-share", "0.001"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no test query" in err[0] and "--max-share" in err[0]


def test_recbench_plus_kg_normalizes_values_and_drops_rare_and_common_ones():
    facts = {
        "a": kg.item_facts("Ann  Lee", "Visit the Harbor Store", ["Books"], None, ()),
        "b": kg.item_facts("ann lee", "Harbor", ["Books"], '{"Publisher": "P"}', ("Publisher",)),
        "c": kg.item_facts("Bo", "harbor", ["Books"], None, ()),
        "d": kg.item_facts(None, None, ["Books", "Fantasy"], None, ()),
    }
    graph = kg.build_graph(facts, min_items=2, max_share=0.75)
    assert graph.facts["a"] == (kg.Fact("author", "Ann Lee"), kg.Fact("store", "Harbor"))
    assert graph.holders[("store", "harbor")] == {"a", "b", "c"}
    # "Bo", "P" and "Fantasy" are held by one item (too rare); "Books" by all four (> 75 %: too common)
    assert graph.dropped == {"too_rare": 3, "too_common": 1}


def test_recbench_plus_kg_details_keys_default_per_category_and_overridable():
    assert kg.detail_keys("Books") == kg.DEFAULT_DETAIL_KEYS["Books"]
    assert kg.detail_keys("Video_Games") == kg.DEFAULT_DETAIL_KEYS["*"]
    assert kg.detail_keys("Books", ("Language",)) == ("Language",)


def test_recbench_plus_build_details_keys_choose_the_details_relations(raw, bench, tmp_path):
    relations = {f["relation"] for row in _rows(bench, "catalogue", "items") for f in row["relations"]}
    assert "details.Publisher" in relations  # Books' default keys
    other = build(tmp_path / "b", raw, "--details-keys", "Paperback")
    relations = {f["relation"] for row in _rows(other, "catalogue", "items") for f in row["relations"]}
    assert "details.Publisher" not in relations and relations <= {
        "author",
        "store",
        "categories",
        "details.Paperback",
    }
    manifest = json.loads((other / "manifest.json").read_text())
    assert manifest["parameters"]["details_keys"] == ["Paperback"]
