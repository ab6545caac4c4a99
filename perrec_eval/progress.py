"""One process-wide switch for progress bars.

Every bar of the project comes from `bar`, shown unless the switch is off; `perrecbench --no-progress`
(or `disable()` from Python) turns off ours and the Hugging Face libraries' own (datasets, huggingface_hub,
transformers), whichever of them is imported, now or later. Nothing else takes a ``progress`` setting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from contextlib import AbstractContextManager
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


def logging_between_bars() -> AbstractContextManager[None]:
    """For the block, log lines to the console go above the progress bars (`tqdm.write`) instead of into
    the middle of a bar's line; their formatter (secrets redacted) is kept."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm(tqdm_class=tqdm)


def bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar that follows the switch (``disable=True`` in `kwargs` still hides this one)."""
    kwargs["disable"] = kwargs.get("disable", False) or not enabled()
    return tqdm(iterable, **kwargs)
