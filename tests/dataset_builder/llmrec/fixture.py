"""LLMRec builds for the tests: a tiny hand-made raw folder with known answers, and a small synthetic one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from perrec_eval.cli import main

GROUP_1 = ("u1", "u2", "u3")  # each reviews A, B, C, D
GROUP_2 = ("u5", "u6", "u7")  # each reviews E, F, G, H
T0 = 1_600_000_000_000
TITLES = {item: f"Item {item}" for item in "ABCDEFGHX"}  # Z has no title; X only u4 reviews


def _review(user: str, item: str, ts: int, rating: float = 4.0) -> dict[str, Any]:
    # times in milliseconds, as Amazon Reviews 2023 has them
    return {"user_id": user, "parent_asin": item, "timestamp": T0 + ts * 1000, "rating": rating, "asin": item}


def hand_reviews() -> list[dict[str, Any]]:
    """u1 reviews A twice (the earliest is kept), C and D at one time (C, by parent_asin, comes first)
    and the untitled Z; u4 reviews A, B and X: X has one review (dropped in round 1), then u4 has two
    (dropped in round 2)."""
    rows = [
        _review("u1", "A", 1, 5.0), _review("u1", "A", 100, 1.0), _review("u1", "B", 2),
        _review("u1", "D", 5), _review("u1", "C", 5), _review("u1", "Z", 7),
        _review("u4", "A", 3), _review("u4", "B", 4), _review("u4", "X", 9),
    ]  # fmt: skip
    for user in GROUP_1[1:]:
        rows += [_review(user, item, 10 + i) for i, item in enumerate("ABCD")]
    for user in GROUP_2:
        rows += [_review(user, item, 20 + i, 3.0) for i, item in enumerate("EFGH")]
    return rows


def write_hand_raw(folder: Path) -> Path:
    folder.mkdir(parents=True)
    meta = [{"parent_asin": item, "title": title} for item, title in TITLES.items()] + [{"parent_asin": "Z"}]
    for name, rows in (("Books.jsonl", hand_reviews()), ("meta_Books.jsonl", meta)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def build(source: Path, out: Path, *args: str) -> int:
    return main(
        ["build", "--task", "llmrec", "--source", str(source), "--out", str(out), "--no-progress", *args]
    )


def synth_build(root: Path, *, negatives: int = 19) -> Path:
    """`perrecbench synth` (one small domain) built with the defaults but `negatives`."""
    raw = root / "raw"
    assert main(["synth", "--out", str(raw), "--reviews-per-domain", "2000", "--domains", "Books"]) == 0
    out = root / "llmrec"
    assert build(raw, out, "--domains", "Books", "--negatives", str(negatives)) == 0
    return out


def read(out: Path, config: str, split: str) -> list[dict[str, Any]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return pq.read_table(out / manifest["outputs"][config][split]).to_pylist()
