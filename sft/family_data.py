"""`perrecbench sft data --task NAME` for a family on the general path: chat examples from its train split.

Each example is a request the runner sends for a train doc (its protocol's runner's first requests,
rendered by the protocol) paired with the true answer written as the prompt asks for it
(`true_answer` + `format_answer`), so the protocol's own parser reads every answer back to its truth. The
folder is a `datasets` folder (a parquet file named by its content, a card with ``configs:``) and
``sft_data.json``, the file `perrecbench sft train` reads, as PerRecBench's examples folders are.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import fileio
from perrec_eval.cliconfig import check_task, option
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.evaluation import fingerprint
from perrec_eval.lock import folder_lock
from perrec_eval.registry import get
from perrec_eval.task import Cell, Doc, Task
from sft.examples import INFO_FILE, check_out, lengths_per_format
from sft.outdir import replaced


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyDataConfig:
    """Settings of `perrecbench sft data --task NAME`: a family's training examples."""

    task: str = option("task family (`perrecbench tasks` lists them)", default="perrecbench")
    data: str = option("benchmark folder written by `perrecbench build --task NAME`")
    out: str = option(
        "output folder: a `datasets` folder (parquet + card) that `perrecbench sft train` reads"
    )
    format: str = option(
        "one request protocol of the family, or mixed (the family's mix, shuffled)", default="mixed"
    )
    subsets: tuple[str, ...] | None = option(
        "the family's subsets whose train docs give examples (comma-separated)", default=None, shown="all"
    )
    max_docs: int | None = option(
        "use N train docs of each subset: a seeded sample (default: all)", default=None
    )
    seed: int = option("seed of the --max-docs sample and of the mixed shuffle", default=0)
    prompts: str | None = option(
        "a prompt variant of the family (evaluate the fine-tuned model with the same --prompts)",
        default=None,
        shown="the one the family fine-tunes with",
    )

    def __post_init__(self) -> None:
        check_task(self.task)
        task = get(self.task)
        if self.prompts is not None and self.prompts not in task.prompt_variants:
            known = ", ".join(task.prompt_variants) or "none"
            raise ConfigError(f"--prompts of task {task.name} must be one of its variants ({known})")
        if self.format != "mixed" and self.format not in task.protocols:
            raise ConfigError(
                f"--format must be mixed or one of {', '.join(task.protocols)}, got {self.format!r}"
            )
        if isinstance(self.subsets, str):
            object.__setattr__(self, "subsets", tuple(s for s in self.subsets.split(",") if s))
        if self.subsets is not None and any(s not in task.subsets for s in self.subsets):
            raise ConfigError(f"--subsets of task {task.name} must be a subset of {','.join(task.subsets)}")


def examples(
    task: Task, docs: dict[str, list[Doc]], protocols: tuple[str, ...], prompts: str | None = None
) -> list[dict[str, Any]]:
    """One row per request a runner sends first for a train doc, with the true answer as its completion
    (rendered in prompt variant `prompts`; None: the protocols' default); a doc that several subsets hold
    (RecBench+: a query type and its condition-count group) gives it once."""
    variant = {} if prompts is None else {"variant": prompts}
    rows = []
    seen: set[tuple[str, str, str]] = set()
    cells = set(task.cells())
    for protocol_name in protocols:
        protocol = task.protocols[protocol_name]
        for subset, subset_docs in docs.items():
            if Cell(subset, protocol_name) not in cells:
                continue
            for doc in subset_docs:
                for slot in protocol.runner(doc).pending():
                    answer = protocol.true_answer(doc, slot)
                    messages = protocol.render(doc, slot, **variant)
                    key = (protocol_name, doc.id, json.dumps(messages))
                    if key in seen:
                        continue
                    seen.add(key)
                    rows.append(
                        {
                            "prompt": messages,
                            "completion": [
                                {"role": "assistant", "content": protocol.format_answer(answer, slot)}
                            ],
                            "format": protocol_name,
                            "subset": subset,
                            "id": doc.id,
                            "answer": json.dumps(answer),
                        }
                    )
    return rows


def write_command(config: FamilyDataConfig) -> int:
    """Write the examples folder; print where and how many."""
    import datasets

    task = get(config.task)
    protocols = _protocols(task, config.format)
    cells = set(task.cells())
    subsets = [s for s in config.subsets or task.subsets if any(Cell(s, p) in cells for p in protocols)]
    out = check_out(config.out, {"--data": config.data})  # resolved: a symlinked --out is written through
    from dataset_builder.manifest import check_files

    check_files(config.data)  # as `evaluate` checks the build: no file missing or replaced
    with folder_lock(out):
        docs = {
            subset: list(
                task.load_docs(config.data, subset, "train", max_docs=config.max_docs, seed=config.seed)
            )
            for subset in subsets
        }
        rows = examples(task, docs, protocols, config.prompts or task.sft_prompts)
        if not rows:
            raise DataError(f"no examples: {config.data} has no train docs in {', '.join(subsets)}")
        if config.format == "mixed":
            random.Random(config.seed).shuffle(rows)
        digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:12]
        name = f"train-{digest}.parquet"
        info = describe(task, config, rows, sum(map(len, docs.values())))
        info["file"] = name
        with replaced(out) as tmp:
            datasets.Dataset.from_list(rows).to_parquet(str(tmp / name))
            fileio.write_json(tmp / INFO_FILE, info)
            fileio.write_text(tmp / "README.md", card(task, info))
    print(f"{len(rows)} examples of task {task.name} written to {out}/ ({name})")
    return 0


def _protocols(task: Task, fmt: str) -> tuple[str, ...]:
    """The protocols whose examples `fmt` (`--format`) writes: one, or the family's mix (`Task.sft_mixed`)."""
    if fmt != "mixed":
        return (fmt,)
    return tuple(task.protocols) if task.sft_mixed is None else task.sft_mixed


def describe(task: Task, config: FamilyDataConfig, rows: list[dict[str, Any]], n_docs: int) -> dict[str, Any]:
    """The facts of the examples folder (``sft_data.json``): those every examples folder holds
    (`sft.examples`), the family's name and its subsets."""
    lengths = [sum(len(m["content"]) for m in (*row["prompt"], *row["completion"])) for row in rows]
    formats = [row["format"] for row in rows]
    protocols = _protocols(task, config.format)
    answers: dict[str, Counter] = {}
    for row in rows:
        answers.setdefault(row["format"], Counter())[row["answer"]] += 1
    return {
        "task": task.name,
        "format": config.format,
        "examples": len(rows),
        "examples_per_format": {protocol: formats.count(protocol) for protocol in protocols},
        "docs": n_docs,
        "subsets": list(config.subsets or task.subsets),
        "answers": {fmt: dict(sorted(counts.items())) for fmt, counts in answers.items()},
        "length_unit": "characters",
        "lengths": lengths_per_format(formats, lengths),
        "total_length": sum(lengths),
        "max_docs": config.max_docs,
        "seed": config.seed,
        "prompts": config.prompts or task.sft_prompts,
        "source": {
            "data": config.data,
            "split": "train",
            "dataset_fingerprint": fingerprint(config.data),
        },
    }


def card(task: Task, info: dict[str, Any]) -> str:
    """The examples folder's card: YAML ``configs:`` and what it holds."""
    import yaml

    header = {
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": info["file"]}]}],
        "task_categories": ["text-generation"],
        "tags": ["perrecbench", task.name, "sft", "trl"],
    }
    counts = "\n".join(f"- {fmt}: {n:,}" for fmt, n in info["examples_per_format"].items())
    source = Path(info["source"]["data"]).name
    return (
        f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n# {task.title}: training examples\n\n"
        f"{info['examples']:,} conversational prompt-completion examples from the train split of "
        f"`{source}`: each prompt is the request `perrecbench evaluate` sends, each completion its true "
        f"answer.\n\n{counts}\n"
    )
