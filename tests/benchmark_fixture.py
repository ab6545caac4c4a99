"""A tiny hand-made benchmark folder (the builder's output layout) with known relative ratings.

Each user's profile carries the truth as `TRUTH rel=<relative rating> rating=<rating>`, so a scripted
engine that reads the prompt can answer perfectly (or perfectly wrong) and the tests can check every
ranking method end to end against known PTC values.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import datasets

from dataset_builder.manifest import record_checksums
from dataset_builder.perrecbench.schema import CONFIGS, FEATURES

TOPICS = ("garden", "kitchen", "camera", "novel", "boots", "laptop")


def _history(rng: random.Random, n: int, start: int) -> list[dict]:
    return [
        {
            "parent_asin": f"H{rng.randrange(10**6):06d}",
            "title": f"{rng.choice(TOPICS)} item {i}",
            "author": None,
            "rating": float(rng.randint(1, 5)),
            "timestamp": start + i * 86_400_000,
        }
        for i in range(n)
    ]


def make_rows(n_groups: int, seed: int = 0, prefix: str = "g") -> list[dict]:
    """Full (5-user) rows with distinct relative ratings (gaps > 0.6) in a seeded presentation order."""
    rng = random.Random(seed)
    rows = []
    for g in range(n_groups):
        rels = [-2.0, -1.2, -0.4, 0.4, 1.2]
        rng.shuffle(rels)
        users = []
        for u, rel in enumerate(rels):
            rating = float(round(3 + rel))
            avg = rating - rel  # keeps both the rating and its mirror avg - rel inside [1, 5]
            history = _history(rng, 22 + u, 1_600_000_000_000)
            users.append(
                {
                    "user_id": f"U{g}_{u}",
                    "rating": rating,
                    "timestamp": 1_700_000_000_000 + u,
                    "avg_rating": avg,
                    "most_common_rating": 4.0,
                    "relative_rating": rel,
                    "history": history,
                }
            )
        rows.append(
            {
                "group_id": f"{prefix}{g:04d}",
                "domain": "Books",
                "level": "full",
                "query": {
                    "parent_asin": f"Q{g:05d}",
                    "title": f"{TOPICS[g % len(TOPICS)]} query {g}",
                    "author": "Ann Author" if g % 2 else None,
                    "main_category": "Books",
                    "average_rating": 4.1,
                    "rating_number": 100,
                },
                "window_start": 1_700_000_000_000,
                "users": users,
            }
        )
    return rows


def write_tiny_benchmark(
    folder: Path, n_test: int = 6, n_train: int = 4, seed: int = 0, *, leaky_train: bool = False
) -> Path:
    """Write easy/medium/hard/full configs with test and train splits; return the folder.

    Train users and query items are renamed (``TRAIN-``), so that no train group shows a test label, as in a
    build with the default leak-free split rule; with `leaky_train` they are the test ones (every train group
    shows a test label).
    """
    folder = Path(folder)
    splits = {"test": make_rows(n_test, seed, "t"), "train": make_rows(n_train, seed + 1, "h")}
    for row in [] if leaky_train else splits["train"]:
        row["query"]["parent_asin"] = "TRAIN-" + row["query"]["parent_asin"]
        for user in row["users"]:
            user["user_id"] = "TRAIN-" + user["user_id"]
    yaml_lines = ["---", "configs:"]
    rng = random.Random(seed)
    for config, size in CONFIGS.items():
        yaml_lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            level_rows = []
            for row in rows:
                users = rng.sample(row["users"], size) if size < 5 else row["users"]
                level_rows.append({**row, "level": config, "users": users})
            # datasets caches a data file by folder name and relative path, not content (PITFALLS 1):
            # name each file by its content, as the builder does, so two tiny benchmarks never collide.
            tmp = folder / config / f".{split}.parquet"
            tmp.parent.mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_list(level_rows, features=FEATURES).to_parquet(str(tmp))
            digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:12]
            name = f"{split}-{digest}.parquet"
            tmp.replace(folder / config / name)
            yaml_lines += [f"  - split: {split}", f"    path: {config}/{name}"]
    yaml_lines.append("---")
    (folder / "README.md").write_text("\n".join(yaml_lines) + "\n# tiny PerRecBench\n", encoding="utf-8")
    return write_manifest(folder)


def write_manifest(folder: Path) -> Path:
    """Give a hand-made benchmark folder a build's ``manifest.json``: the data files its card's ``configs:``
    name, under ``outputs``, and their sha256 (a local folder without one is refused by every command, and
    one whose files changed since: call this again after editing them). Returns the folder.
    """
    import yaml

    card = (folder / "README.md").read_text(encoding="utf-8").split("---")[1]
    outputs = {
        config["config_name"]: {entry["split"]: entry["path"] for entry in config["data_files"]}
        for config in yaml.safe_load(card)["configs"]
    }
    manifest = {"source_kind": "synthetic", "parameters": {}, "outputs": outputs, "versions": {}}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    record_checksums(folder)
    return folder


def write_truth_profiles(folder: Path, path: Path) -> Path:
    """Profiles JSONL whose text states each user's true relative rating and rating."""
    with path.open("w", encoding="utf-8") as f:
        for split in ("test", "train"):
            (data_file,) = (folder / "full").glob(f"{split}-*.parquet")
            rows = datasets.Dataset.from_parquet(str(data_file))
            for row in rows:
                for u in row["users"]:
                    text = f"TRUTH rel={u['relative_rating']!r} rating={u['rating']!r}"
                    f.write(
                        json.dumps({"group_id": row["group_id"], "user_id": u["user_id"], "profile": text})
                        + "\n"
                    )
    return path


_TRUTH = re.compile(r"TRUTH rel=(-?[\d.]+(?:e-?\d+)?) rating=(-?[\d.]+(?:e-?\d+)?)")


def truth_responder(sign: float = 1.0):
    """A scripted engine answer that reads the truth from the profiles (sign -1: the exact reverse)."""

    def respond(request, params, sample_index) -> str:
        content = request.messages[-1]["content"]
        found = [(float(rel), float(rating)) for rel, rating in _TRUTH.findall(content)]
        system = request.messages[0]["content"]
        if "pair of users" in system:
            a, b = found[0][0], found[1][0]
            return "[User A]" if sign * a > sign * b else "[User B]"
        if "group of users" in system:
            order = sorted(range(len(found)), key=lambda i: -sign * found[i][0])
            return json.dumps({"predicted_ranking": [i + 1 for i in order]})
        rel, rating = found[0]
        # Pointwise: a perfect model predicts the rating itself; the reverse mirrors the relative rating.
        return json.dumps({"predicted_rating": rating if sign > 0 else rating - 2 * rel})

    return respond
