"""PerRecBench evaluation runner: prompts, retrieval, profiles, ranking methods, engines, runs."""

__version__ = "0.1.0"
