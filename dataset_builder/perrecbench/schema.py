"""The published row schema: one row per group, users in presentation order.

``CONFIGS`` names the dataset's configs and the users per group of each: the levels easy/medium/hard and
``full`` (every user of the group), the sizes of :data:`perrec_eval.types.LEVEL_SIZES`.

The features are declared once, as the dictionary ``datasets`` itself stores in a parquet file's
``huggingface`` metadata. :data:`ARROW_SCHEMA` (Arrow types plus that metadata, what the builder writes) is
derived from it with pyarrow alone, so a build never imports ``datasets`` (≈ 0.4 s of start-up);
:data:`FEATURES` (``datasets.Features``) is made from it on first access.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pyarrow as pa

from perrec_eval.tasks.perrecbench.vocabulary import LEVEL_SIZES

CONFIGS: dict[str, int] = LEVEL_SIZES


def _value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


def _list(feature: dict[str, Any]) -> dict[str, Any]:
    return {"feature": feature, "_type": "List"}


HISTORY_ITEM: dict[str, Any] = {
    "parent_asin": _value("string"),
    "title": _value("string"),
    "author": _value("string"),
    "rating": _value("float64"),
    "timestamp": _value("int64"),
}

FEATURES_DICT: dict[str, Any] = {
    "group_id": _value("string"),
    "domain": _value("string"),
    "level": _value("string"),
    "query": {
        "parent_asin": _value("string"),
        "title": _value("string"),
        "author": _value("string"),
        "main_category": _value("string"),
        "average_rating": _value("float64"),
        "rating_number": _value("int64"),
    },
    "window_start": _value("int64"),
    "users": _list(
        {
            "user_id": _value("string"),
            "rating": _value("float64"),
            "timestamp": _value("int64"),
            "avg_rating": _value("float64"),
            "most_common_rating": _value("float64"),
            "relative_rating": _value("float64"),
            "history": _list(HISTORY_ITEM),
        }
    ),
}

_VALUE_TYPES = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64()}


def arrow_type(feature: dict[str, Any]) -> pa.DataType:
    """The Arrow type ``datasets`` gives a feature of :data:`FEATURES_DICT` (a ``Value``, a ``List`` or a
    dict of features, i.e. a struct).

    >>> arrow_type(_list({"x": _value("int64")}))
    ListType(list<item: struct<x: int64>>)
    """
    kind = feature.get("_type")
    if kind == "Value":
        return _VALUE_TYPES[feature["dtype"]]
    if kind == "List":
        return pa.list_(arrow_type(feature["feature"]))
    return pa.struct([(name, arrow_type(sub)) for name, sub in feature.items()])


ARROW_SCHEMA: pa.Schema = pa.schema(
    [(name, arrow_type(feature)) for name, feature in FEATURES_DICT.items()],
    metadata={"huggingface": json.dumps({"info": {"features": FEATURES_DICT}})},
)


@cache
def _features() -> Any:
    import datasets

    return datasets.Features.from_dict(FEATURES_DICT)


def __getattr__(name: str) -> Any:
    # FEATURES is made on first access: importing datasets takes ≈ 0.4 s that a build does not need.
    if name == "FEATURES":
        return _features()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
