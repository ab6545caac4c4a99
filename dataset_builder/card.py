"""The dataset card: the ``hub_cards/dataset_card.md`` template filled with this build's facts."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import yaml

from dataset_builder.config import BuildConfig
from dataset_builder.interactions import card_section
from dataset_builder.schema import CONFIGS
from dataset_builder.stats import format_table

_PLACEHOLDER = re.compile(r"{{(\w+)}}")


def render(template: str, values: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; every placeholder must have a value and every value a placeholder.

    >>> render("a {{x}} b", {"x": "1"})
    'a 1 b'
    """
    wanted = set(_PLACEHOLDER.findall(template))
    if wanted != set(values):
        raise ValueError(f"card template placeholders {sorted(wanted)} do not match values {sorted(values)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def configs_yaml(files: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The card's ``configs:`` entries; splits without a file (empty) are left out (PITFALLS 2).

    >>> configs_yaml({"easy": {"test": "easy/test-ab.parquet"}})
    [{'config_name': 'easy', 'data_files': [{'split': 'test', 'path': 'easy/test-ab.parquet'}]}]
    """
    return [
        {
            "config_name": name,
            "data_files": [{"split": split, "path": path} for split, path in splits.items()],
        }
        for name, splits in files.items()
    ]


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def build_card(
    cfg: BuildConfig,
    files: dict[str, dict[str, str]],
    stats: dict[str, Any],
    builder: str,
    source_kind: str = "raw",
    interactions: dict[str, dict[str, Any]] | None = None,
) -> str:
    """The README.md of the output folder.

    Args:
        cfg: the build parameters.
        files: ``{config: {split: relative parquet path}}``.
        stats: the content of ``stats.json``.
        builder: the package name and version that built it.
        source_kind: ``raw``, ``synthetic`` or ``mixed`` (``manifest.json``); a synthetic source says so in
            the title, the tags, a note under the title and the source section.
        interactions: what ``--with-interactions`` wrote (``manifest.json`` ``interactions``), or None.
    """
    n_groups = sum(s["all"]["groups"] for s in stats["splits"].values())
    synthetic = source_kind != "raw"
    header = {
        "pretty_name": _TITLES[source_kind],
        "language": ["en"],
        "license": "other",
        "license_name": "synthetic-data" if source_kind == "synthetic" else "amazon-reviews-2023-terms",
        "task_categories": ["text-classification"],
        "tags": ["recommendation", "personalization", "ranking", "llm-evaluation"]
        + (["synthetic"] if synthetic else [])
        + (["amazon-reviews"] if source_kind != "synthetic" else []),
        "size_categories": [_size_category(n_groups)],
        "configs": configs_yaml(files),
    }
    config_rows = "\n".join(
        f"| `{name}` | {cfg.group_size if name == 'full' else CONFIGS[name]} | "
        f"{', '.join(f'{s} ({stats_rows(stats, s)})' for s in splits)} |"
        for name, splits in files.items()
    )
    funnel_rows = [
        "| domain | " + " | ".join(_FUNNEL_COLUMNS.values()) + " |",
        "|---" * (len(_FUNNEL_COLUMNS) + 1) + "|",
    ]
    for domain, counts in stats["selection"].items():
        funnel_rows.append(
            f"| {domain} | " + " | ".join(f"{counts.get(k, 0):,}" for k in _FUNNEL_COLUMNS) + " |"
        )
    train_note = (
        ""
        if "train" in stats["splits"]
        else (" This build found too few groups for a held-out set, so there is no `train` split.")
    )
    values = {
        "yaml_header": yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip("\n"),
        "title": _TITLES[source_kind],
        "provenance_note": _NOTES[source_kind],
        "builder": builder,
        "config_rows": config_rows,
        "seed": str(cfg.seed),
        "test_groups": str(stats["splits"]["test"]["all"]["groups"]),
        "train_note": train_note,
        "split_rule": cfg.split_rule,
        "split_rule_text": _SPLIT_RULES[cfg.split_rule],
        "split_table": split_table(stats["split"]),
        "choice_table": choice_table(stats),
        "load_path": cfg.push_to_hub or cfg.out.name,
        "domains": ", ".join(cfg.domains),
        "window_days": f"{cfg.window_days:g}",
        "min_history": str(cfg.min_history),
        "min_gap": f"{cfg.min_gap:g}",
        "avg_scope": cfg.avg_scope,
        "group_size": str(cfg.group_size),
        "funnel_table": "\n".join(funnel_rows),
        "stats_table": "```\n" + format_table({**stats, "selection": {}, "split": {}}) + "\n```",
        "source_section": _source_section(cfg, source_kind),
        "interactions_section": card_section(interactions),
    }
    template = resources.files("hub_cards").joinpath("dataset_card.md").read_text(encoding="utf-8")
    return render(template, values)


def split_table(split: dict[str, Any]) -> str:
    """Groups per domain in test, in train and dropped from train by the rule, and the leaks measured.

    >>> print(split_table({"test_groups_per_domain": {"Books": 2}, "train_groups_per_domain": {"Books": 3},
    ...     "train_groups_dropped_per_domain": {"Books": 1}, "leaks": {"test_reviews_as_train_queries": 0,
    ...     "test_reviews_in_train_histories": 0}}).splitlines()[2])
    | Books | 2 | 3 | 1 |
    """
    rows = ["| domain | test | train | dropped from train by the rule |", "|---|---:|---:|---:|"]
    for domain, test in split["test_groups_per_domain"].items():
        train, dropped = (
            split[k][domain] for k in ("train_groups_per_domain", "train_groups_dropped_per_domain")
        )
        rows.append(f"| {domain} | {test:,} | {train:,} | {dropped:,} |")
    leaks = split["leaks"]
    rows.append("")
    rows.append(
        f"Test (user, item) reviews found in `train`, counted on the files: "
        f"{leaks['test_reviews_as_train_queries']:,} as train queries, "
        f"{leaks['test_reviews_in_train_histories']:,} in train histories."
    )
    return "\n".join(rows)


def choice_table(stats: dict[str, Any]) -> str:
    """Per split: how many, mean relative rating and share below 0 of the chosen users, of every candidate
    of the chosen windows, and of every active candidate of the same items.

    >>> f = {"users": 5, "mean_relative_rating": 0.1, "negative_share": 0.4}
    >>> choice = {"chosen_users": f, "window_candidates": f, "item_candidates": f}
    >>> print(choice_table({"splits": {"test": {"choice": choice}}}).splitlines()[2])
    | test | 5 | 0.100 | 0.400 | 5 | 0.100 | 0.400 | 5 | 0.100 | 0.400 |
    """
    rows = [
        "| split | chosen users | mean rel. | share < 0 | candidates of the chosen windows | mean rel. | "
        "share < 0 | all candidates of these items | mean rel. | share < 0 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for split, figures in stats["splits"].items():
        cells = []
        for key in ("chosen_users", "window_candidates", "item_candidates"):
            f = figures["choice"][key]
            cells += [f"{f['users']:,}", _number(f["mean_relative_rating"]), _number(f["negative_share"])]
        rows.append(f"| {split} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _source_section(cfg: BuildConfig, source_kind: str) -> str:
    source = cfg.source if cfg.source.startswith("hf://") else "a local copy of the raw files"
    amazon = (
        f"Derived from **Amazon Reviews 2023** (McAuley Lab; Hou et al., 2024, *Bridging Language and Items "
        f"for Retrieval and Recommendation*), `{source}`. The reviews and metadata remain subject to the "
        "terms of the original dataset, which is intended for research use; this derived benchmark inherits "
        "them. Cite both the source dataset and the PerRecBench paper when using it."
    )
    synthetic = (
        "**Synthetic data generated by `perrecbench synth`** (`dataset_builder/synth` of the perrecbench "
        "repository): users, items, ratings and texts are drawn from a documented generative model with a "
        "planted preference signal, in the raw file layout of Amazon Reviews 2023. It contains no Amazon "
        "review or metadata; it exists to test the pipeline, and scores on it are not PerRecBench results."
    )
    if source_kind == "synthetic":
        return synthetic
    if source_kind == "mixed":
        return (
            "Some input files are synthetic (`manifest.json` marks them).\n\n" + synthetic + "\n\n" + amazon
        )
    return amazon


_TITLES = {
    "raw": "PerRecBench (rebuilt from Amazon Reviews 2023)",
    "synthetic": "PerRecBench on SYNTHETIC data (perrecbench synth)",
    "mixed": "PerRecBench on PARTLY SYNTHETIC data (perrecbench synth + raw files)",
}
_NOTES = {
    "raw": "",
    "synthetic": "\n> **Synthetic data generated by `perrecbench synth`, not Amazon reviews.** Every user, "
    "item, rating and\n> text was drawn by a generative model; results on it say nothing about real users.\n",
    "mixed": "\n> **Partly synthetic data:** some input files were generated by `perrecbench synth` (see\n> "
    "`manifest.json`, `source_kind` and each input's `synthetic` flag); results on it are not PerRecBench "
    "results.\n",
}
_SPLIT_RULES = {
    "leak-free": "a train group is dropped when one of its users is a test user of the same domain whose "
    "train review is not strictly before all their test reviews (with `avg_scope=all`, whole-list averages "
    "cover every review, so any same-domain test user). No test (user, item) review appears in `train`, "
    "neither as a query nor in a history, and no train average covers a test rating: what `train` shows "
    "about a test user, their test histories show already.",
    "user-disjoint": "every train group with a test user (of any domain) is dropped: no test user appears "
    "in `train`.",
    "none": "no train group is dropped (the paper's split): a test user's test review can appear in a train "
    "history; the counts below say how often.",
}


_FUNNEL_COLUMNS = {
    "reviews": "reviews (deduplicated)",
    "active_reviews": "user has > γ earlier reviews",
    "active_reviews_with_metadata": "item has metadata",
    "items_with_enough_active_reviewers": "items with ≥ k such reviews",
    "items_with_enough_in_one_window": "items with ≥ k in one window",
    "items_with_group": "items with a valid group",
}


def stats_rows(stats: dict[str, Any], split: str) -> str:
    """Number of groups in a split, formatted.

    >>> stats_rows({"splits": {"test": {"all": {"groups": 1200}}}}, "test")
    '1,200'
    """
    return f"{stats['splits'][split]['all']['groups']:,}"
