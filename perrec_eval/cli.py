"""The `perrecbench` console command: one entry point, subcommands registered by each part."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`; it adds its subcommands with `set_defaults(func=...)` and
# keeps heavy imports inside the handlers so `perrecbench --help` stays fast.
_COMMAND_MODULES = ("dataset_builder.cli", "perrec_eval.commands")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="perrecbench",
        description="PerRecBench: build the benchmark, evaluate models on it, fine-tune them.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
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
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, ImportError) as err:
        # Bad input and missing extras: the message names the fix; a traceback would only hide it.
        logging.getLogger("perrecbench").debug("details", exc_info=True)
        print(f"perrecbench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
