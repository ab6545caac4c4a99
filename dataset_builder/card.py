"""Dataset cards: a ``hub_cards/`` template filled with a build's facts through ``huggingface_hub``'s card
templates (``DatasetCard.from_template``: jinja, with the metadata the Hub parses in ``DatasetCardData``).

Each task family writes its card's content (``dataset_builder/<family>/card.py``) and fills its template here.
"""

from __future__ import annotations

from importlib import resources
from typing import Any


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


def fill_card(header: dict[str, Any], template: str, values: dict[str, Any]) -> str:
    """A card: the YAML header (in this order) and the template ``hub_cards/<template>`` filled with `values`.

    Args:
        header: the card's metadata (``DatasetCardData`` fields: ``pretty_name``, ``configs``, ...).
        template: the file name of a jinja template in ``hub_cards/``.
        values: the template's variables.

    Returns:
        The README.md text, ending with a newline.
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    data = DatasetCardData(**header)
    data.to_yaml(original_order=list(header))  # the header keeps this order (DatasetCardData has its own)
    text = resources.files("hub_cards").joinpath(template).read_text(encoding="utf-8")
    # jinja drops the template's final newline
    return str(DatasetCard.from_template(data, template_str=text, **values)) + "\n"
