"""The dataset card: the ``hub_cards/dataset_card.md`` template filled with this build's facts."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import yaml

from dataset_builder.config import BuildConfig
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
    cfg: BuildConfig, files: dict[str, dict[str, str]], stats: dict[str, Any], builder: str
) -> str:
    """The README.md of the output folder.

    Args:
        cfg: the build parameters.
        files: ``{config: {split: relative parquet path}}``.
        stats: the content of ``stats.json``.
        builder: the package name and version that built it.
    """
    n_groups = sum(s["all"]["groups"] for s in stats["splits"].values())
    header = {
        "pretty_name": "PerRecBench (rebuilt from Amazon Reviews 2023)",
        "language": ["en"],
        "license": "other",
        "license_name": "amazon-reviews-2023-terms",
        "task_categories": ["text-classification"],
        "tags": ["recommendation", "personalization", "ranking", "llm-evaluation", "amazon-reviews"],
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
        "builder": builder,
        "config_rows": config_rows,
        "seed": str(cfg.seed),
        "test_groups": str(stats["splits"]["test"]["all"]["groups"]),
        "train_note": train_note,
        "load_path": cfg.push_to_hub or cfg.out.name,
        "domains": ", ".join(cfg.domains),
        "window_days": f"{cfg.window_days:g}",
        "min_history": str(cfg.min_history),
        "min_gap": f"{cfg.min_gap:g}",
        "avg_scope": cfg.avg_scope,
        "group_size": str(cfg.group_size),
        "funnel_table": "\n".join(funnel_rows),
        "stats_table": "```\n" + format_table({**stats, "selection": {}}) + "\n```",
        "source": cfg.source if cfg.source.startswith("hf://") else "a local copy of the raw files",
    }
    template = resources.files("hub_cards").joinpath("dataset_card.md").read_text(encoding="utf-8")
    return render(template, values)


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
