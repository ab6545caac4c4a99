"""RecBench+'s task on movie queries: BM25 ignores the template's words, the history is shown by default,
MovieLens titles match in the forms answers write them, a demographics query has no condition match, and
an LLM rewrite of a demographics query may not name its ground truth."""

from __future__ import annotations

import pytest

from perrec_eval.registry import get
from perrec_eval.tasks.recbench_plus.task import QueryDoc, catalogue_of, score_doc

TASK = get("recbench-plus")
MOVIES = {
    "1": ("Some Mother's Son (1996)", "Drama"),
    "2": ("You Can't Take It With You (1938)", "Comedy"),
    "3": ("Paths of Glory (1957)", "War"),
    "4": ("Boat, The (Das Boot) (1981)", "War"),
    "5": ("Heat (1995)", "Crime"),
}


def _doc(query: str, *, history: tuple[str, ...] = (), kind: str = "explicit", conditions=()) -> QueryDoc:
    catalogue = catalogue_of(
        [
            {"parent_asin": a, "title": t, "domain": "MovieLens-1M", "popularity": 10 - int(a),
             "relations": [{"relation": "genre", "value": g}]}
            for a, (t, g) in MOVIES.items()
        ]
    )  # fmt: skip
    truth = {"type": kind, "ground_truth": [{"parent_asin": "3", "title": MOVIES["3"][0]}],
             "conditions": list(conditions), "domain": "MovieLens-1M", "k": 2}  # fmt: skip
    row = {"query": query, "domain": "MovieLens-1M",
           "history": [{"parent_asin": a, "title": MOVIES[a][0]} for a in history]}  # fmt: skip
    return QueryDoc("q", truth, "u", row=row, catalogue=catalogue)


def _asins(name: str, doc: QueryDoc) -> list[str]:
    [answer] = TASK.predict_baseline(name, [doc], data="", seed=0)
    return [entry["parent_asin"] for entry in answer]


def test_bm25_ignores_the_words_of_the_query_template():
    # before: "you" and "some" matched "Some Mother's Son" and "You Can't Take It With You" first
    war = [{"relation": "genre", "value": "War"}]
    doc = _doc("Can you recommend some movies in the genre War?", conditions=war)
    assert _asins("bm25", doc) == ["3", "4"]


def test_bm25_without_a_condition_word_answers_by_popularity():
    assert _asins("bm25", _doc("Can you recommend some movies that I would like?")) == ["1", "2"]


def test_history_is_shown_by_default_and_left_out_on_request():
    doc = _doc("Any war films?", history=("5",))
    protocol = TASK.protocols["recommend"]
    _, user = protocol.render(doc, "recommend")
    assert user["content"].startswith("The user has watched the following movies:['Heat (1995)']")
    _, plain = protocol.render(doc, "recommend", variant="default")
    assert plain["content"] == "Query: Any war films?\nRecommended movies (separated by [SEP]):"
    assert TASK.prompt_variants == ("history", "default")


def test_query_without_history_is_asked_with_the_plain_prompt():
    doc = _doc("I'm a writer. Any movies?", kind="demographics")
    system, user = TASK.protocols["recommend-k"].render(doc, "recommend")
    assert user["content"].startswith("Query: ") and "Please output 2 recommended movies" in system["content"]


@pytest.mark.parametrize("title", ["The Boat (Das Boot) (1981)", "Das Boot", "The Boat", "Boat, The"])
def test_movielens_titles_match_in_the_forms_answers_write(title):
    doc = _doc("War?")
    assert [entry["parent_asin"] for entry in doc.catalogue.match([title], doc.truth)] == ["4"]


def test_demographics_query_has_no_condition_match():
    war = [{"relation": "genre", "value": "War"}]
    doc = _doc("I'm a writer. Any war movies?", kind="demographics", conditions=war)
    prediction = doc.catalogue.match(["Heat"], doc.truth)
    assert score_doc("condition_match", prediction, doc.truth) is None
    assert score_doc("recall", prediction, doc.truth) == 0.0


def test_demographics_rewrite_may_not_name_its_ground_truth():
    from dataset_builder.recbench_plus import phrasing

    row = {"domain": "MovieLens-1M", "conditions": [{"relation": "genre", "value": "War"}],
           "ground_truth": [{"title": "Paths of Glory (1957)"}], "query": "Any War?"}  # fmt: skip
    assert phrasing.problem("demographics", row, "As a writer I love War films. Ideas?") is None
    assert phrasing.problem("demographics", row, "A War film like Paths of Glory?") == "leaks"
    assert phrasing.problem("demographics", row, "Any films for a writer?") == "omits"
    assert "demographics" in phrasing.prompts().types
