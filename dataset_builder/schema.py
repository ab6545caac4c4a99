"""The published row schema: one row per group, users in presentation order."""

from __future__ import annotations

import datasets

DOMAINS: tuple[str, ...] = ("Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics")
CONFIGS: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4, "full": 5}

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
