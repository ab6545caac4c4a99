"""`perrecbench export lm-eval | lighteval`: a build's cells as tasks of the harnesses people already run."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perrec_eval import cliconfig
from perrec_eval.cliconfig import option
from perrec_eval.harness.export import ExportConfig

FLOW = """then run the harness, --log_samples (lm-eval) or --save-details (lighteval), and score its answers:
  perrecbench score --data BUILD --predictions HARNESS_OUTPUT --out runs/NAME     the harness's numbers,
                                                                                  with intervals
  perrecbench report runs/NAME runs/baselines --out report                        beside the baselines"""


@dataclass(frozen=True, slots=True, kw_only=True)
class LmEvalExportConfig(ExportConfig):
    """Settings of `perrecbench export lm-eval`."""

    out: str = option("folder of the tasks: `lm_eval --include_path OUT --tasks perrecbench ...`")


@dataclass(frozen=True, slots=True, kw_only=True)
class LightevalExportConfig(ExportConfig):
    """Settings of `perrecbench export lighteval`."""

    out: str = option(
        "the custom tasks file (`lighteval ... --custom-tasks OUT`); its rows go beside it, in OUT's name "
        "with _rows for .py",
        metavar="FILE.py",
    )

    def __post_init__(self) -> None:
        ExportConfig.__post_init__(self)
        if not self.out.endswith(".py"):
            from perrec_eval.errors import ConfigError

            raise ConfigError(
                f"--out {self.out}: name the custom tasks file, e.g. --out perrecbench_tasks.py"
            )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``export`` with its two harnesses to the ``perrecbench`` command."""
    parser = subparsers.add_parser(
        "export",
        help="a build's cells as lm-evaluation-harness or lighteval tasks",
        description="Write a build's cells (any family) as tasks of a harness: the same prompts, answer "
        "reading and metrics as `perrecbench evaluate`, asked in one round.",
        epilog=FLOW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="export_command", required=True, metavar="HARNESS")
    cliconfig.add_command(
        commands, "lm-eval", LmEvalExportConfig, export_lm_eval, help="lm-evaluation-harness YAML tasks"
    )
    cliconfig.add_command(
        commands, "lighteval", LightevalExportConfig, export_lighteval, help="a lighteval custom tasks file"
    )


def rows_folder(out: str | Path) -> Path:
    """Where `export lighteval --out FILE.py` writes its rows: ``FILE_rows/`` beside it."""
    out = Path(out)
    return out.with_name(out.stem + "_rows")


def _inputs(config: ExportConfig) -> dict[str, str]:
    inputs = {"BUILD" if i == 0 else f"BUILD {i + 1}": source for i, source in enumerate(config.builds)}
    return inputs | ({"--profiles": config.profiles} if config.profiles else {})


def export_lm_eval(config: LmEvalExportConfig) -> int:
    """Write the export folder whole (rows, export.json, task YAML, hooks), replacing an earlier export."""
    from perrec_eval import outputs
    from perrec_eval.harness import lmeval_tasks
    from perrec_eval.harness.export import write_rows
    from perrec_eval.lock import file_lock

    out = outputs.target(config.out)
    outputs.refuse_overlap(out, _inputs(config))
    outputs.refuse_foreign(out, lmeval_tasks.owned, command="export lm-eval")
    with file_lock(out):
        outputs.refuse_foreign(out, lmeval_tasks.owned, command="export lm-eval")
        with outputs.replaced(out) as tmp:
            record = write_rows(config, tmp, "lm-eval")
            groups = lmeval_tasks.write(tmp, record)
    _summary(record, config.out)
    tasks = ",".join(groups[:-1]) if len(groups) > 2 else groups[0]
    print(
        "run: lm_eval --model hf --model_args pretrained=MODEL --include_path "
        f"{shlex.quote(config.out)} --tasks {tasks} --apply_chat_template --log_samples --output_path OUT"
    )
    return 0


def export_lighteval(config: LightevalExportConfig) -> int:
    """Write the rows folder whole, then the custom tasks file that loads it."""
    from perrec_eval import fileio, outputs
    from perrec_eval.harness import lighteval_tasks
    from perrec_eval.harness.export import is_export_file, write_rows
    from perrec_eval.lock import file_lock

    inputs = _inputs(config)
    tasks_file = outputs.file_target(
        config.out, inputs=inputs, owned=lighteval_tasks.is_tasks_file, command="export lighteval"
    )
    rows = outputs.target(rows_folder(tasks_file), flag="--out's rows folder")
    outputs.refuse_overlap(rows, inputs, flag="--out's rows folder")
    outputs.refuse_foreign(rows, is_export_file, command="export lighteval", flag="--out's rows folder")
    with file_lock(tasks_file):
        with outputs.replaced(rows) as tmp:
            record = write_rows(config, tmp, "lighteval")
        fileio.write_text(tasks_file, lighteval_tasks.module_text(rows.name))
    _summary(record, f"{config.out} (rows in {rows_folder(config.out)})")
    groups = list(dict.fromkeys(cell["group"] for cell in record["cells"]))
    names = ",".join(f"{group}|0" for group in groups)
    print(
        'run: lighteval accelerate "model_name=MODEL" '
        f'"{names}" --custom-tasks {shlex.quote(config.out)} --save-details --output-dir OUT'
    )
    return 0


def _summary(record: dict[str, Any], where: str) -> None:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for cell in record["cells"]:
        by_task.setdefault(cell["task"], []).append(cell)
    parts = [
        f"{len(cells)} {task} cells ({sum(c['rows'] for c in cells)} requests)"
        for task, cells in by_task.items()
    ]
    print(f"exported {', '.join(parts)} to {where}")
    for skipped in record["skipped"]:
        print(f"  skipped {skipped['task']} {skipped['cell']}: {skipped['why']}")
