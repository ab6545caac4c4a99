"""The `perrecbench` console command: one entry point, subcommands registered by each part.

Each command module exposes `register(subparsers)` and adds its subcommands with
`cliconfig.add_command(subparsers, NAME, ConfigClass, handler)`: the flags come from the config dataclass
and the handler receives the validated config. Heavy imports stay inside the handlers, so
`perrecbench --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from perrec_eval import cliconfig
from perrec_eval.errors import PerrecbenchError

_COMMAND_MODULES = ("dataset_builder.cli", "perrec_eval.commands", "sft.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perrecbench",
        description="PerRecBench: build the benchmark, evaluate models on it, fine-tune them.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = cliconfig.from_namespace(args.config_cls, args)
        return int(args.handler(config) or 0)
    except (PerrecbenchError, ValueError, FileNotFoundError, ImportError) as err:
        # Bad input and missing extras: the message names the fix; a traceback would only hide it.
        if args.verbose:
            raise
        print(f"perrecbench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
