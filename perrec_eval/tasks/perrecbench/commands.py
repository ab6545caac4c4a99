"""PerRecBench's `perrecbench evaluate | score | profiles | sweep`: one config class and one handler each.

The general command line (`perrec_eval.commands`) registers them for the default task through
`Task.handlers`; their flags and outputs are PerRecBench's own.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from perrec_eval import fileio
from perrec_eval.config import BASELINE_ENGINE
from perrec_eval.lock import folder_lock
from perrec_eval.results import read_run_info
from perrec_eval.tasks.perrecbench.config import EvalConfig, ProfilesConfig, ScoreConfig, SweepConfig
from perrec_eval.tasks.perrecbench.results import Scores


def evaluate(config: EvalConfig) -> int:
    from perrec_eval import rundir
    from perrec_eval.tasks.perrecbench import report, run

    # the runs just written: their predictions are not read back for the table
    if len(config.adapter) > 1 and config.engine != BASELINE_ENGINE:
        written = run.evaluate_adapters(config)
    elif config.engine == BASELINE_ENGINE:
        written = run.baseline_runs(config, run.baseline_names(config))
    else:
        written = [(config.system_label, run.evaluate_run(config))]
    systems = [(name, Scores.from_family(one.scores)) for name, one in written]
    print(report.table([one for _, one in written]))
    if len(systems) > 1:
        print(f"\nwritten to {config.out}/<system>/ (one run folder each) and {config.out}/report.md")
    else:
        print(f"\nwritten to {config.out}/ (report.md, scores.json, run.json)")
    out = Path(config.out)
    report_dir = rundir.report_folder(out)
    print(f"next: perrecbench report {out} --out {report_dir}   (leaderboard, plots, index.html)")
    _warn_suspect_profiles(config)
    failed = [scores for _, scores in systems if not scores.complete]
    if failed:
        print(failure_summary(failed), file=sys.stderr)
        return 1
    return 0


def failure_summary(failed: list[Scores], command: str = "evaluate") -> str:
    """The closing lines of a run with engine errors: the fix for those that fail on every try (a prompt
    longer than the context, ...), "run again" only for those that may pass on their own."""
    from perrec_eval.tasks.perrecbench.profiles import permanent_fix

    total = sum(s.num_engine_errors for s in failed)
    permanent = sum(s.num_permanent_errors for s in failed)
    lines = []
    if permanent:
        first = next(s.first_permanent_error for s in failed if s.first_permanent_error)
        lines.append(
            f"perrecbench {command}: {permanent} of {total} failed requests fail the same way on every try "
            f"(first: {first}): {permanent_fix(first)}; the scores above count them as failures"
        )
    if total > permanent:
        first = next(
            (s.first_transient_error for s in failed if s.first_transient_error),
            failed[0].first_engine_error,
        )
        lines.append(
            f"perrecbench {command}: {total - permanent} requests failed (first: {first}); the scores above "
            "are provisional: run the same command again to retry them"
        )
    return "\n".join(lines)


def _warn_suspect_profiles(config: EvalConfig) -> None:
    """One line on stderr when the run's profiles were cut at their budget or look degenerate."""
    if config.engine == BASELINE_ENGINE or not (Path(config.out) / "run.json").is_file():
        return
    quality = (read_run_info(config.out).profiles or {}).get("quality")
    if quality and quality["flagged"]:
        print(
            f"perrecbench evaluate: {quality['flagged']} profiles are suspect ({quality['cut']} cut at the "
            f"token budget, {quality['copied']} mostly copied history, {quality['repetitive']} repetitive); "
            f"--degenerate-profiles {config.degenerate_profiles} (run.json: profiles.quality)",
            file=sys.stderr,
        )


def score(config: ScoreConfig) -> int:
    from perrec_eval import rundir
    from perrec_eval.tasks.perrecbench import report
    from perrec_eval.tasks.perrecbench import rundir as run_files

    if config.run_dir is None:
        from perrec_eval.harness.samples import is_harness_output

        if is_harness_output(config.predictions):  # a harness's answers (`perrecbench export`)
            from perrec_eval.tasks.perrecbench.harness import score_command

            return score_command(config)
        from perrec_eval.tasks.perrecbench import external  # another system's predictions file

        scores, written = external.score_file(config)
        if config.json:
            json.dump(scores.to_family().to_json(), sys.stdout, indent=2)
            print(flush=True)
        else:
            print(report.table([written]), flush=True)
        if config.out is not None:
            print(f"written to {config.out}/ (scores.json, predictions.jsonl, run.json)", file=sys.stderr)
        return 0
    run_dir = rundir.one_run_folder(config.run_dir)
    with folder_lock(run_dir) if config.write else contextlib.nullcontext():  # no writer of it meanwhile
        scores = run_files.rescore(run_dir, variant=config.variant, invalid=config.invalid)
        rescored = [report.rescored(run_dir, scores)]
        if config.write:
            run_files.update_metric(run_dir, scores, report.render_report(rescored))
    # stdout holds the table `evaluate` prints, as every family's `score` does (its row named by the run's
    # label); --json: the scores instead (for `> file` or `| jq`)
    if config.json:
        json.dump(scores.to_family().to_json(), sys.stdout, indent=2)
        print(flush=True)
    else:
        print(report.table(rescored), flush=True)
    if config.write:
        print(f"written to {run_dir}/ (scores.json, report.md, run.json's metric)", file=sys.stderr)
    else:
        print(f"not saved: add --write to rewrite {run_dir}/scores.json and report.md", file=sys.stderr)
    return 0


def profiles(config: ProfilesConfig) -> int:
    """Write profiles into `config.out`, holding its lock: a second process on the same file is refused."""
    from dataclasses import replace

    from perrec_eval import outputs
    from perrec_eval.lock import file_lock

    # the real file (a symlink to it shares its lock), checked before the lock: nothing left behind
    out = outputs.file_target(
        config.out, inputs={"--data": config.data}, owned=_is_profiles_file, command="profiles"
    )
    with file_lock(out):
        return _profiles(replace(config, out=str(out)))


def _is_profiles_file(path: Path) -> bool:
    """Whether `path` starts with a profile record (an earlier `profiles --out`, which it extends)."""
    return fileio.starts_with_record(path, ("group_id", "user_id", "profile"))


def _profiles(config: ProfilesConfig) -> int:
    from types import SimpleNamespace

    from perrec_eval.cache import CachedEngine
    from perrec_eval.engines.base import answer_options
    from perrec_eval.tasks.perrecbench import context
    from perrec_eval.tasks.perrecbench.profiles import (
        HistoryBudget,
        check_provenance,
        flag_counts,
        generate_profiles,
        load_profile_flags,
        load_profiles,
        save_profiles,
        writer_provenance,
    )

    out = Path(config.out)
    groups = [
        group
        for split in config.splits
        for level in config.levels
        for group in context.load_groups(config.data, level, split, config.max_groups, seed=config.seed)
    ]
    params = config.profile_params()
    budget = HistoryBudget(max_items=config.max_items, max_chars=config.max_chars)
    provenance = writer_provenance(
        config.engine,
        config.model,
        adapters=config.adapters(),
        options=answer_options(SimpleNamespace(options=config.engine_options())),
        max_tokens=params.max_tokens,
        budget=budget,
    )
    if out.is_file():  # refused before any model is loaded
        check_provenance(out, provenance)
    engine = config.load_engine()
    cached = CachedEngine(engine, out.with_name(out.name + ".cache.jsonl"))
    known = load_profiles(out) if out.is_file() else {}
    flagged = load_profile_flags(out) if out.is_file() else {}
    written, failures = generate_profiles(
        cached,
        groups,
        budget=budget,
        params=params,
        known=known,
        degenerate=config.degenerate_profiles,
        flagged=flagged,
    )
    save_profiles(out, written, provenance, flagged)
    print(f"{len(written)} profiles written to {out}; {len(failures)} failed")
    if failures:
        print(_profile_failures(list(failures.values())), file=sys.stderr)
    counts = flag_counts(flagged)
    if counts["flagged"]:
        print(
            f"{counts['flagged']} profiles are suspect: {counts['cut']} cut at the token budget, "
            f"{counts['copied']} mostly copied history, {counts['repetitive']} repetitive "
            f"(--degenerate-profiles {config.degenerate_profiles})"
        )
    if config.push_to_hub and not failures:
        _push_profiles(out, config.push_to_hub, f"{engine.name}:{engine.model}")
    return 1 if failures else 0


def _profile_failures(errors: list[str]) -> str:
    """What to do about failed profile requests: the fix for permanent ones, a re-run for the others."""
    from perrec_eval.tasks.perrecbench.profiles import permanent_fix

    permanent = [error for error in errors if permanent_fix(error)]
    lines = []
    if permanent:
        lines.append(
            f"perrecbench profiles: {len(permanent)} fail the same way on every try (first: {permanent[0]}): "
            f"{permanent_fix(permanent[0])}"
        )
    if len(errors) > len(permanent):
        first = next(error for error in errors if not permanent_fix(error))
        lines.append(
            f"perrecbench profiles: {len(errors) - len(permanent)} failed (first: {first}): run the same "
            "command again to retry them"
        )
    return "\n".join(lines)


def _push_profiles(path: Path, repo_id: str, writer: str) -> None:
    """Upload the profiles file as ``profiles/<name>`` of the dataset `repo_id`, scanned as every push is."""
    from perrec_eval.publish import Upload, check_repo_id, push

    upload = Upload(
        repo=check_repo_id(repo_id, "--push-to-hub"),
        repo_type="dataset",
        files={f"profiles/{path.name}": path},
        commit_message=f"Add profiles written by {writer}",
    )
    push(upload, dry_run=False)
    print(f"uploaded to https://huggingface.co/datasets/{repo_id}/blob/main/profiles/{path.name}")


def sweep(config: SweepConfig) -> int:
    """Evaluate one model at every (k, shots) point into ``OUT/k<K>-shots<S>/`` and report the grid into
    ``OUT/report/`` (the shared report, its prompting and k × shots analyses included)."""
    from pathlib import PurePosixPath

    from perrec_eval import rundir
    from perrec_eval.leaderboard import family
    from perrec_eval.leaderboard import folder as reports
    from perrec_eval.lock import folder_lock
    from perrec_eval.tasks.perrecbench.leaderboard import sweep as grid

    out = Path(config.out)
    report_dir = out / "report"

    def in_report(path: PurePosixPath) -> bool:
        return path.parts[0] == "report" and reports.is_report_file(PurePosixPath(*path.parts[1:]))

    rundir.check_out(config.out, rundir.local_inputs(config), runs=True, also=in_report, command="sweep")
    with folder_lock(out):  # the grid and its report: another sweep on OUT is refused until both are written
        reports.check_out(report_dir)  # before the grid runs
        results = grid.run_grid(config)
        sections = family.report([out], seed=config.seed, base=report_dir)
        family.write(sections, report_dir, plots=config.plots)
    for data in sections:
        print(family.markdown(data))
    incomplete = [name for name, scores in results if not scores.complete]
    print(f"{len(results)} grid points in {out}/; report: {report_dir / 'index.html'}")
    if incomplete:
        print(
            f"perrecbench sweep: provisional points (engine errors): {', '.join(incomplete)}", file=sys.stderr
        )
        print(
            failure_summary([scores for _, scores in results if not scores.complete], "sweep"),
            file=sys.stderr,
        )
        return 1
    return 0
