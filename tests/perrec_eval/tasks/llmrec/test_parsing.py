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
def test_parse_rating_reads_the_first_number_and_fails_outside_one_to_five(text, value, reason) -> None:
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
    # "Red Soap" lacks "The": ratio 88 < 90, unmatched; "Blue Soap Bars" is fuzzy; the repeat is dropped
    assert parsed.value == {"items": ["B2"], "fuzzy": 1, "unmatched": 2, "duplicates": 1}


@pytest.mark.parametrize(("text", "reason"), [("", "no_list"), ('["Purple Shampoo"]', "no_item")])
def test_parse_ranking_fails_when_nothing_names_an_item(text, reason) -> None:
    parsed = parse_ranking(text, INDEX)
    assert not parsed.ok and parsed.reason == reason


def test_title_index_gives_a_shared_title_to_its_first_item() -> None:
    index = TitleIndex([("X", "Same"), ("Y", "same ")])
    assert index.find("SAME") == ("X", False)
