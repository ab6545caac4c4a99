"""Every family's answer readers, timed on long hostile answers: each reads any answer in bounded time.

The readers (PerRecBench's three, LLMRec's rating, ranking and text readers, RecBench+'s list reader and both
its scorings, with their title matching against a catalogue of 4,000 titles) each get answers built to make
a backtracking pattern, a quadratic scan or a per-entry catalogue search blow up: runs of digits, spaces,
brackets, quotes, colons, markers, separators, 20,000 titles, nested lists, unclosed reasoning. The bound is
CPU time per answer (`time.process_time`, which other processes on a loaded machine do not add to), at a
ceiling 20 times the slowest reading measured: it catches a reader that turned quadratic (the slow inputs of
the last audit took 8 s to minutes), never a busy machine. The whole file runs in a few seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from perrec_eval.answers import MAX_ANSWER_CHARS, entries
from perrec_eval.tasks.llmrec.parsing import TitleIndex, parse_ranking, parse_rating
from perrec_eval.tasks.llmrec.text import parse_text
from perrec_eval.tasks.perrecbench.protocols import parse as perrecbench_parse
from perrec_eval.tasks.recbench_plus import released
from perrec_eval.tasks.recbench_plus.parsing import split_answer

CEILING_S = 3.0  # CPU seconds per answer: 20 times the slowest reading measured (0.14 s, 2 shared cores)
N = MAX_ANSWER_CHARS  # answers at the length bound (readers read them) …
LONG = 4 * MAX_ANSWER_CHARS  # … and four times over it (readers refuse them, in linear time)


def _hostile() -> dict[str, str]:
    titles = " [SEP] ".join(f"Movie {i}" for i in range(20_000))
    return {
        "digits": "1" * N,
        "digits-long": "1" * LONG,
        "labelled-spaces": "Rating:" + " " * N + "x",
        "spaces": "a" + " " * N + "b",
        "years": "(1999)" * (N // 6),
        "editions": "(" + "edition " * (N // 8),
        "brackets": "(a)" * (N // 3),
        "sep-titles": titles,
        "sep-titles-short": titles[: N - 10],
        "one-letter-lines": "\n".join("abcdefghij"[i % 10] for i in range(N // 2)),
        "json-list": json.dumps([f"t{i}" for i in range(N // 6)]),
        "nested": "[" * (N // 2) + "]" * (N // 2),
        "unclosed-think": "<think>" * (N // 7),
        "close-think": "</think>" * (N // 8),
        "markers": "1. " * (N // 3),
        "prose-lines": "Here are some movies you might like:\n" * (N // 38),
        "refusals": "I'm sorry, I cannot recommend that. " * (N // 36),
        "quotes": '"' * N,
        "colons": ": " * (N // 2),
        "lead-ins": "Sure! Here are some: " * (N // 21),
        "sentence-breaks": "Abc. D" * (N // 6),
        "stars": "★" * N,
        "table": "| a | b |\n" * (N // 10),
        "bold": "**" * (N // 2),
        "dashes": "Heat (1995) - " * (N // 14),
        "words": "Word " * (N // 5),
        "digits-in-words": "MLU196 " * (N // 7),
        "history-lines": '1. "Heat (1995)": 4 stars\n' * (N // 26),
        "quoted-titles": '"Heat" by Jane Roe, ' * (N // 20),
        "commas": "Heat, " * (N // 6),
    }


CATALOGUE = [(str(i), f"The Movie Number {i} of the Catalogue ({1950 + i % 60})") for i in range(4_000)]
INDEX = TitleIndex(CATALOGUE)
MOVIES = [released.Movie(i, title) for i, (_, title) in enumerate(CATALOGUE)]
QUERY = released.ReleasedQuery("0", "explicit", "q", ("Heat (1995)",), (1,), (("genre", "Crime"),), "u")
MATCHER, IDS = released.matcher(MOVIES), released.MovieIds(MOVIES)

READERS: dict[str, Callable[[str], object]] = {
    "answers.entries": entries,
    "answers.entries[SEP]": lambda text: entries(text, "[SEP]"),
    "recbench-plus split_answer": split_answer,
    "recbench-plus corrected": lambda text: released.corrected_scores(QUERY, text, MATCHER),
    "recbench-plus released": lambda text: released.released_scores(QUERY, text, IDS, k=1_000),
    "llmrec rating": lambda text: parse_rating(text, title="Heat (1995)", user="MLU196"),
    "llmrec ranking": lambda text: parse_ranking(text, INDEX),
    "llmrec text": parse_text,
    "perrecbench pointwise": lambda text: perrecbench_parse("pointwise", text),
    "perrecbench pairwise": lambda text: perrecbench_parse("pairwise", text),
    "perrecbench listwise": lambda text: perrecbench_parse("listwise", text, 4),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_reads_every_hostile_answer_in_bounded_time(reader) -> None:
    read = READERS[reader]
    slow = {}
    for name, text in _hostile().items():
        start = time.process_time()
        read(text)
        spent = time.process_time() - start
        if spent > CEILING_S:
            slow[name] = round(spent, 2)
    assert not slow, f"{reader} took more than {CEILING_S} s of CPU on: {slow}"
