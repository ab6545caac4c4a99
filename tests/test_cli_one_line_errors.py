"""The audit's tracebacks (issue 29, F24), replayed: each ends in one line naming the fix, exit 2.

Edited or unreadable files, a full disk, a file removed under a running command, settings a server or a
source cannot take. Tests of single option values are in `tests/test_cli_fuzz.py`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.benchmark_fixture import write_tiny_benchmark, write_truth_profiles


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = write_tiny_benchmark(tmp_path_factory.mktemp("bench") / "perrecbench")
    profiles = write_truth_profiles(folder, folder.parent / "profiles.jsonl")
    return folder, profiles


def _evaluate(data: Path, out: Path, *flags: str) -> list[str]:
    argv = ["evaluate", "--data", str(data), "--engine", "fake", "--model", "constant", "--out", str(out)]
    return [*argv, "--levels", "easy", "--methods", "pointwise", "--no-progress", *flags]


@pytest.fixture(scope="module")
def fake_run(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("fake_run") / "run"
    assert main(_evaluate(bench[0], out, "--profiles", str(bench[1]))) == 0
    return out


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw")
    argv = ["synth", "--out", str(root / "raw"), "--reviews-per-domain", "6000", "--domains", "Books"]
    assert main([*argv, "--no-progress"]) == 0
    return root / "raw"


def _build(source: Path, out: Path, *flags: str) -> list[str]:
    argv = ["build", "--source", str(source), "--out", str(out), "--domains", "Books", "--test-groups", "4"]
    return [*argv, "--no-progress", *flags]


def _one_line_error(capsys, argv, *needles):
    """Run the CLI; it must exit 2 with one line on stderr that contains every needle."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("perrecbench "), err
    for needle in needles:
        assert needle in last, last
    return last


def _copy_run(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


def _edit_first_line(path: Path, **fields) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    first = {**json.loads(lines[0]), **fields}
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")


def _argv(command: str, run: Path, tmp_path: Path) -> list[str]:
    return [command, str(run)] + (["--out", str(tmp_path / "report")] if command == "report" else [])


# --- edited run files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize("references", [[float("nan"), 1.0], [], [1.0]])
def test_cli_predictions_with_nan_or_missing_references_are_one_line(
    fake_run, tmp_path, capsys, command, references
):
    run = _copy_run(fake_run, tmp_path)
    _edit_first_line(run / "predictions.jsonl", references=references)
    _one_line_error(capsys, _argv(command, run, tmp_path), "predictions.jsonl line 1: references")


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize("field", ["prompt_tokens", "completion_tokens"])
def test_cli_samples_with_a_token_count_that_is_not_a_count_are_one_line(
    fake_run, tmp_path, capsys, command, field
):
    run = _copy_run(fake_run, tmp_path)
    _edit_first_line(run / "samples.jsonl", **{field: "many"})
    _one_line_error(
        capsys, _argv(command, run, tmp_path), "samples.jsonl line 1", f"{field} is 'many', not a token count"
    )


@pytest.mark.parametrize("profile", [None, 12345, "", "  "])
def test_cli_profiles_file_with_a_profile_that_is_no_text_is_one_line(bench, tmp_path, capsys, profile):
    edited = tmp_path / "profiles.jsonl"
    shutil.copy(bench[1], edited)
    _edit_first_line(edited, profile=profile)
    argv = _evaluate(bench[0], tmp_path / "run", "--profiles", str(edited))
    _one_line_error(capsys, argv, f"{edited}:1: the profile is", "not a text", "--no-profile")
    assert not (tmp_path / "run" / "cache.jsonl").exists()  # refused before any request


def test_cli_profiles_file_that_is_not_utf8_is_one_line(bench, tmp_path, capsys):
    edited = tmp_path / "profiles.jsonl"
    edited.write_bytes(bench[1].read_bytes() + b"\xff\xfe\n")
    argv = _evaluate(bench[0], tmp_path / "run", "--profiles", str(edited))
    _one_line_error(capsys, argv, f"{edited} is not UTF-8 text")


@pytest.mark.parametrize("data", ["/", "empty"])
def test_cli_data_that_is_no_benchmark_folder_is_one_line(tmp_path, capsys, data):
    (tmp_path / "empty").mkdir()
    data = data if data == "/" else str(tmp_path / data)
    argv = _evaluate(Path(data), tmp_path / "run", "--no-profile")
    # `/` holds --out: the output rule refuses it first, in one line naming --data too
    _one_line_error(
        capsys, argv, f"--data {data}" if data == "/" else f"--data {data} is not a benchmark folder"
    )


def test_cli_data_hub_id_while_offline_says_how_to_go_online(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = _evaluate(Path("org/somebench"), tmp_path / "run", "--no-profile")
    last = _one_line_error(capsys, argv, "offline mode is on (HF_HUB_OFFLINE)", "unset HF_HUB_OFFLINE")
    assert "(or pass an existing folder or Hub id ORG/NAME)" not in last


def test_cli_score_write_while_the_run_is_replaced_is_one_line(fake_run, tmp_path, capsys, monkeypatch):
    from perrec_eval.tasks.perrecbench import rundir

    run = _copy_run(fake_run, tmp_path)
    rescore = rundir.rescore

    def replaced_meanwhile(run_dir, **kwargs):  # `evaluate --overwrite` removed run.json meanwhile
        scores = rescore(run_dir, **kwargs)
        (Path(run_dir) / "run.json").unlink()
        return scores

    monkeypatch.setattr(rundir, "rescore", replaced_meanwhile)
    _one_line_error(capsys, ["score", str(run), "--write"], "run.json is missing", "run this command again")


# --- the machine: a full disk, files this user may not read -------------------------------------------------


@pytest.fixture
def full_disk(monkeypatch):
    """Every fsync fails as on a full disk (every writer of the project fsyncs before its rename)."""

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    return monkeypatch


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_cli_full_disk_score_write_is_one_line_and_keeps_the_files(fake_run, tmp_path, capsys, full_disk):
    run = _copy_run(fake_run, tmp_path)
    before = _files(run)
    _one_line_error(
        capsys, ["score", str(run), "--write", "--variant", "paper"], "no space left on the device"
    )
    assert _files(run) == before


def test_cli_full_disk_evaluate_is_one_line_and_the_rerun_finishes(bench, tmp_path, capsys, full_disk):
    argv = _evaluate(bench[0], tmp_path / "run", "--profiles", str(bench[1]))
    _one_line_error(capsys, argv, "no space left on the device", "run the same command again")
    full_disk.undo()
    assert main(argv) == 0


def test_cli_full_disk_profiles_is_one_line(bench, tmp_path, capsys, full_disk):
    argv = [
        "profiles",
        "--data",
        str(bench[0]),
        "--engine",
        "fake",
        "--model",
        "constant",
        "--levels",
        "easy",
    ]
    _one_line_error(capsys, [*argv, "--out", str(tmp_path / "p.jsonl")], "no space left on the device")
    assert not (tmp_path / "p.jsonl").exists()


def test_cli_full_disk_synth_is_one_line(tmp_path, capsys, full_disk):
    argv = ["synth", "--out", str(tmp_path / "raw"), "--reviews-per-domain", "300", "--domains", "Books"]
    _one_line_error(capsys, argv, "no space left on the device")


def test_cli_full_disk_build_overwrite_is_one_line_and_keeps_the_old_build(
    raw, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "bench"
    assert main(_build(raw, out)) == 0
    before = _files(out)
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    _one_line_error(capsys, _build(raw, out, "--overwrite", "--seed", "1"), "no space left on the device")
    assert _files(out) == before


@pytest.mark.parametrize("name", ["scores.json", "report.md"])
def test_cli_score_write_over_a_folder_is_one_line(fake_run, tmp_path, capsys, name):
    run = _copy_run(fake_run, tmp_path)
    (run / name).unlink()
    (run / name).mkdir()
    _one_line_error(capsys, ["score", str(run), "--write"], f"{run / name}: is a folder where a file belongs")


@pytest.mark.parametrize("name", [".parquet", "predictions.jsonl"])
@pytest.mark.parametrize("command", ["evaluate", "score", "report"])
def test_cli_unreadable_input_is_one_line(bench, fake_run, tmp_path, capsys, monkeypatch, command, name):
    if (command == "evaluate") != (name == ".parquet"):
        pytest.skip("the command does not read that file")
    real_open = Path.open

    def denied(self, *args, **kwargs):  # as root, chmod 000 stops no read: fail it as for another user
        if self.name.endswith(name):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    data = Path(shutil.copytree(bench[0], tmp_path / "bench"))
    (data / "manifest.json").write_text(  # a build's manifest: evaluate hashes the files it lists
        json.dumps({"outputs": {"easy": {"test": str(next(data.glob("easy/test-*")).relative_to(data))}}})
    )
    run = _copy_run(fake_run, tmp_path)
    monkeypatch.setattr(Path, "open", denied)
    argv = (
        _evaluate(data, tmp_path / "out", "--no-profile")
        if command == "evaluate"
        else _argv(command, run, tmp_path)
    )
    _one_line_error(capsys, argv, name, "permission denied: give this user access to it")


# --- build: the Hub offline, a split that leaves a side empty, two files for one domain ------------------


def test_cli_build_from_the_hub_while_offline_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    source = "hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw"
    _one_line_error(capsys, _build(source, tmp_path / "out"), "offline mode", "unset HF_HUB_OFFLINE")


def test_cli_build_from_the_hub_without_a_network_is_one_line(tmp_path, capsys, monkeypatch):
    """Not offline mode, but no route to the Hub: the HTTP client's own connection error (its module's name
    moved between huggingface_hub releases) ends in one line, as the OS's does."""
    from dataset_builder import sources

    ConnectError = type("ConnectError", (Exception,), {"__module__": "httpx2._exceptions"})

    def unreachable(self):
        raise ConnectError("[Errno -2] Name or service not known")

    monkeypatch.setattr(sources.Source, "listing", unreachable)
    source = "hf://datasets/McAuley-Lab/Amazon-Reviews-2023/raw"
    argv = _build(source, tmp_path / "out")
    _one_line_error(capsys, argv, "not reachable", "ConnectError", "check the network")
    monkeypatch.setattr(sources.Source, "listing", lambda self: (_ for _ in ()).throw(KeyError("a bug")))
    with pytest.raises(KeyError):  # anything else is not dressed up as the network
        main(_build(source, tmp_path / "out"))


def test_cli_build_large_train_fraction_that_leaves_no_test_group_is_one_line(raw, tmp_path, capsys):
    argv = _build(raw, tmp_path / "out", "--preset", "large", "--train-fraction", "0.999")
    _one_line_error(
        capsys, argv, "--train-fraction 0.999 leaves no", "group in test", "lower --train-fraction"
    )
    assert not (tmp_path / "out").exists()


def test_cli_build_with_every_group_in_test_warns_in_one_line(raw, tmp_path, capsys):
    assert main(_build(raw, tmp_path / "out", "--test-groups", "100000")) == 0
    err = capsys.readouterr().err.splitlines()
    (warning,) = [line for line in err if line.startswith("perrecbench build: warning: no train groups")]
    assert "--shots" in warning and "sft data" in warning and "lower --test-groups" in warning


def test_cli_build_warns_of_nothing_when_train_groups_exist(raw, tmp_path, capsys):
    assert main(_build(raw, tmp_path / "out", "--test-groups", "1")) == 0
    assert "no train groups" not in capsys.readouterr().err


def test_cli_build_refuses_a_plain_and_a_gzip_file_of_one_domain(raw, tmp_path, capsys):
    import gzip

    source = Path(shutil.copytree(raw, tmp_path / "raw"))
    lines = (raw / "Books.jsonl").read_bytes().splitlines(keepends=True)
    (source / "Books.jsonl.gz").write_bytes(gzip.compress(b"".join(lines[:100])))  # a different file
    last = _one_line_error(capsys, _build(source, tmp_path / "out"), "Books.jsonl, Books.jsonl.gz")
    assert "keep one of them there and move the others away" in last


# --- a server whose usage counts are not counts ----------------------------------------------------------


@pytest.fixture
def odd_usage_server():
    """An OpenAI-compatible server on 127.0.0.1 that answers well but reports ``"prompt_tokens": "lots"``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": '{"rating": 3}'},
                    "finish_reason": "stop",
                }
                for i in range(body.get("n", 1))
            ]
            usage = {"prompt_tokens": "lots", "completion_tokens": -1, "total_tokens": None}
            payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"]}
            data = json.dumps({**payload, "choices": choices, "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_cli_server_usage_that_is_not_a_count_never_reaches_the_cache(
    bench, tmp_path, capsys, odd_usage_server
):
    argv = ["evaluate", "--data", str(bench[0]), "--engine", "openai", "--model", "m"]
    argv += ["--base-url", odd_usage_server, "--profiles", str(bench[1]), "--levels", "easy"]
    argv += ["--methods", "pointwise", "--max-groups", "1", "--out", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    cached = [json.loads(line) for line in (tmp_path / "run" / "cache.jsonl").read_text().splitlines()]
    assert cached and all(line["prompt_tokens"] is None for line in cached)
    assert all(line["completion_tokens"] is None for line in cached)
    assert main([*argv, "--overwrite"]) == 0  # a resumed run sums what the cache holds
