"""One process-wide switch for progress bars, and one bar per step of generation.

Every bar of the project comes from `bar`, shown unless the switch is off; `perrecbench --no-progress`
(or `disable()` from Python) turns off ours and the Hugging Face libraries' own (datasets, huggingface_hub,
transformers), whichever of them is imported, now or later. Nothing else takes a ``progress`` setting.

A run's steps each have one bar (`step`, the runner's); an engine moves it once per finished request through
`requests`, and a long generation shows the tokens generated so far on it (`tokens`), so a CPU model that
takes minutes is never a bar at 0/N, and no engine draws a second bar under the step's. An engine called
outside a step (profiles, a script) gets a bar of its own from the same `requests`.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tqdm.auto import tqdm

_ENABLED = [True]
# Read by those libraries when they are imported; the ones already imported are switched off directly.
_LIBRARY_VARIABLES = ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS")


def enabled() -> bool:
    """Whether progress bars are shown (on unless `disable` was called).

    >>> enabled()
    True
    """
    return _ENABLED[0]


def disable() -> None:
    """Hide every progress bar of this process, the libraries' included."""
    _ENABLED[0] = False
    for name in _LIBRARY_VARIABLES:
        os.environ[name] = "1"
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def enable() -> None:
    """Show progress bars again (ours; the libraries keep what `disable` told them)."""
    _ENABLED[0] = True


@contextmanager
def logging_between_bars() -> Iterator[None]:
    """For the block, log lines to the console go above the progress bars (`tqdm.write`) instead of into
    the middle of a bar's line, their secrets redacted."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    from perrec_eval.secrets import redact_logs

    with logging_redirect_tqdm(tqdm_class=tqdm):
        # tqdm's handler takes the console handler's formatter, or none where the root has no console
        # handler (an embedding application's, pytest's): it redacts either way
        redact_logs()
        yield


def bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar that follows the switch (``disable=True`` in `kwargs` still hides this one)."""
    kwargs["disable"] = kwargs.get("disable", False) or not enabled()
    return tqdm(iterable, **kwargs)


_STEPS: list[tqdm] = []  # the bar of the step being generated (innermost last)


@contextmanager
def step(bar: tqdm) -> Iterator[tqdm]:
    """Make `bar` the one that engines move for the block (`requests`, `tokens`)."""
    _STEPS.append(bar)
    try:
        yield bar
    finally:
        _STEPS.remove(bar)


class _StepShare:
    """An engine's view of the running step's bar: requests finished and tokens go there; closing it leaves
    the step's bar open."""

    def __init__(self, shared: tqdm) -> None:
        self.shared = shared

    def update(self, n: int = 1) -> None:
        self.shared.update(n)

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.shared.set_postfix_str(text, refresh=refresh)

    def close(self) -> None:
        """The step's bar stays: the runner closes it."""

    def __enter__(self) -> _StepShare:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def requests(total: int, desc: str) -> tqdm | _StepShare:
    """The bar an engine moves by one per finished request: the running step's when there is one, else a bar
    of its own (`total` requests, labelled `desc`)."""
    if _STEPS:
        return _StepShare(_STEPS[-1])
    return bar(total=total, desc=desc, unit="req")


def tokens(shown: tqdm | _StepShare, count: int) -> None:
    """Show `count` tokens generated so far on a bar (redrawn at tqdm's own pace).

    >>> with bar(total=2, disable=True) as b:
    ...     tokens(b, 1234)
    ...     b.postfix
    '1,234 tokens'
    """
    shown.set_postfix_str(f"{count:,} tokens", refresh=False)
    shown.update(0)  # redraws when tqdm's minimum interval has passed


class StepBar(tqdm):
    """A tqdm that draws nowhere and moves the running step's bar, for a library that takes a tqdm class
    and draws its own bar otherwise (vLLM's ``use_tqdm``): its requests count on the step's one bar."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["file"] = io.StringIO()
        super().__init__(*args, **kwargs)

    def update(self, n: float | None = 1) -> bool | None:
        if _STEPS and n:
            _STEPS[-1].update(n)
        return super().update(n)
