"""`perrecbench push metric | leaderboard | results | benchmark | adapter`: publish to the Hub.

Every push builds its files offline (`perrec_eval.publish`), refuses secrets, absolute local paths and the
machine's name in them, and sends them in one commit. ``--dry-run`` lists every file and the repository it
would go to and sends nothing; ``--stage DIR`` writes those exact files into DIR to read them first, and
stops there: it creates no repository and sends nothing.
`push adapter` is the command for adapters; `perrecbench sft push` is an alias of it (the same flags).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from perrec_eval import cliconfig
from perrec_eval.cliconfig import check_task, option
from perrec_eval.errors import ConfigError

FLOW = """publishing, in order (add --dry-run to any of them to see what it would send):
  perrecbench push benchmark BENCH --repo ORG/perrecbench              the dataset repo, with eval.yaml
  perrecbench push metric --repo ORG/ptc                               evaluate.load("ORG/ptc")
  perrecbench push adapter ADAPTER --repo ORG/NAME --run RUN_DIR \\
      --base-run BASE_RUN --dataset ORG/perrecbench --dataset-revision REV   card, model-index, .eval_results
  perrecbench push results RUN_DIR --repo ORG/MODEL --dataset ORG/perrecbench --dataset-revision REV
  perrecbench push leaderboard REPORT_DIR --repo ORG/perrecbench-leaderboard    a static Space"""

# What each `push` subcommand sends (its one line in `perrecbench push --help`).
_HELP = {
    "metric": "the PTC evaluate module as a Space (module, card, Gradio app, requirements.txt)",
    "leaderboard": "a report folder (index.html, tables, plots) as a static Space",
    "results": (
        "a run's cells (their headline metric) into its model's repository (.eval_results/, pinned to the "
        "dataset revision)"
    ),
    "benchmark": "a build folder as the benchmark's dataset repository, with its eval.yaml",
    "adapter": "an adapter (or merged model) with its model card (`perrecbench sft push` is an alias)",
}


def _dry_run() -> bool:
    return option("list every file and the repository it would go to; send nothing", default=False)


def _stage() -> str | None:
    return option(
        "write the files that would be uploaded into this folder, to read them, and stop: nothing is sent "
        "(the folder must not exist yet)",
        default=None,
        metavar="DIR",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PushMetricConfig:
    """Settings of `perrecbench push metric`: the PTC module as an `evaluate` Space."""

    repo: str = option("Hub Space for the metric; then `evaluate.load(REPO)` loads it", metavar="ORG/NAME")
    private: bool = option("create the Space as private", default=False)
    dry_run: bool = _dry_run()
    stage: str | None = _stage()


@dataclass(frozen=True, slots=True, kw_only=True)
class PushLeaderboardConfig:
    """Settings of `perrecbench push leaderboard`: a report folder as a static Space."""

    report: str = option("report folder written by `perrecbench report`", positional=True)
    repo: str = option("Hub Space for the leaderboard", metavar="ORG/NAME")
    title: str | None = option(
        "the Space's title", default=None, shown="the report page's own, e.g. 'LLMRec leaderboard'"
    )
    private: bool = option("create the Space as private", default=False)
    dry_run: bool = _dry_run()
    stage: str | None = _stage()


@dataclass(frozen=True, slots=True, kw_only=True)
class PushResultsConfig:
    """Settings of `perrecbench push results`: a run's cells (their headline metric) into its model's
    repository."""

    run: str = option(
        "run folder of `perrecbench evaluate` (one model, or one adapter), or a suite folder (`evaluate "
        "--task all`): every family's results in one commit",
        positional=True,
    )
    task: str = option(
        "task family of the run (`perrecbench tasks` lists them); a run of another family is refused",
        default="perrecbench",
    )
    repo: str = option(
        "the evaluated model's Hub repository (the adapter's, with --adapter)", metavar="ORG/NAME"
    )
    dataset: str = option(
        "the benchmark's Hub dataset repository the run used; a suite: FAMILY=ORG/NAME[@REV],... (one per "
        "family)",
        metavar="ORG/NAME",
    )
    dataset_revision: str | None = option(
        "the revision (commit) of --dataset the run used (a suite's entries may give theirs as @REV)",
        default=None,
        metavar="REV",
    )
    model: str | None = option(
        "the name the run recorded for the model when it is not --repo (e.g. a local copy of it)",
        default=None,
    )
    adapter: str | None = option(
        "the adapter folder, when --repo holds an adapter: the run must have used exactly it, on its base "
        "model",
        default=None,
    )
    quantized: bool = option(
        "the run's weights are a GGUF file of --repo's model (or a folder converted from one): file them as "
        "such, every entry saying so (such a run is refused without it)",
        default=False,
    )
    private: bool = option("create the repository as private", default=False)
    create_pr: bool = option(
        "open a pull request instead of committing: for a repository you cannot write to (the model's "
        "authors review it)",
        default=False,
    )
    dry_run: bool = _dry_run()
    stage: str | None = _stage()

    def __post_init__(self) -> None:
        check_task(self.task)


@dataclass(frozen=True, slots=True, kw_only=True)
class PushBenchmarkConfig:
    """Settings of `perrecbench push benchmark`: a build folder as the benchmark's dataset repository."""

    bench: str = option("benchmark folder written by `perrecbench build`", positional=True)
    repo: str = option("Hub dataset repository", metavar="ORG/NAME")
    private: bool = option("create the repository as private", default=False)
    dry_run: bool = _dry_run()
    stage: str | None = _stage()


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``push`` with its subcommands to the ``perrecbench`` command."""
    from sft.config import PushConfig

    parser = subparsers.add_parser(
        "push",
        help="publish to the Hugging Face Hub: benchmark, metric, adapter, results, leaderboard",
        description="Publish to the Hugging Face Hub (`hf auth login` first). Every subcommand takes "
        "--dry-run.",
        epilog=FLOW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="push_command", required=True, metavar="WHAT")
    for name, config, handler in (
        ("metric", PushMetricConfig, run_metric),
        ("leaderboard", PushLeaderboardConfig, run_leaderboard),
        ("results", PushResultsConfig, run_results),
        ("benchmark", PushBenchmarkConfig, run_benchmark),
        ("adapter", PushConfig, run_adapter),
    ):
        cliconfig.add_command(commands, name, config, handler, help=_HELP[name])


def report(upload, *, dry_run: bool, private: bool, stage: str | None, create_pr: bool = False) -> int:
    """Send `upload` (or, with `dry_run` or `stage`, only check it: `stage` writes its files and stops) and
    print what went where."""
    from perrec_eval.publish import check_publishable, push, stage_files

    if stage:  # checked first, as a push is: no secret reaches the staged copy either
        check_publishable(upload)
        staged = stage_files(upload, stage)
        url = None
    else:
        url = push(upload, dry_run=dry_run, private=private, create_pr=create_pr)
    kind = upload.repo_type + (f", sdk {upload.space_sdk}" if upload.space_sdk else "")
    verb = "dry run: would upload" if dry_run else "staged, would upload" if stage else "uploaded"
    verb = "pull request with" if create_pr and verb == "uploaded" else verb
    count = len(upload.files)
    print(f"{verb} {count} file{'' if count == 1 else 's'} to {url or upload.url} ({kind}):")
    for line in upload.describe():
        print(f"  {line}")
    for note in upload.notes:
        print(note)
    if stage:
        print(f"staged in {staged}; nothing was sent: read them, then push again without --stage")
    return 0


def run_metric(config: PushMetricConfig) -> int:
    from perrec_eval.publish import metric_upload

    return report(
        metric_upload(config.repo), dry_run=config.dry_run, private=config.private, stage=config.stage
    )


def run_leaderboard(config: PushLeaderboardConfig) -> int:
    from perrec_eval.publish import leaderboard_upload

    upload = leaderboard_upload(config.report, config.repo, title=config.title)
    return report(upload, dry_run=config.dry_run, private=config.private, stage=config.stage)


def run_results(config: PushResultsConfig) -> int:
    from pathlib import Path

    from perrec_eval.publish import parse_datasets, results_upload, suite_results_upload
    from perrec_eval.suitedir import SUITE_FILE

    if config.model and config.adapter:
        raise ConfigError(
            "--model names a model run without adapter; with --adapter the base is the adapter's"
        )
    datasets = parse_datasets(config.dataset, config.dataset_revision)
    if (Path(config.run) / SUITE_FILE).is_file():
        if config.adapter:
            raise ConfigError("a suite evaluates a model (merged adapters included): drop --adapter")
        upload = suite_results_upload(
            config.run, config.repo, datasets=datasets, model=config.model, quantized=config.quantized
        )
    elif set(datasets) != {None}:
        raise ConfigError("--dataset FAMILY=ORG/NAME entries are for a suite folder; one run takes ORG/NAME")
    else:
        ((dataset, revision),) = datasets.values()
        upload = results_upload(
            config.run,
            config.repo,
            dataset=dataset,
            revision=revision,
            model=config.model,
            adapter=config.adapter,
            task=config.task,
            quantized=config.quantized,
        )
    return report(
        upload, dry_run=config.dry_run, private=config.private, stage=config.stage, create_pr=config.create_pr
    )


def run_benchmark(config: PushBenchmarkConfig) -> int:
    from perrec_eval.publish import benchmark_upload

    upload = benchmark_upload(config.bench, config.repo)
    return report(upload, dry_run=config.dry_run, private=config.private, stage=config.stage)


def run_adapter(config) -> int:
    from sft.push import adapter_upload

    upload, _ = adapter_upload(config)
    return report(upload, dry_run=config.dry_run, private=config.private, stage=config.stage)
