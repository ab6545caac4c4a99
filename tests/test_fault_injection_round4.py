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
from tests.refusals import refused

RELEASED = Path(__file__).resolve().parent / "data" / "recbench_plus_released"


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
    from perrec_eval import registry as tasks
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.evaluation import TaskEvalConfig, evaluate
    from tests.perrec_eval.tasks import toy

    tasks.register(toy.TASK, replace=True)
    toy.write_data(Path("toy-data"))
    config = TaskEvalConfig(task="toy", data="toy-data", engine="fake", model="oracle", out="toy-run")
    evaluate(config, engine=FakeEngine(toy.oracle, model="oracle"))
    yield ["bl", "toy-run"]
    tasks.unregister("toy")


def test_report_of_one_family_replaces_a_report_of_several(two_families, capsys):
    # H21: a report of one family into a report of several was refused as holding files `report` did not
    # write. A report of several families is one folder now, which the next report replaces whole.
    assert main(["--no-progress", "report", *two_families, "--out", "both", "--no-plots"]) == 0
    assert (Path("both") / "index.html").is_file() and not (Path("both") / "toy").exists()
    assert main(["--no-progress", "report", "toy-run", "--out", "both", "--no-plots"]) == 0
    assert "PerRecBench" not in (Path("both") / "leaderboard.md").read_text(encoding="utf-8")
    assert main(["push", "leaderboard", "both", "--repo", "org/x", "--dry-run"]) == 0


# ----------------------------------------------------------- H8: integrity that cannot be edited around


def _tampered(build: Path, tmp_path: Path) -> Path:
    """A copy of `build` whose explicit test file names other ground truths, its checksum edited to match."""
    import hashlib
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "t"
    shutil.copytree(build, copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    test = copy / manifest["outputs"]["explicit"]["test"]
    item = pq.read_table(copy / manifest["outputs"]["catalogue"]["items"]).to_pylist()[0]
    rows = pq.read_table(test).to_pylist()
    for row in rows:
        truth = {**row["ground_truth"][0], "parent_asin": item["parent_asin"], "title": item["title"]}
        row["ground_truth"] = [truth]
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(test)), test)
    name = manifest["outputs"]["explicit"]["test"]
    manifest["checksums"][name] = hashlib.sha256(test.read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return copy


def test_evaluate_refuses_a_file_edited_with_its_checksum(rbp_build, tmp_path, capsys):
    data = _tampered(rbp_build, tmp_path)
    argv = ["--no-progress", "evaluate", "--task", "recbench-plus", "--data", str(data)]
    argv += ["--engine", "baseline", "--model", "popularity", "--out", str(tmp_path / "run")]
    refused(capsys, argv, "does not hold the rows")
    assert not (tmp_path / "run" / "run.json").exists()


def test_fingerprint_is_computed_from_the_files(rbp_build, tmp_path):
    # the tampered copy never gets the genuine build's fingerprint: refused (its name holds the build's hash)
    from dataset_builder.manifest import fingerprint
    from perrec_eval.errors import DataError

    genuine = fingerprint(rbp_build)
    with pytest.raises(DataError, match="does not hold the rows"):
        fingerprint(_tampered(rbp_build, tmp_path))
    assert fingerprint(rbp_build) == genuine  # unchanged files: unchanged fingerprint


def test_fingerprint_of_a_build_with_plain_names_holds_each_files_sha256(tmp_path):
    # a family naming its files without a hash: an edit with its checksum changes the fingerprint
    import hashlib

    from dataset_builder.manifest import fingerprint, record_checksums

    (tmp_path / "a.jsonl").write_text('{"id": 1}\n', encoding="utf-8")
    manifest = {"task": "toy", "parameters": {}, "outputs": {"a": {"test": "a.jsonl"}}, "versions": {}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    record_checksums(tmp_path)
    before = fingerprint(tmp_path)
    (tmp_path / "a.jsonl").write_text('{"id": 2}\n', encoding="utf-8")
    recorded = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    recorded["checksums"]["a.jsonl"] = hashlib.sha256((tmp_path / "a.jsonl").read_bytes()).hexdigest()
    (tmp_path / "manifest.json").write_text(json.dumps(recorded), encoding="utf-8")
    assert fingerprint(tmp_path) != before


def test_evaluate_refuses_a_perrecbench_build_without_its_manifest(bench, tmp_path, capsys):
    import shutil

    data = tmp_path / "pb"
    shutil.copytree(bench, data)
    (data / "manifest.json").unlink()
    (train,) = (data / "easy").glob("train-*.parquet")
    (test,) = (data / "easy").glob("test-*.parquet")
    shutil.copyfile(train, test)  # train rows scored as test, unnoticed without the manifest
    argv = ["--no-progress", "evaluate", "--data", str(data), "--engine", "fake", "--model", "constant"]
    refused(capsys, [*argv, "--levels", "easy", "--out", str(tmp_path / "run")], "has no manifest.json")


# ---------------------------------------------------------------- H19: family inference reads folders only


def test_score_per_query_empty_is_named_in_a_folder_of_perrecbench_runs(baseline_run, capsys):
    # '' was read as the current folder, a folder of PerRecBench runs: "is perrecbench's (--task ... given)"
    import shutil

    for name in ("DemographicsBasedQuery.json", "responses.jsonl", "movies.dat"):
        shutil.copy(RELEASED / name, name)
    refused(capsys, _score_released(""), "--per-query is empty")


def test_evaluate_reads_no_family_from_an_option_value(bench, rbp_build, tmp_path, capsys):
    # --label naming another family's build switched the command to that family's options
    argv = ["--no-progress", "evaluate", "--label", str(rbp_build), "--data", str(bench), "--engine", "fake"]
    argv += ["--model", "constant", "--levels", "easy", "--max-groups", "2", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"].get("task", "perrecbench") == (
        "perrecbench"
    )


# ------------------------------------------------------- H13, H14, H16: one line instead of a traceback


def _queries(change, name: str = "DemographicsBasedQuery.json") -> str:
    records = json.loads(Path(name).read_text(encoding="utf-8"))
    change(records)
    Path("q.json").write_text(json.dumps(records), encoding="utf-8")
    return "q.json"


def _set_group(**fields):
    def change(records):
        records[0].update(fields)
        for name in [key for key, value in fields.items() if value is None]:
            records[0].pop(name)

    return change


@pytest.mark.parametrize(
    "change",
    [
        _set_group(group_type="age_gender"),  # two names, one value: zip() ... is shorter
        _set_group(group=None),  # KeyError: 'group'
        _set_group(group_type=["age"]),  # ArrowInvalid
    ],
)
def test_released_evaluate_names_a_group_of_the_wrong_shape(released, capsys, change):
    refused(capsys, _released_evaluate(_queries(change), "e"), "group 0", "not a released query file")


def test_released_query_ids_beyond_int64_are_refused(released, capsys):
    def change(records):
        records[0]["movieSubsetId"] = [10**30, 1]  # OverflowError in the parquet writer

    queries = _queries(change, "ExplicitQuery.json")
    refused(capsys, _released_evaluate(queries, "e"), "is not a movie id")


@pytest.mark.parametrize(
    "body",
    [{"choices": "nope"}, {"choices": [None]}, "str", {"choices": [{"message": "hi"}]}],
)
def test_released_batch_output_of_another_shape_is_named_by_its_line(released, capsys, body):
    Path("b.jsonl").write_text(json.dumps({"custom_id": "3", "response": {"body": body}}) + "\n")
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", "ExplicitQuery.json"]
    refused(capsys, [*args, "--responses", "b.jsonl", "--catalogue", "movies.dat"], "b.jsonl line 1")


def test_score_and_report_of_a_run_whose_run_json_names_another_family(released, capsys):
    # an LLMRec-shaped run recorded as RecBench+'s: the rows were scored by the wrong family's rules
    assert main(_released_evaluate("ExplicitQuery.json", "x")) == 0
    lines = Path("x/predictions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [{**json.loads(line), "subset": "rating", "protocol": "rating", "truth": 4.0} for line in lines]
    Path("x/predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    refused(capsys, ["--no-progress", "score", "x"], "rating/rating", "run.json names another task")
    refused(capsys, ["--no-progress", "report", "x", "--no-plots"], "rating/rating")


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_inputs_end_in_one_line(released, capsys):
    # H14: RecursionError tracebacks from a query file, a responses line, run.json and manifest.json
    Path("deep.json").write_text(DEEP, encoding="utf-8")
    Path("deep.jsonl").write_text('{"id": "3", "response": ' + DEEP + "}\n", encoding="utf-8")
    score = ["--no-progress", "score", "--task", "recbench-plus", "--catalogue", "movies.dat", "--responses"]
    refused(capsys, [*score, "responses.jsonl", "--released-queries", "deep.json"], "deep.json")
    refused(capsys, [*score, "deep.jsonl", "--released-queries", "ExplicitQuery.json"], "line 1")
    Path("run").mkdir()
    Path("run/run.json").write_text(DEEP, encoding="utf-8")
    refused(capsys, ["--no-progress", "score", "run"], "run.json", "nested too deeply")
    refused(capsys, ["--no-progress", "report", "run"], "run.json", "nested too deeply")
    Path("b").mkdir()
    Path("b/README.md").write_text("", encoding="utf-8")
    Path("b/manifest.json").write_text(DEEP, encoding="utf-8")
    argv = ["--no-progress", "evaluate", "--data", "b", "--engine", "fake", "--model", "constant"]
    refused(capsys, [*argv, "--out", "o"], "manifest.json")


def test_fileio_loads_reads_deep_nesting_as_invalid_json():
    from perrec_eval import fileio

    with pytest.raises(ValueError, match="nested too deeply"):
        fileio.loads(DEEP)


@pytest.fixture
def movielens(tmp_path: Path) -> Path:
    from tests.dataset_builder.recbench_plus.movielens_fixture import write

    return write(tmp_path / "ml-1m")


def _movielens_build(source: Path, out: Path) -> list[str]:
    args = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(source), "--out", str(out)]
    return [*args, "--users", "20", "--train-users", "0", "--max-share", "0.5", "--threads", "1"]


def _edit_line(path: Path, number: int, edit) -> None:
    lines = path.read_bytes().decode("latin-1").split("\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_bytes("\n".join(lines).encode("latin-1"))


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("users.dat", lambda line: line.replace("::18::", "::1²::"), "users.dat:"),  # age "1²"
        ("ratings.dat", lambda line: line + "²", "ratings.dat:4"),  # ValueError in int()
        ("ratings.dat", lambda line: line.rpartition("::")[0] + "::" + "9" * 23, "ratings.dat:4"),  # Overflow
    ],
)
def test_movielens_numbers_int_refuses_are_bad_lines(movielens, tmp_path, capsys, name, edit, says):
    number = 4 if name == "ratings.dat" else next(
        i for i, line in enumerate((movielens / name).read_text(encoding="latin-1").split("\n"), 1)
        if "::18::" in line
    )  # fmt: skip
    _edit_line(movielens / name, number, edit)
    refused(capsys, _movielens_build(movielens, tmp_path / "o"), says, "--on-bad-line skip")


def test_released_catalogue_with_a_superscript_id_is_refused_by_line(released, capsys):
    with Path("movies.dat").open("ab") as handle:
        handle.write("¹::Superscript (1995)::Drama\n".encode("latin-1"))  # byte 0xB9 is "¹" in Latin-1
    Path("r.jsonl").write_text('{"id": "3", "response": "Heat"}\n', encoding="utf-8")
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", "ExplicitQuery.json"]
    refused(capsys, [*args, "--responses", "r.jsonl", "--catalogue", "movies.dat"], "movies.dat line")


# --------------------------------------------------------- H23, H24, H25: MovieLens and released files


def test_movielens_repeated_movie_id_is_a_bad_line(movielens, tmp_path, capsys):
    # the last title won: every rating of movie 1 became "Not Toy Story (1999)"
    with (movielens / "movies.dat").open("ab") as handle:
        handle.write(b"1::Not Toy Story (1999)::Drama\n")
    refused(capsys, _movielens_build(movielens, tmp_path / "o"), "movies.dat:41", "id 1 is on line 1 too")


def test_movielens_repeated_user_with_other_attributes_is_a_bad_line(movielens, tmp_path, capsys):
    with (movielens / "users.dat").open("ab") as handle:
        handle.write(b"1::F::56::20::99999\n")
    refused(capsys, _movielens_build(movielens, tmp_path / "o"), "users.dat:61", "id 1 is on line 1 too")


def test_movielens_utf8_file_with_a_stray_byte_keeps_its_titles(movielens, tmp_path):
    import pyarrow.parquet as pq

    text = (movielens / "movies.dat").read_bytes().decode("latin-1")
    data = text.encode("utf-8") + b"41::Caf\xe9 (1990)::Drama\n"  # UTF-8, and one Latin-1 line
    (movielens / "movies.dat").write_bytes(data)
    out = tmp_path / "o"
    assert main([*_movielens_build(movielens, out), "--on-bad-line", "skip"]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    items = pq.read_table(out / manifest["outputs"]["catalogue"]["items"]).to_pylist()
    titles = [row["title"] for row in items]
    assert any(title.startswith("Amélie") for title in titles) and not any("Ã" in title for title in titles)
    assert "not UTF-8" in json.dumps(manifest["bad_lines"])


def test_movielens_users_file_with_a_byte_order_mark_builds(movielens, tmp_path):
    (movielens / "users.dat").write_bytes(b"\xef\xbb\xbf" + (movielens / "users.dat").read_bytes())
    assert main(_movielens_build(movielens, tmp_path / "o")) == 0


@pytest.mark.parametrize("name", ["ratings.dat", "movies.dat"])
def test_movielens_empty_file_is_named(movielens, tmp_path, capsys, name):
    (movielens / name).write_bytes(b"")
    line = refused(capsys, _movielens_build(movielens, tmp_path / "o"), name, "holds no line")
    assert "title" not in line


@pytest.mark.parametrize(
    ("index", "says"), [(None, "data_idx"), ([1, 2], "data_idx"), ("same", "names two queries")]
)
def test_released_condition_file_with_a_bad_data_idx_is_refused(released, capsys, index, says):
    def change(records):
        if index == "same":
            records.append(dict(records[0]))  # one response would be scored for both
        else:
            records[0]["data_idx"] = index

    queries = _queries(change, "ExplicitQuery.json")
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", queries]
    refused(capsys, [*args, "--responses", "responses.jsonl", "--catalogue", "movies.dat"], says)
    refused(capsys, _released_evaluate(queries, "e"), says)


# ------------------------------------------------------------------- H18: --memory-limit too small


@pytest.mark.parametrize("task", ["llmrec", "recbench-plus"])
def test_build_with_too_small_a_memory_limit_says_raise_it(tmp_path, capsys, task):
    # LLMRec's builder printed DuckDB's OutOfMemoryException with its traceback; every family's selection
    # now goes through the shared conversion (PerRecBench's had its own)
    from tests.dataset_builder.recbench_plus import fixture

    raw = fixture.synth(tmp_path / "raw")
    args = ["--no-progress", "build", "--task", task, "--source", str(raw), "--domains", "Books"]
    refused(capsys, [*args, "--memory-limit", "1MB", "--out", str(tmp_path / "b")], "raise --memory-limit")


# --------------------------------------------------------- H20: score --write waits for no one's lock


def test_score_write_of_a_finished_run_refuses_a_run_another_process_holds(baseline_run, released, capsys):
    from tests.lock_holder import held_by_another_process

    assert main(_released_evaluate("ExplicitQuery.json", "family-run")) == 0
    for run in (Path("family-run"), Path("../") / baseline_run):  # the general path's and PerRecBench's
        before = (run / "scores.json").read_bytes()
        with held_by_another_process(run) as pid:
            refused(capsys, ["--no-progress", "score", str(run), "--write"], f"pid {pid}")
            assert main(["--no-progress", "score", str(run)]) == 0  # reading alone is fine
        assert (run / "scores.json").read_bytes() == before


# ---------------------------------------------------------------------------- H22: labels


def test_label_with_a_bidirectional_override_is_refused(bench, tmp_path, capsys):
    argv = ["--no-progress", "evaluate", "--data", str(bench), "--engine", "fake", "--model", "constant"]
    refused(capsys, [*argv, "--label", "gpt\u202eevil", "--out", str(tmp_path / "r")], "U+202E")
    assert not (tmp_path / "r").exists()


def test_latex_escape_writes_a_backslash_once():
    # the braces of \textbackslash{} were escaped again: LaTeX printed "\{}"
    from perrec_eval.leaderboard.family import latex_escape

    assert latex_escape("a\\b{c}") == "a\\textbackslash{}b\\{c\\}"


def test_plot_label_starting_with_an_underscore_has_its_legend_entry():
    pytest.importorskip("matplotlib")
    from perrec_eval.leaderboard import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots()
    plots.bars(ax, ["a", "b"], {"_mine": [0.1, 0.2], "gpt": [0.3, 0.4]})
    plots.legend(ax, 2)
    assert [text.get_text() for text in ax.get_legend().get_texts()] == [" _mine", "gpt"]
    plt.close(fig)


def test_report_of_several_families_refuses_a_users_file_in_its_folder(two_families):
    argv = ["--no-progress", "report", *two_families, "--out", "both", "--no-plots"]
    assert main(argv) == 0
    (Path("both") / "mine.txt").write_text("notes\n", encoding="utf-8")
    assert main(argv) == 2 and (Path("both") / "mine.txt").is_file()  # a user's file: refused
