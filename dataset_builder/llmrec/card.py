"""LLMRec's dataset card: what was built, how, its counts and its leakage statement."""

from __future__ import annotations

from typing import Any

from dataset_builder.card import configs_yaml, fill_card
from dataset_builder.llmrec.config import BuildConfig


def _count(counts: dict[str, dict[str, int]], name: str, split: str) -> str:
    split_counts = counts[name]
    return f"{split_counts[split]:,}" if split in split_counts else "–"  # a split the config does not have


def build_card(
    cfg: BuildConfig,
    files: dict[str, dict[str, str]],
    counts: dict[str, dict[str, int]],
    results: dict[str, dict[str, Any]],
    plan: list[str],
    provenance: dict[str, Any],
    *,
    text: dict[str, Any] | None = None,
    ties: dict[str, Any] | None = None,
) -> str:
    """The README.md of an LLMRec build (``hub_cards/llmrec_dataset_card.md``)."""
    header = {
        "pretty_name": "LLMRec tasks from Amazon Reviews 2023",
        "license": "other",
        "task_categories": ["text-generation"],
        "tags": ["recommendation", "llmrec", "perrecbench"]
        + (["synthetic"] if provenance["source_kind"] == "synthetic" else ["amazon-reviews"]),
        "configs": configs_yaml(files),
    }
    rows = "\n".join(
        f"| `{name}` | " + " | ".join(_count(counts, name, s) for s in ("train", "validation", "test")) + " |"
        for name in files
    )
    funnel = "\n".join(
        f"| {d} | {results[d]['funnel']['reviews']:,} | {results[d]['funnel']['titled']:,} | "
        f"{results[d]['interactions']:,} | {results[d]['users']:,} | {results[d]['items']:,} | "
        f"{results[d]['kcore_rounds']} |"
        for d in plan
    )
    split_text = (
        "**Leave-last-out**: test asks about each user's last item, validation about the second to last, "
        "train about every earlier item but the first (which has no history)."
        if cfg.split == "last_out"
        else "**Timestamp split** (the Amazon Reviews 2023 benchmark's global cut points): a target reviewed "
        f"from {cfg.test_from} ms on is test, from {cfg.valid_from} ms on validation, earlier train (every "
        "item of a user but the first asks one row); `interactions` holds the reviews before the first cut."
    )
    values = {
        "split_text": split_text,
        "sampling": "uniformly" if cfg.negative_sampling == "uniform" else "by popularity (1 + train count)",
        "kcore": cfg.kcore,
        "history_length": cfg.history_length,
        "negatives": cfg.negatives,
        "seed": cfg.seed,
        "domains": ", ".join(plan),
        "source_kind": provenance["source_kind"],
        "config_rows": rows,
        "funnel_rows": funnel,
        **text_values(text or {"funnel": {}, "skipped": []}),
        **tie_values(ties),
    }
    return fill_card(header, "llmrec_dataset_card.md", values)


_TEXT_COLUMNS = (
    "kept_train", "kept_validation", "kept_test", "no_text", "no_sentence", "empty_title", "star_title",
    "no_word", "repeated_target",
)  # fmt: skip


def text_values(text: dict[str, Any]) -> dict[str, Any]:
    """The card's text-task part: per domain and config what was kept and why the rest was left out."""
    from dataset_builder.llmrec import text as extraction

    rows = "\n".join(
        f"| {domain} | `{name}` | " + " | ".join(f"{counts.get(c, 0):,}" for c in _TEXT_COLUMNS) + " |"
        for domain, configs in text["funnel"].items()
        for name, counts in configs.items()
    )
    return {
        "text_rows": rows,
        "text_skipped": text.get("skipped_because", ""),
        "vocabulary_size": extraction.VOCABULARY_SIZE,
        "min_words": extraction.MIN_WORDS,
        "max_words": extraction.MAX_WORDS,
    }


_TIE_RULES = {
    "asin": "equal timestamps are ordered by `parent_asin` (`--ties asin`, P5's order)",
    "drop": "a user whose last item has the time of the item before it is left out of every config "
    "(`--ties drop`; the k-core is not recomputed); other equal timestamps are ordered by `parent_asin`",
    "random": "equal timestamps are ordered by a hash of the seed, the user and the item (`--ties random`)",
}


def tie_values(ties: dict[str, Any] | None) -> dict[str, Any]:
    """The card's ties part: the rule, and per domain the validation and test targets that have the time of a
    history item (their order against it was decided by the rule, not by time)."""
    if ties is None:
        return {"ties_text": _TIE_RULES["asin"], "tie_rows": ""}

    def share(tied: int, targets: int) -> str:
        return f"{tied:,} of {targets:,} ({tied / targets:.1%})" if targets else "0 of 0"

    rows = "\n".join(
        f"| {domain} | {share(c['validation_tied'], c['validation_targets'])} | "
        f"{share(c['test_tied'], c['test_targets'])} | {c['dropped_users']:,} |"
        for domain, c in ties["domains"].items()
    )
    return {"ties_text": _TIE_RULES[ties["rule"]], "tie_rows": rows}
