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


CONDITION_TYPES = ["explicit", "implicit", "misinformed"]
TYPES = [*CONDITION_TYPES, "interest"]


@pytest.mark.parametrize("config", CONDITION_TYPES)
def test_recbench_plus_build_every_ground_truth_item_satisfies_every_condition(bench, config):
    facts, rows = _facts(bench), _rows(bench, config) + _rows(bench, config, "train")
    assert rows and {1, 2, 3} <= {len(r["conditions"]) for r in rows} <= {1, 2, 3, 4}
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


@pytest.mark.parametrize("config", TYPES)
def test_recbench_plus_build_history_shown_never_holds_a_ground_truth_item(bench, config):
    rows = _rows(bench, config) + _rows(bench, config, "train")
    assert rows
    for row in rows:
        truth = {item["parent_asin"] for item in row["ground_truth"]}
        assert truth.isdisjoint(item["parent_asin"] for item in row["history"])
        titles = {normalize_title(item["title"]) for item in row["ground_truth"]}
        assert titles.isdisjoint(normalize_title(item["title"]) for item in row["history"])


@pytest.mark.parametrize("config", ["explicit", "misinformed"])
def test_recbench_plus_build_explicit_query_names_every_condition_value(bench, config):
    for row in _rows(bench, config):
        assert all(c["value"] in row["query"] for c in row["conditions"])


def _raw_facts(raw: Path) -> dict[str, set[tuple[str, str]]]:
    """Every relation value of the raw metadata (before the thresholds), by parent_asin."""
    facts = {}
    for line in (raw / "meta_Books.jsonl").read_text().splitlines():
        meta = json.loads(line)
        author = (meta.get("author") or {}).get("name")
        found = kg.item_facts(
            author, meta["store"], meta["categories"], meta["details"], kg.detail_keys("Books")
        )
        facts[meta["parent_asin"]] = {(f.relation, kg.value_key(f.value)) for f in found}
    return facts


def test_recbench_plus_build_every_misinformed_claim_is_false(raw, bench):
    facts = _raw_facts(raw)
    rows = _rows(bench, "misinformed") + _rows(bench, "misinformed", "train")
    assert rows
    for row in rows:
        [claim] = row["false_claims"]
        held = facts[claim["parent_asin"]]
        assert (claim["relation"], kg.value_key(claim["value"])) not in held  # the claim is false ...
        assert any(relation == claim["relation"] for relation, _ in held)  # ... provably: another value
        assert {"relation": claim["relation"], "value": claim["value"]} in row["conditions"]
        named = {item["parent_asin"] for item in row["ground_truth"] + row["history"]}
        assert claim["parent_asin"] not in named
        title = next(
            r["title"] for r in _rows(bench, "catalogue", "items") if r["parent_asin"] == claim["parent_asin"]
        )
        assert row["query"].startswith(f'I loved "{title}"')


def test_recbench_plus_build_interest_names_no_condition_and_no_ground_truth_title(bench):
    rows = _rows(bench, "interest")
    assert rows
    for row in rows:
        assert row["conditions"] == [] and row["ground_truth"]
        [seed] = row["seeds"]
        assert seed in row["history"] and seed not in row["ground_truth"]
        assert all(item["title"] not in row["query"] for item in row["ground_truth"])


def test_recbench_plus_build_ids_are_unique_and_test_train_users_disjoint(bench):
    for config in TYPES:
        test, train = _rows(bench, config), _rows(bench, config, "train")
        ids = [row["id"] for row in test + train]
        assert len(ids) == len(set(ids))
        assert {r["user_id"] for r in test}.isdisjoint(r["user_id"] for r in train)


def test_recbench_plus_build_card_configs_name_every_file_and_the_manifest_the_task(bench):
    card = (bench / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    named = {f["path"] for c in header["configs"] for f in c["data_files"]}
    assert {c["config_name"] for c in header["configs"]} == {*TYPES, "catalogue"}
    assert all((bench / path).is_file() for path in named)
    assert "template-v1" in card and "demographics" in card  # the phrasing, and what is not built
    assert "a rebuild on Amazon Reviews 2023 by" in card and "| explicit | " in card  # query diversity
    manifest = json.loads((bench / "manifest.json").read_text())
    assert manifest["task"] == "recbench-plus" and manifest["source_kind"] == "synthetic"


def _refused(raw: Path, out: Path, capsys, *extra: str) -> str:
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(raw), "--out", str(out),
            "--domains", "Books", "--threads", "1", *extra]  # fmt: skip
    capsys.readouterr()
    assert main(args) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_recbench_plus_build_no_usable_relation_ends_in_one_line(raw, tmp_path, capsys):
    line = _refused(raw, tmp_path / "b", capsys, "--max-share", "0.001")
    assert "no relation value" in line and "--details-keys" in line and "--max-share" in line


def test_recbench_plus_build_no_query_ends_in_one_line(raw, tmp_path, capsys):
    line = _refused(raw, tmp_path / "b", capsys, "--min-subset", "60", "--max-subset", "60")
    assert "no test query" in line and "--min-subset" in line


def test_recbench_plus_build_too_short_histories_end_in_one_line(raw, tmp_path, capsys):
    line = _refused(raw, tmp_path / "b", capsys, "--min-history", "100000")
    assert "no user has 100000 reviewed items" in line and "--min-history" in line


def test_recbench_plus_build_catalogue_without_titles_ends_in_one_line(raw, tmp_path, capsys):
    untitled = tmp_path / "raw"
    untitled.mkdir()
    (untitled / "Books.jsonl").write_bytes((raw / "Books.jsonl").read_bytes())
    lines = [json.loads(line) for line in (raw / "meta_Books.jsonl").read_text().splitlines()]
    (untitled / "meta_Books.jsonl").write_text("".join(json.dumps({**m, "title": " "}) + "\n" for m in lines))
    line = _refused(untitled, tmp_path / "b", capsys)
    assert "no reviewed item has a title" in line


def test_recbench_plus_build_killed_after_its_stage_resumes_without_reading_again(raw, tmp_path, monkeypatch):
    from dataset_builder.recbench_plus import builder

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(queries, "rows_of_user", killed)
        with pytest.raises(AssertionError):  # the CLI ends the killed build with its own exit code
            build(tmp_path / "b", raw)
    assert not (tmp_path / "b" / "manifest.json").exists()
    fresh = _rows(build(tmp_path / "fresh", raw), "explicit")

    def read_again(*args, **kwargs):
        raise AssertionError("the raw files were read again")

    monkeypatch.setattr(builder, "_select", read_again)
    resumed = build(tmp_path / "b", raw)
    assert _rows(resumed, "explicit") == fresh


def test_recbench_plus_kg_normalizes_values_and_drops_rare_and_common_ones():
    facts = [
        kg.item_facts("Ann  Lee", "Visit the Harbor Store", ["Books"], None, ()),
        kg.item_facts("ann lee", "Harbor", ["Books"], '{"Publisher": "P"}', ("Publisher",)),
        kg.item_facts("Bo", "harbor", ["Books"], None, ()),
        kg.item_facts(None, None, ["Books", "Fantasy"], None, ()),
    ]
    graph = kg.build_graph(facts, min_items=2, max_share=0.75)
    assert graph.item_facts(0) == (kg.Fact("author", "Ann Lee"), kg.Fact("store", "Harbor"))
    assert graph.holders(graph.index[("store", "harbor")]).tolist() == [0, 1, 2]
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
