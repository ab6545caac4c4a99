"""`make demo` (or `make demo-llm`) step by step: each command's wall time, CPU time and peak memory.

Usage: ``.venv/bin/python benchmarks/demo_bench.py [--target demo] [--json FILE]`` from the clone's root,
with the venv already made (the install is not timed here: time a fresh clone's ``make TARGET`` with
``/usr/bin/time -v`` for that). The commands are the Makefile's own (``make -n``), each run under
``/usr/bin/time`` in order; the table is Markdown for ``benchmarks/RESULTS.md``. Say the machine's load
beside the figures: on shared cores wall time is only good to a factor of ~2, CPU time much better.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commands(target: str) -> list[str]:
    """The shell lines `make TARGET` runs (the venv taken as made; continuations joined)."""
    printed = subprocess.run(
        ["make", "-s", "-n", "-o", ".venv/.core", "-o", ".venv/.full", target],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [
        line
        for line in printed.replace("\\\n", " ").splitlines()
        if line.strip() and not line.startswith("test ")
    ]


def step_name(line: str) -> str:
    """A command's short name: the perrecbench subcommand and its family (or the program run)."""
    argv = shlex.split(line)
    if not argv[0].endswith("perrecbench"):
        return " ".join(Path(a).name if "/" in a else a for a in argv[:3])
    if argv[1] in ("synth", "report"):
        return f"{argv[1]} {Path(argv[argv.index('--out') + 1]).name}"
    task = argv[argv.index("--task") + 1] if "--task" in argv else "perrecbench"
    engine = f" {argv[argv.index('--engine') + 1]}" if "--engine" in argv else ""
    return f"{argv[1]} {task}{engine}"


def measure(line: str) -> dict[str, float | str]:
    """Run one command under /usr/bin/time: wall and CPU seconds, peak resident MB, exit status."""
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%U %S %M", "sh", "-c", f"{line} >/dev/null 2>/dev/null"],
        cwd=ROOT, capture_output=True, text=True, env=os.environ,
    )  # fmt: skip
    wall = time.perf_counter() - started
    user, system, peak_kb = done.stderr.strip().splitlines()[-1].split()
    return {
        "step": step_name(line),
        "wall_s": round(wall, 1),
        "cpu_s": round(float(user) + float(system), 1),
        "peak_mb": round(int(peak_kb) / 1024),
        "exit": done.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="demo", help="the make target (demo or demo-llm)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = [measure(line) for line in commands(args.target)]
    print(f"`make {args.target}`, {os.cpu_count()} cores, load average {load:.1f} at the start")
    print("| step | wall | CPU | peak memory |")
    print("|---|---:|---:|---:|")
    for row in rows:
        flag = "" if row["exit"] == 0 else f" (exit {row['exit']})"
        print(f"| {row['step']}{flag} | {row['wall_s']} s | {row['cpu_s']} s | {row['peak_mb']} MB |")
    wall = sum(float(r["wall_s"]) for r in rows)
    cpu = sum(float(r["cpu_s"]) for r in rows)
    print(f"| total | {wall:.0f} s | {cpu:.0f} s | {max(int(r['peak_mb']) for r in rows)} MB |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    if any(r["exit"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
