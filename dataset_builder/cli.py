"""`perrecbench synth` and `perrecbench build`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    synth = subparsers.add_parser(
        "synth",
        help="write synthetic raw Amazon Reviews 2023 files with a planted preference signal",
        description="Write the four domains in the raw Amazon Reviews 2023 layout (<Category>.jsonl, "
        "meta_<Category>.jsonl) with a planted, documented personal preference signal.",
    )
    synth.add_argument("--out", required=True, help="output folder (created)")
    synth.add_argument("--reviews-per-domain", type=int, default=60_000)
    synth.add_argument("--domains", default=None, help="comma-separated categories (default: the paper's 4)")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--gzip", action="store_true", help="write .jsonl.gz files")
    synth.add_argument("--dirty", action="store_true", help="plant realistic faults (see the synth docs)")
    synth.set_defaults(func=_run_synth)

    build = subparsers.add_parser(
        "build",
        help="build the benchmark (parquet + dataset card + stats) from raw Amazon Reviews 2023 files",
        description="Select PerRecBench groups (PROTOCOL §2) from raw review and metadata files with DuckDB "
        "and write a folder that datasets.load_dataset reads: configs easy/medium/hard/full; test/train",
    )
    build.add_argument(
        "--source", required=True,
        help="local folder (plain or .gz files) or hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw",
    )
    build.add_argument("--out", required=True, help="output folder (written to a temp folder, then renamed)")
    build.add_argument("--domains", default=None, help="comma-separated categories (default: the paper's 4)")
    build.add_argument("--window-days", type=float, default=30.0, help="co-purchase window in days")
    build.add_argument("--min-history", type=int, default=20, help="users need MORE earlier reviews")
    build.add_argument("--min-gap", type=float, default=0.6, help="pairwise relative-rating gaps exceed this")
    build.add_argument("--group-size", type=int, default=5, help="users per group (the full config)")
    build.add_argument("--test-groups", type=int, default=200, help="groups in the test split")
    build.add_argument("--avg-scope", choices=("history", "all"), default="history",
                       help="average over the reviews before the query (default) or all (paper mode)")
    build.add_argument("--seed", type=int, default=0, help="split, level draws and presentation order")
    build.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    build.add_argument("--memory-limit", default="4GB", help="DuckDB memory limit; more spills to disk")
    build.add_argument("--on-bad-line", choices=("error", "skip"), default="error",
                       help="stop at a malformed line (default) or count, report and skip it")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    build.add_argument("--work-dir", default=None, help="stage files for resuming (default: <out>.stages)")
    build.add_argument("--push-to-hub", default=None, metavar="ORG/NAME", help="upload the folder afterwards")
    build.add_argument("--no-progress", action="store_true", help="hide progress bars")
    build.set_defaults(func=_run_build)


def _run_synth(args: argparse.Namespace) -> int:
    from dataset_builder import synth

    return synth.main(args)


def _run_build(args: argparse.Namespace) -> int:
    import json
    import sys

    from dataset_builder.build import build
    from dataset_builder.config import BuildConfig, BuildError, parse_domains
    from dataset_builder.stats import format_table

    try:
        config = BuildConfig(
            source=args.source,
            out=args.out,
            domains=parse_domains(args.domains),
            window_days=args.window_days,
            min_history=args.min_history,
            min_gap=args.min_gap,
            group_size=args.group_size,
            test_groups=args.test_groups,
            avg_scope=args.avg_scope,
            seed=args.seed,
            threads=args.threads,
            memory_limit=args.memory_limit,
            on_bad_line=args.on_bad_line,
            overwrite=args.overwrite,
            work_dir=args.work_dir,
            push_to_hub=args.push_to_hub,
            progress=not args.no_progress,
        )
        out = build(config)
    except BuildError as err:
        print(f"perrecbench build: error: {err}", file=sys.stderr)
        return 2
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    print(f"PerRecBench built in {out}")
    print(format_table(stats))
    return 0
