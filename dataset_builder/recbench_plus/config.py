"""The settings of ``perrecbench build --task recbench-plus`` (imports nothing heavy: the CLI reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dataset_builder.config import BuildConfigError, BuildSpec, portable_name
from perrec_eval.cliconfig import option
from perrec_eval.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BuildConfig(BuildSpec):
    """RecBench+'s build: an item knowledge graph from the metadata, then condition queries per user."""

    task: ClassVar[str] = "recbench-plus"
    description: ClassVar[str] = (
        "Build RecBench+ queries (explicit, implicit, misinformed, interest) from an item knowledge graph of "
        "the metadata (author, store, categories, details) and users' histories; from MovieLens-1M files "
        "(ratings.dat, movies.dat, users.dat) also demographics queries."
    )

    users: int = option(
        "test users sampled per domain (each gives up to --queries-per-user queries)", default=500
    )
    train_users: int = option(
        "train users per domain, disjoint from the test users (for `sft data`)", default=500
    )
    queries_per_user: int = option(
        "queries per user (candidates of 3-4, 2 and 1 conditions in turn; each gives a query of every type)",
        default=2,
    )
    min_history: int = option("a user needs at least this many reviewed items with metadata", default=5)
    min_subset: int = option("a condition must be shared by at least this many history items", default=2)
    max_subset: int = option("and by at most this many (the ground truth's largest size)", default=10)
    min_items: int = option("drop a relation value held by fewer catalogue items than this", default=3)
    max_share: float = option(
        "drop a relation value held by more than this share of the catalogue's items", default=0.2
    )
    details_keys: tuple[str, ...] | None = option(
        "the metadata `details` keys read as relations (comma-separated)",
        default=None,
        shown="the list per category in dataset_builder/recbench_plus/kg.py",
    )
    item_attributes: str | None = option(
        "a file of further item relations feeding the knowledge graph: CSV/TSV with the header "
        "item_id,relation,value, or JSONL of those keys (e.g. director, actor, composer exported from "
        "Wikidata; item ids as the source's: MovieLens movie ids or parent_asin)",
        default=None,
    )
    dedupe_queries: bool = option(
        "keep one query per identical text and type (the first user's), so that one text has one ground "
        "truth; by default every user's query is kept and shown with their history (docs/recbench-plus.md)",
        default=False,
    )
    groups_per_type: int = option(
        "demographics (MovieLens-1M): the largest groups kept of each attribute combination", default=10
    )
    min_group_size: int = option("demographics: a group needs at least this many users", default=20)
    min_group_raters: int = option(
        "demographics: an item is a group's distinctive item only when this many of its users rated it",
        default=5,
    )
    top_items: int = option("demographics: the distinctive items of a group the queries draw on", default=10)
    queries_per_group: int = option("demographics: queries per group (distinct item subsets)", default=5)
    seed: int = option("seed of the user sample and of the choice of conditions", default=0)
    k: int = option(
        "K of the fixed-K cells: the recommend-k protocol asks for K titles and scores the first K, and the "
        "baselines answer K items",
        default=5,
    )

    phrasing: str = option(
        "how queries are worded: template (deterministic, offline) or llm (each template query rewritten in "
        "the paper's situational style by --engine/--model, checked, cached next to the stage files)",
        default="template",
    )
    engine: str | None = option("llm phrasing: the engine (fake, hf, openai, vllm)", default=None)
    model: str | None = option("llm phrasing: the model id or path", default=None)
    engine_args: tuple[str, ...] = option(
        "llm phrasing: engine option KEY=VALUE, repeatable (e.g. base_url=URL for openai)",
        default=(),
        flag="--engine-arg",
        repeat=True,
        metavar="KEY=VALUE",
    )
    phrasing_retries: int = option(
        "llm phrasing: times a refused rewrite (a hidden value named, a condition left out) is asked again "
        "before its query is dropped",
        default=2,
    )

    def engine_spec(self) -> Any:
        """The engine of LLM phrasing (`perrec_eval.config.EngineSpec`)."""
        from perrec_eval.config import EngineSpec

        return EngineSpec(engine=self.engine, model=self.model, engine_args=self.engine_args)

    def __post_init__(self) -> None:
        BuildSpec.__post_init__(self)
        if self.phrasing not in ("template", "llm"):
            raise BuildConfigError(f"--phrasing must be template or llm, got {self.phrasing!r}")
        if self.phrasing == "llm":
            if not self.engine or not self.model:
                raise BuildConfigError("--phrasing llm needs --engine and --model (the model that rewrites)")
            try:
                self.engine_spec()
            except ConfigError as err:
                raise BuildConfigError(str(err)) from None
        elif self.engine or self.model or self.engine_args:
            raise BuildConfigError("--engine, --model and --engine-arg phrase queries: add --phrasing llm")
        if self.phrasing_retries < 0:
            raise BuildConfigError(f"--phrasing-retries must be >= 0, got {self.phrasing_retries}")
        names = ("users", "queries_per_user", "min_history", "min_items", "k", "groups_per_type")
        for name in (*names, "min_group_size", "min_group_raters", "top_items", "queries_per_group"):
            if getattr(self, name) < 1:
                raise BuildConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.train_users < 0 or self.seed < 0:
            raise BuildConfigError("--train-users and --seed must be integers >= 0")
        if not 2 <= self.min_subset <= self.max_subset:
            raise BuildConfigError(
                f"--min-subset must be at least 2 and at most --max-subset, got {self.min_subset} and "
                f"{self.max_subset}"
            )
        if not 0 < self.max_share <= 1:
            raise BuildConfigError(f"--max-share must lie in (0, 1], got {self.max_share}")
        if isinstance(self.details_keys, str):
            keys = tuple(key.strip() for key in self.details_keys.split(",") if key.strip())
            object.__setattr__(self, "details_keys", keys)
        if self.details_keys is not None and not all(isinstance(k, str) and k for k in self.details_keys):
            raise BuildConfigError("--details-keys must name metadata details keys, e.g. Publisher,Language")

    def params(self) -> dict[str, Any]:
        """What the stage and the queries depend on (the stage cache's key, the manifest's parameters)."""
        names = ("users", "train_users", "queries_per_user", "min_history", "min_subset", "max_subset")
        names += ("min_items", "max_share", "seed", "k", "dedupe_queries", "groups_per_type")
        names += ("min_group_size", "min_group_raters", "top_items", "queries_per_group")
        details = None if self.details_keys is None else list(self.details_keys)
        attributes = None
        if self.item_attributes is not None:
            attributes = {"file": portable_name(self.item_attributes)}
            attributes["sha256"] = _sha256(self.item_attributes)
        phrasing: dict[str, Any] = {"phrasing": self.phrasing}
        if self.phrasing == "llm":
            phrasing |= {
                "engine": self.engine,
                "model": self.model,
                "phrasing_retries": self.phrasing_retries,
            }
        return {
            **{name: getattr(self, name) for name in names},
            "details_keys": details,
            "item_attributes": attributes,
            **phrasing,
        }

    def as_manifest(self) -> dict[str, Any]:
        return {"source": portable_name(self.source), **self.params()}


def _sha256(path: str) -> str:
    """The content hash of a file the build reads (one line naming the fix when it cannot be read)."""
    import hashlib

    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as err:
        raise BuildConfigError(f"--item-attributes {path}: {err.strerror}; pass a readable file") from None
