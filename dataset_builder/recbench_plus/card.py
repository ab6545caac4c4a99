"""RecBench+'s dataset card: `hub_cards/recbench_plus_card.md` filled with the settings and counts."""

from __future__ import annotations

from typing import Any

from dataset_builder.card import configs_yaml, fill_card
from dataset_builder.config import MOVIELENS_DOMAIN, portable_name
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
    "raw": "RecBench+ (rebuild)",
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
    movie = [d for d in cfg.domains if d == MOVIELENS_DOMAIN]
    amazon = [d for d in cfg.domains if d != MOVIELENS_DOMAIN]
    notes = []
    if amazon:
        notes.append(
            "Amazon Reviews 2023: relations from `author`, `store`, each level of `categories` and the "
            "`details` keys " + "; ".join(f"{d}: {keys[d]}" for d in amazon) + "."
        )
    if movie:
        notes.append("MovieLens-1M: `genre` (each genre of movies.dat) and `year` (the title's year).")
    if cfg.item_attributes is not None:
        notes.append(f"Further relations from `{portable_name(cfg.item_attributes)}` (`--item-attributes`).")
    sources = [*(["Amazon Reviews 2023"] if amazon else []), *(["MovieLens-1M"] if movie else [])]
    diversity = [
        f"| {c} | {t[f'{c}_test_queries']:,} | {t[f'{c}_distinct_texts']:,} | "
        f"{t[f'{c}_texts_several_truths']:,} | {t[f'{c}_most_truths_per_text']:,} |"
        for c in (*queries.TYPES, "demographics")
        for t in [_totals(counts, c)]
        if t[f"{c}_test_queries"]
    ]
    deduped = sum(c.get(f"{t}_deduped", 0) for c in counts.values() for t in (*queries.TYPES, "demographics"))
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
        "implicit_ambiguous": sum(c.get("implicit_ambiguous", 0) for c in counts.values()),
        "source_name": " and ".join(sources),
        "relations_note": " ".join(notes),
        "diversity_rows": "\n".join(diversity),
        "dedupe_note": f"on: {deduped:,} queries dropped" if cfg.dedupe_queries else "off in this build",
        "misinformed_skipped": sum(c.get("misinformed_skipped", 0) for c in counts.values()),
        "demographics": demographics,
        "counts_table": table,
        **cfg.params(),
    }
    return fill_card(header, "recbench_plus_card.md", values)


def _totals(counts: dict[str, dict[str, int]], config: str) -> dict[str, int]:
    """A config's text counts over every domain (the most truths of one text: the largest)."""
    names = ("test_queries", "distinct_texts", "texts_several_truths")
    out = {f"{config}_{n}": sum(c.get(f"{config}_{n}", 0) for c in counts.values()) for n in names}
    most = f"{config}_most_truths_per_text"
    out[most] = max((c.get(most, 0) for c in counts.values()), default=0)
    return out
