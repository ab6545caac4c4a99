"""RecBench+'s released files scored (`perrecbench score --task recbench-plus --released-queries ...`) on
hand-made files in the release's shapes: both response shapes, the released evaluator's quirks under
``--compat released`` (hand-computed), the corrected scoring, and one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.tasks.recbench_plus import released

DATA = Path(__file__).resolve().parents[3] / "data" / "recbench_plus_released"
QUERIES = str(DATA / "DemographicsBasedQuery.json")
MOVIES = str(DATA / "movies.dat")


def _score(*, compat: str | None = None, responses: str = "responses.jsonl", queries: str = QUERIES):
    answers = released.read_responses(str(DATA / responses)).answers
    records = released.score_released(
        released.read_queries(queries), answers, released.read_movies(MOVIES), compat=compat
    )
    return {record["id"]: record for record in records}


def test_recbench_plus_released_profile_ids_count_the_non_empty_queries_of_a_group():
    queries = released.read_queries(QUERIES)
    assert [q.id for q in queries] == ["0-0", "0-1", "1-0", "1-1"]
    assert queries[1].titles == ("Heat (1995)",) and {q.query_type for q in queries} == {"demographics"}
    assert [q.cluster for q in queries] == ["0", "0", "1", "1"]


def test_recbench_plus_released_both_response_shapes_read_alike():
    plain = released.read_responses(str(DATA / "responses.jsonl")).answers
    batch = released.read_responses(str(DATA / "batch_output.jsonl")).answers
    assert {k: v for k, v in batch.items() if k != "1-1"} == {k: v for k, v in plain.items() if k != "1-1"}
    assert batch["1-1"] is None  # a failed batch request: no answer


def test_recbench_plus_released_compat_equals_the_hand_computed_released_results():
    ours = _score(compat="released")
    for expected in json.loads((DATA / "released_results.json").read_text()):
        got = ours[expected["id"]]
        assert all(float(got[name]) == float(expected[name]) for name in released.COMPAT_METRICS), expected[
            "id"
        ]


def test_recbench_plus_released_compat_keeps_each_defect():
    ours = _score(compat="released")
    assert ours["0-0"]["recall"] == 0.0  # "Forrest Gump" vs "Forrest Gump (1994)": difflib 0.774 < 0.8
    assert ours["0-1"]["ftr"] == 1.0  # a one-item answer has no [SEP]: a failure
    assert ours["1-0"]["precision"] == 0.5 and ours["1-0"]["ndcg"] == 1.0  # a repeat counts twice


def test_recbench_plus_released_corrected_scoring_fixes_them():
    ours = _score()
    assert ours["0-0"]["recall"] == ours["0-0"]["precision"] == ours["0-0"]["ndcg"] == 1.0
    assert ours["0-1"]["recall"] == 1.0 and ours["0-1"]["ftr"] == 0.0
    assert ours["1-0"]["recall"] == 0.5 and ours["1-0"]["precision"] == 1.0  # the repeat is kept once
    assert ours["1-0"]["ndcg"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ours["1-1"]["ftr"] == 1.0 and ours["1-1"]["recall"] == 0.0


def test_recbench_plus_released_movielens_titles_are_read_with_their_article_and_alternatives():
    from perrec_eval.titles import alternatives

    assert alternatives("Boat, The (Das Boot) (1981)") == (["Boat, The (Das Boot) (1981)", "The Boat"],
                                                          ["Boat", "Das Boot", "Boot"], [])  # fmt: skip
    matcher = released.matcher(released.read_movies(MOVIES))
    assert matcher.match("Das Boot") == matcher.match("the boat") == ("00000005",)


def test_recbench_plus_released_condition_queries_take_the_better_of_title_and_id_per_metric():
    queries = released.read_queries(str(DATA / "ExplicitQuery.json"))
    (query,) = queries
    assert query.id == "3" and query.query_type == "explicit" and query.condition_num == 1
    movies = released.read_movies(MOVIES)
    # "Forrest Gump" misses the titles (year kept there) but names movie 1 in the catalogue
    values = released.released_scores(query, "Forrest Gump [SEP] Alien", movies)
    assert values["recall"] == 0.5 and values["precision"] == 0.5 and values["ftr"] == 0.0


def test_recbench_plus_released_fixed_k_pads_with_none_as_released():
    (query, *_) = released.read_queries(QUERIES)
    values = released.released_scores(query, "Forrest Gump (1994) [SEP] x", k=4)
    assert values["precision"] == 0.0  # "Forrest Gump" after the year is cut; 4 titles read with padding


def test_recbench_plus_released_cli_prints_scores_and_writes_one_line_per_query(tmp_path, capsys):
    out = tmp_path / "per_query.jsonl"
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", QUERIES]
    args += ["--responses", str(DATA / "batch_output.jsonl"), "--catalogue", MOVIES]
    args += ["--users", str(DATA / "users.dat"), "--per-query", str(out)]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    cell = printed["query_types"]["demographics"]
    assert printed["scoring"] == "corrected" and cell["num_queries"] == 4
    assert cell["metrics"]["recall"]["value"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert cell["metrics"]["recall"]["ci_low"] <= cell["metrics"]["recall"]["value"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["0-0", "0-1", "1-0", "1-1"]
    assert set(released.COMPAT_METRICS) <= set(lines[0])


@pytest.mark.parametrize(
    ("flag", "content", "message"),
    [
        ("--released-queries", '{"a": 1}', "not a released RecBench+ query file"),
        ("--responses", '{"answer": "x"}\n', "not a released response"),
        ("--responses", '{"id": "9-9", "response": "x"}\n', "the query file does not hold"),
        ("--catalogue", "1::1193::5::978300760\n", "has no movie id and title"),
        ("--users", "1::F::1\n", "UserID::Gender::Age::Occupation::Zip"),
    ],
)
def test_recbench_plus_released_bad_files_end_in_one_line(tmp_path, capsys, flag, content, message):
    files = {
        "--released-queries": QUERIES,
        "--responses": str(DATA / "responses.jsonl"),
        "--catalogue": MOVIES,
        "--users": str(DATA / "users.dat"),
    }
    bad = tmp_path / "bad"
    bad.write_text(content, encoding="utf-8")
    files[flag] = str(bad)
    args = ["--no-progress", "score", "--task", "recbench-plus"]
    assert main([*args, *(part for pair in files.items() for part in pair)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_recbench_plus_released_query_answered_twice_scores_its_first_answer_and_counts_the_rest(
    tmp_path, capsys
):
    responses = tmp_path / "twice.jsonl"
    lines = (DATA / "responses.jsonl").read_text().splitlines()
    repeated = [json.dumps({"id": "0-0", "response": "Heat"}), json.dumps({"id": "0-0", "response": "Alien"})]
    responses.write_text("\n".join([*lines, *repeated]) + "\n")
    assert released.read_responses(str(responses)).repeats == 2
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", QUERIES]
    assert main([*args, "--responses", str(responses), "--catalogue", MOVIES]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["num_repeated_answers"] == 2 and "first answer" in printed["repeated_answers"]
    once = tmp_path / "once.jsonl"
    once.write_text("\n".join(lines) + "\n")
    assert main([*args, "--responses", str(once), "--catalogue", MOVIES]) == 0
    assert json.loads(capsys.readouterr().out)["query_types"] == printed["query_types"]


@pytest.mark.parametrize("k", ["0", "1001", "100000000"])
def test_recbench_plus_released_k_is_bounded(capsys, k):
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", QUERIES]
    args += ["--responses", str(DATA / "responses.jsonl"), "--catalogue", MOVIES, "--compat", "released"]
    assert main([*args, "--k", k]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--k must be between 1 and 1,000" in err


def test_recbench_plus_released_needs_all_three_files(capsys):
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", QUERIES]
    assert main(args) == 2
    assert "--responses and --catalogue" in capsys.readouterr().err


RELEASED_HISTORY_SYSTEM = (
    "You are a movie recommender system. You are given a user's watched movies and a query from the user. "
    "You need to recommend movies that satisfy the user's query and user preferences. Please output  5 "
    "recommended movies directly, do not output other content."
)


def test_recbench_plus_released_prompts_render_as_the_release_sent_them():
    from perrec_eval.tasks.recbench_plus.prompts import messages

    system, user = messages(
        "Q?", "Movies_and_TV", ["Saint, The (1997)", "Cabaret (1972)"], variant="history-k"
    )
    assert system["content"] == RELEASED_HISTORY_SYSTEM
    assert user["content"] == (
        "The user has watched the following movies:['Saint, The (1997)', 'Cabaret (1972)']\nQuery: Q?\n"
        "Recommended movies (separated by [SEP]):"
    )
    fixed_k = messages("Q?", "Movies_and_TV", [], variant="k")
    assert "Please output 5 recommended movies directly" in fixed_k[0]["content"]
    assert fixed_k[1]["content"] == messages("Q?", "Movies_and_TV", [])[1]["content"]
