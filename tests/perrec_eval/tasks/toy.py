"""A toy task family made inside the tests: it plugs into the house without touching general code.

Docs are items with a true rating 1..5 in ``<data>/<subset>/<split>.jsonl``. Two protocols: ``toy-rate``
asks for the rating in one request; ``toy-check`` asks whether the rating is at least 3, then asks for it
within the half the first answer chose (two lockstep steps). Metrics: ``accuracy`` (a mean over docs, a
failed doc scores 0) and ``rmse`` (corpus-level; a failed doc adds no error). One baseline, ``always-3``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval.runner import OneShot
from perrec_eval.stats import MetricSpec, rmse
from perrec_eval.task import Doc, Parsed, Task

SYSTEM = "You are the toy rater."
SUBSETS = ("small", "large")


def write_data(folder: Path, n: int = 12, seed: int = 0) -> Path:
    """A toy build: `n` docs per subset and split, ratings drawn with a seed."""
    rng = random.Random(seed)
    for subset in SUBSETS:
        for split in ("train", "test"):
            path = folder / subset / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            rows = [
                {
                    "id": f"{subset}-{split}-{i}",
                    "item": f"item {subset}-{split}-{i}",
                    "rating": rng.randint(1, 5),
                }
                for i in range(n)
            ]
            TRUTH.update({row["item"]: row["rating"] for row in rows})
            lines = [json.dumps(row) for row in rows]
            path.write_text("\n".join(lines) + "\n")
    (folder / "manifest.json").write_text(json.dumps({"task": "toy", "seed": seed}))
    return folder


def load_docs(data: str, subset: str, split: str, *, max_docs: int | None = None, seed: int = 0) -> list[Doc]:
    rows = [json.loads(line) for line in (Path(data) / subset / f"{split}.jsonl").read_text().splitlines()]
    docs = [Doc(row["id"], row["rating"]) for row in rows]
    for doc, row in zip(docs, rows, strict=True):
        ITEMS[doc.id] = row["item"]
    return docs if max_docs is None else random.Random(seed).sample(docs, min(max_docs, len(docs)))


ITEMS: dict[str, str] = {}


def _messages(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


class TwoStep:
    """Step 0 asks ``high?``; step 1 asks for the rating within the chosen half."""

    def __init__(self) -> None:
        self.step, self.value = 0, None

    @property
    def done(self) -> bool:
        return self.step == 2

    def pending(self) -> list[Any]:
        return [] if self.done else (["high?"] if self.step == 0 else [self.half])

    def feed(self, answers: Mapping[Any, Any]) -> None:
        (answer,) = answers.values()
        if self.step == 0:
            self.half = "3-5" if answer == "yes" else "1-2"
        else:
            self.value = answer
        self.step += 1

    def prediction(self) -> Any:
        return self.value


def _read_rating(text: str | None) -> Parsed:
    match = re.fullmatch(r"\s*([1-5])\s*", text or "")
    return Parsed(True, int(match.group(1))) if match else Parsed(False, reason="no_rating")


@dataclass(frozen=True)
class Rate:
    name: str = "toy-rate"
    max_tokens: int = 4

    def runner(self, doc: Doc) -> OneShot:
        return OneShot("rating")

    def render(self, doc: Doc, slot: Any, *, variant: str = "default") -> list[dict[str, str]]:
        return _messages(f"Rate {ITEMS[doc.id]} from 1 to 5. Answer with the digit.")

    def parse(self, text: str | None, slot: Any) -> Parsed:
        return _read_rating(text)

    def combine(self, values: Sequence[Any]) -> Any:
        return max(set(values), key=list(values).count)

    def true_answer(self, doc: Doc, slot: Any) -> Any:
        return doc.truth

    def format_answer(self, answer: Any, slot: Any) -> str:
        return str(answer)

    def answer_format(self, doc: Doc, *, cot: bool = False) -> str:
        return self.name


@dataclass(frozen=True)
class Check(Rate):
    name: str = "toy-check"

    def runner(self, doc: Doc) -> TwoStep:
        return TwoStep()

    def render(self, doc: Doc, slot: Any, *, variant: str = "default") -> list[dict[str, str]]:
        if slot == "high?":
            return _messages(f"Is {ITEMS[doc.id]} rated 3 or more? Answer yes or no.")
        return _messages(f"Rate {ITEMS[doc.id]} within {slot}. Answer with the digit.")

    def parse(self, text: str | None, slot: Any) -> Parsed:
        if slot == "high?":
            word = (text or "").strip().lower()
            return Parsed(True, word) if word in ("yes", "no") else Parsed(False, reason="no_yes_no")
        return _read_rating(text)

    def true_answer(self, doc: Doc, slot: Any) -> Any:
        return ("yes" if doc.truth >= 3 else "no") if slot == "high?" else doc.truth


def score_doc(metric: str, prediction: Any, truth: Any) -> Any:
    if metric == "accuracy":
        return float(prediction == truth)
    return [] if prediction is None else [float(prediction - truth)]


def constant_answer(request: Any) -> str | None:
    """The fake engine's `constant` script answers 3 (and "yes") to the toy's requests."""
    messages = request.messages
    if not messages or messages[0]["content"] != SYSTEM:
        return None
    return "yes" if "yes or no" in messages[-1]["content"] else "3"


def predict_baseline(
    name: str, docs: Sequence[Doc], *, data: str, seed: int, protocol: str | None = None
) -> list[Any]:
    return [3 for _ in docs]


def answer_formats(spec: str) -> tuple[str, dict | None]:
    return r"[1-5]", None


def oracle(request: Any, params: Any, sample_index: int) -> str:
    """A fake responder that knows the truth (from the toy data's ratings, looked up by the item name)."""
    text = request.messages[-1]["content"]
    item = re.search(r"(item [\w-]+)", text).group(1)
    rating = TRUTH[item]
    if "yes or no" in text:
        return "yes" if rating >= 3 else "no"
    return str(rating)


TRUTH: dict[str, int] = {}


TASK = Task(
    name="toy",
    title="Toy",
    description="rate an item 1..5 (a test family)",
    subset_axis="size",
    protocol_axis="protocol",
    subsets=SUBSETS,
    protocols={"toy-rate": Rate(), "toy-check": Check()},
    metrics=(
        MetricSpec("accuracy"),
        MetricSpec("rmse", higher_is_better=False, aggregation="corpus", corpus=rmse),
    ),
    baselines=("always-3",),
    builder="tests.perrec_eval.tasks.toy",
    answer_formats=answer_formats,
    constant_answer=constant_answer,
    load_docs=load_docs,
    score_doc=score_doc,
    predict_baseline=predict_baseline,
)
