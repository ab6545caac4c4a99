"""What a newcomer met from a fresh clone (issue 27, part 2): each trip, replayed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench")


@pytest.fixture(scope="module")
def pointwise_run(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "random"
    argv = ["evaluate", "--data", str(bench), "--engine", "baseline", "--model", "random", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    return out


def _error_line(capsys, argv: list[str]) -> str:
    """Run the CLI (argparse's errors included); it must exit 2 with exactly one line on stderr."""
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_push_results_with_a_local_model_folder_as_repo_names_model(capsys):
    argv = ["push", "results", "runs/base", "--repo", "/tmp/tiny-chat", "--dataset", "ORG/perrecbench"]
    line = _error_line(capsys, [*argv, "--dataset-revision", "REV", "--dry-run"])
    assert "--repo ORG/NAME --model /tmp/tiny-chat" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["push", "results", "runs/base", "--repo", "--dataset", "ORG/perrecbench"],  # `--repo $MODEL`, unset
        ["sft", "push", "--repo", "ORG/x"],  # a required argument missing
        ["build", "--preset", "huge"],
    ],
    ids=["unset-variable", "sft-push", "build"],
)
def test_cli_argument_errors_are_one_line_that_points_to_help(capsys, argv):
    line = _error_line(capsys, argv)
    assert "usage:" not in line and line.endswith("--help`")


def test_cli_flag_without_its_value_suggests_an_empty_shell_variable(capsys):
    line = _error_line(capsys, ["push", "results", "runs/base", "--repo", "--dataset", "ORG/perrecbench"])
    assert "--repo: expected one argument" in line and "shell variable" in line


def test_score_prints_the_table_of_the_cells_that_were_run_and_json_on_request(pointwise_run, capsys):
    capsys.readouterr()
    assert main(["score", str(pointwise_run), "--variant", "paper"]) == 0
    printed = capsys.readouterr()
    table = printed.out.splitlines()  # the table `evaluate` prints, as every family's `score` does
    assert table[0] == "## PerRecBench: ptc (higher is better)"
    header = "| run | easy/pointwise: ptc (higher is better) | medium/pointwise: ptc (higher is better) | "
    assert table[2].startswith(header) and "/pairwise" not in table[2]  # run cells only
    assert printed.err.strip().startswith("not saved")
    assert main(["score", str(pointwise_run), "--variant", "paper", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)  # --json: stdout is the scores alone
    assert scores["extras"]["variant"] == "paper"
    assert {c["protocol"] for c in scores["cells"]} == {"pointwise"}


def test_report_names_the_fake_engines_constant_apart_and_never_best(bench, tmp_path, capsys):
    runs = tmp_path / "runs"
    argv = ["evaluate", "--data", str(bench), "--methods", "pointwise", "--no-progress"]
    assert main([*argv, "--engine", "fake", "--model", "constant", "--out", str(runs / "fake")]) == 0
    for baseline in ("constant", "random"):
        assert main([*argv, "--engine", "baseline", "--model", baseline, "--out", str(runs / baseline)]) == 0
    out = tmp_path / "report"
    folders = [str(runs / name) for name in ("fake", "constant", "random")]
    assert main(["report", *folders, "--out", str(out)]) == 0
    rows = {line.split(" | ")[0][2:]: line for line in (out / "leaderboard.md").read_text().splitlines()}
    assert "fake:constant" in rows and "constant" in rows and "constant (baseline)" not in rows
    assert "**" not in rows["fake:constant"]  # scripted answers are never the best system
    (section,) = json.loads((out / "leaderboard.json").read_text())
    fake = next(row for row in section["rows"] if row["label"] == "fake:constant")
    assert not fake.get("average_best")
    assert not any(cell["metrics"]["ptc"].get("best") for cell in fake["cells"].values())


def test_a_table_on_too_few_groups_says_so_and_marks_no_best(bench, tmp_path, capsys):
    argv = ["evaluate", "--data", str(bench), "--engine", "baseline", "--model", "all", "--max-groups", "3"]
    assert main([*argv, "--out", str(tmp_path / "runs"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Too few docs to compare (3)" in printed
    assert "**" not in printed and "†" not in printed.split("95% bootstrap")[0]
    resolution = next(line for line in printed.splitlines() if line.startswith("| min. detectable Δ"))
    values = [part.strip() for part in resolution.strip("|").split("|")[1:]]
    assert "> 2" in values and all(v == "> 2" or float(v) <= 2 for v in values)  # never past PTC's range


def test_tied_rows_are_ordered_by_label_whatever_order_the_runs_came_in(bench, tmp_path, capsys):
    argv = ["evaluate", "--data", str(bench), "--engine", "baseline", "--model", "constant", "--no-progress"]
    for folder in ("b", "a"):  # the same run twice: a tie
        assert main([*argv, "--out", str(tmp_path / folder)]) == 0
    orders = []
    for listed in (["b", "a"], ["a", "b"]):
        out = tmp_path / f"report-{''.join(listed)}"
        assert main(["report", *(str(tmp_path / f) for f in listed), "--out", str(out), "--no-plots"]) == 0
        (section,) = json.loads((out / "leaderboard.json").read_text())
        orders.append([row["label"] for row in section["rows"]])
    assert orders[0] == orders[1] == ["constant [a]", "constant [b]"]


def test_one_command_publishes_adapters_and_sft_push_says_it_is_its_alias(capsys):
    with pytest.raises(SystemExit):
        main(["sft", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "perrecbench push adapter adapters/merged" in text
    assert "alias of `perrecbench push adapter`" in text
    assert "perrecbench sft push adapters" not in text


def test_pyproject_reads_without_setuptools_deprecation_warnings():
    import warnings
    from pathlib import Path

    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pyprojecttoml.apply_configuration(Distribution(), Path(__file__).parents[1] / "pyproject.toml")
    assert [str(w.message).splitlines()[0] for w in caught] == []  # the licence box, 3-4 times per install


def test_log_lines_never_land_inside_a_progress_bars_line(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cli = [sys.executable, "-m", "perrec_eval"]
    synth = ["synth", "--out", str(tmp_path / "raw"), "--reviews-per-domain", "8000", "--domains", "Books"]
    subprocess.run([*cli, *synth, "--no-progress"], env=env, check=True, capture_output=True)
    build = ["build", "--source", str(tmp_path / "raw"), "--out", str(tmp_path / "b"), "--domains", "Books"]
    # -v: the build's stage timings are debug lines, logged while its bars run
    done = subprocess.run([*cli, "-v", *build, "--test-groups", "6"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = [line.split("\r")[-1] for line in done.stderr.split("\n")]  # what a terminal keeps of each line
    logged = [line for line in shown if " INFO " in line or " DEBUG dataset_builder" in line]
    assert logged and all(line.startswith("20") for line in logged), logged  # no "Books: 14%|...2026 INFO"


def test_build_says_where_the_user_looks_when_few_train_groups_are_left(tmp_path, capsys):
    raw, out = tmp_path / "raw", tmp_path / "large"
    synth = ["synth", "--out", str(raw), "--reviews-per-domain", "8000", "--domains", "Books"]
    assert main([*synth, "--no-progress"]) == 0
    build = ["build", "--source", str(raw), "--out", str(out), "--domains", "Books", "--preset", "large"]
    assert main([*build, "--train-fraction", "0.2", "--no-progress"]) == 0
    err = capsys.readouterr().err
    warning = next(line for line in err.splitlines() if line.startswith("perrecbench build: warning:"))
    assert "train groups" in warning and "raise --train-fraction" in warning
    assert "**Few train groups**" in (out / "README.md").read_text()
    assert main([*build[:-2], "--out", str(tmp_path / "paper"), "--test-groups", "6", "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err  # a --test-groups build chose its test size itself


def test_report_page_has_contents_folds_the_legend_and_scrolls_wide_tables(pointwise_run, tmp_path):
    import re

    out = tmp_path / "report"
    assert main(["report", str(pointwise_run), "--out", str(out), "--no-plots"]) == 0
    page = (out / "index.html").read_text()
    sections = re.findall(r'<h2 id="([^"]+)">', page)
    links = re.findall(r'<a href="#([^"]+)">', page.split('<nav class="contents">', 1)[1].split("</nav>")[0])
    assert sections and links == sections  # a link to every section
    assert page.count("<table") == page.count('<div class="scroll"><table')  # wide tables scroll in place
    assert '<details class="legend"><summary>' in page and '<p class="legend">' not in page


# --- round two (issue 37): the small things ----------------------------------------------------------------


def _option_helps(capsys, argv: list[str]) -> list[str]:
    """Each option's entry in `perrecbench ARGV --help` (its wrapped lines joined)."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    text = capsys.readouterr().out.split("options:", 1)[1]
    return [" ".join(entry.split()) for entry in re.split(r"\n(?=  -)", text) if entry.strip()]


@pytest.mark.parametrize("task", ["perrecbench", "llmrec", "recbench-plus"])
def test_help_says_each_default_and_list_format_once(task, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # one line per option: no word split at a hyphen
    for command in (["build"], ["evaluate"], ["score"], ["report"], ["sft", "data"]):
        for entry in _option_helps(capsys, [*command, "--task", task]):
            assert entry.count("default:") <= 1, f"{task} {command}: {entry}"
            assert entry.count("comma-separated") <= 1, f"{task} {command}: {entry}"


def test_a_domain_of_one_group_is_said_in_the_singular():
    from types import SimpleNamespace

    from perrec_eval.tasks.perrecbench.leaderboard.tables import analysis_tables

    by_domain = {"domains": ["Books", "Electronics"], "num_groups": {"Books": 1, "Electronics": 3}}
    by_domain["rows"] = [{"label": "m", "ptc": {"Books": 0.5, "Electronics": 0.1}}]
    nothing = {"rows": [], "levels": [], "sizes": [], "methods": []}
    analyses = {"by_domain": by_domain, "by_group_size": nothing, "by_method": nothing, "prompting": []}
    analyses |= {"k_shots": [], "versus_baselines": [], "rating_errors": {"points": []}}
    grid = analysis_tables(SimpleNamespace(columns=[]), analyses)[0]
    assert grid["header"][1:] == ["Books (1 group)", "Electronics (3 groups)"]


def test_convert_gguf_writes_the_weights_readable_like_the_files_beside_them(tmp_path, monkeypatch):
    import os
    import stat

    from perrec_eval.engines import hf

    def convert(path: str, out: str) -> str:  # what transformers and safetensors write
        (Path(out) / "config.json").write_text("{}")
        weights = Path(out) / "model.safetensors"
        weights.write_bytes(b"w")
        weights.chmod(0o600)
        return out

    monkeypatch.setattr(hf, "convert_gguf", convert)
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    mask = os.umask(0o022)
    try:
        assert main(["convert-gguf", str(tmp_path / "tiny.gguf"), "--out", str(tmp_path / "model")]) == 0
    finally:
        os.umask(mask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "model").iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == 0o644, modes


def test_tasks_describes_llmrec_by_its_five_tasks(capsys):
    assert main(["tasks"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("llmrec:"))
    assert all(word in line for word in ("rating", "sequential", "direct", "explanation", "summarization"))
