"""The README's and the docs pages' commands run as written, and every number they quote from the demo is the
current code's.

Every ```bash and ```python block of README.md and docs/*.md (a new page is covered as soon as it exists) is
read in order, as a shell would: continued lines joined, comments dropped, ``NAME=value`` lines and ``for``
loops expanded (a variable the page never sets fails). In a temp folder holding what `make demo` makes (its
commands read from the Makefile) and the raw files the pages name (`RAW`, `~/amazon2023/raw`: every category
a page names, small and synthetic):

- every ``perrecbench`` command must parse, then runs through `perrec_eval.cli.main`, with the smaller data
  and fewer groups of `SHRINK` (docs/demo_quotes.py), unless `why_not_run` gives one of its rules: a model
  (``--engine vllm|hf|openai``), training or merging a model (``sft train``/``sft merge``), a GGUF download,
  an upload (``push`` without ``--dry-run``, ``--push-to-hub``), the Hub (``hf://``), or reading what such a
  command would have written;
- other commands (``pip``, ``make``, ``vllm serve``, ``accelerate``, ``python -c``) are not run: they are not
  this package's;
- python blocks run as they are;
- a block right after ``<!-- not run: REASON -->`` is parsed (compiled) and not run.

The numbers the pages quote from `make demo` sit in marked spans that `make docs` (docs/demo_quotes.py) writes
and records in docs/demo_quotes.json, with the fingerprint of a small slice of the demo: the pages must hold
the recorded quotes, docs/report.png must be the recorded picture, and the small slice, run here by the
current code (the same folder the commands above run in), must give the recorded fingerprint.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from perrec_eval import cliconfig
from perrec_eval.cli import build_parser, main


def _quotes_module():
    """docs/demo_quotes.py (`make docs`): the demo's commands, their small slice and the quotes' record."""
    path = Path(__file__).resolve().parent.parent / "docs" / "demo_quotes.py"
    spec = importlib.util.spec_from_file_location("demo_quotes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_quotes"] = module
    spec.loader.exec_module(module)
    return module


quotes = _quotes_module()
REPO, PAGES, make_target, shrink = quotes.REPO, quotes.PAGES, quotes.make_target, quotes.shrink

# The raw files the pages read: the default categories and every one a page names, small (synthetic).
RAW_NAMES = ("RAW", "~/amazon2023/raw")
DEFAULT_DOMAINS = ["Books", "Clothing_Shoes_and_Jewelry", "Home_and_Kitchen", "Electronics"]
REVIEWS = quotes.SHRINK["replace"]["--reviews-per-domain"]

_ENGINES_WITH_A_MODEL = {"vllm", "hf", "openai"}


def why_not_run(argv: list[str], documented: set[str]) -> str | None:
    """Why a documented command is parsed but not run here (None: it runs), one rule each.

    `documented` holds every path a command of some page writes (its --out): a command reading one that
    is not here reads what a command not run here (on this page or another) would have written.
    """
    option = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    if option.get("--engine") in _ENGINES_WITH_A_MODEL:
        return "needs a model: a download, a GPU or a server"
    if argv[0] == "sft" and argv[1] in ("train", "merge"):
        return "trains or merges a real model (tests/sft covers them on the tiny model)"
    if argv[0] == "convert-gguf":
        return "needs a downloaded GGUF file"
    if (argv[0] == "push" and "--dry-run" not in argv) or "--push-to-hub" in argv:
        return "uploads to the Hub"
    if any(word.startswith("hf://") for word in argv):
        return "reads the Hub"
    if any(
        (value == path or value.startswith(path + "/")) and not Path(value).exists()
        for value in inputs(argv)
        for path in documented
    ):
        return "reads what a command not run here writes"
    return None


_OUTPUT_OPTIONS = ("--out", "--output_dir", "--output-dir", "--output_path")  # lm_eval's is --output_path
_PATH_OPTIONS = ("--data", "--source", "--profiles", "--run", "--base-run", "--adapter", "--model")


def inputs(argv: list[str]) -> set[str]:
    """The paths a command may read: its positional operands, the values of options that name files, and any
    value with a slash."""
    operands = argv[2:] if argv[0] in ("sft", "push") else argv[1:]  # after the (sub)command's name
    found = set()
    for before, word in zip(["", *operands], operands, strict=False):
        if word.startswith("-") or before in _OUTPUT_OPTIONS:
            continue
        if before.startswith("-") and before not in _PATH_OPTIONS and "/" not in word:
            continue
        found.add(word.partition("=")[2] if before == "--adapter" else word)
    return found


def test_why_not_run_names_each_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert why_not_run(["evaluate", "--engine", "vllm", "--model", "m"], set()) == (
        "needs a model: a download, a GPU or a server"
    )
    assert why_not_run(["push", "metric", "--repo", "ORG/ptc"], set()) == "uploads to the Hub"
    assert why_not_run(["push", "metric", "--repo", "ORG/ptc", "--dry-run"], set()) is None
    assert why_not_run(["report", "runs/a", "--out", "r"], {"runs/a"}) is not None
    assert why_not_run(["report", "runs/b", "--out", "r"], {"report"}) is None  # a command's name is no path
    assert why_not_run(["build", "--task", "llmrec", "--out", "x"], {"llmrec"}) is None  # nor a family's
    assert why_not_run(["evaluate", "--adapter", "x=adapters/x"], {"adapters"}) is not None
    assert why_not_run(["report", "runs/ab", "--out", "r"], {"runs/a"}) is None  # a typo is run, and fails
    assert why_not_run(["evaluate", "--data", "b", "--out", "runs/a"], {"runs/a"}) is None  # writing it
    (tmp_path / "runs" / "a").mkdir(parents=True)
    assert why_not_run(["report", "runs/a", "--out", "r"], {"runs/a"}) is None  # made by an earlier command


# --- reading the pages as a shell would ------------------------------------------------------------------

# A block right after `<!-- not run: REASON -->` is parsed, never run (e.g. it needs files a page tells you to
# download); the reason stays visible to every reader of the page's source.
_BLOCK = re.compile(r"(?:^<!-- not run: (.+?) -->\n)?^```(bash|python)\n(.*?)^```", re.S | re.M)
_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def blocks(text: str) -> Iterator[tuple[str, str, str | None]]:
    """The page's ```bash and ```python blocks, in order, as (language, code, why it is not run or None);
    indented ones too."""
    dedented = re.sub(r"^ {2,}(```|<!-- not run)", r"\1", text, flags=re.M)
    for match in _BLOCK.finditer(dedented):
        code = match.group(3)
        indent = min(
            (len(line) - len(line.lstrip()) for line in code.splitlines() if line.strip()), default=0
        )
        yield match.group(2), "\n".join(line[indent:] for line in code.splitlines()), match.group(1)


def shell_lines(code: str) -> list[str]:
    """Lines of a bash block with continuations joined; blank and comment-only lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def expand(line: str, env: dict[str, str]) -> str:
    """$NAME and ${NAME} replaced from the page's own assignments; a variable the page never sets fails."""

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        assert name in env, f"{line!r} uses ${name}, which the page never sets"
        return env[name]

    return _VARIABLE.sub(value, line)


def commands(code: str, env: dict[str, str]) -> Iterator[list[str]]:
    """The commands of a bash block as argv lists (leading NAME=value assignments, a trailing & dropped)."""
    lines = shell_lines(code)
    i = 0
    while i < len(lines):
        line = lines[i]
        loop = re.fullmatch(r"for (\w+) in (.+); do", line)
        if loop:
            end = lines.index("done", i)
            for item in loop.group(2).split():
                for body in lines[i + 1 : end]:
                    yield from commands(body, {**env, loop.group(1): item})
            i = end + 1
            continue
        words = shlex.split(line if "$((" in line else expand(line, env), comments=True)
        if len(words) == 1 and re.fullmatch(r"\w+=.*", words[0]):
            name, _, value = words[0].partition("=")
            env[name] = value
        else:
            while words and re.fullmatch(r"\w+=.*", words[0]):
                words.pop(0)
            yield [word for word in words if word != "&"]
        i += 1


# --- running them ------------------------------------------------------------------------------------------


def parses(argv: list[str]) -> None:
    """The command parses (argparse for every command; TRL's parser for `sft train`'s own settings)."""
    cliconfig.select_task(argv)
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"perrecbench {shlex.join(argv)} does not parse: {err.getvalue().strip()}")
    if argv[:2] == ["sft", "train"]:
        from sft.train import parse

        parse(args.argv)


def outputs(argv: list[str]) -> set[str]:
    """The folders and files a command writes (its --out or --output_dir; the folder of a `git clone`)."""
    if argv[:2] == ["git", "clone"]:  # git clone [OPTIONS] URL [DIR]
        url = next(i for i, word in enumerate(argv) if "://" in word or word.endswith(".git"))
        folder = argv[url + 1 : url + 2] or [argv[url].rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")]
        return set(folder)
    return {argv[i + 1].rstrip("/") for i in range(len(argv) - 1) if argv[i] in _OUTPUT_OPTIONS}


def test_make_target_reads_prerequisites_sub_makes_and_variables():
    makefile = "OUT ?= d\nN := 3\nall: a\n\tcp x y\n\t$(MAKE) b\na: $(VENV)/.core\n"
    makefile += "\t.venv/bin/perrecbench synth --out $(OUT) \\\n\t\t--seed $(N)\n\n"
    makefile += "b:\n\t.venv/bin/perrecbench tasks\n"
    assert make_target("all", makefile) == [["synth", "--out", "d", "--seed", "3"], ["tasks"]]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A folder holding what `make demo` writes (small) and the raw files the pages name."""
    base = tmp_path_factory.mktemp("docs")
    work, raw = base / "work", base / "raw"
    work.mkdir()
    named = {
        d
        for text in map(Path.read_text, PAGES)
        for v in re.findall(r"--domains[ =](\w+(?:,\w+)*)", text)
        for d in v.split(",")
    }
    domains = ",".join([*DEFAULT_DOMAINS, *sorted(named - {"all", *DEFAULT_DOMAINS})])
    argv = ["synth", "--out", str(raw), "--domains", domains, "--reviews-per-domain", REVIEWS]
    assert main([*argv, "--no-progress"]) == 0
    for name in RAW_NAMES:
        link = (base / "home" / name[2:]) if name.startswith("~/") else (work / name)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(raw, target_is_directory=True)
    quotes.small_demo(work)
    return base


def documented_outputs() -> set[str]:
    """Every path a command of some page writes (its --out or --output_dir)."""
    found: set[str] = set()
    for page in PAGES:
        env: dict[str, str] = {}
        for language, code, _ in blocks(page.read_text(encoding="utf-8")):
            if language == "bash":
                found |= {path for argv in commands(code, env) for path in outputs(argv)}
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_docs_commands_run_as_written(page, prepared, tmp_path, monkeypatch, capsys):
    base = tmp_path / "b"
    shutil.copytree(prepared, base, symlinks=True)
    monkeypatch.chdir(base / "work")
    monkeypatch.setenv("HOME", str(base / "home"))
    documented = documented_outputs()
    env: dict[str, str] = {}
    for language, code, not_run in blocks(page.read_text(encoding="utf-8")):
        if language == "python":
            compiled = compile(code, str(page), "exec")
            if not not_run:
                exec(compiled, {"__name__": "__docs__"})
            continue
        for argv in commands(code, env):
            if argv[0] != "perrecbench":
                continue  # pip, make, vllm serve, accelerate, python -c: not this package's commands
            argv = [os.path.expanduser(word) if word.startswith("~/") else word for word in argv[1:]]
            parses(argv)
            if not not_run and why_not_run(argv, documented) is None:
                assert main([*shrink(argv), "--no-progress"]) == 0, shlex.join(argv)
    capsys.readouterr()


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_docs_links_resolve(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links {target}: no such file"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {_anchor(h) for h in headings}, f"{page.name} links {target}: no such heading"


def test_blocks_read_the_not_run_marker():
    page = "text\n<!-- not run: needs the released files -->\n```bash\nperrecbench tasks\n```\n"
    page += "\n  ```python\n  print(1)\n  ```\n"
    assert list(blocks(page)) == [
        ("bash", "perrecbench tasks", "needs the released files"),
        ("python", "print(1)", None),
    ]


def test_commands_expand_variables_and_loops():
    code = "MODEL=m  # a comment\nfor F in a b; do\n"
    code += "    perrecbench sft data --format $F \\\n  --out d/$F\ndone\n"
    code += "KEY=... perrecbench evaluate --model $MODEL &\n"
    assert list(commands(code, {})) == [
        ["perrecbench", "sft", "data", "--format", "a", "--out", "d/a"],
        ["perrecbench", "sft", "data", "--format", "b", "--out", "d/b"],
        ["perrecbench", "evaluate", "--model", "m"],
    ]
    with pytest.raises(AssertionError, match="never sets"):
        list(commands("perrecbench evaluate --model $UNSET", {}))


def test_outputs_of_a_clone_are_its_folder():
    assert outputs(["git", "clone", "https://github.com/o/Rel.git"]) == {"Rel"}
    assert outputs(["git", "clone", "--depth", "1", "https://github.com/o/Rel", "here"]) == {"here"}
    argv = ["score", "--responses", "Rel/a.json", "--per-query", "x.jsonl"]
    assert why_not_run(argv, {"Rel"}) == "reads what a command not run here writes"
    assert why_not_run(["score", "Rel/run"], {"Rel"}) == "reads what a command not run here writes"


# --- the numbers quoted from the demo -----------------------------------------------------------------------

RECORD = json.loads(quotes.RECORD.read_text(encoding="utf-8"))
_RERUN = "run `make demo docs` and commit the pages, docs/report.png and docs/demo_quotes.json"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_quoted_spans_hold_the_recorded_demo_outputs(page):
    for name, quoted in quotes.marked(page.read_text(encoding="utf-8")):
        assert name in RECORD["quotes"], (
            f"{page.name} quotes {name!r}, which `make docs` never recorded: {_RERUN}"
        )
        assert quoted == RECORD["quotes"][name], f"{page.name}: {name!r} is not the recorded demo's: {_RERUN}"


def test_every_recorded_quote_is_defined_and_quoted_by_a_page():
    used = {name for page in PAGES for name, _ in quotes.marked(page.read_text(encoding="utf-8"))}
    assert set(RECORD["quotes"]) == set(quotes.QUOTES) == used, _RERUN


def test_picture_is_the_recorded_demos_report_page():
    assert quotes.sha256(quotes.PICTURE) == RECORD["picture_sha256"], f"docs/report.png: {_RERUN}"


def test_recorded_quotes_come_from_the_current_code(prepared):
    """The small slice of the demo, run by this code, gives what it gave when the quotes were taken."""
    now = quotes.fingerprint(prepared / "work" / quotes.DEMO_NAME)
    changed = sorted(
        name
        for name in now.keys() | RECORD["small_demo"].keys()
        if now.get(name) != RECORD["small_demo"].get(name)
    )
    assert not changed, (
        f"the code's demo outputs changed since the docs quoted them ({', '.join(changed)}): {_RERUN}"
    )


def test_fingerprint_sees_a_changed_score_and_not_a_changed_timing(tmp_path):
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "scores.json").write_text(json.dumps({"ptc": 0.123456789, "seconds": 1.0}))
    before = quotes.fingerprint(tmp_path)
    (run / "scores.json").write_text(json.dumps({"ptc": 0.123456788, "seconds": 9.0}))  # last bits, a timing
    assert quotes.fingerprint(tmp_path) == before
    (run / "scores.json").write_text(json.dumps({"ptc": 0.125, "seconds": 1.0}))
    assert quotes.fingerprint(tmp_path) != before


def test_rewrite_fills_every_marked_span_and_refuses_an_unknown_name():
    page = "mf (<!-- demo: a -->0.33<!-- /demo --> on average)\n"
    page += "<!-- demo: b -->\n```\nold\n```\n<!-- /demo -->\n"
    new = quotes.rewrite(page, {"a": "0.28", "b": "\n```\nnew\n```\n"})
    assert dict(quotes.marked(new)) == {"a": "0.28", "b": "\n```\nnew\n```\n"}
    with pytest.raises(SystemExit, match="'a'"):
        quotes.rewrite(page, {"b": ""})


def test_demo_quotes_doctests():
    assert doctest.testmod(quotes).failed == 0


# Words of the project's own tracker and working folders: a reader of a clone has none of them.
TRACKER_WORDS = re.compile(
    r"\bissues? #?\d+|\.\./shared|\bseeds/|\bTASKS\.md\b|\bhelper\b|\bintegrator\b", re.I
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_user_docs_hold_no_tracker_words(page):
    found = [
        f"{page.name}:{number}: {match.group(0)}"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for match in TRACKER_WORDS.finditer(line)
    ]
    assert found == []


def test_tracker_words_are_found_where_they_are():
    assert TRACKER_WORDS.search("## LLMRec (issue 25): what is built") and TRACKER_WORDS.search(
        "`../shared/x`"
    )
    assert not TRACKER_WORDS.search("the issues the paper leaves open; 25 groups")
