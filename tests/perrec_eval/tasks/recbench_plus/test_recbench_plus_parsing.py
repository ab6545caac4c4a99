"""The answer reader's table: list shapes, title normalization, and the fuzzy threshold on both sides."""

from __future__ import annotations

import pytest
from rapidfuzz import fuzz

from perrec_eval.tasks.recbench_plus.parsing import FUZZY_THRESHOLD, Matcher, normalize_title, split_answer


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("Dune [SEP] Emma [SEP] Ulysses", ["Dune", "Emma", "Ulysses"]),
        ('"Dune" [SEP] "Emma" [SEP]', ["Dune", "Emma"]),  # quotes and an empty last piece
        ("1. Dune\n2. Emma\n3) Ulysses", ["Dune", "Emma", "Ulysses"]),
        ("- Dune\n* Emma\n• Ulysses", ["Dune", "Emma", "Ulysses"]),
        ("Here are some books:\n1. **Dune**\n2. Emma", ["Dune", "Emma"]),
        ('["Dune", "Emma"]', ["Dune", "Emma"]),
        ('```json\n[{"title": "Dune"}, {"title": "Emma"}]\n```', ["Dune", "Emma"]),
        ("<think>Dune? Emma?</think>Dune [SEP] Emma", ["Dune", "Emma"]),
        ("Dune", ["Dune"]),  # a one-item answer is an answer
        ("Dune (1965)", ["Dune (1965)"]),
    ],
)
def test_recbench_plus_split_answer_reads_each_list_shape(text, titles):
    parsed = split_answer(text)
    assert parsed.ok and parsed.value == titles


@pytest.mark.parametrize("text", [None, "", "   ", "[SEP] [SEP]", "<think>only thoughts</think>", "[]"])
def test_recbench_plus_split_answer_without_a_title_fails_as_data(text):
    parsed = split_answer(text)
    assert not parsed.ok and parsed.reason == "no_items"


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Forrest Gump (1994)", "Forrest Gump"),  # the released code's difflib gave 0.774 here
        ("Dune, 1965", "dune"),
        ("The Hobbit (Paperback)", "The Hobbit"),
        ("The Hobbit [Anniversary Edition]", "the hobbit"),
        ("The Hobbit (Kindle Edition) (2012)", "The Hobbit"),
        ("“The Hobbit”", "The Hobbit"),
        ("The Hobbit: There and Back Again", "the hobbit - there and back again"),
    ],
)
def test_recbench_plus_normalize_title_equates_years_editions_quotes_and_punctuation(left, right):
    assert normalize_title(left) == normalize_title(right)


def test_recbench_plus_normalize_title_keeps_a_year_that_is_the_title():
    assert normalize_title("1984") == "1984"


CATALOGUE = [("a", "The Silent Sorcerer of the North", 5), ("b", "Dragons", 1), ("c", "Dragons", 7)]


def test_recbench_plus_matcher_matches_just_above_the_threshold_and_not_below():
    matcher, target = Matcher(CATALOGUE), normalize_title(CATALOGUE[0][1])
    above, below = "The Silent Sorcerers of North", "Silent Sorcerer of North"
    assert FUZZY_THRESHOLD <= fuzz.ratio(normalize_title(above), target) < FUZZY_THRESHOLD + 3
    assert FUZZY_THRESHOLD - 6 < fuzz.ratio(normalize_title(below), target) < FUZZY_THRESHOLD
    assert matcher.match(above) == ("a",) and matcher.match(below) == ()


def test_recbench_plus_matcher_names_every_item_of_an_equal_title_most_popular_first():
    assert Matcher(CATALOGUE).match("DRAGONS (2001)") == ("c", "b")
