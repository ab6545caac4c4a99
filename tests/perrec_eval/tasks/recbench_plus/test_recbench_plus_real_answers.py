"""RecBench+'s reader on the answer shapes the released answers of seven models hold (RecAssistBench
`llm_results/`; the shapes are reproduced here with other titles, no released line is copied): refusals
recognised by what they do, prose wherever it sits, the prompt's header echoed, titles at a list's edge."""

from __future__ import annotations

import pytest

from perrec_eval.tasks.recbench_plus.parsing import split_answer


@pytest.mark.parametrize(
    "text",
    [
        "Sorry, I do not have any additional gardening books by the Hart family to recommend.",
        "I cannot make a recommendation, as that director has no other films.",
        "Helen Mirren did not star in Heat or in Alien.",
        "Jane Roe has not published any novels besides The Quiet Shore.",
        "I don't have information about other books by this author.",
        "No recommendations available, as Jane Roe did not write The Quiet Shore.",
        "There are currently no other travel books by Jane Roe.",
        "I’m sorry, but I couldn’t find any other films shot by that cinematographer.",  # curly apostrophes
        "Recommended books (separated by [SEP]): Unfortunately, there are no more books by Jane Roe.",
        "Jane Roe is not the author of The Quiet Shore. The actual author is John Doe.",
    ],
)
def test_a_refusal_is_read_as_no_items_not_one_title(text) -> None:
    parsed = split_answer(text)
    assert parsed.ok and parsed.value == [] and parsed.detail == "declined"


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("Heat [SEP] Alien [SEP] Fargo\n\nThese directors are known for their tense stories, sharp dialogue "
         "and memorable villains.", ["Heat", "Alien", "Fargo"]),
        ("Heat [SEP] Alien [SEP] Fargo [SEP] These films all share a dark tone and are well worth watching.",
         ["Heat", "Alien", "Fargo"]),
        ("Sorry, Jane Roe didn't work on Heat. However, here are some other films she shot: "
         "Mad Max: Fury Road [SEP] Alien", ["Mad Max: Fury Road", "Alien"]),
        ("Unfortunately, I couldn't find other books by Jane Roe. However, I can suggest some similar books "
         "that might interest you [SEP] Emma [SEP] Dune", ["Emma", "Dune"]),
        ("Jane Roe did not write Emma. However, you might enjoy: \"Dune\", \"Ulysses\" and \"Persuasion\".",
         ["Dune", "Ulysses", "Persuasion"]),
        ("Heat (1995) - a tense crime epic [SEP] Alien (1979) - horror in space",
         ["Heat (1995)", "Alien (1979)"]),
    ],
)  # fmt: skip
def test_prose_is_dropped_wherever_it_sits(text, titles) -> None:
    assert split_answer(text).value == titles


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ('Recommended books (separated by [SEP]): "Emma" by Jane Austen [SEP] "Dune" by Frank Herbert',
         ["Emma by Jane Austen", "Dune by Frank Herbert"]),
        ("Recommended books (separated by [SEP]): Emma [SEP]: Dune [SEP]: Ulysses",
         ["Emma", "Dune", "Ulysses"]),
        ("Recommended movies (separated by [SEP]):\nHeat [SEP] Alien", ["Heat", "Alien"]),
        ("Recommended movies: Heat [SEP] Alien", ["Heat", "Alien"]),
    ],
)  # fmt: skip
def test_the_prompts_own_answer_header_is_removed_wherever_it_is_echoed(text, titles) -> None:
    assert split_answer(text).value == titles


@pytest.mark.parametrize(
    "title",
    [
        "Great Expectations by Charles Dickens",
        "Great Balls of Fire! (1989)",
        "Absolutely Fabulous: The Movie (2016)",
        "I Think I Love My Wife (2007)",
        "I Can Do Bad All by Myself (2009)",
        "Hello, Dolly!",
        "Here's No Evil, Never Tell",
        "If You Want to Write: A Book about Art, Independence and Spirit",
    ],
)
def test_a_title_that_starts_like_chat_stays_a_title_at_either_edge(title) -> None:
    assert split_answer(f"{title} [SEP] Heat [SEP] Alien").value == [title, "Heat", "Alien"]
    assert split_answer(f"Heat [SEP] Alien [SEP] {title}").value == ["Heat", "Alien", title]


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ('"Casablanca" (1942) [SEP] "Heat" (1995)', ["Casablanca (1942)", "Heat (1995)"]),
        ('"Piranesi" by Susanna Clarke [SEP] "Emma" by Jane Austen', ["Piranesi by Susanna Clarke",
                                                                      "Emma by Jane Austen"]),
        ("'The Church in the Modern World' [SEP] 'Schindler's List'", ["The Church in the Modern World",
                                                                      "Schindler's List"]),
        ('"Zoey and Sassafras" series by Asia Citro [SEP] "Dune"', ["Zoey and Sassafras", "Dune"]),
    ],
)  # fmt: skip
def test_quotes_around_a_title_are_removed_in_pairs(text, titles) -> None:
    assert split_answer(text).value == titles


def test_an_answer_over_the_length_bound_fails_with_its_reason() -> None:
    parsed = split_answer("Heat [SEP] " * 5_000)
    assert not parsed.ok and parsed.reason == "too_long"


def test_an_echoed_history_is_no_answer() -> None:
    # SmolLM2-135M's most common free answer to the history prompt: the prompt's history line back
    parsed = split_answer("The user has read the following books: ['Love and Bride', 'Witness and Clue']")
    assert not parsed.ok and parsed.reason == "no_items"
    text = "The user has watched the following movies: ['Alien']\nQuery: crime films?\nHeat [SEP] Fargo"
    assert split_answer(text).value == ["Heat", "Fargo"]


def test_a_bold_label_before_a_title_is_not_the_title() -> None:
    text = "Here are films with these actors:\n\n**Michael Caine:** The Italian Job (1969) [SEP] Alfie (1966)"
    assert split_answer(text).value == ["The Italian Job (1969)", "Alfie (1966)"]
