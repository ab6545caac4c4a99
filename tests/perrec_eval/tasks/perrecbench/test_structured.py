"""Structured outputs: the answer formats, their regexes and schemas, and how a run carries them."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from perrec_eval.cache import key_of
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench import protocols, structured
from perrec_eval.tasks.perrecbench.config import EvalConfig, token_budgets
from perrec_eval.types import ChatRequest, GenParams

REQUEST = ChatRequest(messages=({"role": "user", "content": "hi"},))


def _in_format(spec: str, text: str) -> bool:
    return re.fullmatch(structured.answer_regex(spec), text) is not None


@pytest.mark.parametrize("n_users", [2, 3, 4, 5])
def test_structured_listwise_accepts_exactly_the_permutations(n_users):
    spec = structured.answer_format("listwise", n_users)
    users = range(1, n_users + 1)
    candidates = itertools.product(users, repeat=n_users) if n_users <= 4 else itertools.permutations(users)
    for ranking in candidates:
        text = json.dumps({"predicted_ranking": list(ranking)})
        assert _in_format(spec, text) == (sorted(ranking) == list(users)), text
        if _in_format(spec, text):
            assert protocols.parse("listwise", text, n_users=n_users).value == list(ranking)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('{"predicted_rating": 1}', True),
        ('{"predicted_rating": 4.5}', True),
        ('{"predicted_rating": 5.0}', True),
        ('{"predicted_rating": 5.5}', False),
        ('{"predicted_rating": 0}', False),
        ('{"predicted_rating": 4.25}', False),
        ("4", False),
    ],
)
def test_structured_pointwise_is_a_rating_in_range(text, ok):
    assert _in_format("pointwise", text) == ok
    if ok:
        assert protocols.parse("pointwise", text).ok


def test_structured_pairwise_is_one_label():
    assert [_in_format("pairwise", t) for t in ("[User A]", "[User B]", "User A", "[User C]")] == [
        True,
        True,
        False,
        False,
    ]


def test_structured_cot_allows_reasoning_then_the_answer():
    spec = structured.answer_format("pairwise", 2, cot=True)
    assert _in_format(spec, "User A rates tea 5.0, User B 2.0.\nSo:\n[User A]")
    assert not _in_format(spec, "User A rates tea 5.0; no answer")


def test_structured_rejects_unknown_formats():
    for spec in ("listwise", "pointwise:3", "listwise:6", "pairwise+json", "ranking"):
        with pytest.raises(ValueError):
            structured.answer_regex(spec)


def test_structured_json_schema_only_where_a_schema_can_say_it():
    schema = structured.json_schema("listwise:3")
    assert schema["properties"]["predicted_ranking"]["minItems"] == 3
    assert structured.json_schema("pairwise") is None and structured.json_schema("pointwise+cot") is None


def test_structured_regex_is_plain_python_regex():
    for spec in ("pointwise", "pairwise", "listwise:4", "listwise:4+cot"):
        re.compile(structured.answer_regex(spec))


def test_cache_key_of_default_params_is_unchanged():
    # The key of an unconstrained request with the released budgets is what it was before these options.
    params = EvalConfig(engine="fake", model="m", data="d", out="o").params("pairwise")
    legacy = {"temperature": 0.1, "top_p": 1.0, "max_tokens": 512, "n": 1, "seed": 0}
    assert params.as_dict() == legacy
    assert key_of("hf", "m", None, params, REQUEST) == key_of("hf", "m", None, GenParams(**legacy), REQUEST)


def test_cache_key_changes_with_the_format_and_the_budget():
    base = GenParams()
    keys = {
        key_of("hf", "m", None, params, REQUEST)
        for params in (base, GenParams(max_tokens=16), GenParams(answer_format="pointwise"))
    }
    assert len(keys) == 3


def test_config_params_carry_the_level_format_and_budgets():
    config = EvalConfig(
        engine="fake",
        model="m",
        data="d",
        out="o",
        structured_outputs=True,
        cot=True,
        max_new_tokens=("listwise=64", "pairwise=8"),
    )
    assert config.params("listwise", "hard").answer_format == "listwise:4+cot"
    assert config.params("pairwise", "hard").answer_format == "pairwise+cot"
    assert config.params("listwise", "hard").max_tokens == 64
    assert config.params("pointwise").max_tokens == 800
    assert config.profile_params().max_tokens == 512


@pytest.mark.parametrize("spec", [("0",), ("pointwise=x",), ("ranking=5",), ("pointwise=-1",)])
def test_config_token_budgets_reject_bad_values(spec):
    with pytest.raises(ConfigError, match="--max-new-tokens"):
        token_budgets(spec)


def test_config_token_budgets_one_value_sets_every_budget():
    assert set(token_budgets(("48",)).values()) == {48}
