"""`perrecbench synth` and `perrecbench build`: the builder's commands, their flags derived from the configs.

The flags, defaults and help texts come from :class:`~dataset_builder.config.SynthConfig` and, for ``build``,
from the config of the task family ``--task`` names (:func:`dataset_builder.tasks.task_config`: the shared
:class:`~dataset_builder.config.BuildSpec` plus the family's own fields; ``--config FILE.yaml`` included):
``build`` reads ``--task`` first and then makes its parser from that family's config, so ``perrecbench build
--task NAME --help`` shows that family's options. The handlers receive the validated config, call the library
and print a summary. Heavy imports stay inside the handlers, so ``perrecbench --help`` stays fast. Errors of
the :mod:`perrec_eval.errors` family are printed as one line by :func:`perrec_eval.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from dataset_builder.config import BuildSpec, SynthConfig
from dataset_builder.tasks import DEFAULT_TASK, task_builder, task_config, task_names
from perrec_eval import cliconfig


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``synth`` and ``build`` to the ``perrecbench`` command."""
    cliconfig.add_command(
        subparsers,
        "synth",
        SynthConfig,
        run_synth,
        help="write synthetic raw Amazon Reviews 2023 files with a planted preference signal",
        description="Write Amazon Reviews 2023 categories (default: the paper's four; any category or all)\n"
        "in the raw layout (<Category>.jsonl, meta_<Category>.jsonl) with a planted, documented personal\n"
        "preference signal, plus synth_truth.json with the planted parameters and synth_marker.json with\n"
        "the sha256 of every file written (a build from them is marked synthetic in its card).",
    )
    build = subparsers.add_parser(
        "build",
        help="build a task family's benchmark (parquet + dataset card + stats) from raw Amazon Reviews 2023 "
        "files",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.__class__ = _TaskParser  # its flags are added once --task is known (`_TaskParser.parse_known_args`)
    build.add_argument(
        "--task",
        default=DEFAULT_TASK,
        metavar="NAME",
        help=f"the task family to build: {', '.join(task_names())} (default: {DEFAULT_TASK}); "
        "`--task NAME --help` shows its options",
    )


class _TaskParser(cliconfig.OneLineParser):
    """The parser of ``perrecbench build``: reads ``--task`` from the arguments first, then adds the flags of
    that family's config (and its description) before parsing them."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        task = _task_of(args)
        if task not in task_names():  # one line, as the CLI prints every error (argparse's adds the usage)
            known = ", ".join(task_names())
            self.exit(2, f"{self.prog}: error: unknown --task {task!r}; known tasks: {known}\n")
        if getattr(self, "_task", None) is None:
            self._task = task
            cls = task_config(task)
            self.description = cls.description
            cliconfig.add_arguments(self, cls)
            cliconfig.add_common_arguments(self)
            self.set_defaults(handler=run_build, config_cls=cls)
        return super().parse_known_args(args, namespace)


def _task_of(args: list[str]) -> str:
    """The value of ``--task`` (or an abbreviation argparse accepts, ``--ta`` up) in `args`, else the default.

    >>> _task_of(["--source", "raw", "--task", "x"]), _task_of(["--tas=y"]), _task_of([])
    ('x', 'y', 'perrecbench')
    """
    task = DEFAULT_TASK
    for i, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if len(flag) > 3 and "--task".startswith(flag):
            task = value if equals else args[i + 1] if i + 1 < len(args) else task
    return task


def run_synth(config: SynthConfig) -> int:
    """``perrecbench synth``, holding the output folder's lock: two synths into one folder would mix files."""
    from perrec_eval.lock import folder_lock

    with folder_lock(config.out):
        return _run_synth(config)


def _run_synth(config: SynthConfig) -> int:
    """``perrecbench synth``: write the files and print a one-screen summary.

    Args:
        config: the validated settings.

    Returns:
        The exit status (0).
    """
    from dataset_builder.synth import write_synthetic

    summary = write_synthetic(
        config.out,
        reviews_per_domain=config.reviews_per_domain,
        domains=config.domains,
        seed=config.seed,
        gzip=config.gzip,
        dirty=config.dirty,
        twins=config.twins,
        shape=config.shape,
    )
    print(f"wrote {summary['out']} in {summary['seconds']} s ({summary['reviews_per_second']:,} reviews/s)")
    for name, info in summary["domains"].items():
        print(
            f"  {name}: {info['reviews']:,} reviews, {info['users']:,} users "
            f"({info['users_over_20_reviews']:,} with >20 reviews), {info['items']:,} items"
        )
    for fault in summary["faults"]:
        where = f"line {fault['line']}" if "line" in fault else fault["parent_asin"]
        print(f"  planted fault {fault['kind']}: {fault['file']} {where}")
    print(f"  planted parameters: {summary['truth']}")
    return 0


def run_build(config: BuildSpec) -> int:
    """``perrecbench build``, holding the lock beside ``--out`` (and ``--work-dir``): a second build into
    the same folder, or with the same stages, is refused instead of deleting the other's stage files."""
    from perrec_eval.lock import file_lock

    config.check_source_apart()  # before the lock beside --out, which may lie in the source folder
    work_dir = file_lock(config.work_dir) if config.work_dir is not None else contextlib.nullcontext()
    with file_lock(config.out), work_dir:  # the default stages sit beside --out: its lock covers them
        return _run_build(config)


def _run_build(config: BuildSpec) -> int:
    """``perrecbench build``: build the folder and print the family's summary of it.

    Args:
        config: the validated settings.

    Returns:
        The exit status (0).
    """
    from dataset_builder.build import build

    build(config)
    print(task_builder(config.task).summary(Path(config.out)))  # the folder as the user named it
    return 0
