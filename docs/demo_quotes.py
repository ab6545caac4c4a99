"""Write every number the README and docs/ quote from `make demo` out of a finished demo folder: `make docs`.

A page marks each quote: ``<!-- demo: NAME -->`` … ``<!-- /demo -->`` around a number in a sentence or a
whole printed block; `QUOTES` says how each NAME is read from the demo's outputs (its build's stats, its
runs' scores, its reports' tables), and a few `DERIVED` runs on the demo's own data give the figures the
demo itself does not print (the other split rules, the listwise presentation). The script rewrites every
marked span of the pages, redraws docs/report.png (the demo's report page, headless chromium) and records
what it quoted in docs/demo_quotes.json, with a fingerprint of the code that made the numbers: the outputs
of the same commands on a small slice (`small_demo`, the Makefile's demo recipe with `SHRINK`'s sizes).
tests/test_docs.py checks that the pages hold the recorded quotes, that the picture is the recorded one and
that the small slice, run by the current code, still gives the recorded fingerprint: code that changes a
number the docs quote fails there until `make demo docs` is run again.
A demo folder older than the code (a source file changed after its build) is refused.

Usage: python docs/demo_quotes.py DEMO_FOLDER   (`make docs` after `make demo`)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RECORD = REPO / "docs" / "demo_quotes.json"
PICTURE = REPO / "docs" / "report.png"
PICTURE_SIZE = (1280, 1500)
DEMO_NAME = "demo_out"  # how the pages name the demo's folder (the Makefile's DEMO default)

MARKED = re.compile(r"<!-- demo: ([\w.-]+) -->(.*?)<!-- /demo -->", re.S)


def marked(text: str) -> Iterator[tuple[str, str]]:
    """The (name, quoted text) of every marked span of a page.

    >>> list(marked("mf <!-- demo: mf-avg -->0.28<!-- /demo --> and x"))
    [('mf-avg', '0.28')]
    """
    for match in MARKED.finditer(text):
        yield match.group(1), match.group(2)


def rewrite(text: str, quotes: dict[str, str]) -> str:
    """`text` with every marked span holding its quote; an unknown name is an error.

    >>> rewrite("<!-- demo: a -->1<!-- /demo -->", {"a": "2"})
    '<!-- demo: a -->2<!-- /demo -->'
    """

    def quote(match: re.Match) -> str:
        if match.group(1) not in quotes:
            raise SystemExit(f"demo_quotes: a page marks {match.group(1)!r}, which QUOTES does not define")
        return f"<!-- demo: {match.group(1)} -->{quotes[match.group(1)]}<!-- /demo -->"

    return MARKED.sub(quote, text)


# --- the demo's commands, read from the Makefile, and the small slice of them ------------------------------


def make_target(name: str, makefile: str | None = None) -> list[list[str]]:
    """The perrecbench commands `make NAME` runs, read from the Makefile: its prerequisite targets' and
    ``$(MAKE) TARGET`` lines' first, Makefile variables (``NAME ?= value``) expanded."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Makefile").read_text() if makefile is None else makefile)
    variables = dict(re.findall(r"^(\w+) *[?:]?= *(.*)$", text, flags=re.M))
    rule = re.search(rf"^{re.escape(name)}:(.*)\n((?:\t.*\n?)*)", text, flags=re.M)
    if not rule:
        raise SystemExit(f"demo_quotes: the Makefile has no target {name}")
    targets = set(re.findall(r"^([\w-]+):", text, flags=re.M))
    found = [
        argv
        for prerequisite in rule.group(1).split()
        if prerequisite in targets
        for argv in make_target(prerequisite, text)
    ]
    for line in rule.group(2).splitlines():
        while "$(" in line.replace("$(MAKE)", ""):
            line = re.sub(
                r"\$\((\w+)\)", lambda m: "$(MAKE)" if m.group(1) == "MAKE" else variables[m.group(1)], line
            )
        if "$(MAKE) " in line:
            found += [
                argv
                for word in line.split("$(MAKE) ", 1)[1].split()
                if word in targets
                for argv in make_target(word, text)
            ]
        elif "bin/perrecbench " in line:
            found.append(shlex.split(line.split("bin/perrecbench ", 1)[1]))
    return found


# Runs on the demo's data that the demo does not make, for figures the pages quote (written under
# DEMO/docs/, which `make clean` removes with the demo).
_BUILD = "build --source {demo}/raw --test-groups 200 --overwrite"
_LISTWISE = (
    "evaluate --data {demo}/perrecbench --engine fake --model constant --methods listwise --overwrite"
    " --no-profile"
)
DERIVED = {
    "split-none": f"{_BUILD} --split-rule none --out {{demo}}/docs/split-none",
    "split-user-disjoint": f"{_BUILD} --split-rule user-disjoint --out {{demo}}/docs/split-user-disjoint",
    "listwise-dataset": f"{_LISTWISE} --out {{demo}}/docs/listwise-dataset --presentation dataset",
    "listwise-balanced": f"{_LISTWISE} --out {{demo}}/docs/listwise-balanced",
}


def derived(demo: str) -> list[list[str]]:
    return [shlex.split(command.format(demo=demo)) for command in DERIVED.values()]


# The small slice is small: these settings replace a command's value (`replace`) or are added where a command
# takes the flag and does not set it (`add`, the first flag taken). Nothing else about a command changes.
SHRINK = {
    "replace": {"--reviews-per-domain": "4000", "--test-groups": "6", "--kcore": "5"},
    "add": [[("--max-groups", "2"), ("--max-docs", "4")], [("--negatives", "9")]],
}


def _accepts(argv: list[str], flag: str) -> bool:
    """Whether the (sub)command of `argv` has the option `flag`, spelled out (no abbreviation)."""
    from perrec_eval import cliconfig
    from perrec_eval.cli import build_parser

    cliconfig.select_task(argv)
    parser = build_parser()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        parser.parse_args(argv)  # `build` adds its family's flags while parsing
    for word in argv:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or word not in actions[0].choices:
            break
        parser = actions[0].choices[word]
    return flag in parser._option_string_actions


def shrink(argv: list[str]) -> list[str]:
    """`argv` with SHRINK's settings: smaller data and fewer groups, the command otherwise as written."""
    argv = [SHRINK["replace"].get(argv[i - 1], word) if i else word for i, word in enumerate(argv)]
    for choices in SHRINK["add"]:
        for flag, value in choices:
            if flag in argv:
                break
            if _accepts(argv, flag):
                argv = [*argv, flag, value]
                break
    return argv


def small_demo(work: Path) -> Path:
    """Run the demo's commands and the derived runs, shrunk, in `work` (as ``demo_out``); returns its path."""
    from perrec_eval.cli import main

    cwd = os.getcwd()
    os.chdir(work)
    try:
        for argv in [*make_target("demo"), *derived(DEMO_NAME)]:
            if main([*shrink(argv), "--no-progress"]) != 0:
                raise SystemExit(f"demo_quotes: the small demo failed at perrecbench {shlex.join(argv)}")
    finally:
        os.chdir(cwd)
    return work / DEMO_NAME


# Runs whose numbers differ between machines in their last digits: SASRec trains on torch, whose CPU kernels
# differ by instruction set. The quotes still show them; the fingerprint does not count them.
UNSTABLE = {"sasrec"}
_NOT_OUTPUT = re.compile(r"seconds|time|fingerprint|sha|version|path|cache", re.I)


def _canonical(value: Any) -> Any:
    """JSON numbers to 5 significant digits (last-bit differences between machines do not count); keys that
    hold timings, hashes of files or paths dropped."""
    if isinstance(value, float):
        return float(f"{value:.5g}")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items()) if not _NOT_OUTPUT.search(k)}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def fingerprint(demo: Path) -> dict[str, str]:
    """sha256 (12 hex digits) of each output of a (small) demo that the quotes are made from: the builds'
    statistics, the runs' scores and the reports' tables, plus the demo's own commands."""
    found = {"make demo": json.dumps(make_target("demo"))}
    for path in sorted(demo.rglob("stats.json")) + sorted(demo.rglob("scores.json")):
        if path.parent.name in UNSTABLE:
            continue
        found[path.relative_to(demo).as_posix()] = json.dumps(_canonical(json.loads(path.read_text())))
    for path in sorted(demo.glob("report*/leaderboard.md")):
        text = re.sub(r"\b[0-9a-f]{12}\b", "<build>", path.read_text(encoding="utf-8"))  # a build's id
        text = "\n".join(line for line in text.splitlines() if line.split(" | ")[0][2:] not in UNSTABLE)
        found[path.relative_to(demo).as_posix()] = text
    return {name: hashlib.sha256(text.encode()).hexdigest()[:12] for name, text in found.items()}


# --- reading the quotes from a demo folder -----------------------------------------------------------------


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SystemExit(f"demo_quotes: cannot read {path} ({err}): run `make demo` first") from err


def _table(markdown: str) -> list[str]:
    """The first markdown table of a document, its |---| line left out (as the pages show tables printed)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            table.append(line)
    return table


def _block(lines: list[str]) -> str:
    return "\n```\n" + "\n".join(lines) + "\n```\n"


def _scores(demo: Path, run: str) -> dict[str, Any]:
    return _json(demo / "runs" / "baselines" / run / "scores.json")


def _ptc(cells: list[dict[str, Any]], level: str) -> float:
    """A level's PTC among a PerRecBench run's scores.json cells (the layout every family's scores take)."""
    return next(c["metrics"]["ptc"]["value"] for c in cells if c["subset"] == level)


def _cell(demo: Path, run: str, level: str) -> float:
    return _ptc(_scores(demo, run)["cells"], level)


def _levels(values: list[float], fmt: str = "{:.2f}") -> str:
    """One figure per level.

    >>> _levels([0.126, -0.001, -0.05])
    '0.13 / 0.00 / −0.05'
    """
    return " / ".join(_signed(v, fmt) for v in values)


LEVELS = ("easy", "medium", "hard")


def perrecbench_printed(demo: Path) -> str:
    """What `make demo` prints for PerRecBench, cut as the README shows it."""
    from dataset_builder.perrecbench import stats as stats_mod

    stats = _json(demo / "perrecbench" / "stats.json")
    split = re.sub(r"\(([^,()]+), [^()]*\)", r"(\1, ...)", stats_mod.split_line(stats["split"]), count=1)
    report = (demo / "runs" / "baselines" / "report.md").read_text(encoding="utf-8")
    legend = next(line for line in report.splitlines() if line.startswith("PTC = "))
    lines = [
        f"PerRecBench built in {DEMO_NAME}/perrecbench",
        *stats_mod.format_table(stats).splitlines()[:5],
        "...",
        split,
        "...",
        *_table(report),
        "",
        legend.split(";", 1)[0] + "; ...",
        "...",
        f"report written to {DEMO_NAME}/report/ (leaderboard.md, .json, .csv, .tex, plots/); "
        f"open {DEMO_NAME}/report/index.html",
    ]
    return _block(lines)


def _stats(demo: Path, build: str = "perrecbench") -> dict[str, Any]:
    return _json(demo / build / "stats.json")


def _train_groups(stats: dict[str, Any]) -> int:
    return sum(stats["split"]["train_groups_per_domain"].values())


def _choice(demo: Path, who: str, key: str) -> float:
    return _stats(demo)["splits"]["test"]["choice"][who][key]


def _cf(demo: Path, model: str, key: str) -> int:
    values = {
        cell[key] for cell in _json(demo / "runs" / "baselines" / model / "run.json")["cf"]["cells"].values()
    }
    return max(values)


def _listwise(demo: Path, run: str) -> str:
    cells = _json(demo / "docs" / run / "scores.json")["cells"]
    return _levels([_ptc(cells, level) for level in LEVELS])


def _resolution(demo: Path, key: str, fmt: str) -> str:
    entries = _stats(demo)["resolution"]
    return _levels([entries[level]["test"][key] for level in LEVELS], fmt)


def _report_table(demo: Path, report: str) -> str:
    return _block(_table((demo / report / "leaderboard.md").read_text(encoding="utf-8")))


def _test_groups(demo: Path) -> int:
    return _stats(demo)["splits"]["test"]["all"]["groups"]


def _leaks(demo: Path) -> dict[str, int]:
    """What the paper's split (`--split-rule none`) leaks on the demo's data."""
    return _stats(demo, "docs/split-none")["split"]["leaks"]


def _constant_range(demo: Path) -> str:
    values = sorted(_cell(demo, "constant", level) for level in LEVELS)
    low, high = f"{values[0]:.2f}", f"{values[-1]:.2f}"
    return low if low == high else f"{low}–{high}"


def _signed(value: float, fmt: str = "{:.2f}") -> str:
    """A figure as the pages print it: a minus sign, never -0.00."""
    shown = fmt.format(value)
    return shown.replace("-", "" if float(re.sub(r"[^\d.-]", "", shown)) == 0 else "−")


QUOTES: dict[str, Callable[[Path], str]] = {
    "perrecbench-printed": perrecbench_printed,
    "llmrec-table": lambda d: _report_table(d, "report-llmrec"),
    "llmrec-test-users": lambda d: f"{_json(d / 'llmrec' / 'manifest.json')['counts']['sequential']['test']:,}",  # noqa: E501
    "recbench-plus-table": lambda d: _report_table(d, "report-recbench-plus"),
    # perrecbench.md and reports.md
    "resolution-ci": lambda d: _resolution(d, "half_width", "±{:.2f}"),
    "resolution-mdd": lambda d: _resolution(d, "min_detectable_difference", "{:.2f}"),
    "mf-average": lambda d: f"{_scores(d, 'mf')['average']:.2f}",
    "item-knn-average": lambda d: f"{_scores(d, 'item-knn')['average']:.2f}",
    "mf-cold-items": lambda d: str(_cf(d, "mf", "cold_query_items")),
    "item-knn-cold-items": lambda d: str(_cf(d, "item-knn", "cold_query_items")),
    "listwise-dataset-order": lambda d: _listwise(d, "listwise-dataset"),
    "listwise-balanced": lambda d: _listwise(d, "listwise-balanced"),
    "random-average": lambda d: _signed(_scores(d, "random")["average"]),
    "random-medium": lambda d: _signed(_cell(d, "random", "medium")),
    "constant-range": _constant_range,
    # PROTOCOL.md: the builder's choice of users and the split rules
    "test-groups": lambda d: f"{_test_groups(d):,}",
    "groups-found": lambda d: f"{_test_groups(d) + _train_groups(_stats(d, 'docs/split-none')):,}",
    "chosen-negative-share": lambda d: f"{100 * _choice(d, 'chosen_users', 'negative_share'):.0f}%",
    "chosen-mean": lambda d: _signed(_choice(d, "chosen_users", "mean_relative_rating")),
    "window-negative-share": lambda d: f"{100 * _choice(d, 'window_candidates', 'negative_share'):.1f}%",
    "window-mean": lambda d: _signed(_choice(d, "window_candidates", "mean_relative_rating")),
    "items-negative-share": lambda d: f"{100 * _choice(d, 'item_candidates', 'negative_share'):.1f}%",
    "items-mean": lambda d: _signed(_choice(d, "item_candidates", "mean_relative_rating")),
    "train-groups": lambda d: f"{_train_groups(_stats(d, 'docs/split-none')):,}",
    "train-groups-leak-free": lambda d: f"{_train_groups(_stats(d)):,}",
    "train-groups-user-disjoint": lambda d: f"{_train_groups(_stats(d, 'docs/split-user-disjoint')):,}",
    "leaked-history-rows": lambda d: f"{_leaks(d)['test_reviews_in_train_histories']:,}",
}  # fmt: skip


# --- the picture -------------------------------------------------------------------------------------------


def _newer_code(demo: Path) -> str | None:
    """A source file changed after the demo was built (then its numbers may be another code's), or None."""
    built = (demo / "perrecbench" / "stats.json").stat().st_mtime
    sources = [REPO / "Makefile", REPO / "pyproject.toml"]
    sources += [
        path
        for folder in ("perrec_eval", "dataset_builder", "metric")
        for path in (REPO / folder).rglob("*.py")
    ]
    newest = max(sources, key=lambda path: path.stat().st_mtime)
    return str(newest.relative_to(REPO)) if newest.stat().st_mtime > built else None


def browser() -> str | None:
    return next((shutil.which(name) for name in ("chromium", "chromium-browser") if shutil.which(name)), None)


def draw_picture(page: Path, out: Path) -> None:
    """A screenshot of the report page at PICTURE_SIZE (headless chromium, as the tests render it)."""
    command = [browser(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars"]
    command += [f"--window-size={PICTURE_SIZE[0]},{PICTURE_SIZE[1]}", f"--screenshot={out}", page.as_uri()]
    subprocess.run(command, capture_output=True, timeout=120, check=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="the folder `make demo` wrote (DEMO, default demo_out)")
    args = parser.parse_args(argv)
    from perrec_eval.cli import main as cli

    demo = args.demo.resolve()
    if not (demo / "report" / "index.html").is_file():
        print(f"demo_quotes: {args.demo} holds no finished demo: run `make demo` first", file=sys.stderr)
        return 2
    if stale := _newer_code(demo):
        print(f"demo_quotes: {stale} is newer than {args.demo}: run `make demo docs`", file=sys.stderr)
        return 2
    if browser() is None:
        print(
            "demo_quotes: docs/report.png needs headless chromium: apt-get install -y chromium",
            file=sys.stderr,
        )
        return 2
    for argv in derived(str(demo)):
        with contextlib.redirect_stdout(io.StringIO()):  # their tables are read from their files
            code = cli([*argv, "--no-progress"])
        if code != 0:
            print(f"demo_quotes: perrecbench {shlex.join(argv)} failed", file=sys.stderr)
            return 1
    quotes = {name: read(demo) for name, read in QUOTES.items()}
    used = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        used |= {name for name, _ in marked(text)}
        if (new := rewrite(text, quotes)) != text:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {page.relative_to(REPO)}")
    if unused := sorted(set(quotes) - used):
        print(
            f"demo_quotes: no page quotes {', '.join(unused)}: mark them or drop them from QUOTES",
            file=sys.stderr,
        )
        return 1
    draw_picture(demo / "report" / "index.html", PICTURE)
    with tempfile.TemporaryDirectory() as work, contextlib.redirect_stdout(io.StringIO()):
        canary = fingerprint(small_demo(Path(work)))
    record = {"quotes": quotes, "picture_sha256": sha256(PICTURE), "small_demo": canary}
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {PICTURE.relative_to(REPO)} and {RECORD.relative_to(REPO)} ({len(quotes)} quotes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
