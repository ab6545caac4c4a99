"""Issue 27: the Hugging Face libraries' warnings (the Hub's retries) reach the console once, through the
command's own log format, whether the library was imported before or after the CLI set logging up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The CLI's logging setup, then what the Hub logs while it retries an unreachable host (its words), and a
# datasets warning; huggingface_hub is imported before the setup, datasets after it (both paths).
SCRIPT = """
import logging
import huggingface_hub.utils.logging
from perrec_eval import cli
cli.setup_logging(verbose=False)
huggingface_hub.utils.logging.get_logger("huggingface_hub.utils._http").warning(
    "'[Errno -2] Name or service not known' thrown while requesting HEAD https://huggingface.co/x"
)
huggingface_hub.utils.logging.get_logger("huggingface_hub.utils._http").warning("Retrying in 1s [Retry 1/5].")
import datasets.utils.logging
datasets.utils.logging.get_logger("datasets.load").warning("Using the latest cached version of x")
logging.getLogger("huggingface_hub.utils._http").info("below the library's level: not shown")
"""


def test_library_logs_hub_retry_warnings_are_printed_once_in_our_format() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HF_HUB_VERBOSITY", None)
    env.pop("DATASETS_VERBOSITY", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    lines = done.stderr.splitlines()
    for logger, text in (
        ("huggingface_hub.utils._http", "thrown while requesting HEAD"),
        ("huggingface_hub.utils._http", "Retrying in 1s [Retry 1/5]."),
        ("datasets.load", "Using the latest cached version of x"),
    ):
        found = [line for line in lines if text in line]
        assert len(found) == 1, (text, done.stderr)
        assert f" WARNING {logger}: " in found[0], found  # the command's format (time, level, logger)
    assert "not shown" not in done.stderr
