"""LLMRec's answer parsing: ratings from free text (never clipped), ranked lists mapped to items by title."""

from __future__ import annotations

import pytest

from perrec_eval.tasks.llmrec.parsing import TitleIndex, parse_ranking, parse_rating

INDEX = TitleIndex([("A1", "The Red Soap"), ("B2", "Blue Soap Bar"), ("C3", "Green Tea Lotion")])


@pytest.mark.parametrize(
    ("text", "value", "reason"),
    [
        ("4", 4.0, None),
        ("I would say 3.5 stars.", 3.5, None),
        ("<think>maybe 2</think>5", 5.0, None),
        ("0", None, "out_of_range"),
        ("7.5", None, "out_of_range"),
        ("-1", None, "out_of_range"),
        ("five", None, "no_number"),
        (None, None, "no_number"),
    ],
)
def test_parse_rating_reads_the_number_and_fails_outside_one_to_five(text, value, reason) -> None:
    parsed = parse_rating(text)
    assert (parsed.value, parsed.reason) == (value, reason)
    assert parsed.ok is (reason is None)


@pytest.mark.parametrize(
    "text",
    [
        '["Blue Soap Bar", "The Red Soap"]',
        "['Blue Soap Bar', 'The Red Soap']",
        "Here you go: ['blue soap bar', 'the red soap'] enjoy",
        "1. Blue Soap Bar\n2. The Red Soap",
        "- Blue Soap Bar\n- The Red Soap",
        "Blue Soap Bar\nThe Red Soap",
        '<think>[\'Green Tea Lotion\']</think>\n["Blue Soap Bar", "The Red Soap"]',
    ],
)
def test_parse_ranking_reads_lists_numbered_lists_and_lines(text) -> None:
    parsed = parse_ranking(text, INDEX)
    assert parsed.ok and parsed.value["items"] == ["B2", "A1"]


def test_parse_ranking_maps_close_titles_and_counts_what_it_drops() -> None:
    parsed = parse_ranking('["Blue Soap Bars", "Purple Shampoo", "blue soap bar", "Red Soap"]', INDEX)
    # "Red Soap" lacks "The" (the catalogue title without its article); "Blue Soap Bars" is fuzzy; the repeat
    # is dropped
    assert parsed.value == {"items": ["B2", "A1"], "fuzzy": 1, "unmatched": 1, "duplicates": 1}


@pytest.mark.parametrize(("text", "reason"), [("", "no_list"), ('["Purple Shampoo"]', "no_item")])
def test_parse_ranking_fails_when_nothing_names_an_item(text, reason) -> None:
    parsed = parse_ranking(text, INDEX)
    assert not parsed.ok and parsed.reason == reason


def test_title_index_names_every_item_of_a_shared_title() -> None:
    index = TitleIndex([("X", "Same"), ("Y", "same ")])
    assert index.find("SAME") == (("X", "Y"), False)


# Answers in the styles instruct models write them (SmolLM2, Llama, Qwen, GPT), on real titles.
TITLE = "Coneheads (1993)"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('I would rate "Coneheads (1993)" 4 stars.', 4.0),
        ("Coneheads (1993): 4 stars", 4.0),
        ("The predicted rating for Coneheads (1993) is 4.", 4.0),
        ("Based on the user's history, the predicted rating for this product is 3.5.", 3.5),
        ("4/5", 4.0),
        ("I'd give it a 4 out of 5.", 4.0),
        ("Rating: 4", 4.0),
        ('{"rating": 4}', 4.0),
        ('```json\n{"predicted_rating": "2.5"}\n```', 2.5),
        ("**4**", 4.0),
        ("The user would likely give it **3** stars.", 3.0),
        ("<think>The user rated 5 of 10 items 5 stars, most in 1995.</think>\n4", 4.0),
        ("<think>1, 2, 3?</think>Rating: 2", 2.0),
        ("User A2X would rate it 5.", 5.0),
        ("Coneheads (1993) - 2 stars. The user liked 3 similar comedies.", 2.0),
        ("Out of 1,000 reviews, 85% were positive. I predict 4.", 4.0),
    ],
)
def test_parse_rating_reads_the_rating_not_a_year_or_count_in_real_answer_styles(text, value) -> None:
    parsed = parse_rating(text, title=TITLE)
    assert parsed.ok, parsed
    assert parsed.value == value


def test_parse_rating_never_reads_a_year_even_without_the_title() -> None:
    for text in ('I would rate "Coneheads (1993)" 4 stars.', "Coneheads (1993): 4 stars"):
        assert parse_rating(text).value == 4.0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I'm sorry, but I cannot predict how this user will rate the product.", "refused"),
        ("It could be 2 or 4.", "ambiguous"),
        ('1. "A Tale of Pastry": 4 stars\n2. "Sword and Dragon": 2 stars', "no_number"),  # the history echoed
        ('1. "A Tale of Pastry', "no_number"),  # an echoed history line, cut by the budget: "1." is no rating
        ("I would rate it 7 stars.", "out_of_range"),
        ("<think>It is probably a 4, but", "no_number"),  # cut inside its reasoning
        ("Based on the user's purchase history, which includes", "no_number"),  # cut by the budget
    ],
)
def test_parse_rating_failures_keep_their_reason(text, reason) -> None:
    parsed = parse_rating(text, title=TITLE)
    assert not parsed.ok and parsed.reason == reason and parsed.detail


MOVIES = TitleIndex(
    [("M1", "2001: A Space Odyssey"), ("M2", "Blade Runner"), ("M3", "Heat"), ("M4", "12 Angry Men")]
)


@pytest.mark.parametrize(
    "text",
    [
        "Sure! Here are some you might like:\n1. 2001: A Space Odyssey\n2. Blade Runner\n3. Heat\n"
        "Happy watching!",
        "Here are my recommendations:\n\n1. **2001: A Space Odyssey** - a landmark of science fiction\n"
        "2. **Blade Runner** (1982)\n3. **Heat**\n\nI hope you enjoy these!",
        '["2001: A Space Odyssey", "Blade Runner", "Heat"]',
        "['2001: A Space Odyssey', 'Blade Runner', 'Heat']",
        '```python\n["2001: A Space Odyssey", "Blade Runner", "Heat"]\n```',
        "2001: A Space Odyssey\nBlade Runner\nHeat",
        "- 2001: A Space Odyssey\n- Blade Runner\n- Heat",
        "<think>Maybe 12 Angry Men?</think>\n1) 2001: A Space Odyssey\n2) Blade Runner\n3) Heat",
    ],
)
def test_parse_ranking_reads_real_list_styles_with_chat_prose_dropped(text) -> None:
    parsed = parse_ranking(text, MOVIES)
    assert parsed.ok, parsed
    assert parsed.value["items"] == ["M1", "M2", "M3"]
    assert parsed.value["unmatched"] == 0  # the prose around the list is no hallucinated title


def test_parse_ranking_reads_a_refusal_as_a_refusal_not_a_title() -> None:
    parsed = parse_ranking("I'm sorry, but I can't recommend items without more information.", MOVIES)
    assert not parsed.ok and parsed.reason == "refused"


def test_a_shared_title_counts_for_the_target_whichever_of_its_items_it_is() -> None:
    from perrec_eval.tasks.llmrec.parsing import resolve

    index = TitleIndex([("X", "Witness and Detective"), ("Y", "Witness and Detective"), ("Z", "Heat")])
    parsed = parse_ranking('["Heat", "Witness and Detective"]', index)
    assert parsed.value["items"] == ["Z", ["X", "Y"]]
    assert resolve(parsed.value["items"], "Y") == ["Z", "Y"]
    assert resolve(parsed.value["items"], "X") == ["Z", "X"]
    assert resolve(parsed.value["items"], "Q") == ["Z", "X"]
