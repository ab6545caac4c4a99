"""The audit of 2026-11-29 replayed (issue 44), its findings of the output rule, secrets, integrity,
publishing and one-line errors: each reproduction ends in a correct result or a refusal of one line naming
the fix (exit 2), with nothing lost and no secret written. Each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark
from tests.perrec_eval.openai_stub import StubServer

RELEASED = Path(__file__).resolve().parent / "data" / "recbench_plus_released"


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run the CLI, expect exit 2 with one error line holding every needle; return that line."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _written(folder: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in folder.rglob("*") if path.is_file())


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("round4_bench"))


@pytest.fixture
def echo_server():
    """An OpenAI-compatible stub whose answers repeat the request's whole body (as a hostile server may)."""
    server = StubServer(default="echo-body").start()
    yield server
    server.stop()


def _evaluate(bench: Path, out: Path, *extra: str) -> list[str]:
    flags = ["--levels", "easy", "--max-groups", "2", "--no-profile", "--methods", "pointwise"]
    return ["--no-progress", "evaluate", "--data", str(bench), "--engine", "openai", "--model", "m", *flags,
            "--out", str(out), *extra]  # fmt: skip


# --------------------------------------------------------- H5: secrets under `key`, `auth`, `#key=`, `;key=`


@pytest.mark.parametrize("field", ["key", "auth"])
def test_evaluate_records_no_extra_body_key_or_auth_a_server_echoes(bench, tmp_path, echo_server, field):
    out = tmp_path / "run"
    extra = f'extra_body={{"{field}": "EBSECRET{field.upper()}55"}}'
    assert main(_evaluate(bench, out, "--base-url", echo_server.base_url, "--engine-arg", extra)) == 0
    assert echo_server.bodies[-1][field] == f"EBSECRET{field.upper()}55"  # sent...
    assert f"EBSECRET{field.upper()}55" not in _written(out)  # ...and never written


@pytest.mark.parametrize("url_tail", ["#key=FRAGSECRET13", ";key=MATRIXSECRET14"])
def test_evaluate_records_no_key_of_a_base_url_fragment_or_path_parameter(
    bench, tmp_path, echo_server, capsys, url_tail
):
    out = tmp_path / "run"
    assert main(["-v", *_evaluate(bench, out, "--base-url", echo_server.base_url + url_tail)]) == 0
    secret = url_tail.partition("=")[2]
    shown = capsys.readouterr()
    assert secret not in _written(out) and secret not in shown.out + shown.err


# ------------------------------------------------------------ H9: the publish scan knows every common shape

SHAPES = [
    ("https://APIKEYASUSER12345@api.example.com/v1", "password inside a URL"),
    ('"key": "AIzaSyD-abcdefghijklmnopqrstuvwxyz12345"', "Google API key"),
    ("sk_live_51HabcdefghijklmnopqrstuVWXYZ", "Stripe key"),
    ("-----BEGIN RSA PRIVATE KEY-----", "private key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "JSON Web Token",
    ),
    ("glpat-abcdefghij1234567890", "GitLab token"),
    ("Authorization: Token abcdef1234567890abcd", "Authorization header"),
    ('"auth": "abcdef1234567890"', "key or token assignment"),
    ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "Slack webhook"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm token"),
    ("AccountKey=abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH==", "key or token assignment"),
    ("http://127.0.0.1:8000/v1;key=MATRIXSECRET14", "key in a URL"),
    ("http://127.0.0.1:8000/v1#key=FRAGSECRET13", "key in a URL"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean report (its runs named by relative paths): the scan refuses it only for what a test adds."""
    import os

    root = tmp_path_factory.mktemp("round4_report")
    write_tiny_benchmark(root / "bench")
    here = Path.cwd()
    os.chdir(root)
    try:
        argv = ["--no-progress", "evaluate", "--data", "bench", "--engine", "baseline", "--model", "constant"]
        assert main([*argv, "--levels", "easy", "--out", "bl"]) == 0
        assert main(["--no-progress", "report", "bl", "--out", "rep", "--no-plots"]) == 0
    finally:
        os.chdir(here)
    assert main(["push", "leaderboard", str(root / "rep"), "--repo", "org/x", "--dry-run"]) == 0
    return root / "rep"


@pytest.mark.parametrize(("shape", "what"), SHAPES)
def test_push_leaderboard_refuses_every_common_secret_shape(report, tmp_path, capsys, shape, what):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(report, copy)
    with (copy / "leaderboard.md").open("a", encoding="utf-8") as handle:
        handle.write(shape + "\n")
    argv = ["push", "leaderboard", str(copy), "--repo", "org/x", "--dry-run"]
    refused(capsys, argv, what, "leaderboard.md")


@pytest.mark.parametrize(("shape", "what"), SHAPES)
def test_secrets_redaction_hides_what_the_publish_scan_refuses(shape, what):
    # one place knows the shapes: what the scan names, redaction hides, and the result passes the scan
    from perrec_eval import secrets
    from perrec_eval.publish import scan

    assert what in scan("a.md", shape.encode(), [])
    hidden = secrets.redact_text(shape)
    assert secrets.REDACTED in hidden and scan("a.md", hidden.encode(), []) is None


@pytest.mark.parametrize(
    "text",
    ['"key": "ea98159e3e0cc1fd"', "max_new_tokens: 1234567", '"eos_token": "<pad>"', "sort_key=abc123456"],
)
def test_publish_scan_passes_hashes_numbers_and_special_tokens(text):
    from perrec_eval.publish import scan

    assert scan("a.json", text.encode(), []) is None


# ------------------------------------------------------------------------ --stage writes and stops


def test_push_stage_writes_the_files_and_sends_nothing(tmp_path, capsys, monkeypatch):
    import huggingface_hub

    class NoHub:
        def __init__(self, *args, **kwargs):
            raise AssertionError("--stage reached the Hub")

    monkeypatch.setattr(huggingface_hub, "HfApi", NoHub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["push", "metric", "--repo", "org/ptc", "--stage", str(tmp_path / "staged")]) == 0
    out = capsys.readouterr().out
    assert "nothing was sent" in out and "uploaded" not in out
    assert (tmp_path / "staged" / "ptc.py").is_file()


def test_push_stage_refuses_a_secret_before_writing_it(report, tmp_path, capsys):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(report, copy)
    with (copy / "leaderboard.md").open("a", encoding="utf-8") as handle:
        handle.write("glpat-abcdefghij1234567890\n")
    argv = ["push", "leaderboard", str(copy), "--repo", "org/x", "--stage", str(tmp_path / "staged")]
    refused(capsys, argv, "GitLab token")
    assert not (tmp_path / "staged").exists()


# ------------------------------------------------- H1, H2, H7, H12: one output rule, folders and single files


@pytest.fixture
def released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import shutil

    folder = tmp_path / "released"
    shutil.copytree(RELEASED, folder)
    monkeypatch.chdir(folder)
    return folder


def _released_evaluate(queries: str, out: str, *extra: str) -> list[str]:
    args = ["--no-progress", "evaluate", "--task", "recbench-plus", "--released-queries", queries]
    args += ["--catalogue", "movies.dat", "--engine", "fake", "--model", "constant"]
    return [*args, "--out", out, *extra]


@pytest.mark.parametrize("flag", [[], ["--released-data", "notes.data"]])
def test_released_evaluate_refuses_a_file_at_its_data_folder(released, capsys, flag):
    # a user's file at RUN.data (no flag given) or at --released-data is refused, never moved aside
    Path("notes.data").write_text("precious experiment data\n", encoding="utf-8")
    refused(capsys, _released_evaluate("ExplicitQuery.json", "notes", *flag), "notes.data is a file")
    assert Path("notes.data").read_text(encoding="utf-8") == "precious experiment data\n"
    assert not [path.name for path in released.iterdir() if path.name.startswith(".")]


def test_released_evaluate_refuses_a_data_folder_holding_a_users_file(released, capsys):
    assert main(_released_evaluate("ExplicitQuery.json", "r3")) == 0
    Path("r3.data/MY_NOTES.txt").write_text("keep me\n", encoding="utf-8")
    argv = _released_evaluate("DemographicsBasedQuery.json", "r4", "--released-data", "r3.data")
    refused(capsys, argv, "MY_NOTES.txt", "did not write")
    assert Path("r3.data/MY_NOTES.txt").read_text(encoding="utf-8") == "keep me\n"
    assert json.loads(Path("r3.data/manifest.json").read_text())["released"]["released_queries"]["file"] == (
        "ExplicitQuery.json"
    )


def test_released_evaluate_refuses_a_build_as_its_data_folder(released, tmp_path, capsys):
    bench = write_tiny_benchmark(tmp_path / "bench")
    before = sorted(path.name for path in bench.rglob("*"))
    argv = _released_evaluate("ExplicitQuery.json", "r", "--released-data", str(bench))
    refused(capsys, argv, "did not write")
    assert sorted(path.name for path in bench.rglob("*")) == before


def test_released_evaluate_rewrites_its_own_data_folder(released):
    assert main(_released_evaluate("ExplicitQuery.json", "r1", "--released-data", "shared")) == 0
    assert main(_released_evaluate("DemographicsBasedQuery.json", "r2", "--released-data", "shared")) == 0
    manifest = json.loads(Path("shared/manifest.json").read_text())
    assert manifest["released"]["released_queries"]["file"] == "DemographicsBasedQuery.json"


def test_released_evaluate_into_a_busy_out_leaves_its_data_folder_as_it_was(released, capsys):
    # H7: the refusal came after RUN.data was rewritten under the running run
    from tests.lock_holder import held_by_another_process

    assert main(_released_evaluate("ExplicitQuery.json", "race")) == 0
    before = Path("race.data/manifest.json").read_bytes()
    with held_by_another_process("race") as pid:
        refused(capsys, _released_evaluate("DemographicsBasedQuery.json", "race"), f"pid {pid}")
    assert Path("race.data/manifest.json").read_bytes() == before


def test_released_evaluate_refuses_a_data_folder_another_run_reads(released, capsys):
    from tests.lock_holder import held_by_another_process

    assert main(_released_evaluate("ExplicitQuery.json", "first", "--released-data", "shared")) == 0
    before = Path("shared/manifest.json").read_bytes()
    with held_by_another_process("shared", kind="file") as pid:
        argv = _released_evaluate("DemographicsBasedQuery.json", "second", "--released-data", "shared")
        refused(capsys, argv, f"pid {pid}")
    assert Path("shared/manifest.json").read_bytes() == before
    assert not Path("second").exists()


def _score_released(per_query: str) -> list[str]:
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries"]
    args += ["DemographicsBasedQuery.json", "--responses", "responses.jsonl", "--catalogue", "movies.dat"]
    return [*args, "--per-query", per_query]


def test_per_query_refuses_a_fifo(released, capsys):
    import os
    import stat

    os.mkfifo("fifo")
    refused(capsys, _score_released("fifo"), "is a FIFO", "not a regular file")
    assert stat.S_ISFIFO(os.stat("fifo").st_mode)


def test_per_query_and_profiles_refuse_a_device(released, bench, capsys):
    # a node like /dev/null (never /dev/null itself: run against code without the fix, this test would
    # replace it), which a replacement turns into a regular file for every program that writes there
    import os
    import stat

    try:
        os.mknod("fakenull", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    refused(capsys, _score_released("fakenull"), "is a character device")
    argv = ["--no-progress", "profiles", "--data", str(bench), "--engine", "fake", "--model", "constant"]
    argv += ["--levels", "easy", "--max-groups", "1"]
    refused(capsys, [*argv, "--out", "fakenull"], "character device")
    assert stat.S_ISCHR(os.stat("fakenull").st_mode)


def test_fileio_atomic_open_refuses_to_replace_a_fifo(tmp_path):
    import os

    from perrec_eval import fileio
    from perrec_eval.errors import DataError

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DataError, match="is a FIFO"):
        fileio.write_text(tmp_path / "fifo", "x")


@pytest.fixture
def baseline_run(bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    argv = ["--no-progress", "evaluate", "--data", str(bench), "--engine", "baseline", "--model", "constant"]
    assert main([*argv, "--levels", "easy", "--out", "bl"]) == 0
    return Path("bl")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_refuses_a_folder_whose_leaderboard_json_is_not_a_report(baseline_run, capsys):
    # H12: any leaderboard.json marked a folder as a report folder, and the user's files were replaced
    user = Path("u")
    user.mkdir()
    (user / "leaderboard.json").write_text('{"mine": true}\n', encoding="utf-8")
    (user / "leaderboard.md").write_text("notes\n", encoding="utf-8")
    before = _tree(user)
    refused(capsys, ["--no-progress", "report", "bl", "--out", "u", "--no-plots"], "did not write")
    assert _tree(user) == before


@pytest.mark.parametrize("name", ["plots/t1_mine.png", "leaderboard.md"])
def test_report_keeps_a_file_it_did_not_write_under_a_report_name(baseline_run, capsys, name):
    # H12: a picture named like a report's (or a report file the user edited) was deleted by the next report
    argv = ["--no-progress", "report", "bl", "--out", "v", "--resamples", "20"]
    assert main(argv) == 0
    mine = Path("v", name)
    mine.parent.mkdir(exist_ok=True)
    mine.write_bytes(b"the user's own")
    refused(capsys, argv, name, "did not write")
    assert mine.read_bytes() == b"the user's own"
    mine.unlink()
    assert main(argv) == 0 and (Path("v") / "index.html").is_file()


@pytest.fixture
def two_families(baseline_run: Path) -> list[str]:
    """The perrecbench baseline run and a toy family's run, in the current folder."""
    from perrec_eval import tasks
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.evaluation import TaskEvalConfig, evaluate
    from tests.perrec_eval.tasks import toy

    tasks.register(toy.TASK, replace=True)
    toy.write_data(Path("toy-data"))
    config = TaskEvalConfig(task="toy", data="toy-data", engine="fake", model="oracle", out="toy-run")
    evaluate(config, engine=FakeEngine(toy.oracle, model="oracle"))
    yield ["bl", "toy-run"]
    tasks.unregister("toy")


def test_report_of_one_family_into_a_folder_of_several_names_the_cause(two_families, capsys):
    # H21: it said the folder held files `perrecbench report` did not write (it wrote them)
    assert main(["--no-progress", "report", *two_families, "--out", "both", "--no-plots"]) == 0
    assert (Path("both") / "toy" / "index.html").is_file() and (Path("both") / "perrecbench").is_dir()
    line = refused(capsys, ["--no-progress", "report", "toy-run", "--out", "both"], "several families")
    assert "did not write" not in line
    line = refused(capsys, ["push", "leaderboard", "both", "--repo", "org/x", "--dry-run"], "both/perrecbench")
    assert "write a report first" not in line
