"""The published row schema: one row per group, users in presentation order.

``CONFIGS`` names the dataset's configs and the users per group of each: the levels easy/medium/hard and
``full`` (every user of the group), the sizes of :data:`perrec_eval.types.LEVEL_SIZES`.
"""

from __future__ import annotations

import datasets

from perrec_eval.types import LEVEL_SIZES

CONFIGS: dict[str, int] = LEVEL_SIZES

HISTORY_ITEM = {
    "parent_asin": datasets.Value("string"),
    "title": datasets.Value("string"),
    "author": datasets.Value("string"),
    "rating": datasets.Value("float64"),
    "timestamp": datasets.Value("int64"),
}

FEATURES = datasets.Features(
    {
        "group_id": datasets.Value("string"),
        "domain": datasets.Value("string"),
        "level": datasets.Value("string"),
        "query": {
            "parent_asin": datasets.Value("string"),
            "title": datasets.Value("string"),
            "author": datasets.Value("string"),
            "main_category": datasets.Value("string"),
            "average_rating": datasets.Value("float64"),
            "rating_number": datasets.Value("int64"),
        },
        "window_start": datasets.Value("int64"),
        "users": datasets.List(
            {
                "user_id": datasets.Value("string"),
                "rating": datasets.Value("float64"),
                "timestamp": datasets.Value("int64"),
                "avg_rating": datasets.Value("float64"),
                "most_common_rating": datasets.Value("float64"),
                "relative_rating": datasets.Value("float64"),
                "history": datasets.List(HISTORY_ITEM),
            }
        ),
    }
)
