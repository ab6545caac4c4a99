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


@pytest.mark.parametrize("text", [None, "", " ", "[SEP] [SEP]", "<think>only thoughts</think>", "<think>cut"])
def test_recbench_plus_split_answer_without_a_title_fails_as_data(text):
    parsed = split_answer(text)
    assert not parsed.ok and parsed.reason == "no_items"


# Answers in the styles instruct models write them: chat prose around the list, markdown, reasoning.
@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("Sure! Here are some you might like:\n1. Heat\n2. Alien\n3. Casablanca\n\nHappy watching!",
         ["Heat", "Alien", "Casablanca"]),
        ("Here are some movies you might enjoy:\n\nHeat [SEP] Alien [SEP] Casablanca\n\nEnjoy!",
         ["Heat", "Alien", "Casablanca"]),
        ("Here are my recommendations: Heat [SEP] Alien [SEP] Casablanca", ["Heat", "Alien", "Casablanca"]),
        ("Based on your query, I recommend:\n- **Heat** (1995): a tense crime epic\n- **Alien** (1979)\n"
         "I hope you enjoy these!", ["Heat", "Alien"]),
        ("<think>The user wants crime films. Heat? Alien is sci-fi.</think>\nHeat [SEP] Casablanca",
         ["Heat", "Casablanca"]),
        ("Okay</think>Heat [SEP] Alien", ["Heat", "Alien"]),  # a template that opened the block itself
        ("I Have a Dream [SEP] I Am Legend", ["I Have a Dream", "I Am Legend"]),  # titles, not a lead-in
        ("I Am Legend\nHeat\nHere Comes the Boom", ["I Am Legend", "Heat", "Here Comes the Boom"]),
    ],
)  # fmt: skip
def test_recbench_plus_split_answer_drops_chat_prose_around_the_list(text, titles):
    parsed = split_answer(text)
    assert parsed.ok and parsed.value == titles


@pytest.mark.parametrize(
    ("text", "titles"),
    [  # the shapes of the released answers (RecAssistBench llm_results, demographics queries) that name it
        ("Metropolis (1927)[SEP]Vertigo (1958)[SEP]2001: A Space Odyssey (1968)[SEP]Solaris (1972)",
         ["Metropolis (1927)", "Vertigo (1958)", "2001: A Space Odyssey (1968)", "Solaris (1972)"]),
        ("Blade Runner [SEP] The Matrix [SEP] 2001: A Space Odyssey [SEP] Arrival",
         ["Blade Runner", "The Matrix", "2001: A Space Odyssey", "Arrival"]),
        ("2001: A Space Odyssey [SEP] Metropolis [SEP] Blade Runner",
         ["2001: A Space Odyssey", "Metropolis", "Blade Runner"]),
        ("1. Metropolis\n2. 2001: A Space Odyssey\n3. 12 Angry Men",
         ["Metropolis", "2001: A Space Odyssey", "12 Angry Men"]),
        ("300 [SEP] 12 Angry Men [SEP] 8½", ["300", "12 Angry Men", "8½"]),
    ],
)  # fmt: skip
def test_recbench_plus_split_answer_keeps_a_title_whose_first_word_is_a_number(text, titles):
    parsed = split_answer(text)
    assert parsed.ok and parsed.value == titles


def test_recbench_plus_released_answers_naming_2001_match_it():
    from perrec_eval.tasks.recbench_plus.released import Movie, matcher

    movies = [Movie(924, "2001: A Space Odyssey (1968)"), Movie(541, "Blade Runner (1982)")]
    titles = matcher(movies)
    for answer in (
        "Metropolis (1927)[SEP]2001: A Space Odyssey (1968)[SEP]Solaris (1972)",
        "Blade Runner [SEP] 2001: A Space Odyssey [SEP] Arrival",
        "Blade Runner [SEP] The Matrix [SEP] 2001: A Space Odyssey [SEP] Arrival [SEP] Ex Machina",
    ):
        matched = [titles.match(title) for title in split_answer(answer).value]
        assert ("00000924",) in matched


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but Heat is not in the category Comedy, so I cannot recommend movies on that basis.",
        "There are no such movies directed by that person.",
        "Unfortunately, I couldn't find any books that meet all of these conditions.",
        "I apologize, but the premise is mistaken: no film stars both of them.",
        "[]",
        "<think>None of them fit.</think>\nI cannot recommend any movie that satisfies this query.",
    ],
)
def test_recbench_plus_split_answer_reads_a_refusal_as_no_items_not_a_title(text):
    parsed = split_answer(text)
    assert parsed.ok and parsed.value == [] and parsed.detail == "declined"


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
    matcher = Matcher(CATALOGUE)
    forms = [normalize_title(CATALOGUE[0][1]), "silent sorcerer of the north"]  # with and without its article
    above, below = "The Silent Sorcerers of North", "Silent Sorcerers in North"
    assert FUZZY_THRESHOLD <= fuzz.ratio(normalize_title(above), forms[0]) < FUZZY_THRESHOLD + 3
    closest = max(fuzz.ratio(normalize_title(below), form) for form in forms)
    assert FUZZY_THRESHOLD - 8 < closest < FUZZY_THRESHOLD
    assert matcher.find(above) == (("a",), True) and matcher.match(below) == ()


def test_recbench_plus_matcher_names_every_item_of_an_equal_title_most_popular_first():
    assert Matcher(CATALOGUE).match("DRAGONS (2001)") == ("c", "b")
