"""Fine-tuning examples from the benchmark's train split, rendered and answered exactly as the runner asks.

One example is one request the runner would send for a train group, paired with its true answer:

- **pointwise**: one per user (``UserSlot``), answered with the user's true rating;
- **pairwise**: one per ordered pair (``PairSlot``, both orders, as the runner's all-pairs asks them),
  answered with the user of higher relative rating; each pair gives one ``[User A]`` and one ``[User B]``
  answer, so the two labels are exactly balanced;
- **listwise**: one per group and level (``ListSlot``), answered with the true best-first order; the users
  are shown in the runner's presentation (``--presentation``, balanced by default:
  `presentation`), so a listwise training prompt is the one `evaluate --split train` sends;
- **mixed**: the union of the three, shuffled (seeded).

Nothing about the text is re-implemented here: the slots are the runner's rankers' own requests
(each protocol's `ranker`, `perrec_eval.tasks.perrecbench.protocols`), the prompts come from
`perrec_eval.tasks.perrecbench.systems.render_slot`, the truth from the protocol's `demonstration` (what
few-shot demonstrations show) and the answer text from its `format_answer`, so its `parse` reads every
answer back to its truth.
An example whose prompt is identical to an earlier one (the same user, or the same ordered pair, seen in
several levels) is kept once.

**No test label.** Only the train split is read for examples. The test split's labels, every test
(user, query item) pair, are loaded too, and a train group that would show one of them (as its query or in a
user's history) is left out and counted: whatever split rule the benchmark was built with, no test rating
reaches the examples.

Examples are written as an examples folder (`sft.examples`): ``train-<sha12>.parquet`` (named by content,
PITFALLS 1) with the conversational prompt-completion columns TRL's `SFTTrainer` reads (``prompt``:
system + user messages, ``completion``: the assistant answer) and provenance columns, a card (``README.md``
with its ``configs:``) and ``sft_data.json`` (the facts the card states, read by `perrecbench sft train`).
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from perrec_eval import fileio
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.publish import size_category
from perrec_eval.tasks.perrecbench import context, prompts, protocols
from perrec_eval.tasks.perrecbench.context import GroupContext
from perrec_eval.tasks.perrecbench.presentation import listwise_orders
from perrec_eval.tasks.perrecbench.rankers import Slot
from perrec_eval.tasks.perrecbench.records import Group
from perrec_eval.tasks.perrecbench.retrieval import retrieve_groups
from perrec_eval.tasks.perrecbench.systems import render_slot
from perrec_eval.tasks.perrecbench.vocabulary import METHODS, Method
from perrec_eval.types import Message
from sft.examples import INFO_FILE, check_out, content_name, lengths_per_format, token_ids
from sft.outdir import replaced
from sft.perrecbench.config import DataConfig

logger = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class Example:
    """One training conversation: the runner's request for a train group and its true answer.

    `answer` is the truth (rating | "A"/"B" | best-first 1-based indices); the assistant message of
    `completion` writes it in the format the prompt asks for.
    """

    format: Method
    group_id: str
    domain: str
    level: str
    user_ids: tuple[str, ...]
    prompt: tuple[Message, ...]
    completion: tuple[Message, ...]
    answer: float | str | list[int]

    def to_row(self) -> dict[str, Any]:
        """The parquet row: `prompt`/`completion` for TRL, provenance, and the truth as JSON."""
        return {
            "prompt": [dict(message) for message in self.prompt],
            "completion": [dict(message) for message in self.completion],
            "format": self.format,
            "group_id": self.group_id,
            "domain": self.domain,
            "level": self.level,
            "user_ids": list(self.user_ids),
            "answer": json.dumps(self.answer),
        }


def truth(method: Method, group: Group, slot: Slot) -> float | str | list[int]:
    """The true answer to the runner's request `slot` of `group` (the few-shot demonstrations' rule).

    >>> from perrec_eval.tasks.perrecbench.records import User
    >>> users = tuple(User(f"u{i}", r, 0, 3.0, 3.0, r - 3.0, ()) for i, r in enumerate([2.0, 5.0, 4.0]))
    >>> group = Group("g", "Books", "medium", None, 0, users)
    >>> from perrec_eval.tasks.perrecbench.rankers import ListSlot, PairSlot, UserSlot
    >>> truth("pointwise", group, UserSlot(1)), truth("pairwise", group, PairSlot(2, 0))
    (5.0, 'A')
    >>> truth("listwise", group, ListSlot(3))
    [2, 3, 1]
    """
    return protocols.get(method).true_answer(group.relative_ratings, group.ratings, slot)


def group_examples(method: Method, ctx: GroupContext, variant: str) -> list[Example]:
    """Every request the runner sends for `ctx` with `method` (all pairs for pairwise), with its truth."""
    group = ctx.group
    examples = []
    protocol = protocols.get(method)
    for slot in protocol.ranker(group.avg_ratings, listwise_order=ctx.listwise_order).pending():
        answer = truth(method, group, slot)
        text = protocol.format_answer(answer, n_users=len(slot.users))
        examples.append(
            Example(
                format=method,
                group_id=group.group_id,
                domain=group.domain,
                level=ctx.level,
                user_ids=tuple(group.users[i].user_id for i in slot.users),
                prompt=tuple(render_slot(method, ctx, slot, variant)),
                completion=({"role": "assistant", "content": text},),
                answer=answer,
            )
        )
    return examples


def build_examples(
    methods: Sequence[Method], contexts: Iterable[GroupContext], variant: str, *, seed: int = 0
) -> list[Example]:
    """Examples of `methods` for every group context, identical prompts kept once.

    With one method the examples keep the groups' order; with several they are shuffled (seeded).
    """
    contexts = list(contexts)
    seen: set[str] = set()
    examples = []
    for method in methods:
        for ctx in contexts:
            for example in group_examples(method, ctx, variant):
                key = json.dumps(example.prompt, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    examples.append(example)
    if len(methods) > 1:
        random.Random(seed).shuffle(examples)
    return examples


def methods_of(fmt: str) -> tuple[Method, ...]:
    """The ranking methods a data format holds.

    >>> methods_of("mixed"), methods_of("pairwise")
    (('pointwise', 'pairwise', 'listwise'), ('pairwise',))
    """
    return METHODS if fmt == "mixed" else (fmt,)  # type: ignore[return-value]


def load_train_contexts(config: DataConfig) -> tuple[list[GroupContext], dict[str, Any]]:
    """The train groups of every level as prompts see them, without groups that show a test label.

    Returns:
        (contexts in level then dataset order, facts for the card: groups per level, groups left out)
    """
    # The labels are the test users' query reviews: their histories are not read.
    labels = context.TestLabels.of(context.load_groups(config.data, "full", "test", history=False))
    train: dict[str, list[Group]] = {}
    dropped: dict[str, int] = {}
    for level in config.levels:
        groups = context.load_groups(config.data, level, "train")
        kept = labels.without_leaks(groups)
        dropped[level] = len(groups) - len(kept)
        if config.max_groups is not None:
            kept = context.sample_groups(kept, config.max_groups, config.seed)
        train[level] = kept
    if any(dropped.values()):
        logger.warning("left out train groups that show a test review (label): %s", dropped)
    if not any(train.values()):
        raise DataError(f"{config.data} has no usable train groups in levels {','.join(config.levels)}")
    all_groups = [group for groups in train.values() for group in groups]
    retrieved = retrieve_groups(all_groups, config.k)
    profiles, writer = None, None
    if config.profiles:
        from perrec_eval.tasks.perrecbench.profiles import check_profiles, file_writer, load_profiles

        profiles = load_profiles(config.profiles)
        writer = file_writer(config.profiles)  # one writer's profiles, recorded with the examples
        users = {(group.group_id, user.user_id) for group in all_groups for user in group.users}
        fix = (
            f"write them with `perrecbench profiles --data {config.data} --splits train "
            f"--levels {','.join(config.levels)} --out {config.profiles} ...`, or pass --no-profile"
        )
        check_profiles(users, profiles, config.profiles, fix)
    contexts = [
        ctx
        for level, groups in train.items()
        for ctx in context.contexts(
            groups,
            level,
            retrieved,
            profiles,
            listwise_orders=listwise_orders(groups, config.presentation, seed=config.seed, level=level),
        )
    ]
    facts = {
        "presentation": config.presentation,
        "train_groups": {level: len(groups) for level, groups in train.items()},
        "test_label_groups_left_out": dropped,
        "test_labels_checked": len(labels.pairs),
    }
    if writer is not None:
        facts["profiles_writer"] = writer
    return contexts, facts


def example_lengths(examples: Sequence[Example], tokenizer: Any | None = None) -> list[int]:
    """Length of each conversation: tokens of its chat-templated text with `tokenizer`, else characters."""
    if tokenizer is None:
        return [sum(len(m["content"]) for m in (*ex.prompt, *ex.completion)) for ex in examples]
    return [len(token_ids(tokenizer, [*ex.prompt, *ex.completion])) for ex in examples]


def answer_counts(examples: Sequence[Example]) -> dict[str, dict[str, int]]:
    """Per format, how often each answer occurs (pairwise: A/B; pointwise: ratings; listwise: group sizes)."""
    counts: dict[str, Counter] = {}
    for ex in examples:
        if ex.format == "listwise":
            key = f"{len(ex.user_ids)} users"
        elif ex.format == "pointwise":
            key = f"{float(ex.answer):g}"  # type: ignore[arg-type]
        else:
            key = str(ex.answer)
        counts.setdefault(ex.format, Counter())[key] += 1
    return {fmt: dict(sorted(counter.items())) for fmt, counter in counts.items()}


def describe(
    examples: Sequence[Example], config: DataConfig, facts: Mapping[str, Any], lengths: Sequence[int]
) -> dict[str, Any]:
    """The facts of an examples folder (``sft_data.json``): what it holds, where from, how long."""
    per_format: dict[str, list[int]] = {}
    for ex, length in zip(examples, lengths, strict=True):
        per_format.setdefault(ex.format, []).append(length)
    return {
        "format": config.format,
        "examples": len(examples),
        "examples_per_format": {fmt: len(values) for fmt, values in per_format.items()},
        "groups": len({ex.group_id for ex in examples}),
        "answers": answer_counts(examples),
        "length_unit": "tokens" if config.tokenizer else "characters",
        "tokenizer": config.tokenizer,
        "lengths": lengths_per_format([ex.format for ex in examples], lengths),
        "total_length": sum(lengths),
        "variant": config.variant,
        "k": config.k,
        "levels": list(config.levels),
        "max_groups": config.max_groups,
        "seed": config.seed,
        "source": {
            "data": config.data,
            "split": "train",
            "dataset_fingerprint": context.dataset_fingerprint(config.data),
            "source_kind": source_kind(config.data),
            "profiles": config.profiles,
        },
        **facts,
        "templates": prompts.template_info(),
    }


def source_kind(data: str) -> str | None:
    """``amazon``, ``synthetic`` or ``mixed`` from the build's ``manifest.json`` (None when there is none)."""
    manifest = Path(data) / "manifest.json"
    return fileio.read_json(manifest).get("source_kind") if manifest.is_file() else None


def _features() -> Any:
    import datasets

    message = [{"role": datasets.Value("string"), "content": datasets.Value("string")}]
    return datasets.Features(
        {
            "prompt": message,
            "completion": message,
            "format": datasets.Value("string"),
            "group_id": datasets.Value("string"),
            "domain": datasets.Value("string"),
            "level": datasets.Value("string"),
            "user_ids": [datasets.Value("string")],
            "answer": datasets.Value("string"),
        }
    )


def write_folder(out: str | Path, examples: Sequence[Example], info: Mapping[str, Any]) -> Path:
    """Write the parquet file, ``sft_data.json`` and the card into `out`; return the parquet path.

    The folder is written as a temp sibling that replaces `out` whole (`sft.outdir.replaced`): a kill
    leaves the earlier examples folder or the new one, never a card naming one file beside another's facts.
    """
    import datasets

    if not examples:
        raise DataError("no examples to write: the chosen train groups gave none")
    out = check_out(out)  # resolved: a symlinked --out is written through, not replaced
    rows = [example.to_row() for example in examples]
    name = content_name(rows)
    info = {**info, "file": name}
    with replaced(out) as tmp:
        datasets.Dataset.from_list(rows, features=_features()).to_parquet(str(tmp / name))
        fileio.write_json(tmp / INFO_FILE, info)
        fileio.write_text(tmp / "README.md", card(info))
    return out / name


_SOURCE_NOTES = {
    "synthetic": "**Synthetic data** (`perrecbench synth`): no Amazon review; for testing the pipeline.\n\n",
    "mixed": "**Partly synthetic data** (see the benchmark's `manifest.json`).\n\n",
}


def card(info: Mapping[str, Any]) -> str:
    """The dataset card of an examples folder: YAML header with ``configs:``, then what it holds."""
    header = {
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": info["file"]}]}],
        "task_categories": ["text-generation"],
        "tags": ["perrecbench", "personalization", "recommendation", "sft", "trl"],
        "size_categories": [size_category(info["examples"])],
    }
    unit = info["length_unit"]
    rows = ["| format | examples | min | mean | median | p95 | max |", "|---|---:|---:|---:|---:|---:|---:|"]
    for fmt, stats in info["lengths"].items():
        rows.append(
            f"| {fmt} | {info['examples_per_format'][fmt]:,} | {stats['min']:,} | {stats['mean']:,} | "
            f"{stats['median']:,} | {stats['p95']:,} | {stats['max']:,} |"
        )
    answers = "\n".join(
        f"- {fmt}: " + ", ".join(f"{answer} × {n}" for answer, n in counts.items())
        for fmt, counts in info["answers"].items()
    )
    left_out = sum(info["test_label_groups_left_out"].values())
    levels = ", ".join(f"{level} {n}" for level, n in info["train_groups"].items())
    note = _SOURCE_NOTES.get(info["source"]["source_kind"], "")
    profile_text = (
        "without user profiles (prompt variant `no_profile`: evaluate with `--no-profile`)"
        if info["variant"] == "no_profile"
        else f"with user profiles from `{info['source']['profiles']}` (prompt variant `default`)"
    )
    return f"""---
{yaml.safe_dump(header, sort_keys=False).rstrip()}
---

# PerRecBench fine-tuning examples ({info["format"]})

Conversational prompt-completion examples for TRL's `SFTTrainer`, written by `perrecbench sft data` from the
**train** split of `{info["source"]["data"]}` (PerRecBench: rank users by how much each one likes an item).
Each `prompt` is the exact request `perrecbench evaluate` sends for a train group (same templates, BM25 top
{info["k"]} history items, {profile_text}); each `completion` is the true answer in the format the prompt
asks for, which the runner's parser reads back to the truth.

| format | one example per | answer |
|---|---|---|
| pointwise | user | the user's true rating, `{{"predicted_rating": 4.0}}` |
| pairwise | ordered pair (both orders) | the user of higher relative rating, `[User A]` / `[User B]` |
| listwise | group and level | the true best-first order, `{{"predicted_ranking": [2, 1, 3]}}` |

Listwise prompts show each group's users in the `{info["presentation"]}` presentation, as `perrecbench
evaluate --presentation {info["presentation"]}` does (balanced: paired across each level's groups, so that
any fixed answer is as often right as wrong).

Train groups used per level: {levels} (levels: {", ".join(info["levels"])}). {info["groups"]:,} distinct
groups give {info["examples"]:,} examples; an identical prompt seen in several levels is kept once.

Lengths of whole conversations in {unit}{f" (tokenizer `{info['tokenizer']}`)" if info["tokenizer"] else ""}:

{chr(10).join(rows)}

Answers:
{answers}

{note}No test label: {info["test_labels_checked"]:,} test (user, item) reviews were checked; {left_out}
train groups that would show one (as a query or in a history) were left out.

```python
from datasets import load_dataset
train = load_dataset("PATH_TO_THIS_FOLDER", split="train")
```

Train a LoRA adapter on it: `perrecbench sft train --model MODEL --data PATH_TO_THIS_FOLDER --out ADAPTER`.
"""


def build(config: DataConfig) -> tuple[Path, dict[str, Any]]:
    """`perrecbench sft data`: build the examples of `config` and write the folder.

    Returns:
        (the parquet file, the facts written to ``sft_data.json``)
    """
    from perrec_eval.engines._common import check_local_path

    check_out(config.out, {"--data": config.data, "--profiles": config.profiles})  # before any work
    if config.tokenizer:
        check_local_path(config.tokenizer, "--tokenizer")
    contexts, facts = load_train_contexts(config)
    examples = build_examples(methods_of(config.format), contexts, config.variant, seed=config.seed)
    tokenizer = None
    if config.tokenizer:
        from perrec_eval.extras import require

        transformers = require("transformers", "train", by="fine-tuning")
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(config.tokenizer)
        except (OSError, ValueError) as err:  # transformers' "cannot find or load this"
            raise ConfigError(
                f"--tokenizer {config.tokenizer} cannot be loaded ({' '.join(str(err).split())[:200]}): pass "
                "a model folder or Hub id that holds a tokenizer"
            ) from err
    lengths = example_lengths(examples, tokenizer)
    info = describe(examples, config, facts, lengths)
    return write_folder(config.out, examples, info), info
