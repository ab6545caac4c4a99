"""PerRecBench's settings of `perrecbench sft data`: chat examples of its three methods from the train split.

Only light modules are imported here, so ``--help`` is fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from perrec_eval.cliconfig import option
from perrec_eval.errors import ConfigError
from perrec_eval.tasks.perrecbench.config import PromptSpec
from perrec_eval.tasks.perrecbench.presentation import Presentation
from perrec_eval.tasks.perrecbench.vocabulary import LEVEL_SIZES

SFTFormat = Literal["pointwise", "pairwise", "listwise", "mixed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataConfig(PromptSpec):
    """Settings of `perrecbench sft data`: chat examples for fine-tuning from the train split."""

    level_choices = tuple(LEVEL_SIZES)  # full: the 5-user groups, train only

    format: SFTFormat = option(
        "answer format: pointwise (a rating per user), pairwise (every pair in both orders), listwise (the "
        "best-first order of a group), or mixed (the union of the three, shuffled)"
    )
    out: str = option(
        "output folder: a `datasets` folder (parquet + card) that `perrecbench sft train` reads"
    )
    presentation: Presentation = option(
        "order of the users in listwise examples, as `perrecbench evaluate --presentation`: balanced (paired "
        "across each level's groups, seeded by --seed) or dataset (the dataset's order)",
        default="balanced",
    )
    tokenizer: str | None = option(
        "tokenizer (model id or folder) for token counts in the card",
        default=None,
        shown="character counts",
    )

    def __post_init__(self) -> None:
        PromptSpec.__post_init__(self)
        if not self.profiles and not self.no_profile:
            raise ConfigError(
                "pass --profiles PATH (profiles of the train users, written with `perrecbench profiles "
                "--splits train --out PATH ...`) or --no-profile (prompts without profiles)"
            )

    @property
    def variant(self) -> str:
        """The runner's prompt variant the examples are rendered with."""
        return "no_profile" if self.no_profile else "default"
