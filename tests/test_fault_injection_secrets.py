"""The audit of 2026-11-26 replayed (issue 29), its secret-leak and publish findings: a hostile server that
echoes credentials back in every field, credentials in ``--base-url`` and ``extra_body``, and every upload
path's publish scan. Each case failed before its fix; a refusal is one line naming the fix, exit 2."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark
from tests.perrec_eval.openai_stub import KEY_ENV, SECRET, StubServer

_STUB = ["--engine", "openai", "--model", "stub-model"]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run the CLI, expect exit 2 with one error line holding every needle; return that line."""
    assert main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("secrets_bench"))


@pytest.fixture
def stub_factory():
    """``start(default="ok")``: a running OpenAI-compatible stub on 127.0.0.1, stopped afterwards."""
    servers: list[StubServer] = []

    def start(default="ok"):
        servers.append(StubServer(default=default).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _evaluate(bench: Path, out: Path, *extra: str) -> list[str]:
    flags = "--levels easy --max-groups 2 --no-profile --no-progress --methods pointwise"
    return ["evaluate", "--data", str(bench), *_STUB, "--out", str(out), *flags.split(), *extra]


def _written(folder: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in folder.rglob("*") if path.is_file())


def test_evaluate_stores_no_key_a_server_echoes_in_finish_reason(bench, tmp_path, stub_factory, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    server = stub_factory("echo-finish")
    out = tmp_path / "run"
    assert main(_evaluate(bench, out, "--base-url", server.base_url, "--api-key-env", KEY_ENV)) == 0
    assert server.authorizations and all(SECRET in header for header in server.authorizations)
    assert SECRET not in _written(out)
    assert "Bearer <redacted>" in (out / "samples.jsonl").read_text()


@pytest.mark.parametrize("echo", ["echo-key-ok", ("echo-auth", 500)])
def test_evaluate_stores_no_basic_credential_of_the_base_url(bench, tmp_path, stub_factory, capsys, echo):
    server = stub_factory(echo)
    url = server.base_url.replace("http://", "http://alice:PWSECRET111@")
    out = tmp_path / "run"
    assert main(_evaluate(bench, out, "--base-url", url, "--engine-arg", "max_retries=0")) in (0, 1)
    basic = base64.b64encode(b"alice:PWSECRET111").decode()
    assert server.authorizations[-1] == f"Basic {basic}"
    shown = capsys.readouterr()
    for where, text in {"files": _written(out), "output": shown.out + shown.err}.items():
        assert basic not in text and "PWSECRET111" not in text, where


def test_evaluate_records_no_credential_inside_extra_body(bench, tmp_path, stub_factory):
    server = stub_factory()
    extra = {"authorization": "Basic ZWJ1c2VyOkVCU0VDUkVUMg==", "user": {"private_key": "EBSECRET3"}}
    extra["user"]["access_key_id"] = "AKIAEBSECRET4"
    out = tmp_path / "run"
    extra_body = f"extra_body={json.dumps(extra)}"
    argv = _evaluate(bench, out, "--base-url", server.base_url, "--engine-arg", extra_body)
    assert main(argv) == 0
    assert server.bodies[-1]["authorization"] == extra["authorization"]  # sent...
    written = _written(out)
    for secret in ("ZWJ1c2VyOkVCU0VDUkVUMg", "EBSECRET3", "AKIAEBSECRET4"):  # ...never recorded
        assert secret not in written, secret


def test_evaluate_refuses_an_empty_base_url(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    refused(capsys, _evaluate(bench, tmp_path / "run", "--base-url", ""), "--base-url is empty")
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://alice:PWSECRET111@[::1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:99999/v1", "the port is not a number"),
    ],
)
def test_evaluate_refuses_a_malformed_base_url_in_one_line(bench, tmp_path, capsys, url, problem):
    line = refused(capsys, _evaluate(bench, tmp_path / "run", "--base-url", url), "not a valid URL", problem)
    assert "PWSECRET111" not in line


def test_profiles_push_to_hub_runs_the_publish_scan(bench, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--no-progress", "profiles", "--data", str(bench), "--engine", "fake", "--model", "constant"]
    argv += ["--out", "profiles.jsonl", "--levels", "easy", "--max-groups", "1"]
    assert main(argv) == 0
    path = Path("profiles.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["profile"] += " (notes in /workspace/alice/perrec)"  # what an echoing server could put there
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    refused(capsys, [*argv, "--push-to-hub", "org/x"], "refusing to push to org/x", "/workspace/alice/perrec")
