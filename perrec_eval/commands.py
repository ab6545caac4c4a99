"""`perrecbench evaluate | score | profiles | tasks | convert-gguf`: one config class and one handler each.

`evaluate`, `score` and `profiles` are the task family's (`--task`, default perrecbench): each family runs
them its own way (`Task.handlers`) or through the general path (`perrec_eval.evaluation`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from perrec_eval.cliconfig import add_command, for_task, selected_task
from perrec_eval.config import ConvertGGUFConfig, TasksConfig
from perrec_eval.registry import default_command


def engine_options_help() -> str:
    """Every engine's options, for the --help epilog of the commands that load an engine."""
    from perrec_eval.engines import ENGINE_NAMES, describe_options

    parts = ["engine options (--engine-arg KEY=VALUE):"]
    for name in ENGINE_NAMES:
        parts += [f" {name}:", describe_options(name)]
    return "\n".join(parts)


def budgets_help(task_name: str | None) -> str:
    """The default answer budget of each request protocol of a family (the default family when None)."""
    from perrec_eval import registry

    name = task_name or registry.DEFAULT_TASK
    if name not in registry.evaluable():
        return ""
    task = registry.get(name)
    budgets = ", ".join(f"{name}={protocol.max_tokens}" for name, protocol in task.protocols.items())
    return f"default answer budgets of {task.name} (tokens; --max-new-tokens NAME=N sets one): {budgets}"


def family_words(task_name: str | None) -> str:
    """Which family a command's options are, and how to see another's (for `--help`)."""
    from perrec_eval import registry

    name = task_name or registry.DEFAULT_TASK
    if name not in registry.evaluable():  # a family with a builder only: no options of its own here
        return ""
    others = ", ".join(other for other in registry.evaluable() if other != name)
    return (
        f"The options below are {registry.get(name).title}'s (--task {name}); `perrecbench {{command}} "
        f"--task NAME --help` shows another family's ({others}; `perrecbench tasks` lists them)."
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    epilog = engine_options_help()
    family = family_words(selected_task())
    add_command(
        subparsers,
        "evaluate",
        *for_task("evaluate", *default_command("evaluate")),
        epilog="\n\n".join(filter(None, (budgets_help(selected_task()), epilog))),
        help="run a model (or the no-LLM baselines) on a family's benchmark (--task: PerRecBench, LLMRec, "
        "RecBench+) and score it",
        description="Evaluate a model (or the no-LLM baselines) on a built benchmark of a task family; "
        "writes run.json, samples.jsonl, predictions.jsonl and scores.json into --out (PerRecBench also "
        "report.md). Running the same command again resumes from the cache. "
        + family.format(command="evaluate"),
    )
    add_command(
        subparsers,
        "score",
        *for_task("score", *default_command("score")),
        help="re-score a finished run from its saved predictions, or score another system's predictions "
        "file (--task picks the family)",
        description="Re-score a finished run from its saved predictions; where a family takes them "
        "(--predictions among its options), score another system's predictions file on a build. "
        + family.format(command="score"),
    )
    add_command(
        subparsers,
        "profiles",
        *for_task("profiles", *default_command("profiles")),
        help="PerRecBench only: write one LLM profile per (group, user), shared by every model you compare",
        description="PerRecBench only (LLMRec and RecBench+ ask without profiles): write one user profile "
        "per (group, user) with an LLM, read by `perrecbench evaluate --profiles FILE`.",
        epilog=epilog,
    )
    add_command(
        subparsers,
        "tasks",
        TasksConfig,
        list_tasks,
        help="list the task families with their cells, metrics and baselines",
    )
    add_command(
        subparsers,
        "convert-gguf",
        ConvertGGUFConfig,
        convert_gguf,
        help="write a GGUF model file as a transformers model folder (for --engine vllm)",
    )


def list_tasks(config: TasksConfig) -> int:
    """Print every task family: its cells, metrics and baselines (``--json``: the same as JSON)."""
    from perrec_eval import registry

    described = [registry.get(name).describe() for name in registry.evaluable()]
    if config.json:
        print(json.dumps(described, indent=2, ensure_ascii=False))
        return 0
    for task in (registry.get(name) for name in registry.evaluable()):
        metrics = ", ".join(
            f"{m.name} ({'higher' if m.higher_is_better else 'lower'} is better, {m.aggregation})"
            for m in task.metrics
        )
        print(f"{task.name}: {task.title}: {task.description}")
        if task.subset_protocols is None:
            print(f"  cells:     {task.subset_axis} ({', '.join(task.subsets)}) × {task.protocol_axis} "
                  f"({', '.join(task.protocols)})")
        else:
            print(f"  cells:     {task.subset_axis}/{task.protocol_axis}: "
                  f"{', '.join(str(cell) for cell in task.cells())}")
        print(f"  metrics:   {metrics}")
        print(f"  baselines: {', '.join(task.baselines)}")
    return 0


def convert_gguf(config: ConvertGGUFConfig) -> int:
    """Write the model folder into a temp sibling and swap it in, holding the lock beside `--out`; a folder
    that an earlier `convert-gguf` did not write is refused (`perrec_eval.outputs`)."""
    from perrec_eval import fileio, outputs
    from perrec_eval.engines._common import CONVERTED
    from perrec_eval.engines.hf import convert_gguf as convert
    from perrec_eval.lock import file_lock

    out = outputs.target(config.out)
    outputs.refuse_overlap(out, {"GGUF": config.gguf})
    outputs.refuse_foreign(out, _converted_files(out), command="convert-gguf")
    with file_lock(out):
        outputs.refuse_foreign(out, _converted_files(out), command="convert-gguf")  # again, under the lock
        with outputs.replaced(out) as tmp:
            convert(config.gguf, str(tmp))
            fileio.open_permissions(tmp)  # safetensors writes model.safetensors 0600, beside 0644 files
            files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
            fileio.write_json(tmp / CONVERTED, {"gguf": Path(config.gguf).name, "files": files})
    print(f"{config.gguf} written to {config.out} (float32 weights): --model {config.out}")
    return 0


def _converted_files(out: Path) -> Callable[[PurePosixPath], bool]:
    """Whether a path in `out` is a file an earlier `convert-gguf` wrote (its record lists them)."""
    from perrec_eval.engines._common import CONVERTED

    try:
        listed = set(json.loads((out / CONVERTED).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        listed = set()
    return lambda path: str(path) == CONVERTED or str(path) in listed
