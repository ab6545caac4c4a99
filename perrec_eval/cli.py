"""The `perrecbench` console command: one entry point, subcommands registered by each part.

Each command module exposes `register(subparsers)` and adds its subcommands with
`cliconfig.add_command(subparsers, NAME, ConfigClass, handler)`: the flags come from the config dataclass
and the handler receives the validated config. Heavy imports stay inside the handlers, so
`perrecbench --help` stays fast.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from collections.abc import Sequence

from dataset_builder import cli as builder_cli
from perrec_eval import cliconfig, commands, progress, push_cli
from perrec_eval.errors import PerrecbenchError
from perrec_eval.harness import cli as harness_cli
from perrec_eval.leaderboard import cli as leaderboard_cli
from perrec_eval.logs import setup_logging
from perrec_eval.secrets import redact_text, redact_tracebacks
from sft import cli as sft_cli

logger = logging.getLogger("perrecbench")

_MAX_MESSAGE = 2000  # characters of an error line


def build_parser() -> argparse.ArgumentParser:
    parser = cliconfig.OneLineParser(
        prog="perrecbench",
        description="perrecbench: three LLM-recommendation benchmarks, PerRecBench, LLMRec and RecBench+ "
        "(task families, picked with --task; `perrecbench tasks` lists them): build each one, evaluate "
        "models and baselines on it, score other systems' predictions, report, fine-tune and publish.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    cliconfig.add_common_arguments(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the order --help lists them
    for part in (builder_cli, commands, leaderboard_cli, harness_cli, sft_cli, push_cli):
        part.register(subparsers)
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("perrecbench")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e . from the clone)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # a family's own options; a run or benchmark folder's --task
        argv = cliconfig.select_task(argv, build_parser)
    except PerrecbenchError as err:
        print(f"perrecbench: error: {err}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose, debug = getattr(args, "verbose", False), getattr(args, "debug", False)
    setup_logging(verbose=verbose)
    redact_tracebacks()
    if getattr(args, "no_progress", False):
        progress.disable()
    try:
        config = cliconfig.from_namespace(args.config_cls, args)
        with progress.logging_between_bars():
            return int(args.handler(config) or 0)
    except PerrecbenchError as err:
        # Bad input, missing extras, unwritable or missing files: the message names the fix; any other
        # exception is a bug and keeps its traceback.
        if debug:
            raise
        logger.debug("details", exc_info=True)
        message = redact_text(" ".join(str(err).split())) or type(err).__name__
        if len(message) > _MAX_MESSAGE:  # a message quoting a huge value must not flood the terminal
            message = message[:_MAX_MESSAGE] + " ... (cut; --debug shows it whole)"
        print(f"perrecbench {args.command}: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:
        # A full disk or a file this user may not read or write can meet any read or write of any command:
        # one line naming the file and the fix (atomic writes leave finished files as they were).
        problem = _environment_problem(err)
        if debug or problem is None:
            raise
        logger.debug("details", exc_info=True)
        print(f"perrecbench {args.command}: error: {redact_text(problem)}", file=sys.stderr)
        return 2
    except RecursionError:
        # every reader names its file (`fileio.loads`); one that does not still ends in one line
        if debug:
            raise
        logger.debug("details", exc_info=True)
        print(
            f"perrecbench {args.command}: error: an input is nested too deeply to be read (such as JSON "
            "of thousands of nested brackets): check the files the command reads (--debug shows where)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as err:
        if not _is_interrupt(err):
            raise
        return _interrupted()


def _environment_problem(err: OSError) -> str | None:
    """The one-line message of an error of the machine rather than of the program (None: a bug).

    >>> _environment_problem(OSError(errno.ENOSPC, "No space left on device", "runs/a/cache.jsonl"))[:60]
    'runs/a/cache.jsonl: no space left on the device: free some s'
    >>> _environment_problem(PermissionError(errno.EACCES, "Permission denied", "bench/easy"))
    'bench/easy: permission denied: give this user access to it, or choose another path'
    >>> _environment_problem(IsADirectoryError(errno.EISDIR, "Is a dir", "run/.tmp", None, "run/report.md"))
    'run/report.md: is a folder where a file belongs: move it away'
    >>> _environment_problem(OSError("unexpected")) is None
    True
    """
    # os.replace(tmp, target) names the target second: the name the user knows
    named = err.filename2 if err.filename2 is not None else err.filename
    where = f"{named}: " if named else ""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"{where}no space left on the device: free some space and run the same command again "
            "(finished files are kept)"
        )
    if isinstance(err, PermissionError):
        return f"{where}permission denied: give this user access to it, or choose another path"
    if err.errno == errno.EROFS:
        return f"{where}the file system is read-only: choose a writable path"
    if err.errno == errno.EISDIR:
        return f"{where}is a folder where a file belongs: move it away"
    if err.errno == errno.ENOTDIR:
        return f"{where}a part of this path is a file where a folder belongs: choose another path"
    if err.errno == errno.ENAMETOOLONG:
        return f"{where[:200]}{'... ' if len(where) > 200 else ''}a name in this path is too long: shorten it"
    return None


def _is_interrupt(err: Exception) -> bool:
    """Whether `err` is DuckDB's form of Ctrl-C inside a query (a RuntimeError, or its InterruptException)."""
    if isinstance(err, RuntimeError) and str(err) == "Query interrupted":
        return True
    kind = type(err)
    return kind.__name__ == "InterruptException" and kind.__module__.lstrip("_").startswith("duckdb")


def _interrupted() -> int:
    print("interrupted: finished work is kept; run the same command again to resume", file=sys.stderr)
    return 130


if __name__ == "__main__":
    sys.exit(main())
