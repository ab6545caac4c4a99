"""RecBench+ at scale: the graph on index arrays and the candidates counted per level are the first
versions' (Python sets, every combination tried), checked on random catalogues; the plan's steps are logged
with their times; a long attribute file's repeated facts are added once."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_builder.recbench_plus import kg, queries
from perrec_eval.cli import main
from tests.dataset_builder.recbench_plus import reference
from tests.dataset_builder.recbench_plus.movielens_fixture import write

RELATIONS = ("author", "store", "genre", "year")
SPELLINGS = ("Ann", "ann", "Bo", "BO", "Cy", "Di", "Ed", "Flo")


@pytest.fixture(scope="module")
def movielens_source(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("ml") / "ml-1m")


@st.composite
def catalogues(draw) -> list[list[kg.Fact]]:
    """Up to 40 items, each with up to 6 facts of 4 relations and 8 spellings of 6 values (so values
    repeat in other cases, and within an item)."""
    n = draw(st.integers(1, 40))
    fact = st.builds(kg.Fact, st.sampled_from(RELATIONS), st.sampled_from(SPELLINGS))
    items = draw(st.lists(st.lists(fact, max_size=6), min_size=n, max_size=n))
    return [list({f.key: f for f in reversed(item)}.values())[::-1] for item in items]  # first of a key


@settings(max_examples=200, deadline=None)
@given(items=catalogues(), min_items=st.integers(1, 4), max_share=st.floats(0.05, 1.0))
def test_graph_on_index_arrays_is_the_set_graph(items, min_items, max_share):
    graph = kg.build_graph(items, min_items=min_items, max_share=max_share)
    names = [f"i{n:02d}" for n in range(len(items))]
    ref = reference.graph(dict(zip(names, items, strict=True)), min_items=min_items, max_share=max_share)
    assert [graph.item_facts(n) for n in range(len(items))] == [ref["facts"][a] for a in names]
    assert {key: {names[i] for i in graph.holders(v).tolist()} for key, v in graph.index.items()} == {
        key: set(held) for key, held in ref["holders"].items()
    }
    assert graph.dropped == ref["dropped"]
    for n, asin in enumerate(names):
        for relation in RELATIONS:
            assert int(graph.arity_of(relation)[n]) == ref["arity"][asin].get(relation, 0)


@settings(max_examples=200, deadline=None)
@given(
    items=catalogues(),
    data=st.data(),
    min_subset=st.integers(2, 3),
    max_subset=st.integers(3, 8),
    max_share=st.floats(0.3, 1.0),
)
def test_candidates_are_the_first_versions_in_its_order(items, data, min_subset, max_subset, max_share):
    graph = kg.build_graph(items, min_items=2, max_share=max_share)
    names = [f"i{n:02d}" for n in range(len(items))]
    ref = reference.graph(dict(zip(names, items, strict=True)), min_items=2, max_share=max_share)
    history = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=30))
    found = queries.candidates(history, graph, min_subset=min_subset, max_subset=max_subset)
    expected = reference.candidates(
        [names[i] for i in history], ref, min_subset=min_subset, max_subset=max_subset
    )
    assert [(c.conditions, tuple(names[i] for i in c.subset)) for c in found] == expected
    assert all(tuple(graph.facts[v] for v in c.values) == c.conditions for c in found)


def test_item_attributes_repeating_facts_are_added_once(tmp_path, movielens_source):
    """An attribute file naming an item's value many times (a cast exported once per film and role): the
    value is added once, under its first spelling, and the build does not slow with the repeats."""
    rows = ["item_id,relation,value"]
    rows += [f"{1 + i % 40},actor,{'Ann Lee' if i % 2 else 'ANN LEE'}" for i in range(20_000)]
    rows += ["1,actor,Bo Li", "2,actor,Bo Li", "3,actor,Bo Li"]
    (tmp_path / "attributes.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    args = ["build", "--task", "recbench-plus", "--source", str(movielens_source), "--out", str(out)]
    args += ["--item-attributes", str(tmp_path / "attributes.csv"), "--max-share", "1", "--no-progress"]
    assert main(args) == 0
    (catalogue,) = (out / "catalogue").glob("items-*.parquet")
    relations = {r["parent_asin"]: r["relations"] for r in pq.read_table(catalogue).to_pylist()}
    actors = [f["value"] for f in relations["1"] if f["relation"] == "actor"]
    assert actors == ["ANN LEE", "Bo Li"]  # one spelling (the smallest) per value, each value once


def test_plan_logs_each_step_with_its_time(movielens_source, tmp_path, caplog):
    out = tmp_path / "out"
    with caplog.at_level(logging.DEBUG, logger="dataset_builder.build"):  # the stages' times: debug lines
        args = ["build", "--task", "recbench-plus", "--source", str(movielens_source), "--out", str(out)]
        assert main([*args, "--no-progress"]) == 0
    steps = [r.getMessage() for r in caplog.records if " took " in r.getMessage()]
    for step in ("knowledge graph", "eligible users", "queries", "demographics", "catalogue rows"):
        assert any(f"MovieLens-1M: {step} took" in line for line in steps), steps


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([*"aZ09 ;()-.'é\t", "Visit the ", " Store", " (Author)", " (2019)"]), max_size=30
    ).map("".join),
    relation=st.sampled_from(["author", "details.Publisher"]),
)
def test_normalize_value_shortcut_changes_nothing(text, relation):
    """A value with nothing to normalize skips the regexes; padded, the same value cannot skip them."""
    assert kg.normalize_value(text, relation) == kg.normalize_value(f" {text} ", relation)
