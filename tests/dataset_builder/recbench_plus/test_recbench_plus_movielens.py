"""RecBench+'s movie half: a hand-made MovieLens-1M folder builds every query type; the demographics ground
truth is checked against an independent computation of each group's distinctive items (numpy, from the
raw files); implicit references are unambiguous; the card counts the query texts; one-line errors."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from perrec_eval.cli import main
from tests.dataset_builder.recbench_plus.movielens_fixture import write

ARGS = ["--users", "30", "--train-users", "10", "--threads", "1", "--max-share", "0.3"]
DEMO = ["--min-group-size", "3", "--min-group-raters", "2", "--groups-per-type", "4"]
AGES = {"1": "Under 18", "18": "18-24", "25": "25-34", "35": "35-44", "45": "45-49", "50": "50-55",
        "56": "56+"}  # fmt: skip
JOBS = {"2": "artist", "12": "programmer", "20": "writer"}


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("ml") / "ml-1m")


def _build(raw: Path, out: Path, *extra: str) -> Path:
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(raw), "--out", str(out)]
    assert main([*args, *ARGS, *DEMO, *extra]) == 0
    return out


@pytest.fixture(scope="module")
def bench(raw, tmp_path_factory) -> Path:
    return _build(raw, tmp_path_factory.mktemp("ml-build") / "bench")


def _rows(bench: Path, config: str, split: str = "test") -> list[dict]:
    manifest = json.loads((bench / "manifest.json").read_text())
    return pq.read_table(bench / manifest["outputs"][config][split]).to_pylist()


def _catalogue(bench: Path) -> dict[str, dict]:
    return {row["parent_asin"]: row for row in _rows(bench, "catalogue", "items")}


def test_movielens_build_writes_all_five_query_types(bench):
    manifest = json.loads((bench / "manifest.json").read_text())
    assert set(manifest["queries"]) == {"explicit", "implicit", "misinformed", "interest", "demographics"}
    assert all(manifest["queries"][config]["test"] > 0 for config in manifest["queries"])
    assert [entry["file"] for entry in manifest["inputs"]] == ["ratings.dat", "movies.dat", "users.dat"]


def test_movielens_catalogue_reads_latin1_titles_genres_and_year(bench):
    movie = _catalogue(bench)["1"]
    assert movie["title"] == "Amélie (Le Fabuleux destin d'Amélie Poulain) (1981)"
    relations = {(f["relation"], f["value"]) for f in movie["relations"]}
    assert ("year", "1981") in relations and ("genre", "Comedy") in relations


def test_movielens_ground_truth_holds_every_condition(bench):
    catalogue = _catalogue(bench)
    for config in ("explicit", "implicit", "misinformed"):
        for row in _rows(bench, config):
            for item in row["ground_truth"]:
                held = {(f["relation"], f["value"]) for f in catalogue[item["parent_asin"]]["relations"]}
                assert {(c["relation"], c["value"]) for c in row["conditions"]} <= held


def test_movielens_implicit_references_hold_one_value_of_the_relation(raw, bench):
    genres = {
        line.split("::")[0]: line.split("::")[2].split("|")
        for line in (raw / "movies.dat").read_text(encoding="latin-1").splitlines()
    }
    rows = _rows(bench, "implicit")
    assert rows
    for row in rows:
        for ref in row["references"]:
            if ref["relation"] == "genre":
                assert len(genres[ref["parent_asin"]]) == 1, ref  # "the genre of X" names one genre


def _independent_groups(raw: Path) -> dict[str, list[tuple[str, float]]]:
    """Each group's distinctive items, recomputed from the raw files with a user x movie matrix."""
    users = [line.split("::") for line in (raw / "users.dat").read_text(encoding="latin-1").splitlines()]
    ratings = [line.split("::") for line in (raw / "ratings.dat").read_text(encoding="latin-1").splitlines()]
    user_ids = sorted({r[0] for r in ratings}, key=int)
    movie_ids = sorted({r[1] for r in ratings}, key=int)
    matrix = np.zeros((len(user_ids), len(movie_ids)))
    for user, movie, *_ in ratings:
        matrix[user_ids.index(user), movie_ids.index(movie)] = 1
    idf = np.log(len(user_ids) / matrix.sum(axis=0))
    words = {u: {"age": AGES[a], "gender": {"M": "Male", "F": "Female"}[g], "occupation": JOBS[o]}
             for u, g, a, o, _ in users}  # fmt: skip
    out = {}
    for names in (("age",), ("gender",), ("occupation",), ("age", "gender"), ("age", "occupation"),
                  ("gender", "occupation"), ("age", "gender", "occupation")):  # fmt: skip
        keys = Counter(tuple(words[u][n] for n in names) for u in user_ids)
        for key, size in sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))[:4]:
            if size < 3:
                continue
            members = [i for i, u in enumerate(user_ids) if tuple(words[u][n] for n in names) == key]
            raters = matrix[members].sum(axis=0)
            score = raters / len(members) * idf
            order = sorted((i for i in range(len(movie_ids)) if raters[i] >= 2),
                           key=lambda i: (-score[i], -raters[i], movie_ids[i]))[:10]  # fmt: skip
            name = "|".join(f"{n}={w}" for n, w in zip(names, key, strict=True))
            out[name] = [(movie_ids[i], float(score[i])) for i in order]
    return out


def test_movielens_demographics_match_an_independent_tf_idf(raw, bench):
    expected = _independent_groups(raw)
    rows = _rows(bench, "demographics")
    catalogue = _catalogue(bench)
    assert {row["user_id"] for row in rows} == set(expected)
    for row in rows:
        top = expected[row["user_id"]]
        assert [item["parent_asin"] for item in row["top_items"]] == [movie for movie, _ in top]
        assert [item["score"] for item in row["top_items"]] == pytest.approx([s for _, s in top])
        truth = [item["parent_asin"] for item in row["ground_truth"]]
        if not row["conditions"]:  # the group alone: its three most distinctive movies
            assert truth == [movie for movie, _ in top[:3]]
        else:  # the group and one value: exactly the distinctive movies holding it
            (named,) = row["conditions"]
            holding = [m for m, _ in top if named in catalogue[m]["relations"]]
            assert truth == holding and 2 <= len(truth) <= 4
            assert named["value"] in row["query"]


def test_movielens_demographics_rows_name_their_group_as_a_mapping(bench):
    rows = _rows(bench, "demographics")
    by_type = {row["group_type"]: row for row in rows}
    assert set(by_type) >= {"age", "gender", "occupation", "age_gender_occupation"}
    occupation = by_type["occupation"]
    assert occupation["group"]["occupation"] in JOBS.values()
    assert occupation["group"]["age"] is None and occupation["group"]["gender"] is None
    assert all(row["history"] == [] for row in rows)
    assert by_type["age_gender_occupation"]["query"].startswith("I'm a ")
    assert len({row["query"] for row in rows}) == len(rows)  # one text, one ground truth


def test_movielens_card_and_manifest_count_query_texts(bench):
    manifest = json.loads((bench / "manifest.json").read_text())
    counts = manifest["graph"]["MovieLens-1M"]
    for config in ("explicit", "interest", "demographics"):
        truths: dict[str, set] = {}
        for row in _rows(bench, config):
            truth = tuple(sorted(item["parent_asin"] for item in row["ground_truth"]))
            truths.setdefault(row["query"], set()).add(truth)
        assert counts[f"{config}_distinct_texts"] == len(truths)
        assert counts[f"{config}_most_truths_per_text"] == max(len(t) for t in truths.values())
        assert counts[f"{config}_texts_several_truths"] == sum(len(t) > 1 for t in truths.values())
    assert counts["explicit_most_truths_per_text"] > 1  # the template shares texts across users
    card = (bench / "README.md").read_text()
    assert "| explicit | " in card and "distinct texts" in card and "a rebuild on MovieLens-1M by" in card


def test_movielens_dedupe_queries_keeps_one_ground_truth_per_text(raw, tmp_path):
    out = _build(raw, tmp_path / "deduped", "--dedupe-queries")
    for config in ("explicit", "implicit", "misinformed", "interest"):
        texts = [row["query"] for split in ("test", "train") for row in _rows(out, config, split)]
        assert len(texts) == len(set(texts))
    counts = json.loads((out / "manifest.json").read_text())["graph"]["MovieLens-1M"]
    assert counts["explicit_deduped"] > 0 and counts["explicit_most_truths_per_text"] == 1


def test_movielens_item_attributes_feed_the_graph_and_the_queries(raw, tmp_path):
    attributes = tmp_path / "directors.csv"
    lines = ["item_id,relation,value"] + [f"{i},director,Director {i % 8}" for i in range(1, 41)]
    attributes.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = _build(raw, tmp_path / "kg", "--item-attributes", str(attributes))
    relations = {(f["relation"], f["value"]) for f in _catalogue(out)["4"]["relations"]}
    assert ("director", "Director 4") in relations
    rows = _rows(out, "explicit")
    named = [row for row in rows if "director" in {c["relation"] for c in row["conditions"]}]
    assert named and all("directed by Director" in row["query"] for row in named)
    recorded = json.loads((out / "manifest.json").read_text())["parameters"]["item_attributes"]
    assert recorded["file"] == "directors.csv" and len(recorded["sha256"]) == 64


def test_movielens_folder_without_users_ends_in_one_line(raw, tmp_path, capsys):
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("ratings.dat", "movies.dat"):
        (partial / name).write_bytes((raw / name).read_bytes())
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(partial), "--out"]
    assert main([*args, str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "users.dat" in err


def test_movielens_bad_line_names_its_file_and_line(raw, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("ratings.dat", "movies.dat", "users.dat"):
        (bad / name).write_bytes((raw / name).read_bytes())
    with (bad / "users.dat").open("ab") as handle:
        handle.write(b"999::X::25::2::00000\n")
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(bad), "--out"]
    assert main([*args, str(tmp_path / "o"), "--on-bad-line", "error"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "users.dat:61" in err and "gender" in err


def test_movielens_folder_is_refused_by_families_that_read_amazon_files(raw, tmp_path, capsys):
    assert main(["--no-progress", "build", "--source", str(raw), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "movielens-1m" in err and "--task" in err


def test_movielens_distinctive_score_is_share_times_log_inverse_popularity():
    from dataset_builder.recbench_plus.demographics import distinctive

    histories = {"a": ["x", "y"], "b": ["x"], "c": ["x"], "d": ["y", "z"]}
    best = distinctive(["a", "b"], histories, {"x": 3, "y": 2, "z": 1}, 4, top=3, min_raters=1)
    # y: half the group, rated by 2 of 4 users, beats x: the whole group, but rated by 3 of 4
    assert [(d.item, d.raters) for d in best] == [("y", 1), ("x", 2)]
    assert best[0].score == pytest.approx(0.5 * math.log(4 / 2))
    assert best[1].score == pytest.approx(1.0 * math.log(4 / 3))


def test_implicit_reference_is_never_an_item_with_several_values():
    from dataset_builder.recbench_plus.kg import Fact, build_graph
    from dataset_builder.recbench_plus.queries import Catalogue, Item, references

    drama, war, rare = Fact("genre", "Drama"), Fact("genre", "War"), Fact("genre", "Rare")
    graph = build_graph([[drama, war], [drama, rare], [war], [war]], min_items=2, max_share=1)
    catalogue = Catalogue.of(graph, [Item(k, k.upper(), 10 - n) for n, k in enumerate("abcd")])
    # "b" holds Drama and a genre dropped as too rare: "the genre of B" is still ambiguous
    assert references([drama], catalogue, set()) is None
    assert references([drama], catalogue, set(), unambiguous=False) == [Item("a", "A", 10)]
    assert references([war], catalogue, set()) == [Item("c", "C", 8)]
