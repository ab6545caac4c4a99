"""``perrecbench build --task NAME``: raw Amazon Reviews 2023 files → a task family's benchmark folder.

The shared steps, each in its module, around the family's own (its :class:`~dataset_builder.tasks.Builder`):

1. the domains (``--domains all``: every category of the source) and their files
   (:mod:`~dataset_builder.sources`);
2. per domain, the family's stage from the stage cache, or run again when an input's bytes changed
   (:mod:`~dataset_builder.stages`; the stage reads the raw files with :mod:`~dataset_builder.raw`);
3. the family's plan over every domain's stage (PerRecBench: its test / train split);
4. into a temp folder next to ``out``, the family writes its files (parquet, statistics, the manifest of
   :mod:`~dataset_builder.manifest`, the card of :mod:`~dataset_builder.card`), and the shared step records
   the sha256 of every file the manifest names; the folder is renamed into place when complete;
5. ``--push-to-hub``: the upload of `perrecbench push benchmark`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from dataset_builder import stages
from dataset_builder.config import BuildError, BuildSpec, out_of_memory
from dataset_builder.manifest import check_out, record_checksums
from dataset_builder.sources import MOVIELENS_LAYOUT, Source
from dataset_builder.tasks import task_builder
from perrec_eval import outputs

logger = logging.getLogger(__name__)


def build(config: BuildSpec) -> Path:
    """Build the benchmark folder of the config's task family.

    Args:
        config: the validated parameters (a family's config: its ``task`` names the family).

    Returns:
        The output folder (``config.out``), complete.

    Raises:
        BuildError: bad input (file, line and fix in the message), an existing output without
            ``overwrite``, or nothing to write (the family's message says which filter left nothing).
    """
    import duckdb

    builder = task_builder(config.task)
    out = outputs.target(config.out)  # the real folder: a symlinked --out is not replaced by a folder
    config = replace(config, out=out)
    check_out(config)
    source = Source.open(config.source)
    config = replace(config, domains=source.domains(config.domains))
    if source.layout not in builder.layouts:
        raise BuildError(
            f"--source {config.source} holds {source.layout} files, which --task {config.task} does not read "
            f"(it reads {', '.join(builder.layouts)}); pass another --source or --task"
        )
    extra = ("users",) if source.layout == MOVIELENS_LAYOUT else ()
    inputs = [
        stages.DomainInputs(
            d, source.find(d, "reviews"), source.find(d, "meta"), tuple(source.find(d, k) for k in extra)
        )
        for d in config.domains
    ]
    spec = builder.stage(config)
    results = {item.domain: stages.load(source, item, config, spec) for item in inputs}
    plan = builder.plan(config, results)
    provenance = source.kind([entry for r in results.values() for entry in r["files"]])
    with outputs.replaced(out) as tmp:  # also clears the .NAME.tmp-PID / .old-PID folders of killed builds
        try:
            builder.write(tmp, config, results, plan, provenance)
        except duckdb.OutOfMemoryException as err:  # a family's write may query too: one line
            raise out_of_memory(config.memory_limit, "writing the benchmark", err) from err
        record_checksums(tmp)  # every family's files, named by its manifest: `manifest.check_files`
    logger.debug("wrote %s", out)  # the summary line names it as the user did
    if config.push_to_hub:
        push_to_hub(out, config.push_to_hub, synthetic=provenance["source_kind"] != "raw")
    return out


@contextlib.contextmanager
def timed(stage: str) -> Iterator[None]:
    """Log a stage's wall time at debug level (`-v`; ``benchmarks/build_bench.py`` reads these lines)."""
    started = time.perf_counter()
    yield
    logger.debug("%s took %.2f s", stage, time.perf_counter() - started)


def push_to_hub(folder: Path, repo_id: str, *, synthetic: bool) -> None:
    """Upload the finished folder as a dataset repo with its ``eval.yaml`` (so the Hub lists models' results
    against it); stale parquet files of an earlier build are deleted.

    The same upload as `perrecbench push benchmark` (`perrec_eval.publish.benchmark_upload`): checked for
    secrets and local paths first. A build from (partly) synthetic input is uploaded with its card, which says
    so in its title, tags and first paragraph; the log warns too. Needs network and a token (``HF_TOKEN`` or
    ``hf auth login``); not exercised by the offline tests.
    """
    from perrec_eval.publish import benchmark_upload, push

    if synthetic:
        logger.warning(
            "uploading a build from SYNTHETIC data (perrecbench synth) to %s; its card and tags say so",
            repo_id,
        )
    url = push(benchmark_upload(folder, repo_id), dry_run=False)
    logger.info("uploaded %s to %s", folder, url)
