"""PerRecBench's words: its ranking methods (the request protocols) and its levels (group sizes)."""

from __future__ import annotations

from typing import Literal

Method = Literal["pointwise", "pairwise", "listwise"]
Level = Literal["easy", "medium", "hard"]
METHODS: tuple[Method, ...] = ("pointwise", "pairwise", "listwise")
LEVELS: tuple[Level, ...] = ("easy", "medium", "hard")
LEVEL_SIZES: dict[str, int] = {"easy": 2, "medium": 3, "hard": 4, "full": 5}
