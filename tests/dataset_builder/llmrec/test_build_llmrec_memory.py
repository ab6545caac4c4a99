"""The LLMRec build's memory follows a batch, not the build: a source with ~17× the reviews is built within a
fixed margin of the peak memory of the same command on the small source.

Held as Python rows until the end (as the build once did), every row with its history (a dict per item,
here up to 100 items) and its 50 candidates costs a few KB: 426 MB more here, measured on the code before
the streamed write. The streamed build holds a chunk of users and the rows waiting for their row group
(`stream.ROW_GROUP_BYTES` per file), whatever the size of the source: 140 MB more here.

The peak is measured by the child itself (its peak RSS, `ru_maxrss`), against the same command on the small
source in the same environment (see `tests/perrec_eval/test_memory_cap.py` for why not an address-space cap).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataset_builder.synth import write_synthetic
from tests.peak_memory import cli_peak_mb

MARGIN_MB = 250  # what the large source may cost beyond the small one's peak


def _peak_mb(source: Path, out: Path) -> tuple[float, dict]:
    """Peak RSS (MB) of `build --task llmrec` on `source` in a child process, and its manifest."""
    report = out.with_suffix(".json")
    argv = ["build", "--task", "llmrec", "--source", str(source), "--out", str(out), "--domains", "Books"]
    argv += ["--history-length", "100", "--negatives", "49", "--memory-limit", "256MB", "--threads", "1"]
    argv.append("--no-progress")
    return cli_peak_mb(argv, report), json.loads((out / "manifest.json").read_text())


@pytest.mark.slow
def test_build_llmrec_memory_does_not_grow_with_the_source(tmp_path):
    write_synthetic(tmp_path / "small", reviews_per_domain=6_000, domains="Books", seed=1)
    write_synthetic(tmp_path / "large", reviews_per_domain=100_000, domains="Books", seed=1)
    base, _ = _peak_mb(tmp_path / "small", tmp_path / "small-out")
    peak, recorded = _peak_mb(tmp_path / "large", tmp_path / "large-out")
    rows = sum(n for splits in recorded["counts"].values() for n in splits.values())
    print(f"rows {rows:,}: peak {peak:.0f} MB, small source {base:.0f} MB")
    assert rows > 200_000  # as Python rows with their histories and candidates: ~0.4 GB more
    assert peak - base < MARGIN_MB, f"peak {peak:.0f} MB against {base:.0f} MB for the small source"
