"""Progress while generating: one bar per step, moved per finished request, tokens so far on long steps."""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

import pytest

from perrec_eval import progress, runner
from perrec_eval.types import ChatRequest, Completion, GenParams

PARAMS = GenParams(temperature=0.0, max_tokens=8)


def _request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},))


class _Reporting:
    """An engine that moves its progress bar once per answered request, as the real engines do."""

    model, adapter = "m", None

    def __init__(self) -> None:
        self.seen: list[int] = []

    def generate(self, requests: Sequence[ChatRequest], params: GenParams, **_: object) -> list[Completion]:
        with progress.requests(len(requests), "engine") as bar:
            for _request in requests:
                bar.update(1)
                self.seen.append(bar.shared.n if isinstance(bar, progress._StepShare) else -1)
            progress.tokens(bar, 40 * len(requests))
        return [Completion(texts=("4",)) for _ in requests]


class _Silent(_Reporting):
    """An engine that reports nothing (a cache hit, the fake engine)."""

    def generate(self, requests: Sequence[ChatRequest], params: GenParams, **_: object) -> list[Completion]:
        return [Completion(texts=("4",)) for _ in requests]


@pytest.fixture
def bars(monkeypatch):
    """Every bar `progress.bar` makes, drawn into a buffer (progress on, as in a terminal)."""
    made = []
    make = progress.bar

    def record(*args, **kwargs):
        made.append(make(*args, **kwargs, file=io.StringIO(), mininterval=0))
        return made[-1]

    monkeypatch.setattr(progress, "bar", record)
    monkeypatch.setattr(progress, "_ENABLED", [True])
    return made


def _drive(engine, docs: int = 3):
    runners = {f"d{i}": runner.OneShot("rating") for i in range(docs)}
    ask = lambda doc, slot: _request(doc)  # noqa: E731
    read = lambda doc, slot, step, request, completion: (completion.texts[0], doc)  # noqa: E731
    return runner.drive(runners, ask, read, engine, PARAMS, desc="rating")


def test_an_engine_inside_a_step_moves_the_steps_bar_per_request_and_draws_none(bars):
    engine = _Reporting()
    _drive(engine)
    assert len(bars) == 1  # the step's; no engine bar under it
    assert engine.seen == [1, 2, 3]  # the step's bar moved as each request finished
    assert bars[0].n == bars[0].total == 3  # counted once, not again by the runner
    assert "120 tokens" in bars[0].fp.getvalue()


def test_the_runner_counts_what_an_engine_does_not_report(bars):
    _drive(_Silent(), docs=4)
    assert len(bars) == 1 and bars[0].n == bars[0].total == 4


def test_an_engine_outside_a_step_has_its_own_bar(bars):
    _Reporting().generate([_request("a"), _request("b")], PARAMS)
    assert len(bars) == 1 and bars[0].n == 2 and bars[0].desc == "engine"


def test_a_library_bar_moves_the_steps_bar_and_draws_nothing(bars, capsys):
    step_bar = progress.bar(total=5)
    with progress.step(step_bar):
        library_bar = progress.StepBar(total=5, desc="Processed prompts")  # what vLLM makes of use_tqdm
        library_bar.update(2)
        library_bar.postfix = "est. speed input: 1.00 toks/s"
        library_bar.update(3)
        library_bar.close()
    assert step_bar.n == 5
    assert "Processed prompts" not in capsys.readouterr().err + step_bar.fp.getvalue()


@pytest.mark.slow
def test_hf_engine_shows_tokens_generated_and_says_what_it_loads(tiny_model_dir, bars, caplog):
    from perrec_eval.engines import load_engine
    from perrec_eval.engines.hf import HFOptions

    with caplog.at_level(logging.INFO, logger="perrec_eval.engines.hf"):
        engine = load_engine("hf", str(tiny_model_dir), options=HFOptions(batch_size=2, device="cpu"))
    assert any(str(tiny_model_dir) in r.getMessage() and "loading" in r.getMessage() for r in caplog.records)
    step_bar = progress.bar(total=3)
    with progress.step(step_bar):
        engine.generate([_request("a"), _request("b c"), _request("d e f")], PARAMS)
    assert step_bar.n == 3 and len(bars) == 1
    shown = step_bar.fp.getvalue()
    assert "tokens" in shown and int(step_bar.postfix.split()[0].replace(",", "")) >= 3  # at least one a row
