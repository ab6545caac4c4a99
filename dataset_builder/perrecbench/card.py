"""The dataset card: the ``hub_cards/dataset_card.md`` template filled with this build's facts, through
``huggingface_hub``'s card templates (``DatasetCard.from_template``: jinja, with the metadata the Hub parses
in ``DatasetCardData``)."""

from __future__ import annotations

from typing import Any

from dataset_builder.card import configs_yaml, fill_card
from dataset_builder.perrecbench.config import BuildConfig
from dataset_builder.perrecbench.interactions import card_section
from dataset_builder.perrecbench.schema import CONFIGS
from dataset_builder.perrecbench.stats import format_table, resolution_entry, thin_train_note
from perrec_eval.publish import size_category


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
        "size_categories": [size_category(n_groups)],
        "configs": configs_yaml(files),
    }
    full_size = str(cfg.group_size) if cfg.preset == "paper" else "2–4 (every level's groups)"
    config_rows = "\n".join(
        f"| `{name}` | {full_size if name == 'full' else CONFIGS[name]} | "
        + (
            ", ".join(f"{s} ({stats_rows(stats, s)})" for s in splits)
            if name == "full" or cfg.preset == "paper"
            else ", ".join(f"{s} ({level_groups(stats, name, s)})" for s in splits)
        )
        + " |"
        for name, splits in files.items()
    )
    columns = dict(_FUNNEL_COLUMNS)
    if cfg.preset == "large":  # its item filters use k = 2; then the groups each level found
        columns.update({f"groups_{level}": f"{level} groups" for level in cfg.level_sizes()})
    funnel_rows = [
        "| domain | " + " | ".join(columns.values()) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for domain, counts in stats["selection"].items():
        funnel_rows.append(f"| {domain} | " + " | ".join(f"{counts.get(k, 0):,}" for k in columns) + " |")
    values = {
        "cfg": cfg,
        "stats": stats,
        "provenance_note": _NOTES[source_kind],
        "builder": builder,
        "config_rows": config_rows,
        "levels_text": _levels_text(cfg, stats),
        "split_rule_text": _SPLIT_RULES[cfg.split_rule]
        + (_PER_LEVEL_RULE if cfg.preset == "large" and cfg.split_rule != "none" else ""),
        "split_table": split_table(stats["split"], cfg.train_fraction),
        "resolution_section": resolution_section(cfg, stats),
        "twins_text": _twins_text(cfg, stats),
        "choice_table": choice_table(stats),
        "funnel_table": "\n".join(funnel_rows),
        "stats_table": "```\n"
        + format_table({**stats, "selection": {}, "split": {}, "resolution": {}, "twins": {}})
        + "\n```",
        "source_section": _source_section(cfg, source_kind),
        "interactions_section": card_section(interactions),
    }
    return fill_card(header, "dataset_card.md", values)


def level_groups(stats: dict[str, Any], level: str, split: str) -> str:
    """Groups of one level in a split of a large build (from ``stats.json``'s resolution entry).

    >>> level_groups({"resolution": {"easy": {"test": {"groups": 1500}}}}, "easy", "test")
    '1,500'
    """
    return f"{stats['resolution'][level][split]['groups']:,}"


def _levels_text(cfg: BuildConfig, stats: dict[str, Any]) -> str:
    if cfg.preset == "paper":
        return (
            "`easy`, `medium` and `hard` use the **same query items** as `full`; their 2/3/4 users are "
            f"drawn at random (seed {cfg.seed}) from each {cfg.group_size}-user group, and users appear in "
            f"a seeded random order (the presentation order). `test` holds {stats_rows(stats, 'test')} "
            "groups, a seeded sample spread over the domains as evenly as their groups allow"
        )
    cap = (
        "" if cfg.max_groups_per_item is None else f" (at most {cfg.max_groups_per_item} per item and level)"
    )
    size = (
        f"all but a seeded {cfg.train_fraction:g} share of each domain's groups of the level"
        if cfg.train_fraction is not None
        else f"{cfg.test_groups} groups per level, spread over the domains as evenly as their groups allow"
    )
    return (
        "**Large preset.** Each level's groups are found **directly** with 2 / 3 / 4 users (not drawn from "
        "5-user groups): in each item's earliest window that admits a group, one group is drawn uniformly "
        "among all valid groups (seeded by seed, domain, item and level); its users are set aside and the "
        "search repeats on the remaining reviewers, until no valid group is left" + cap + ". So one item can "
        "give several groups per level, with **disjoint users**; each row's `query.parent_asin` names its "
        "item, so an analysis can treat the groups of one item as a cluster (see Resolution). Levels are "
        "independent: the same user may appear in an easy and a hard group of one item. `full` holds the "
        "groups of all three levels together (its rows have 2–4 users); it is the config to read every "
        f"label of a split from. Users appear in a seeded random order. `test` holds {size}"
    )


_PER_LEVEL_RULE = (
    " With the large preset the split and the rule are decided **per level**: a level's train group is "
    "compared with that level's test groups only (so no test review of a level appears in that level's "
    "`train`, and far fewer train groups are dropped than a rule over all levels would drop). A train group "
    "of one level may show a test review of another level: `perrecbench sft data` checks all test labels "
    "and leaves such groups out."
)


def resolution_section(cfg: BuildConfig, stats: dict[str, Any]) -> str:
    """Per level: test groups, expected 95% CI half-width and smallest detectable paired difference.

    Figures of :func:`perrec_eval.ptc.expected_resolution` (also in ``stats.json``; computed here for a
    build that writes the earlier ``stats.json``, which has no ``resolution`` key).
    """
    resolution = stats.get("resolution")
    if resolution is None:  # paper preset: every group gives every level, one group per item
        resolution = {
            level: {
                name: resolution_entry(size, split["all"]["groups"], split["all"]["groups"], 1.0)
                for name, split in stats["splits"].items()
            }
            for level, size in cfg.level_sizes().items()
        }
    rows = [
        "| level | users | test groups | query items | 95% CI half-width | smallest detectable difference |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    clustered = False
    for level, splits in resolution.items():
        if "test" not in splits:
            continue
        r = splits["test"]
        half, mdd = f"±{r['half_width']:.3f}", f"{r['min_detectable_difference']:.3f}"
        if r["design_effect"] > 1:
            clustered = True
            half += f" (≤ ±{r['half_width_bound']:.3f})"
            mdd += f" (≤ {r['min_detectable_difference_bound']:.3f})"
        rows.append(
            f"| {level} | {CONFIGS[level]} | {r['groups']:,} | {r['query_items']:,} | {half} | {mdd} |"
        )
    text = (
        "What one PTC cell (a level × ranking method) of the `test` split can resolve: the expected 95% "
        "confidence half-width of its score, and the smallest true difference between two systems that a "
        "paired test (two-sided, 5%) finds with 80% power (`perrec_eval.ptc.expected_resolution`, with the "
        "per-group variance of a system that knows nothing, `null_tau_variance`; systems that agree with "
        "each other are told apart at smaller differences). Published 8B models differ by 0.01–0.05.\n\n"
        + "\n".join(rows)
    )
    from perrec_eval.ptc import groups_for_half_width

    needed = " / ".join(f"{groups_for_half_width(CONFIGS[level], 0.02):,}" for level in resolution)
    text += (
        f"\n\nA half-width of ±0.02 per cell needs {needed} groups ({' / '.join(resolution)}; "
        "`groups_for_half_width`): build with `--preset large` and `--test-groups` or `--train-fraction`."
    )
    if cfg.preset == "large":
        text += "\n\n" + _LARGE_ESTIMATE
    if clustered:
        text += (
            "\n\nSeveral groups of one item may be correlated (a model that misreads an item misreads all of "
            "its groups). With `m_i` groups of item `i`, the design effect is `1 + (m̄ − 1)ρ`, "
            "`m̄ = Σ m_i² / Σ m_i`, `ρ` the unknown within-item correlation of the groups' taus; the figures "
            "in brackets take its upper bound `ρ = 1` (design effect `m̄`, in `stats.json`), the others "
            "`ρ = 0`. The truth lies between them; a cluster bootstrap over `query.parent_asin` measures it."
        )
    return text


_LARGE_ESTIMATE = (
    "What this preset gives on the real Amazon Reviews 2023 categories of the paper (Books, Clothing, Home, "
    "Electronics) is estimated, not measured (`benchmarks/RESULTS.md` of the perrecbench repository, "
    "`benchmarks/large_preset_estimate.py`): the paper found 666 items with a valid five-user group; a "
    "five-user group needs about 12–20 active reviewers in one 30-day window, a pair only two, and the "
    "number of items with n active reviewers in a window falls like a power of n. Calibrated on the 666 and "
    "with that power swept over 1.5–2.5, the preset yields about 30k–90k easy, 11k–19k medium and 4k hard "
    "groups (hard hardly depends on the power: it is close to the anchor; other rating models widen the "
    "ranges to 22k–194k, 9k–33k and 3.4k–5.8k), i.e. about ±0.01 / ±0.01 / ±0.017 per cell with 80% of "
    "them in test, and a full evaluation of an 8B model with vLLM on one H100 takes about 1.5–3.3 hours "
    "(1.2–6.4 over those models). Synthetic data is far denser in groups than real data and says nothing "
    "about this."
)


def _twins_text(cfg: BuildConfig, stats: dict[str, Any]) -> str:
    if cfg.keep_twins:
        return (
            "- Twin items are **kept** (`--keep-twins`, the paper's behaviour): a history can hold the query "
            "product under another id (another edition or format), with the user's own rating of it."
        )
    twins = stats["twins"]
    counts = ", ".join(
        f"{d} {t['history_rows_removed']:,} ({t['members_affected']:,} members)" for d, t in twins.items()
    )
    return (
        "- **Twin items removed**: a history item that is the query item under another id (same title after "
        "dropping case, accents, punctuation and edition/format notes such as `(Paperback)`, `[DVD]`, "
        "`Kindle Edition`, `2nd edition`; volume numbers are kept; and the same author when both name one) "
        "would show the user's own rating of the query product, so it is left out of that user's history "
        "for that query. History rows removed: " + counts + ". The user's average and most common rating "
        "still count it (they are the user's own earlier ratings; the selection is unchanged)."
    )


def split_table(split: dict[str, Any], train_fraction: float | None = None) -> str:
    """The split table: one for the paper preset, one per level for the large preset; above it, what to do
    when the rule dropped most train groups (`stats.thin_train_note`)."""
    note = thin_train_note(split, train_fraction)
    warning = f"**Few train groups**: {note}.\n\n" if note else ""
    if "levels" not in split:
        return warning + _split_table(split)
    tables = (f"**{level}**\n\n" + _split_table(facts) for level, facts in split["levels"].items())
    return warning + "\n\n".join(tables)


def _split_table(split: dict[str, Any]) -> str:
    """Groups per domain in test, in train and dropped from train by the rule, and the leaks measured.

    >>> print(_split_table({"test_groups_per_domain": {"Books": 2}, "train_groups_per_domain": {"Books": 3},
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
