"""Peak memory of one `perrecbench` command, measured by the command's own child process (its peak RSS,
``ru_maxrss``), for the tests that compare a command's peak on a small and a large input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import perrec_eval

_CHILD = """
import json, resource, sys
from perrec_eval.cli import main
code = main(sys.argv[2:])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
json.dump({"code": code, "peak_kb": peak}, open(sys.argv[1], "w"))
"""


def cli_peak_mb(argv: list[str], report: Path) -> float:
    """Run `perrecbench ARGV` in a child process of the checkout under test, assert it succeeded, and return
    its peak RSS in MB (`report`: where the child writes its exit code and peak)."""
    code = str(Path(perrec_eval.__file__).resolve().parents[1])  # the checkout under test
    env = {**os.environ, "PYTHONPATH": code, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    child = subprocess.run([sys.executable, "-c", _CHILD, str(report), *argv], env=env, capture_output=True)
    assert child.returncode == 0 and report.is_file(), child.stderr.decode()[-2000:]
    result = json.loads(report.read_text())
    assert result["code"] == 0, child.stderr.decode()[-2000:]
    return result["peak_kb"] / 1024
