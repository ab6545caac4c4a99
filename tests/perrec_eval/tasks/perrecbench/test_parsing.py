"""Parsing tables: real-looking replies (Llama/Qwen/Mistral/Gemma chatter, markdown, think blocks, CoT)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perrec_eval.tasks.perrecbench.parsing import REASONS, ParseResult
from perrec_eval.tasks.perrecbench.protocols import get, majority, parse


def format_answer(method, answer, n_users=None):
    return get(method).format_answer(answer, n_users)

# ---------------------------------------------------------------- pointwise
POINTWISE_OK = [
    ('{"predicted_rating": 4.0}', 4.0),
    ('{"predicted_rating": 4}', 4.0),
    ('{"predicted_rating": 1}', 1.0),
    ('{"predicted_rating": 5.0}', 5.0),
    ('```json\n{\n  "predicted_rating": 3.5\n}\n```', 3.5),
    ('```\n{"predicted_rating": 4.0}\n```\n', 4.0),
    (
        "Based on the user's history of rating kitchen appliances highly, especially the coffee grinder, "
        'I predict:\n\n{"predicted_rating": 4.5}',
        4.5,
    ),
    (  # Qwen3-style: reasoning first, the opening tag in the reply
        '<think>\nThe user rated percolators 2.0. Something like {"predicted_rating": 2} fits...\n'
        'Hmm, but the profile says they love coffee.\n</think>\n\n{"predicted_rating": 3}',
        3.0,
    ),
    (  # DeepSeek-R1-style: the opening tag was in the chat template, only the closing one comes back
        'Okay, the user likes thrillers, the average is 4.2 ... {"predicted_rating": 1}\n</think>\n\n'
        '{"predicted_rating": 5}',
        5.0,
    ),
    ('{"predicted_rating": "4.5"}', 4.5),
    ('{"predicted_rating": "4.5/5"}', 4.5),
    ('{"predicted_rating": 4.5/5}', 4.5),
    ("{'predicted_rating': 4.2}", 4.2),
    ('{"predicted_rating": 4.0,}', 4.0),
    (  # CoT: several objects, the last one is the answer
        "Let's think step by step.\n1. The user's average rating is 3.9 and most common rating is 5.0.\n"
        '2. A rating such as {"predicted_rating": 5} would be too high given the 2.0 for the grinder.\n'
        'Final answer: {"predicted_rating": 4.2}',
        4.2,
    ),
    ("4", 4.0),
    ("**4.5**", 4.5),
    ("Answer: 3", 3.0),
    ("Rating: 4/5", 4.0),
    (" 5.0\n", 5.0),
    ("Predicted rating: 2.5 out of 5.", 2.5),
    ('{"predicted_rating": 4.5', 4.5),  # cut off by max_tokens
    ('{"predicted_rating": 3.5, "explanation": "The user\'s reviews of {similar} items are mixed', 3.5),
    ('{"Predicted Rating": 2.5}', 2.5),
    ('{"prediction": {"predicted_rating": 3.0, "confidence": "high"}}', 3.0),
    ('{"reasoning": "The user loves Kristin Hannah novels.", "predicted_rating": 5}', 5.0),
    (  # Mistral-style: answer, then an explanation with other numbers
        ' {"predicted_rating": 4.0}\n\nExplanation: The user has consistently rated Kristin Hannah\'s '
        "books 5.0, "
        "while giving 2.0 to unrelated items.",
        4.0,
    ),
    ('{"rating": 4}', 4.0),  # one key containing "rating": read as the released code did
    ('[{"predicted_rating": 2}]', 2.0),
    ('{ unbalanced prose brace, then {"predicted_rating": 3} and {"note": "}"}', 3.0),
    ('{"predicted_rating": 2, "why": "likes {curly} titles"} {"predicted_rating": 4', 4.0),
]


@pytest.mark.parametrize(("text", "value"), POINTWISE_OK)
def test_parsing_pointwise_reads_rating(text, value):
    result = parse("pointwise", text)
    assert result.ok, result
    assert result.value == value and isinstance(result.value, float)
    assert result.reason is None


POINTWISE_FAIL = [
    ("", "empty"),
    ("   \n", "empty"),
    (None, "empty"),
    ("<think>ok</think>", "empty"),
    ("<think>\nThe user has an average of 3.9 and the query item is a coffee maker, so", "unclosed_think"),
    ('{"predicted_rating": 7}', "out_of_range"),
    ('{"predicted_rating": 0}', "out_of_range"),
    ('{"predicted_rating": -1.5}', "out_of_range"),
    ('{"predicted_rating": 5.01}', "out_of_range"),
    ('{"predicted_rating": 1' + "0" * 400 + "}", "out_of_range"),
    ("Answer: 11", "out_of_range"),
    ('{"predicted_rating": NaN}', "not_finite"),
    ('{"predicted_rating": "Infinity"}', "not_finite"),
    ('{"predicted_rating": "high"}', "not_number"),
    ('{"predicted_rating": "4 stars"}', "not_number"),
    ('{"predicted_rating": null}', "not_number"),
    ('{"predicted_rating": true}', "not_number"),
    ('{"predicted_rating": [4, 5]}', "not_number"),
    ("I think the user would like this item a lot.", "no_json"),
    ("The user would rate it 4 out of 5 stars because they love coffee.", "no_json"),
    ('{"predicted_rating": <rating>}', "no_json"),
    ('{"user_avg_rating": 3.9, "item_rating": 4.2}', "missing_key"),
    ('{"score": 4}', "missing_key"),
]


@pytest.mark.parametrize(("text", "reason"), POINTWISE_FAIL)
def test_parsing_pointwise_failure_has_reason(text, reason):
    result = parse("pointwise", text)
    assert not result.ok and result.value is None
    assert result.reason == reason, result


def test_parsing_pointwise_never_clips():
    assert parse("pointwise", '{"predicted_rating": 5.5}').detail == "rating 5.5 outside [1, 5]"


# ---------------------------------------------------------------- pairwise
PAIRWISE_OK = [
    ("[User A]", "A"),
    ("[User B]", "B"),
    ("User A", "A"),
    ("**[User B]**", "B"),
    ("[User B]\n", "B"),
    ("[User A].", "A"),
    ('"[User B]"', "B"),
    ("[UserA]", "A"),
    ("A", "A"),
    ("B.", "B"),
    ("Answer: A", "A"),
    (
        "[User B]\n\nUser B has a history of rating coffee-related products highly, which suggests "
        "a preference.",
        "B",
    ),
    (  # answer first, then an explanation naming both (the lone-label line decides)
        "[User A]\n\nReason: User A rates kitchen items highly, while User B gave the percolator 2.0.",
        "A",
    ),
    (
        "User A has rated coffee makers 2.0 while User B rated a percolator 5.0.\n\n"
        "Final Answer: **[User B]**",
        "B",
    ),
    ('{"answer": "[User A]"}', "A"),
    ("The answer is User B.", "B"),
    ("Answer: [User A] (User B has rated similar items lower)", "A"),
    ("<think>\nUser A likes tea. User B likes coffee. So User B.\n</think>\n\n[User B]", "B"),
    ("User A likes tea. User B likes coffee.\n</think>\n[User A]", "A"),
    (  # CoT ending on a lone label
        "Let's compare. User A's history shows 5.0 ratings for novels by Kristin Hannah, while User B mostly "
        "rates thrillers.\nTherefore, User A is more likely to prefer the query item.\n\n[User A]",
        "A",
    ),
    (  # CoT whose last line names one user
        "User A rated similar items 2.0; User B gave 5.0.\n"
        "So User B is more likely to prefer the query item.",
        "B",
    ),
    (  # last line names both, only one in the requested bracket form
        "Based on the histories, [User B] is more likely to prefer the query item than User A.",
        "B",
    ),
    ("```\n[User A]\n```", "A"),
    ('My final answer in "[User A]" or "[User B]" format is: [User B]', "B"),  # instruction quoted back
]


@pytest.mark.parametrize(("text", "value"), PAIRWISE_OK)
def test_parsing_pairwise_reads_label(text, value):
    result = parse("pairwise", text)
    assert result.ok, result
    assert result.value == value


PAIRWISE_FAIL = [
    ("", "empty"),
    ("I cannot determine which user would prefer it.", "no_label"),
    ("Both users might like it.", "no_label"),
    ("User C", "no_label"),
    ("the user a bit more", "no_label"),  # lowercase "a" is an article, not a label
    ("[User A] or [User B]", "ambiguous"),
    ("Answer: [User A] or [User B]", "ambiguous"),
    ("User A prefers it less than User B.", "ambiguous"),
    ("[User A]\n[User B]", "ambiguous"),
    ("[User A] is more likely than [User B]", "ambiguous"),
    ("<think>\nUser A seems to like coffee, but User B", "unclosed_think"),
    ("User A: The Hobbit (5.0)\nUser B: Dune (2.0)", "no_choice"),  # describes both, picks neither
    ("Here are the users.\n- User A: likes tea\n- **User B**: likes coffee", "no_choice"),
]


@pytest.mark.parametrize(("text", "reason"), PAIRWISE_FAIL)
def test_parsing_pairwise_failure_has_reason(text, reason):
    result = parse("pairwise", text)
    assert not result.ok and result.value is None
    assert result.reason == reason, result


def test_parsing_pairwise_listing_then_a_choice_reads_the_choice():
    text = "User A: likes tea\nUser B: likes coffee\nSo User B is more likely to prefer it."
    assert parse("pairwise", text).value == "B"


def test_parsing_pairwise_both_in_final_line_is_ambiguous_not_a_guess():
    text = "User A likes coffee.\nFinal pick: User B, though User A is close."
    result = parse("pairwise", text)
    assert result.reason == "ambiguous"
    assert "Final pick" in result.detail


# ---------------------------------------------------------------- listwise
LISTWISE_OK = [
    ('{"predicted_ranking": [2, 1, 3]}', 3, [2, 1, 3]),
    ('```json\n{"predicted_ranking": [2, 1]}\n```', 2, [2, 1]),
    ('{"predicted_ranking": ["2", "1"]}', 2, [2, 1]),
    ('{"predicted_ranking": ["User3", "User1", "User2"]}', 3, [3, 1, 2]),
    ("{'predicted_ranking': [1, 2, 3, 4],}", 4, [1, 2, 3, 4]),
    ('{"predicted_ranking": [2.0, 1.0]}', 2, [2, 1]),
    (
        "Let's think step by step.\nUser1: predicted 4.5, average 3.9, relative +0.6.\nUser2: predicted 3.0, "
        'average 4.2, relative -1.2.\nUser3: relative +1.0.\n{"predicted_ranking": [1, 2, 3]} would ignore '
        'User3.\nFinal: {"predicted_ranking": [3, 1, 2]}',
        3,
        [3, 1, 2],
    ),
    ('<think>maybe [1, 2]</think>{"predicted_ranking": [2, 1]}', 2, [2, 1]),
    ('{"predicted_ranking": [4, 2, 1, 3]', 4, [4, 2, 1, 3]),  # cut off
    ('{"predicted_ranking": [1, 2]}\nRevised: {"predicted_ranking": [2, 1]', 2, [2, 1]),
    ("[3, 1, 2]", 3, [3, 1, 2]),
    ("Ranking: [2, 1]", 2, [2, 1]),
    ("**Answer:** [2, 1, 3]", 3, [2, 1, 3]),
    ('{"ranking": [2, 1]}', 2, [2, 1]),
    ('{"predicted_ranking": "[2, 1, 3]"}', 3, [2, 1, 3]),
    (
        "Here is the ranking based on the users' preferences:\n\n"
        '{"predicted_ranking": [4, 1, 3, 2]}\n\nUser4 has consistently rated coffee makers 5.0, '
        "while User2 rated them [1, 2] stars.",
        4,
        [4, 1, 3, 2],
    ),
]


@pytest.mark.parametrize(("text", "n_users", "value"), LISTWISE_OK)
def test_parsing_listwise_reads_ranking(text, n_users, value):
    result = parse("listwise", text, n_users=n_users)
    assert result.ok, result
    assert result.value == value and all(type(i) is int for i in result.value)


LISTWISE_FAIL = [
    ('{"predicted_ranking": [1, 1, 3]}', 3, "not_permutation"),  # the paper's check let this pass
    ('{"predicted_ranking": [1, 2]}', 3, "not_permutation"),
    ('{"predicted_ranking": [1, 2, 4]}', 3, "not_permutation"),
    ('{"predicted_ranking": [0, 1, 2]}', 3, "not_permutation"),
    ('{"predicted_ranking": [1, 2, 3, 4]}', 3, "not_permutation"),
    ('{"predicted_ranking": []}', 2, "not_permutation"),
    ('{"predicted_ranking": 2}', 2, "not_list"),
    ('{"predicted_ranking": ["User A", "User B"]}', 2, "not_integer"),
    ('{"predicted_ranking": [1.5, 2]}', 2, "not_integer"),
    ('{"predicted_ranking": [true, false]}', 2, "not_integer"),
    ("User2 is most likely to prefer the item, followed by User1.", 2, "no_json"),
    ("The users' ratings were [5, 4] and [2, 1].", 2, "no_json"),
    ('{"reason": "User 2 likes it"}', 2, "missing_key"),
    ("", 2, "empty"),
    ("<think>\nUser1 has a higher relative rating", 2, "unclosed_think"),
]


@pytest.mark.parametrize(("text", "n_users", "reason"), LISTWISE_FAIL)
def test_parsing_listwise_failure_has_reason(text, n_users, reason):
    result = parse("listwise", text, n_users=n_users)
    assert not result.ok and result.value is None
    assert result.reason == reason, result


def test_parsing_listwise_zero_based_gets_a_hint_but_no_repair():
    result = parse("listwise", '{"predicted_ranking": [1, 0, 2]}', n_users=3)
    assert result.reason == "not_permutation" and "0-based" in result.detail


def test_parsing_listwise_needs_n_users():
    with pytest.raises(ValueError, match="n_users"):
        parse("listwise", '{"predicted_ranking": [1, 2]}')
    with pytest.raises(ValueError, match="n_users"):
        parse("listwise", '{"predicted_ranking": [1, 2]}', n_users=0)


def test_parsing_unknown_method_raises():
    with pytest.raises(ValueError, match="pointwise"):
        parse("groupwise", "[User A]")


# ---------------------------------------------------------------- result contract and round trips
def test_parsing_every_failure_reason_is_documented():
    for table, method in ((POINTWISE_FAIL, "pointwise"), (PAIRWISE_FAIL, "pairwise")):
        for text, reason in table:
            assert reason in REASONS and parse(method, text).reason in REASONS


def test_parsing_result_rejects_inconsistent_states():
    with pytest.raises(ValueError):
        ParseResult(ok=True, value=None)
    with pytest.raises(ValueError):
        ParseResult(ok=False, reason="weird")
    with pytest.raises(ValueError):
        ParseResult(ok=False, value=3.0, reason="out_of_range")


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300), n_users=st.integers(min_value=1, max_value=5))
def test_parsing_never_raises_on_arbitrary_text(text, n_users):
    for method in ("pointwise", "pairwise", "listwise"):
        result = parse(method, text, n_users=n_users)
        assert isinstance(result, ParseResult)
        assert result.ok or result.reason in REASONS


@settings(max_examples=60, deadline=None)
@given(
    ranking=st.integers(min_value=2, max_value=5).flatmap(lambda n: st.permutations(list(range(1, n + 1))))
)
def test_parsing_listwise_round_trips_the_demonstration_format(ranking):
    text = format_answer("listwise", ranking)
    assert parse("listwise", text, n_users=len(ranking)).value == list(ranking)


@pytest.mark.parametrize("rating", [1, 1.5, 2.0, 3, 4.5, 5])
def test_parsing_pointwise_round_trips_the_demonstration_format(rating):
    assert parse("pointwise", format_answer("pointwise", rating)).value == float(rating)


@pytest.mark.parametrize("label", ["A", "B"])
def test_parsing_pairwise_round_trips_the_demonstration_format(label):
    assert parse("pairwise", format_answer("pairwise", label)).value == label


# ---------------------------------------------------------------- majority (self-consistency)
def test_parsing_majority_pairwise_mode():
    assert majority("pairwise", ["A", "B", "B"]) == "B"


def test_parsing_majority_tie_goes_to_first_seen():
    assert majority("pairwise", ["A", "B"]) == "A"
    assert majority("pairwise", ["B", "A"]) == "B"
    assert majority("listwise", [[2, 1], [1, 2]]) == [2, 1]
    assert majority("pointwise", [4.0, 5.0, 5.0, 4.0], how="mode") == 4.0


def test_parsing_majority_listwise_returns_a_list():
    value = majority("listwise", [[1, 2, 3], [2, 1, 3], [2, 1, 3]])
    assert value == [2, 1, 3] and isinstance(value, list)


def test_parsing_majority_pairwise_ignores_the_pointwise_aggregate():
    assert majority("pairwise", ["A", "B", "B"], how="median") == "B"


@pytest.mark.parametrize(
    ("how", "ratings", "value"),
    [
        ("mean", [4.0, 5.0, 3.0], 4.0),
        ("mean", [4.0, 5.0], 4.5),
        ("median", [1.0, 2.0, 5.0], 2.0),
        ("median", [1.0, 2.0, 4.0, 5.0], 3.0),
        ("mode", [3.0, 5.0, 5.0], 5.0),
    ],
)
def test_parsing_majority_pointwise_aggregates(how, ratings, value):
    result = majority("pointwise", ratings, how=how)
    assert result == value and isinstance(result, float)


def test_parsing_majority_of_parsed_samples():
    texts = ["[User B]", "I cannot tell.", "**[User A]**", "Answer: [User B]"]
    results = [parse("pairwise", t) for t in texts]
    assert majority("pairwise", [r.value for r in results if r.ok]) == "B"


def test_parsing_majority_single_value_passes_through():
    assert majority("listwise", [[3, 1, 2]]) == [3, 1, 2]
    assert majority("pointwise", [2.0], how="median") == 2.0


def test_parsing_majority_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        majority("pairwise", [])
    with pytest.raises(ValueError, match="mean, median or mode"):
        majority("pointwise", [4.0], how="max")
    with pytest.raises(TypeError, match="parsed values"):
        majority("pairwise", [ParseResult(ok=True, value="A")])
