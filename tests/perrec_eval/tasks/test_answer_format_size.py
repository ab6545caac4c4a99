"""Every family's answer formats stay small enough to index (the hf engine's structured outputs).

outlines-core indexes a format's regex over the model's whole vocabulary: per automaton state, every token
that keeps the answer in the format. A state inside a JSON string accepts nearly every token, so a bounded
repetition such as ``{1,300}`` (300 states) times a 49k vocabulary took gigabytes for a 135M model. Here a
small vocabulary of single characters (every state's cost is then visible) must give at most
`PER_TOKEN` transitions per token: with a real vocabulary that is a few tens of megabytes.
"""

from __future__ import annotations

import re
import string

import pytest

from perrec_eval import registry

outlines_core = pytest.importorskip("outlines_core")

PER_TOKEN = 64
EXTRA_TOKENS = ("The", " the", '", "', "ab", "\\n")


def _vocabulary():
    tokens = {char: [i] for i, char in enumerate(string.printable)}
    tokens |= {token: [len(string.printable) + i] for i, token in enumerate(EXTRA_TOKENS)}
    return outlines_core.Vocabulary(10_000, tokens), len(tokens)


def _specs() -> list[tuple[str, str]]:
    """(family, format spec) for every protocol of every family (PerRecBench's listwise at 5 users)."""
    out = []
    for name in registry.names():
        task = registry.get(name)
        for protocol in task.protocols:
            spec = f"{protocol}:5" if protocol == "listwise" else protocol
            out.append((name, spec))
    return out


@pytest.mark.parametrize(("family", "spec"), _specs())
def test_answer_format_index_stays_small(family, spec):
    vocabulary, size = _vocabulary()
    transitions = outlines_core.Index(registry.get(family).answer_regex(spec), vocabulary).get_transitions()
    per_token = sum(len(moves) for moves in transitions.values()) / size
    assert per_token <= PER_TOKEN, f"{family} {spec}: {per_token:.0f} transitions per vocabulary token"


def test_answer_format_llmrec_list_takes_long_titles_up_to_ten():
    regex = registry.get("llmrec").answer_regex("direct")
    long_title = "A" * 400  # no length bound but the answer budget's
    assert re.fullmatch(regex, f'["{long_title}", "B \\"quoted\\""]')
    assert re.fullmatch(regex, "[" + ", ".join(['"T"'] * 10) + "]")
    assert not re.fullmatch(regex, "[" + ", ".join(['"T"'] * 11) + "]")
    assert not re.fullmatch(regex, '["line\nbreak"]')
