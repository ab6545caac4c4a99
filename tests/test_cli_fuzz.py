"""Every option of every command, through hostile values: a one-line error (exit 2) or a clean run (exit 0).

The commands and their options are discovered from the parser that `perrecbench` builds from the config
dataclasses, so a new option is covered here without anyone listing it. Each value is given to one option at a
time, on top of cheap base arguments (a tiny benchmark, the fake engine, one group). The command runs in
process (`perrec_eval.cli.main`) with the current folder in ``tmp_path``. Checked for each:

- the exit status is 0 or 2 (argparse's usage errors are 2 too), never an escaping exception;
- an error is exactly one line (``perrecbench COMMAND: error: ...`` or argparse's ``... error: ...``);
- nothing is written outside ``tmp_path``: a listing of guard folders (``/``, the folder above ``tmp_path``,
  the clone and the shared tiny benchmark) is the same before and after.

The same values also reach every field through ``--config FILE.yaml`` (which is how a switch gets a value).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from perrec_eval import cli
from perrec_eval.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]

# The hostile values: empty, blank, signs and zero, non-finite and huge numbers, a long name, a line break, a
# path outside tmp_path, and text that is not UTF-8 (how a shell passes such bytes: lone surrogates).
HOSTILE = (
    "",
    " ",
    "-1",
    "0",
    "nan",
    "inf",
    "99999999999999999999",
    "x" * 300,
    "a\nb",
    "/",
    "caf\udce9",
)
# The same through --config: YAML's own forms of these (a list and a mapping where a scalar belongs, too).
HOSTILE_YAML = (
    *('""', "-1", "0", ".nan", "-.inf", "99999999999999999999"),
    *("[]", "{a: 1}", "null", '"a\\nb"', "/"),
)

# Values that another fix of issue 29 closes (F2, F3, F19: an output folder that is the current folder or "/"
# is refused): until then they write into the current folder or "/", so they are listed, never run.
OUTPUT_FOLDERS = "output folders (issue 29, F2/F3/F19: refuse '', '/' and the current folder as --out)"
OWNED_ELSEWHERE: dict[tuple[str, str, str], str] = {}  # (command, flag, value) a pending fix owns: none now


@dataclasses.dataclass(frozen=True)
class Command:
    """One leaf command of the parser: its words, its config class and its options by destination."""

    words: tuple[str, ...]
    cls: type
    parser: argparse.ArgumentParser

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def actions(self) -> Iterator[argparse.Action]:
        names = {field.name for field in dataclasses.fields(self.cls)}
        for action in self.parser._actions:  # the parser cliconfig built from the config dataclass
            if action.dest in names and action.help != argparse.SUPPRESS:
                yield action


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[Command]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*words, name))
    cls = parser.get_default("config_cls")
    if cls is not None and dataclasses.is_dataclass(cls):
        yield Command(words, cls, parser)


PARSER = build_parser()  # built once: each `main` call would build it again (about 50 ms)
COMMANDS = {command.name: command for command in _commands(PARSER)}
# `sft train` hands its arguments to TRL's own parser (its hyper-parameters are checked there): it has no
# option of ours, so no case. A new command needs its cheap base arguments in `_base`; a new option, none.


def _flag(action: argparse.Action) -> str | None:
    return action.option_strings[0] if action.option_strings else None


CASES = [
    pytest.param(name, action.dest, id=f"{name}-{_flag(action) or action.dest}")
    for name, command in COMMANDS.items()
    for action in command.actions()
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny benchmark and a finished fake run of it (for score and report), shared by every case."""
    from tests.benchmark_fixture import write_tiny_benchmark

    root = tmp_path_factory.mktemp("fuzz_shared")
    write_tiny_benchmark(root / "bench", n_test=2, n_train=2)
    code = main(
        [
            "evaluate",
            "--data",
            str(root / "bench"),
            *("--engine", "fake", "--model", "constant", "--levels", "easy", "--methods", "pointwise"),
            *("--max-groups", "1", "--no-profile", "--out", str(root / "run"), "--no-progress"),
        ]
    )
    assert code == 0
    return root


def _base(command: str, shared: Path, tmp: Path) -> list[tuple[str | None, list[str]]]:
    """Cheap arguments that make `command` run (or stop early with a one-line error): (flag, values)."""
    bench = str(shared / "bench")
    small = [("--levels", ["easy"]), ("--max-groups", ["1"])]
    fake = [("--engine", ["fake"]), ("--model", ["constant"])]
    if command in ("evaluate", "sweep"):
        extra = [("--ks", ["2"]), ("--shots-grid", ["0"]), ("--no-plots", [])] if command == "sweep" else []
        return [
            ("--data", [bench]),
            *fake,
            *small,
            ("--methods", ["pointwise"]),
            ("--no-profile", []),
            ("--out", [str(tmp / "out")]),
            *extra,
        ]
    export = [("--subsets", ["easy"]), ("--protocols", ["pointwise"]), ("--max-docs", ["1"])]
    table: dict[str, list[tuple[str | None, list[str]]]] = {
        "synth": [("--out", [str(tmp / "raw")]), ("--reviews-per-domain", ["200"]), ("--domains", ["Books"])],
        "tasks": [],
        # a source folder with no files: the build stops at once (its options are checked before)
        "build": [("--source", [str(tmp / "empty")]), ("--out", [str(tmp / "bench")])],
        "score": [(None, [str(tmp / "run")])],
        "profiles": [("--data", [bench]), *fake, *small, ("--out", [str(tmp / "p.jsonl")])],
        "convert-gguf": [(None, [str(tmp / "missing.gguf")]), ("--out", [str(tmp / "model")])],
        "report": [(None, [str(tmp / "run")]), ("--no-plots", []), ("--resamples", ["20"])],
        "sft data": [("--data", [bench]), *small, ("--no-profile", []), ("--out", [str(tmp / "sft")])],
        "sft merge": [(None, [str(tmp / "a1"), str(tmp / "a2")]), ("--out", [str(tmp / "merged")])],
        "sft push": [(None, [str(tmp / "adapter")]), ("--repo", ["org/x"]), ("--dry-run", [])],
        "push adapter": [(None, [str(tmp / "adapter")]), ("--repo", ["org/x"]), ("--dry-run", [])],
        "push metric": [("--repo", ["org/x"]), ("--dry-run", [])],
        "push leaderboard": [(None, [str(tmp / "report")]), ("--repo", ["org/x"]), ("--dry-run", [])],
        "push results": [
            (None, [str(tmp / "run")]),
            *(("--repo", ["org/m"]), ("--dataset", ["org/d"]), ("--dataset-revision", ["a" * 40])),
            ("--dry-run", []),
        ],
        "push benchmark": [(None, [str(tmp / "bench")]), ("--repo", ["org/x"]), ("--dry-run", [])],
        "export lm-eval": [(None, [bench]), *export, ("--out", [str(tmp / "tasks")])],
        "export lighteval": [(None, [bench]), *export, ("--out", [str(tmp / "tasks.py")])],
    }
    return table[command]


def _argv(
    command: Command, base: list[tuple[str | None, list[str]]], action: argparse.Action, value: str | None
) -> list[str]:
    """The command's words and base arguments, with `action`'s value replaced by `value` (None: left out)."""
    flag = _flag(action)
    argv = list(command.words)
    for key, values in base:
        if key == flag or (key is None and flag is None and action.dest != "config_file"):
            continue  # replaced below
        argv += ([key] if key else []) + values
    if value is None:
        return argv
    if flag is None:
        return [*argv, "--", value] if value.startswith("-") else [*argv, value]
    return [*argv, f"{flag}={value}"]


def _listing(tmp_path: Path, shared: Path) -> dict[str, tuple[int, int]]:
    """The guard: the names in ``/``, the home folder, the clone and beside ``tmp_path``, and every file of
    the shared benchmark and run with its size and modification time."""
    seen: dict[str, tuple[int, int]] = {}
    for folder in (Path("/"), Path.home(), REPO, tmp_path.parent):
        seen.update({str(path): (0, 0) for path in folder.iterdir()})
    for path in shared.rglob("*"):
        stat = path.lstat()
        seen[str(path)] = (0, 0) if path.is_dir() else (stat.st_size, stat.st_mtime_ns)
    return seen


def _prepare(command: str, shared: Path, tmp: Path) -> None:
    (tmp / "empty").mkdir(exist_ok=True)
    if command in ("score", "report", "push results"):
        shutil.copytree(shared / "run", tmp / "run")


def _check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str | None:
    """Run `argv`; return what is wrong (None: exit 0 or a one-line error with exit 2)."""
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse: usage lines, then one error line
        code = exit_info.code
    except BaseException as err:  # noqa: BLE001 - any escaping exception is the finding
        capsys.readouterr()
        return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    err = capsys.readouterr().err
    if "Traceback" in err:
        return f"traceback in stderr: {err[-300:]}"
    if code not in (0, 2):
        return f"exit {code}: {err.strip()[-300:]}"
    errors = [line for line in err.splitlines() if "error:" in line]
    if code == 2 and len(errors) != 1:
        return f"exit 2 with {len(errors)} error lines: {err[-300:]}"
    return None


@pytest.mark.parametrize(("command", "dest"), CASES)
def test_cli_fuzz_option_refuses_hostile_values_in_one_line(
    command, dest, shared, tmp_path, monkeypatch, capsys
):
    spec = COMMANDS[command]
    action = next(a for a in spec.actions() if a.dest == dest)
    flag = _flag(action)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)
    before = _listing(tmp_path, shared)
    runs: list[tuple[str, list[str] | None, str | None]] = []  # (what, argv or None, YAML value)
    if action.nargs == 0:  # a switch: given (or not, where the base gives it); its values come via --config
        runs.append((f"{flag} toggled", [], None))
    else:
        owned = [value for value in HOSTILE if (command, flag, value) in OWNED_ELSEWHERE]
        runs += [(repr(value), [value], None) for value in HOSTILE if value not in owned]
    if flag is not None:  # a positional is required on the command line: no --config form
        yaml_values = [v for v in HOSTILE_YAML if (command, flag, v.strip('"')) not in OWNED_ELSEWHERE]
        runs += [(f"--config {dest}: {value}", None, value) for value in yaml_values]
    problems = []
    for number, (what, given, yaml_value) in enumerate(runs):
        case = tmp_path / f"case{number}"
        case.mkdir()
        _prepare(command, shared, case)
        base = _base(command, shared, case)
        in_base = any(key == flag for key, _ in base)
        if given == []:
            argv = _argv(spec, base, action, None) + ([] if in_base else [flag])
        elif given is not None:
            argv = _argv(spec, base, action, given[0])
        else:
            config = case / "config.yaml"
            config.write_text(f"{dest}: {yaml_value}\n", encoding="utf-8")
            argv = [*_argv(spec, base, action, None), "--config", str(config)]
        problem = _check(argv, capsys)
        if problem:
            problems.append(f"{what}: {problem}")
    assert _listing(tmp_path, shared) == before, "written outside tmp_path"
    assert not problems, "\n".join(problems)


def _engine_options() -> list[tuple[str, str]]:
    from perrec_eval.engines import ENGINE_NAMES, parse_options

    return [
        (name, field.name) for name in ENGINE_NAMES for field in dataclasses.fields(parse_options(name, []))
    ]


@pytest.mark.parametrize(("engine", "key"), _engine_options())
def test_cli_fuzz_engine_option_takes_or_refuses_hostile_values_in_one_line(engine, key):
    # `--engine-arg KEY=VALUE` of every engine, typed and checked where it is parsed (no model is loaded).
    from perrec_eval.engines import parse_options
    from perrec_eval.errors import PerrecbenchError

    for value in HOSTILE:
        try:
            parse_options(engine, [f"{key}={value}"])
        except PerrecbenchError as err:
            assert str(err).strip(), (key, value)


# ---------------------------------------------------------------------------- the new surfaces (issue 38)
# The options `score` takes for RecBench+'s released files, every field of a released query file given a
# value of another type, every file of a family build removed or replaced, and `sft merge --weights`.

RELEASED = REPO / "tests" / "data" / "recbench_plus_released"


def _family_parser(task: str) -> argparse.ArgumentParser:
    """The parser as `--task TASK` makes it (a family may give a command its own options)."""
    from perrec_eval import cliconfig

    cliconfig.select_task(["--task", task])
    try:
        return build_parser()
    finally:
        cliconfig.select_task([])


RECBENCH_PLUS_PARSER = _family_parser("recbench-plus")
RELEASED_SCORE = {command.words: command for command in _commands(RECBENCH_PLUS_PARSER)}[("score",)]


def _released_base(folder: Path) -> list[tuple[str | None, list[str]]]:
    return [
        ("--task", ["recbench-plus"]),
        ("--released-queries", [str(folder / "DemographicsBasedQuery.json")]),
        ("--responses", [str(folder / "responses.jsonl")]),
        ("--catalogue", [str(folder / "movies.dat")]),
        ("--users", [str(folder / "users.dat")]),
        ("--per-query", [str(folder / "per_query.jsonl")]),
    ]


@pytest.mark.parametrize(
    "dest", [a.dest for a in RELEASED_SCORE.actions() if a.dest not in ("task", "config_file", "overwrite")]
)
def test_cli_fuzz_released_scoring_option_refuses_hostile_values_in_one_line(
    dest, tmp_path, monkeypatch, capsys
):
    action = next(a for a in RELEASED_SCORE.actions() if a.dest == dest)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "build_parser", lambda: RECBENCH_PLUS_PARSER)
    problems = []
    values = [None] if action.nargs == 0 else HOSTILE
    for number, value in enumerate(values):
        case = tmp_path / f"case{number}"
        shutil.copytree(RELEASED, case)
        before = {path.name: path.read_bytes() for path in case.iterdir()}
        argv = _argv(RELEASED_SCORE, _released_base(case), action, value)
        if value is None and action.nargs == 0:
            argv.append(_flag(action))
        problem = _check(argv, capsys)
        if problem:
            problems.append(f"{value!r}: {problem}")
        changed = [name for name, data in before.items() if (case / name).read_bytes() != data]
        if changed:
            problems.append(f"{value!r}: overwrote {changed}")
    assert not problems, "\n".join(problems)


_WRONG_TYPES = (None, 1, 1.5, True, "x", "", [], [None], [1, "x"], {}, {"a": 1})


def _mutations(record: dict, path: tuple = ()) -> Iterator[tuple]:
    """Every key path of a JSON record (into the first element of lists)."""
    for key, value in record.items():
        yield (*path, key)
        if isinstance(value, dict):
            yield from _mutations(value, (*path, key))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            yield from _mutations(value[0], (*path, key, 0))


def _set_path(record, path: tuple, value) -> None:
    for step in path[:-1]:
        record = record[step]
    record[path[-1]] = value


@pytest.mark.parametrize("name", ["DemographicsBasedQuery.json", "ExplicitQuery.json"])
def test_cli_fuzz_released_query_fields_of_any_type_score_or_refuse_in_one_line(
    name, tmp_path, monkeypatch, capsys
):
    import copy
    import json

    monkeypatch.setattr(cli, "build_parser", lambda: RECBENCH_PLUS_PARSER)
    original = json.loads((RELEASED / name).read_text(encoding="utf-8"))
    base = ["score", "--task", "recbench-plus", "--catalogue", str(RELEASED / "movies.dat")]
    base += ["--responses", str(RELEASED / "responses.jsonl")]
    problems = []
    for path in _mutations(original[0]):
        for value in _WRONG_TYPES:
            queries = copy.deepcopy(original)
            _set_path(queries[0], path, value)
            file = tmp_path / name
            file.write_text(json.dumps(queries), encoding="utf-8")
            for compat in ([], ["--compat", "released"]):
                problem = _check([*base, "--released-queries", str(file), *compat], capsys)
                if problem:
                    problems.append(f"{path}={value!r} {compat}: {problem}")
    assert not problems, "\n".join(problems[:20])


@pytest.fixture(scope="module")
def family_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.dataset_builder.llmrec.fixture import synth_build
    from tests.dataset_builder.recbench_plus import fixture

    root = tmp_path_factory.mktemp("fuzz_families")
    return {
        "llmrec": synth_build(root / "llmrec"),
        "recbench-plus": fixture.build(root / "rbp", fixture.synth(root / "raw")),
    }


def _damages(folder: Path) -> Iterator[tuple[str, Callable[[Path], None]]]:
    """(what, how) for each data file of a build: removed, cut in half, replaced by another of its files
    and by bytes that are no parquet; and for its manifest: cut, emptied of checksums, made a list."""
    import json

    from dataset_builder.manifest import data_files

    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    files = data_files(manifest)
    for number, name in enumerate(files):  # one damage each, in turn (the check reads every file alike)
        # another file of other content (LLMRec's sequential and direct test files hold the same rows)
        other = next(o for o in files[number + 1 :] + files if Path(o).name != Path(name).name)
        damages = [
            ("removed", lambda copy, name=name: (copy / name).unlink()),
            ("cut", lambda copy, name=name: (copy / name).write_bytes((copy / name).read_bytes()[:99])),
            (f"= {other}", lambda copy, name=name, other=other: shutil.copyfile(copy / other, copy / name)),
            ("garbage", lambda copy, name=name: (copy / name).write_bytes(b"PAR1 not parquet")),
        ]
        what, damage = damages[number % len(damages)]
        yield f"{name} {what}", damage
    manifest_path = "manifest.json"
    yield "manifest cut", lambda copy: (copy / manifest_path).write_bytes(b'{"outputs": {')
    yield "manifest a list", lambda copy: (copy / manifest_path).write_text("[1, 2]", encoding="utf-8")
    yield (
        "checksums wrong",
        lambda copy: (copy / manifest_path).write_text(
            json.dumps({**manifest, "checksums": {name: "0" * 64 for name in files}}), encoding="utf-8"
        ),
    )


@pytest.mark.parametrize("task", ["llmrec", "recbench-plus"])
def test_cli_fuzz_family_build_with_a_missing_or_replaced_file_is_refused_in_one_line(
    task, family_builds, tmp_path, monkeypatch, capsys
):
    from perrec_eval import cliconfig

    build = family_builds[task]
    monkeypatch.chdir(tmp_path)
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"config": "x", "id": "1", "prediction": null}\n', encoding="utf-8")
    problems = []
    for number, (what, damage) in enumerate(_damages(build)):
        copy = tmp_path / f"b{number}"
        shutil.copytree(build, copy)
        damage(copy)
        for argv in (
            ["evaluate", "--task", task, "--data", str(copy), "--engine", "fake", "--model", "constant"]
            + ["--out", str(tmp_path / f"r{number}"), "--no-progress"],
            ["score", "--task", task, "--data", str(copy), "--predictions", str(predictions)],
        ):
            try:
                code = main(argv)
            except BaseException as err:  # noqa: BLE001 - any escaping exception is the finding
                problems.append(f"{what} {argv[0]}: {type(err).__name__}: {err}")
                continue
            finally:
                cliconfig.select_task([])
            err = capsys.readouterr().err
            errors = [line for line in err.splitlines() if "error:" in line]
            if code != 2 or len(errors) != 1 or "Traceback" in err:
                problems.append(f"{what} {argv[0]}: exit {code}: {err[-300:]}")
        shutil.rmtree(copy)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "weights",
    ["1e308,1e308", "1e-320,1", "0,1", "-1,2", "nan,1", "1,inf", "1", "1,2,3", "", ",", "1,,2", "x,1"],
)
def test_cli_fuzz_sft_merge_weights_refused_in_one_line_or_normalized(weights, tmp_path, monkeypatch, capsys):
    from sft.config import MergeConfig

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)
    argv = ["sft", "merge", str(tmp_path / "a1"), str(tmp_path / "a2"), "--out", str(tmp_path / "m")]
    problem = _check([*argv, f"--weights={weights}"], capsys)
    assert problem is None, problem
    try:
        config = MergeConfig(adapters=("a1", "a2"), out="m", weights=tuple(map(float, weights.split(","))))
    except (ValueError, Exception):  # noqa: B014 - refused: nothing to normalize
        return
    normalized = config.normalized_weights()
    assert all(0 < w <= 1 for w in normalized) and abs(sum(normalized) - 1) < 1e-9, normalized
