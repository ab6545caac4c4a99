"""RecBench+'s dataset card: `hub_cards/recbench_plus_card.md` filled with the settings and counts."""

from __future__ import annotations

from typing import Any

from dataset_builder.card import configs_yaml, fill_card
from dataset_builder.recbench_plus import kg, queries
from dataset_builder.recbench_plus.config import BuildConfig

TEMPLATE_PHRASING = (
    f"deterministic templates (`{queries.TEMPLATE_ID}`, no LLM), the texts shown in "
    "`dataset_builder/recbench_plus/queries.py`"
)


def phrasing_note(cfg: BuildConfig, counts: dict[str, dict[str, int]]) -> str:
    """How the queries were worded, for the card."""
    if cfg.phrasing == "template":
        return TEMPLATE_PHRASING
    from dataset_builder.recbench_plus import phrasing

    def total(name: str) -> int:
        return sum(c.get(f"{t}_phrasing_{name}", 0) for c in counts.values() for t in queries.TYPES)

    return (
        f"LLM rewrites by `{cfg.engine}:{cfg.model}` of the template queries (`{queries.TEMPLATE_ID}`, kept "
        f"in `template_query`), prompts `templates/phrasing.yaml` (sha256 {phrasing.prompts().sha256[:12]}), "
        f"temperature {phrasing.PHRASING_PARAMS.temperature}; a rewrite that names a hidden value or leaves "
        f"out a condition is asked again up to {cfg.phrasing_retries} times with another seed: "
        f"{total('redone')} asked again, {total('dropped')} dropped"
    )


_TITLES = {
    "raw": "RecBench+ (Amazon Reviews 2023 rebuild)",
    "synthetic": "RecBench+ (SYNTHETIC data)",
    "mixed": "RecBench+ (partly SYNTHETIC data)",
}


def card(
    cfg: BuildConfig,
    files: dict[str, dict[str, str]],
    sizes: dict[str, dict[str, int]],
    counts: dict[str, dict[str, int]],
    provenance: dict[str, Any],
    *,
    phrasing: str = TEMPLATE_PHRASING,
    demographics: str,
) -> str:
    """The README.md of a build: YAML ``configs:`` (empty splits left out) and how the queries were made."""
    kind = provenance["source_kind"]
    header = {
        "pretty_name": _TITLES[kind],
        "configs": configs_yaml(files),
        "license": "other",
        "license_name": "synthetic-data" if kind == "synthetic" else "amazon-reviews-2023-terms",
        "tags": ["recommendation", "conversational-recommendation", "llm-evaluation", "recbench-plus"]
        + (["synthetic"] if kind != "raw" else []),
    }
    keys = {d: ", ".join(kg.detail_keys(d, cfg.details_keys)) or "none" for d in cfg.domains}
    rows = [f"| {c} | {s} | {n:,} |" for c, splits in sizes.items() for s, n in splits.items()]
    domains = list(counts)
    names = sorted({name for domain in counts.values() for name in domain})
    table = "| count | " + " | ".join(domains) + " |\n|---|" + "---:|" * len(domains) + "\n"
    table += "\n".join(
        f"| {n} | " + " | ".join(f"{counts[d].get(n, 0):,}" for d in domains) + " |" for n in names
    )
    values = {
        "pretty_name": header["pretty_name"],
        "provenance_note": ""
        if kind == "raw"
        else "\n**Built from synthetic data** (`perrecbench synth`).\n",
        "config_rows": "\n".join(rows),
        "details_keys": "; ".join(f"{d}: {k}" for d, k in keys.items()),
        "phrasing_note": phrasing,
        "implicit_skipped": sum(c.get("implicit_skipped", 0) for c in counts.values()),
        "misinformed_skipped": sum(c.get("misinformed_skipped", 0) for c in counts.values()),
        "demographics": demographics,
        "counts_table": table,
        **cfg.params(),
    }
    return fill_card(header, "recbench_plus_card.md", values)
