"""The adversarial audit of 2026-11-26 (issue 29), data loss and output folders: F1-F4, F18-F20, the cosmetic
items on --out and the --out rows of F24, replayed through the command line. Each case failed before its fix;
a refusal is one line naming the fix, exit 2, and leaves every file where it was (not even a lock file).

The rule itself (`perrec_eval.outputs`) has its unit tests in tests/perrec_eval/test_outputs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark
from tests.dataset_builder.build_fixture import five_user_source
from tests.lock_holder import held_by_another_process
from tests.test_fault_injection import refused


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _build_argv(source: Path, out: str | Path, *extra: str) -> list[str]:
    flags = "--domains Books --test-groups 1 --threads 1 --memory-limit 1GB --no-progress"
    return ["build", "--source", str(source), "--out", str(out), *flags.split(), *extra]


def _eval_argv(bench: Path, out: str | Path, *extra: str, engine: str = "fake", model: str = "constant"):
    flags = "--levels easy --max-groups 2 --no-profile --no-progress"
    methods = [] if engine == "baseline" else ["--methods", "pointwise"]
    argv = ["evaluate", "--data", str(bench), "--engine", engine, "--model", model, "--out", str(out)]
    return [*argv, *methods, *flags.split(), *extra]


def _report_argv(runs: Path, out: str | Path) -> list[str]:
    return ["report", str(runs), "--out", str(out), "--resamples", "20", "--no-plots"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("outputs_bench") / "perrecbench")


@pytest.fixture(scope="module")
def runs(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two baseline runs (as `--model all` writes it) and one run of the fake engine."""
    root = tmp_path_factory.mktemp("outputs_runs")
    for name in ("random", "item-quality"):
        assert main(_eval_argv(bench, root / "baselines" / name, engine="baseline", model=name)) == 0
    assert main(_eval_argv(bench, root / "fake")) == 0
    return root


# ---------------------------------------------------------------------------- F1. build --overwrite, evaluate


def test_build_overwrite_refuses_a_build_holding_files_it_did_not_write(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    out = tmp_path / "bench"
    assert main(_build_argv(source, out)) == 0
    (out / "NOTES.txt").write_text("my notes")
    (out / "my-runs").mkdir()
    (out / "my-runs" / "run.json").write_text("{}")
    before = _tree(out)
    refused(capsys, _build_argv(source, out, "--overwrite"), "NOTES.txt", "my-runs/run.json", "did not write")
    assert _tree(out) == before


def test_evaluate_refuses_the_benchmark_folder_as_out(bench: Path, capsys) -> None:
    before = _tree(bench)
    refused(capsys, _eval_argv(bench, bench), "is --data", "new folder")
    refused(capsys, _eval_argv(bench, bench / "runs" / "fake"), "is inside --data")
    assert _tree(bench) == before  # no run file, no lock file, no runs/ folder


# ------------------------------------------------------------------------ F2, F24. the current, / and home


@pytest.mark.parametrize(
    ("out", "says"),
    [
        ("", "--out is empty"),
        (".", "current folder"),
        ("..", "current folder or one above it"),
        ("/", "root folder"),
        ("~", "home folder"),
    ],
)
def test_evaluate_refuses_the_current_root_and_home_folders(
    bench: Path, tmp_path: Path, monkeypatch, capsys, out: str, says: str
) -> None:
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    refused(capsys, _eval_argv(bench, out), says)
    assert _tree(tmp_path) == {}


@pytest.mark.parametrize("command", ["synth", "sweep", "report", "build", "convert-gguf", "sft data"])
def test_every_folder_command_refuses_an_empty_out(
    bench: Path, runs: Path, tmp_path: Path, monkeypatch, capsys, command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    argv = {
        "synth": ["synth", "--out", "", "--reviews-per-domain", "200", "--domains", "Books"],
        "sweep": ["sweep", *_eval_argv(bench, "")[1:], "--ks", "1", "--shots-grid", "0", "--no-plots"],
        "report": _report_argv(runs / "fake", ""),
        "build": _build_argv(five_user_source(tmp_path / "raw"), ""),
        "convert-gguf": ["convert-gguf", "model.gguf", "--out", ""],
        "sft data": ["sft", "data", "--data", str(bench), "--format", "pairwise", "--no-profile", "--out="],
    }[command]
    before, beside = _tree(tmp_path), sorted(tmp_path.parent.iterdir())
    refused(capsys, argv, "--out")
    assert _tree(tmp_path) == before and sorted(tmp_path.parent.iterdir()) == beside  # no lock beside


def test_evaluate_out_with_a_300_character_name_is_one_line(bench: Path, tmp_path: Path, capsys) -> None:
    refused(capsys, _eval_argv(bench, tmp_path / ("a" * 300)), "at most 200", "shorter --out")
    assert _tree(tmp_path) == {}


# ------------------------------------------------------------------------------------------ F3. convert-gguf


@pytest.fixture
def fake_convert(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """convert-gguf with the transformers conversion replaced: it writes the files of `written` (a dict the
    test changes) into the folder it is given; returns (gguf path, written)."""
    from perrec_eval.engines import hf

    written: dict[str, str] = {"config.json": '{"new": true}', "model.safetensors": "weights"}

    def convert(path: str, out: str) -> str:
        for name, text in written.items():
            (Path(out) / name).write_text(text)
        if written.get("kill"):
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(hf, "convert_gguf", convert)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf, written


def test_convert_gguf_refuses_a_folder_it_did_not_write(fake_convert, tmp_path: Path, capsys) -> None:
    gguf, _ = fake_convert
    model = tmp_path / "precious-model"
    model.mkdir()
    (model / "config.json").write_text('{"my_custom_field": "keep me"}')
    refused(capsys, ["convert-gguf", str(gguf), "--out", str(model)], "config.json", "did not write")
    assert _tree(model) == {"config.json": b'{"my_custom_field": "keep me"}'}


def test_convert_gguf_replaces_its_own_folder_whole(fake_convert, tmp_path: Path) -> None:
    gguf, written = fake_convert
    out = tmp_path / "model"
    assert main(["convert-gguf", str(gguf), "--out", str(out)]) == 0
    record = json.loads((out / "convert_gguf.json").read_text())
    assert record == {"gguf": "tiny.gguf", "files": ["config.json", "model.safetensors"]}
    written.pop("model.safetensors")
    assert main(["convert-gguf", str(gguf), "--out", str(out)]) == 0
    assert sorted(_tree(out)) == ["config.json", "convert_gguf.json"]  # nothing of the first left beside


def test_convert_gguf_killed_midway_leaves_the_old_folder(fake_convert, tmp_path: Path) -> None:
    gguf, written = fake_convert
    out = tmp_path / "model"
    assert main(["convert-gguf", str(gguf), "--out", str(out)]) == 0
    before = _tree(out)
    written.update({"config.json": "half", "kill": "yes"})
    assert main(["convert-gguf", str(gguf), "--out", str(out)]) == 130
    assert _tree(out) == before


def test_convert_gguf_second_process_is_refused(fake_convert, tmp_path: Path, capsys) -> None:
    gguf, _ = fake_convert
    out = tmp_path / "model"
    with held_by_another_process(out, "file") as pid:
        refused(capsys, ["convert-gguf", str(gguf), "--out", str(out)], "in use by another", str(pid))
    assert not out.exists()


# ------------------------------------------------------------------------------------ F4, F19. report --out


def test_report_refuses_user_files_in_its_plots_folder(runs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    assert main(_report_argv(runs / "fake", out)) == 0
    (out / "plots").mkdir()
    (out / "plots" / "t1_leaderboard.png").write_bytes(b"a picture of the user's, named as a report's")
    (out / "plots" / "my_custom_figure_notes.md").write_text("mine")
    before = _tree(out)
    refused(capsys, _report_argv(runs / "fake", out), "plots/my_custom_figure_notes.md", "did not write")
    assert _tree(out) == before
    (out / "plots" / "my_custom_figure_notes.md").unlink()
    refused(capsys, _report_argv(runs / "fake", out), "plots/t1_leaderboard.png", "did not write")
    (out / "plots" / "t1_leaderboard.png").unlink()
    assert main(_report_argv(runs / "fake", out)) == 0  # its own files only: replaced
    assert not (out / "plots").exists()


@pytest.mark.parametrize("where", ["run folder", "benchmark", "folder of runs", "notes"])
def test_report_refuses_a_folder_of_something_else(
    bench: Path, runs: Path, tmp_path: Path, capsys, where: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    out = {"run folder": runs / "fake", "benchmark": bench, "folder of runs": runs, "notes": notes}[where]
    before = _tree(out)
    refused(capsys, _report_argv(runs / "baselines", out), "did not write")
    assert _tree(out) == before


def test_report_refuses_an_out_inside_a_run_folder(runs: Path, capsys) -> None:
    before = _tree(runs / "fake")
    refused(capsys, _report_argv(runs / "fake", runs / "fake" / "report"), "is inside the run folder")
    assert _tree(runs / "fake") == before


# ------------------------------------------------------------------------------- F18. a folder of runs


def test_evaluate_into_a_folder_of_runs_is_refused(bench: Path, runs: Path, capsys) -> None:
    before = _tree(runs / "baselines")
    refused(capsys, _eval_argv(bench, runs / "baselines"), "folder of runs", "item-quality, random", "hide")
    assert _tree(runs / "baselines") == before


def test_evaluate_several_baselines_into_a_run_folder_is_refused(bench: Path, runs: Path, capsys) -> None:
    before = _tree(runs / "fake")
    argv = _eval_argv(bench, runs / "fake", engine="baseline", model="all")
    refused(capsys, argv, "run.json", "did not write")
    assert _tree(runs / "fake") == before


def test_evaluate_refuses_a_run_folder_holding_other_files(bench: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused(capsys, _eval_argv(bench, out), "notes.txt", "did not write")
    assert _tree(out) == {"notes.txt": b"mine"}


# ------------------------------------------------------------------------ F20. symlinked output names


def test_profiles_through_a_symlinked_name_takes_the_real_files_lock(bench: Path, tmp_path: Path, capsys):
    real, alias = tmp_path / "real.jsonl", tmp_path / "alias.jsonl"
    alias.symlink_to(real.name)
    argv = ["profiles", "--data", str(bench), "--engine", "fake", "--model", "constant", "--levels", "easy"]
    argv += ["--max-groups", "2", "--no-progress", "--out"]
    with held_by_another_process(real, "file") as pid:
        refused(capsys, [*argv, str(alias)], "in use by another perrecbench process", str(pid))
    assert main([*argv, str(alias)]) == 0
    assert alias.is_symlink() and real.read_text().count("\n") == 4  # written through the link


def test_build_through_a_symlinked_out_takes_the_real_folders_lock(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    real, link = tmp_path / "cbl", tmp_path / "cbl-link"
    assert main(_build_argv(source, real)) == 0
    link.symlink_to(real.name)
    with held_by_another_process(real, "file") as pid:
        refused(capsys, _build_argv(source, link, "--overwrite"), "in use by another", str(pid))
    assert main(_build_argv(source, link, "--overwrite")) == 0
    assert link.is_symlink() and (real / "manifest.json").is_file()
    assert [p for p in tmp_path.iterdir() if "cbl-link" in p.name] == [link]  # no temp or stages of the link


# --------------------------------------------------------------------------------------------- cosmetic


@pytest.mark.parametrize(("link", "says"), [("loop", "symlink loop"), ("dangling", "does not exist")])
def test_evaluate_out_that_is_a_broken_symlink_says_so(
    bench: Path, tmp_path: Path, capsys, link: str, says: str
) -> None:
    out = tmp_path / "out"
    if link == "loop":
        (tmp_path / "other").symlink_to("out")
        out.symlink_to("other")
    else:
        out.symlink_to("nowhere")
    line = refused(capsys, _eval_argv(bench, out), says)
    assert "File exists" not in line


def test_profiles_refused_inside_the_benchmark_leaves_no_lock_there(bench: Path, capsys) -> None:
    before = _tree(bench)
    argv = ["profiles", "--data", str(bench), "--engine", "fake", "--model", "constant"]
    refused(capsys, [*argv, "--out", str(bench / "manifest.json")], "is inside --data")
    assert _tree(bench) == before


@pytest.mark.parametrize("where", ["source", "inside the source", "out"])
def test_build_refuses_a_work_dir_in_the_source_or_the_output(tmp_path: Path, capsys, where: str) -> None:
    source = five_user_source(tmp_path / "raw")
    out = tmp_path / "bench"
    work = {"source": source, "inside the source": source / "stages", "out": out}[where]
    before = _tree(source)
    refused(capsys, _build_argv(source, out, "--work-dir", str(work)), "--work-dir")
    assert _tree(source) == before and not out.exists()


def test_build_refuses_the_current_folder_as_work_dir(tmp_path: Path, monkeypatch, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    monkeypatch.chdir(tmp_path)
    refused(capsys, _build_argv(source, tmp_path / "bench", "--work-dir", "."), "--work-dir . is the current")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def test_build_refuses_an_out_inside_the_source(tmp_path: Path, capsys) -> None:
    source = five_user_source(tmp_path / "raw")
    before = _tree(source)
    refused(capsys, _build_argv(source, source / "bench"), "is inside --source", "outside the source")
    assert _tree(source) == before


# ------------------------------------------------------------ a family on the general path inherits the rule


@pytest.fixture
def toy_family(tmp_path: Path):
    from perrec_eval import registry
    from tests.perrec_eval.tasks import toy

    registry.register(toy.TASK, replace=True)
    yield toy.write_data(tmp_path / "toy-data")
    registry.unregister("toy")


@pytest.mark.parametrize("where", ["data", "inside data", "notes", "folder of runs"])
def test_family_evaluate_refuses_an_out_of_something_else(toy_family: Path, tmp_path: Path, capsys, where):
    argv = ["evaluate", "--task", "toy", "--data", str(toy_family), "--engine", "fake", "--model", "constant"]
    runs = tmp_path / "runs"
    assert main([*argv, "--out", str(runs / "one")]) == 0
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("mine")
    out = {"data": toy_family, "inside data": toy_family / "run", "notes": tmp_path / "notes"}
    before = _tree(tmp_path)
    refused(capsys, [*argv, "--out", str(out.get(where, runs))], "--out")
    assert _tree(tmp_path) == before
