"""The audit of 2026-11-29 replayed (issue 44), its findings of the output rule, secrets, integrity,
publishing and one-line errors: each reproduction ends in a correct result or a refusal of one line naming
the fix (exit 2), with nothing lost and no secret written. Each case failed before its fix."""

from __future__ import annotations

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
