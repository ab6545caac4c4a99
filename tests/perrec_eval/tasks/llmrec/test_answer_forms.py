"""LLMRec's readers on the forms instruct models write (Qwen2.5, GPT-4o, Llama-3, Mistral, Gemma, Claude,
DeepSeek-R1 and the demo's SmolLM2): one test per form, ratings, rankings on MovieLens titles, and texts."""

from __future__ import annotations

import pytest

from perrec_eval.tasks.llmrec.parsing import TitleIndex, parse_ranking, parse_rating
from perrec_eval.tasks.llmrec.text import parse_text

TOY_STORY = "Toy Story (1995)"


@pytest.mark.parametrize(
    ("text", "user"),
    [
        ('I predict that user MLU196 will rate "Toy Story (1995)" a 4.', "MLU196"),
        ("User AE22236AFRRQK5UXLWQLVDCUVUCA would rate this movie 4.", "AE22236AFRRQK5UXLWQLVDCUVUCA"),
        ("User 196: 4", "196"),
        ("User MLU472 will rate Toy Story (1995) a 4.", None),  # the id in no other form than the answer's
    ],
)
def test_rating_reads_past_an_echoed_user_id_with_digits(text, user) -> None:
    assert parse_rating(text, title=TOY_STORY, user=user).value == 4.0


def test_rating_reads_four_out_of_five_in_brackets() -> None:
    assert parse_rating("I would rate it 4 (out of 5).", title=TOY_STORY).value == 4.0


def test_rating_reads_a_title_echoed_without_its_year() -> None:
    assert parse_rating("2001: A Space Odyssey - 5", title="2001: A Space Odyssey (1968)").value == 5.0


def test_rating_reads_the_prediction_after_a_chain_of_history_ratings() -> None:
    text = (
        "The user rated Heat (1995): 5, Alien (1979): 3, Fargo (1996): 4 and Casino (1995): 2.\n"
        "Similar crime films score 4 on average.\nPrediction: 4"
    )
    assert parse_rating(text, title=TOY_STORY).value == 4.0


@pytest.mark.parametrize(("text", "value"), [("★★★★☆", 4.0), ("Rating: ★★☆☆☆", 2.0), ("⭐⭐⭐⭐⭐", 5.0)])
def test_rating_counts_star_glyphs(text, value) -> None:
    assert parse_rating(text, title=TOY_STORY).value == value


def test_rating_never_reads_a_list_marker_the_budget_cut() -> None:
    text = 'Based on the history:\n1. "Jaws (1975)"\n2. "Alien (1979)"\n3. "Raiders of the Lost Ark"\n4'
    parsed = parse_rating(text, title=TOY_STORY)
    assert not parsed.ok and parsed.reason == "no_number"


def test_rating_never_reads_an_echoed_history_whose_stars_agree() -> None:
    text = 'The user rated:\n1. "Heat (1995)": 4 stars\n2. "Alien (1979)": 4 stars\n3. "Fargo'
    parsed = parse_rating(text, title=TOY_STORY)
    assert not parsed.ok and parsed.reason == "no_number"


def test_rating_reads_the_item_in_the_history_format() -> None:
    assert parse_rating('"Toy Story (1995)": 5 stars', title=TOY_STORY).value == 5.0


MOVIES = TitleIndex(
    [
        ("6", "Heat (1995)"), ("50", "Usual Suspects, The (1995)"), ("47", "Seven (Se7en) (1995)"),
        ("58", "Postino, Il (The Postman) (1994)"), ("527", "Schindler's List (1993)"),
        ("1473", "Best Men (1997)"), ("293", "Professional, The (a.k.a. Leon: The Professional) (1994)"),
    ]
)  # fmt: skip


@pytest.mark.parametrize(
    ("title", "item"),
    [
        ("Heat", "6"),  # the year dropped
        ("The Usual Suspects (1995)", "50"),  # MovieLens's moved article
        ("Usual Suspects", "50"),
        ("Se7en", "47"),  # a bracketed alternative title
        ("Il Postino", "58"),
        ("The Postman (1994)", "58"),
        ("Leon: The Professional", "293"),  # an a.k.a. title
        ("The Best Men (1997)", "1473"),  # an article the catalogue lacks
    ],
)
def test_ranking_maps_movielens_title_forms(title, item) -> None:
    parsed = parse_ranking(f'["{title}"]', MOVIES)
    assert parsed.ok and parsed.value["items"] == [item]


@pytest.mark.parametrize(
    "text",
    [
        "| Rank | Title |\n|---|---|\n| 1 | Heat (1995) |\n| 2 | Se7en |\n| 3 | The Usual Suspects |",
        "Heat (1995), Se7en, The Usual Suspects",
        "['Heat (1995)', 'Se7en', 'The Usual Suspects']",
        '["Heat (1995)", "Se7en", "The Usual Suspects"]\n\n(These are crime films the user will enjoy.)',
        "Sure! Here's the list:\n['Heat (1995)', 'Se7en', 'The Usual Suspects']",
    ],
)
def test_ranking_reads_tables_comma_lines_and_lists_with_a_note(text) -> None:
    parsed = parse_ranking(text, MOVIES)
    assert parsed.ok and parsed.value["items"] == ["6", "47", "50"]


def test_ranking_reads_a_python_list_whose_titles_hold_apostrophes() -> None:
    parsed = parse_ranking("['Schindler's List (1993)', 'Heat (1995)']", MOVIES)
    assert parsed.ok and parsed.value["items"] == ["527", "6"]


@pytest.mark.parametrize(
    "text",
    [
        "Sure! Here's a 10-word explanation:\n\nSoft, warm and cosy, perfect for cold winter nights.",
        "**Explanation:** Soft, warm and cosy, perfect for cold winter nights.",
        "## Summary\nSoft, warm and cosy, perfect for cold winter nights.",
        "Soft, warm and cosy, perfect for cold winter nights.\n\nLet me know if you need anything else!",
        'Certainly! "Soft, warm and cosy, perfect for cold winter nights."\n\nI hope this helps!',
    ],
)
def test_text_reads_the_sentence_without_its_chat(text) -> None:
    assert parse_text(text).value == "Soft, warm and cosy, perfect for cold winter nights."
