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


# ------------------------------------------------------------------------ issue 38: G2, G3 and the class

_EXTRA_BODY = {
    "api_key": "EXTRAKEY123",
    "authorization": "Basic ZWJ1c2VyOkVCU0VDUkVUMg==",
    "user": {"private_key": "EBSECRET3", "access_key_id": "AKIAEBSECRET4"},
    "metadata": {"note": "sk-live-abcdefghijklmnopqrst"},
    "x-api-key": "XAPIKEY99999",
}
_EXTRA_SECRETS = (
    "EXTRAKEY123",
    "ZWJ1c2VyOkVCU0VDUkVUMg",
    "EBSECRET3",
    "AKIAEBSECRET4",
    "sk-live-abc",
    "XAPIKEY9",
)


def test_evaluate_records_no_extra_body_credential_in_profiles_either(bench, tmp_path, stub_factory):
    # G2: run.json's engine part was redacted, but profiles.jsonl and run.json → profiles.writer were not
    server = stub_factory()
    out = tmp_path / "run"
    flags = "--levels easy --max-groups 2 --no-progress --methods pointwise"
    argv = ["evaluate", "--data", str(bench), *_STUB, "--out", str(out), *flags.split()]
    argv += ["--base-url", server.base_url, "--engine-arg", f"extra_body={json.dumps(_EXTRA_BODY)}"]
    assert main(argv) == 0
    assert (out / "profiles.jsonl").is_file()
    written = _written(out)
    for secret in _EXTRA_SECRETS:
        assert secret not in written, secret
    writer = json.loads((out / "run.json").read_text())["profiles"]["writer"]
    assert writer["options"]["extra_body"]["api_key"] == "<redacted>"
    again = main([*argv])  # the same run resumes: its redacted profiles are its own
    assert again == 0


def test_profiles_file_records_no_extra_body_credential(bench, tmp_path, stub_factory, capsys, monkeypatch):
    server = stub_factory()
    monkeypatch.chdir(tmp_path)
    argv = ["--no-progress", "profiles", "--data", str(bench), *_STUB, "--base-url", server.base_url]
    argv += ["--levels", "easy", "--max-groups", "1", "--out", "p.jsonl"]
    argv += ["--engine-arg", f"extra_body={json.dumps(_EXTRA_BODY)}"]
    assert main(argv) == 0
    written = Path("p.jsonl").read_text(encoding="utf-8")
    for secret in _EXTRA_SECRETS:
        assert secret not in written, secret
    assert main(argv) == 0  # written again with the same (redacted) settings: taken as its own


# Every credential shape the publish scan must catch (G3 added the first seven), and what it says.
CREDENTIALS = [
    ("api_key: EXTRAKEY123", "key or token assignment"),
    ('"api_key": "EXTRAKEY123"', "key or token assignment"),
    ("api_key=EXTRAKEY123", "key or token assignment"),
    ("token=abcdef123456ghijkl", "key or token assignment"),
    ('"token": "abcdef123456ghijkl"', "key or token assignment"),
    ("xoxb-123456789012-abcdefghij", "Slack token"),
    ("file:///mnt/data/x", "absolute local path"),
    ("password: hunter2secret", "key or token assignment"),
    ('api_key = "EXTRAKEY123longer"', "key or token assignment"),
    ('"x-api-key": "XAPIKEY99999"', "key or token assignment"),
    ("client_secret=Zq8vN2xW4kP7", "key or token assignment"),
    ("hf_" + "a1B2c3D4e5" * 4, "Hugging Face token"),
    ("sk-" + "a1B2c3D4e5" * 3, "API key"),
    ("sk-proj-abcdEFGH1234", "OpenAI project key"),
    ("ghp_" + "a1B2c3D4e5" * 4, "GitHub token"),
    ("AKIAABCDEFGHIJKLMNOP", "AWS access key"),
    ("Authorization: Bearer abcdefghijklmnop1234", "Bearer-token header"),
    ("Basic YWxpY2U6UFctU0VDUkVULTE=", "Basic credential"),
    ("http://alice:PWSECRET111@host/v1", "password inside a URL"),
    ("/home/alice/perrec/run", "absolute local path"),
    ("/workspace/alice/bench", "absolute local path"),
    ("D:\\data\\bench", "absolute local path"),
]


@pytest.mark.parametrize(("shape", "what"), CREDENTIALS, ids=[shape[:24] for shape, _ in CREDENTIALS])
def test_push_leaderboard_refuses_every_credential_shape(tmp_path, capsys, shape, what):
    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text("<html><body>board</body></html>\n", encoding="utf-8")
    (report / "leaderboard.json").write_text("[]\n", encoding="utf-8")
    (report / "leaderboard.md").write_text("| run | ptc |\n", encoding="utf-8")
    push = ["push", "leaderboard", str(report), "--repo", "org/x", "--dry-run"]
    assert main(push) == 0  # clean: the refusal below is the shape's
    with (report / "leaderboard.md").open("a", encoding="utf-8") as handle:
        handle.write(shape + "\n")
    refused(capsys, push, "refusing to push to org/x", what)


@pytest.fixture(scope="module")
def written_by_commands(bench, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """Every file a chain of commands writes: evaluate (a model and the baselines), report, profiles,
    a family build and its run, a predictions file scored into a run, the released per-query file."""
    from tests.dataset_builder.llmrec.fixture import synth_build

    root = tmp_path_factory.mktemp("written")
    fake = ["--engine", "fake", "--model", "constant", "--levels", "easy", "--max-groups", "2"]
    commands = [
        ["evaluate", "--data", str(bench), *fake, "--methods", "pointwise", "--out", str(root / "run")],
        ["evaluate", "--data", str(bench), "--engine", "baseline", "--model", "random", *fake[4:], "--out"]
        + [str(root / "bl")],
        ["report", str(root / "run"), str(root / "bl"), "--out", str(root / "report"), "--no-plots"],
        ["profiles", "--data", str(bench), *fake[:-2], "--max-groups", "1", "--out", str(root / "p.jsonl")],
    ]
    for argv in commands:
        assert main(["--no-progress", *argv]) == 0, argv
    llmrec = synth_build(root / "family")
    argv = ["evaluate", "--task", "llmrec", "--data", str(llmrec), "--engine", "fake", "--model", "constant"]
    assert main(["--no-progress", *argv, "--out", str(root / "llmrec-run")]) == 0
    released = Path(__file__).resolve().parent / "data" / "recbench_plus_released"
    argv = [
        "score",
        "--task",
        "recbench-plus",
        "--released-queries",
        str(released / "DemographicsBasedQuery.json"),
    ]
    argv += ["--responses", str(released / "responses.jsonl"), "--catalogue", str(released / "movies.dat")]
    assert main([*argv, "--per-query", str(root / "per_query.jsonl")]) == 0
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "cache" not in path.name and not path.name.startswith("."):
            files[str(path.relative_to(root))] = path
    return root, bench, files


def test_scan_finds_every_credential_shape_in_every_file_a_command_writes(written_by_commands):
    # Each shape is placed at the start, in the middle and at the end of each file; the scan must name it.
    # The files' own absolute paths (run.json records --data) are made relative first, so that what the scan
    # finds is the shape: a clean file must pass.
    from perrec_eval.publish import scan

    root, bench, files = written_by_commands
    assert len(files) >= 20, sorted(files)
    problems = []
    for name, path in files.items():
        data = path.read_bytes().replace(str(root).encode(), b"runs").replace(str(bench).encode(), b"bench")
        text = b"\0" not in data[:8192]
        if (clean := scan(name, data, [])) is not None:
            problems.append(f"{name} is refused clean: {clean}")
            continue
        for shape, what in CREDENTIALS:
            for at in (0, len(data) // 2, len(data)):  # the file around it, as the scan reads it in pieces
                placed = data[max(0, at - 4096) : at] + b" " + shape.encode() + b" " + data[at : at + 4096]
                reason = scan(name, placed, [], text=text)
                if reason is None or what not in reason:
                    problems.append(f"{name} at {at}: {shape} -> {reason}")
    assert not problems, "\n".join(problems[:20])


def test_a_library_handler_added_after_the_log_setup_prints_no_credential(capsys):
    # httpx's "HTTP Request: GET http://user:KEY@host/..." reached the terminal through a handler a library
    # gave its own logger after the CLI set up its (redacting) log: every record is redacted when made
    import logging
    import sys

    from perrec_eval.logs import setup_logging

    setup_logging(verbose=True)
    library = logging.getLogger("some_http_library")
    handler = logging.StreamHandler(sys.stderr)  # plain "%(message)s", added afterwards
    library.addHandler(handler)
    try:
        library.warning(
            "HTTP Request: GET %s", "http://user:sk-userinfo-SECRET-1111@127.0.0.1/v1?api-key=Q2222XYZ"
        )
    finally:
        library.removeHandler(handler)
    err = capsys.readouterr().err
    assert "HTTP Request: GET http://<redacted>@127.0.0.1/v1?api-key=<redacted>" in err
    assert "SECRET-1111" not in err and "Q2222XYZ" not in err
