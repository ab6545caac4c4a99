import logging
import math

import bm25s
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perrec_eval.tasks.perrecbench.records import Group, HistoryItem, Query, User
from perrec_eval.tasks.perrecbench.retrieval import (
    RETRIEVAL_INFO,
    Retrieved,
    retrieve,
    retrieve_groups,
    tokenize,
)


def item(title, timestamp, author=None, rating=4.0, asin=None):
    return HistoryItem(asin or f"{title}@{timestamp}", title, author, rating, timestamp)


def query(title, author=None):
    return Query("Q", title, author)


HISTORY = [
    item("Slow Cooker Recipes", 1),
    item("Dune", 2, author="Frank Herbert"),
    item("Garden Tools Guide", 3),
    item("Dune Messiah", 4, author="Frank Herbert"),
    item("The Silmarillion", 5, author="J.R.R. Tolkien"),
    item("Knitting for Beginners", 6),
]


def indices(retrieved):
    return [r.index for r in retrieved]


def test_retrieval_tokenize_lowercases_and_splits_on_non_alphanumerics():
    expected = ["j", "r", "r", "tolkien", "s", "the", "hobbit", "2nd", "ed"]
    assert tokenize("J.R.R. Tolkien's THE_Hobbit, 2nd ed.") == expected


def test_retrieval_ranks_matching_items_first():
    [got] = retrieve(query("Children of Dune", "Frank Herbert"), [HISTORY], k=4)
    assert indices(got)[:2] == [1, 3]  # the two Dune books; the shorter title scores higher
    assert got[0].score > got[1].score > 0
    assert all(r.score == 0 for r in got[2:])


def test_retrieval_author_alone_retrieves():
    [got] = retrieve(query("Unfinished Tales", "J. R. R. Tolkien"), [HISTORY], k=1)
    assert indices(got) == [4]


def test_retrieval_returns_best_first_with_scores_descending():
    [got] = retrieve(query("Dune Cooker Garden"), [HISTORY], k=6)
    scores = [r.score for r in got]
    assert scores == sorted(scores, reverse=True)
    assert sorted(indices(got)) == list(range(6))


def test_retrieval_short_history_returns_everything():
    [got] = retrieve(query("Dune"), [HISTORY[:2]], k=4)
    assert indices(got) == [1, 0]


def test_retrieval_zero_scores_return_k_most_recent():
    [got] = retrieve(query("Quantum Physics"), [HISTORY], k=4)
    assert indices(got) == [5, 4, 3, 2]
    assert all(r.score == 0.0 for r in got)


def test_retrieval_ties_prefer_later_timestamp_then_later_position():
    history = [item("Dune", 10), item("Dune", 30), item("Dune", 20), item("Dune", 30), item("Emma", 99)]
    [got] = retrieve(query("Dune"), [history], k=4)
    assert indices(got) == [3, 1, 2, 0]
    assert len({r.score for r in got}) == 1


def test_retrieval_one_list_per_user_in_order():
    histories = [HISTORY, [], HISTORY[2:3]]
    got = retrieve(query("Dune"), histories, k=2)
    assert [len(g) for g in got] == [2, 0, 1]
    assert indices(got[0]) == [1, 3]


def test_retrieval_k_zero_returns_empty_lists():
    assert retrieve(query("Dune"), [HISTORY], k=0) == [[]]


@pytest.mark.parametrize("k", [-1, 2.5, True, "4"])
def test_retrieval_rejects_bad_k(k):
    with pytest.raises(ValueError, match="non-negative integer"):
        retrieve(query("Dune"), [HISTORY], k=k)


def test_retrieval_empty_query_title_returns_most_recent():
    [got] = retrieve(query("", None), [HISTORY], k=2)
    assert indices(got) == [5, 4]


def lucene_reference(query_tokens, docs, k1=1.5, b=0.75):
    """Textbook Lucene BM25 (Kamphuis et al. 2020), computed independently in float64."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    scores = []
    for doc in docs:
        score = 0.0
        for token in query_tokens:  # a repeated query token counts once per occurrence
            tf = doc.count(token)
            if tf:
                df = sum(token in d for d in docs)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(score)
    return scores


WORDS = st.sampled_from(["dune", "emma", "tea", "art", "war", "of", "the", "x"])


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(WORDS, min_size=1, max_size=8), min_size=1, max_size=12),
    query=st.lists(WORDS, min_size=1, max_size=5),
)
def test_retrieval_scores_equal_full_bm25s_index_and_textbook_lucene(docs, query):
    history = [item(" ".join(doc), t) for t, doc in enumerate(docs)]
    [got] = retrieve(Query("Q", " ".join(query)), [history], k=len(docs))
    ours = {r.index: r.score for r in got}

    full = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    full.index(docs, show_progress=False)
    library = full.get_scores(query)
    reference = lucene_reference(query, docs)
    for i in range(len(docs)):
        assert ours[i] == pytest.approx(float(library[i]), rel=1e-6, abs=1e-7)
        assert ours[i] == pytest.approx(reference[i], rel=1e-5, abs=1e-6)


def make_row(group_id, users, title="Dune", author="Frank Herbert"):
    users = tuple(User(uid, 4.0, 0, 4.0, 4.0, 0.0, tuple(history)) for uid, history in users)
    return Group(group_id, "Books", "easy", query(title, author), 0, users)


def test_retrieval_rows_keyed_by_group_and_user_and_equal_to_retrieve():
    rows = [make_row("g1", [("a", HISTORY), ("b", HISTORY[::2])]),
            make_row("g2", [("a", HISTORY[1:])], title="Garden", author=None)]
    got = retrieve_groups(rows, k=3)
    assert set(got) == {("g1", "a"), ("g1", "b"), ("g2", "a")}
    assert got[("g1", "a")] == retrieve(query("Dune", "Frank Herbert"), [HISTORY], k=3)[0]
    assert got[("g1", "b")] == retrieve(query("Dune", "Frank Herbert"), [HISTORY[::2]], k=3)[0]
    assert indices(got[("g2", "a")])[0] == 1  # "Garden Tools Guide" is HISTORY[3] = HISTORY[1:][1]
    assert all(isinstance(r, Retrieved) for hits in got.values() for r in hits)


def test_retrieval_rows_accepts_repeated_identical_groups():
    row = make_row("g1", [("a", HISTORY)])
    got = retrieve_groups(iter([row, row]), k=2)
    assert list(got) == [("g1", "a")]


def test_retrieval_rows_rejects_same_key_with_different_history():
    rows = [make_row("g1", [("a", HISTORY)]), make_row("g1", [("a", HISTORY[:3])])]
    with pytest.raises(ValueError, match="group_id must identify one group"):
        retrieve_groups(rows)


def test_retrieval_info_records_library_method_and_parameters():
    assert RETRIEVAL_INFO["library"] == "bm25s"
    assert RETRIEVAL_INFO["version"] == bm25s.__version__
    assert RETRIEVAL_INFO["method"] == "lucene"
    assert (RETRIEVAL_INFO["k1"], RETRIEVAL_INFO["b"]) == (1.5, 0.75)
    assert {"tokenizer", "tie_break"} <= set(RETRIEVAL_INFO)


def test_retrieval_lets_the_app_log_level_silence_bm25s_debug_lines(caplog):
    logging.getLogger("bm25s").setLevel(logging.DEBUG)  # what `import bm25s` does: a line per index built
    caplog.set_level(logging.INFO)
    retrieve_groups([make_row("g1", [("a", HISTORY), ("b", HISTORY)])])
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
