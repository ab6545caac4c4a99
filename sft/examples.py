"""An examples folder of `perrecbench sft data`, whatever family wrote it: what `sft train` reads.

Every examples folder is a `datasets` folder: ``train-<sha12>.parquet`` (named by a hash of its content,
PITFALLS 1) with the conversational prompt-completion columns TRL's `SFTTrainer` reads (``prompt``: system +
user messages, ``completion``: the assistant answer) and the family's provenance columns (``format``: the
request protocol that asked), a card (``README.md`` with its ``configs:``) and ``sft_data.json``, its facts.
Every ``sft_data.json`` holds ``format`` (a protocol of the family, or mixed), ``examples``,
``examples_per_format``, ``answers`` (per format, how often each answer occurs), ``length_unit``,
``lengths`` (per format: min / mean / median / p95 / max), ``total_length`` and ``source`` (``data``,
``split``, ``dataset_fingerprint``); a family other than the default one adds ``task`` (its name) and
``docs`` (the train docs the examples came from).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from perrec_eval import fileio, outputs
from perrec_eval.errors import ConfigError
from perrec_eval.types import Message
from sft.outdir import is_empty, refuse_overlap

INFO_FILE = "sft_data.json"


def summary(values: Sequence[int]) -> dict[str, float | int]:
    """min / mean / median / p95 / max of lengths.

    >>> summary([1, 2, 3, 10])
    {'min': 1, 'mean': 4.0, 'median': 2.5, 'p95': 10, 'max': 10}
    """
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "min": ordered[0],
        "mean": round(statistics.fmean(ordered), 1),
        "median": statistics.median(ordered),
        "p95": p95,
        "max": ordered[-1],
    }



def token_ids(tokenizer: Any, messages: Sequence[Message]) -> list[int]:
    """Token ids of a whole conversation through the tokenizer's chat template (what training sees)."""
    text = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]



def content_name(rows: Sequence[Mapping[str, Any]]) -> str:
    """``train-<sha12>.parquet``: the data file named by a hash of its rows (PITFALLS 1).

    >>> content_name([{"a": 1}]) == content_name([{"a": 1}]) != content_name([{"a": 2}])
    True
    """
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return f"train-{digest.hexdigest()[:12]}.parquet"



def check_out(out: str | Path, inputs: Mapping[str, str | None] | None = None) -> Path:
    """Refuse an `out` that overlaps an input or holds files `perrecbench sft data` did not write; return
    it resolved (`perrec_eval.outputs`).

    `out` is replaced whole, so a folder of something else (a benchmark, a dataset with its own
    ``train-*.parquet`` and card), or a file added beside an earlier examples folder, would be lost.

    Raises:
        ConfigError: `out` overlaps an input, or is a non-empty folder without ``sft_data.json``.
        DataError: an earlier examples folder holds files its `sft data` did not write.
    """
    out = outputs.target(out)
    refuse_overlap(out, dict(inputs or {}))
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: sft data writes a folder; choose another --out")
    if not is_empty(out) and not (out / INFO_FILE).is_file():
        raise ConfigError(
            f"--out {out} holds files `perrecbench sft data` did not write (no {INFO_FILE}): they would be "
            "replaced; choose another --out"
        )
    outputs.refuse_foreign(out, _data_files(out), command="sft data")
    return out


def _data_files(out: Path) -> Callable[[PurePosixPath], bool]:
    """Whether a path in `out` is a file an earlier `sft data` wrote (its record names the parquet file)."""
    try:
        written = {INFO_FILE, "README.md", fileio.read_json(out / INFO_FILE)["file"]}
    except (OSError, ValueError, KeyError, TypeError):
        written = {INFO_FILE, "README.md"}
    return lambda path: str(path) in written


def lengths_per_format(formats: Sequence[str], lengths: Sequence[int]) -> dict[str, dict[str, float | int]]:
    """`summary` of the lengths of each format's examples, formats in their first-seen order.

    >>> lengths_per_format(["a", "b", "a"], [1, 5, 3])["a"]
    {'min': 1, 'mean': 2.0, 'median': 2.0, 'p95': 3, 'max': 3}
    """
    per_format: dict[str, list[int]] = {}
    for fmt, length in zip(formats, lengths, strict=True):
        per_format.setdefault(fmt, []).append(length)
    return {fmt: summary(values) for fmt, values in per_format.items()}
