"""The commands' console log, set up once for every entry point (`perrecbench`, and `sft train` under
accelerate): one line per record, secrets redacted, each library's line printed once."""

from __future__ import annotations

import logging

from perrec_eval.secrets import redact_logs

# Libraries that give their root logger a console handler of its own when imported, and also propagate to
# the root's: each of their lines would print twice (issue 27: the Hub's retry warnings). transformers
# does not propagate (its lines print once, in its format).
_OWN_CONSOLE = ("huggingface_hub", "datasets")


class _ThroughRoot(logging.Logger):
    """A library's root logger that keeps no console handler of its own: its records print once, through
    the root's handler (our format, secrets redacted, above the progress bars)."""

    def addHandler(self, hdlr: logging.Handler) -> None:  # noqa: N802 (logging's name)
        if type(hdlr) is not logging.StreamHandler:  # a file or other handler someone asked for stays
            super().addHandler(hdlr)


def setup_logging(*, verbose: bool) -> None:
    """The commands' console log: one line per record with time, level and logger, secrets redacted; the
    libraries of `_OWN_CONSOLE` log through it only, whether they are imported before or after."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    redact_logs()
    for name in _OWN_CONSOLE:
        library = logging.getLogger(name)
        library.__class__ = _ThroughRoot  # later handlers (an import after this) are refused
        for handler in [h for h in library.handlers if type(h) is logging.StreamHandler]:
            library.removeHandler(handler)  # those of an import before this
