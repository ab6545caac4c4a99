"""The audit of 2026-11-28 replayed (issue 38): each reproduction of G1-G9 and C1-C8 (G6 aside) holds, with a
correct result or a refusal of one line naming the fix (exit 2). Each case failed before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perrec_eval.cli import main
from tests.lock_holder import held_by_another_process
from tests.refusals import refused

RELEASED = Path(__file__).resolve().parent / "data" / "recbench_plus_released"


# ------------------------------------------------------------------- G1: --per-query follows the output rule


@pytest.fixture
def released(tmp_path: Path) -> Path:
    folder = tmp_path / "released"
    shutil.copytree(RELEASED, folder)
    return folder


def _score_released(folder: Path, per_query: str) -> list[str]:
    args = ["--no-progress", "score", "--task", "recbench-plus"]
    args += ["--released-queries", str(folder / "DemographicsBasedQuery.json")]
    args += ["--responses", str(folder / "responses.jsonl"), "--catalogue", str(folder / "movies.dat")]
    return [*args, "--users", str(folder / "users.dat"), "--per-query", per_query]


@pytest.mark.parametrize(
    ("name", "flag"),
    [
        ("responses.jsonl", "--responses"),
        ("DemographicsBasedQuery.json", "--released-queries"),
        ("movies.dat", "--catalogue"),
        ("users.dat", "--users"),
    ],
)
def test_per_query_refuses_to_overwrite_an_input(released, capsys, name, flag):
    before = (released / name).read_bytes()
    refused(capsys, _score_released(released, str(released / name)), f"is {flag}")
    assert (released / name).read_bytes() == before


@pytest.mark.parametrize("name", ["manifest.json", "run.json", "notes.txt"])
def test_per_query_refuses_a_file_it_did_not_write(released, capsys, name):
    other = released / name
    other.write_text('{"task": "llmrec", "outputs": {}}\n', encoding="utf-8")
    refused(capsys, _score_released(released, str(other)), "did not write", "name a new file")
    assert other.read_text(encoding="utf-8") == '{"task": "llmrec", "outputs": {}}\n'


def test_per_query_refuses_an_empty_name_and_a_folder(released, capsys):
    refused(capsys, _score_released(released, ""), "--per-query is empty")
    refused(capsys, _score_released(released, str(released)), "is a folder")


def test_per_query_replaces_its_own_file(released, capsys):
    out = released / "per_query.jsonl"
    assert main(_score_released(released, str(out))) == 0
    first = out.read_bytes()
    assert main(_score_released(released, str(out))) == 0  # its own file: replaced, not refused
    assert out.read_bytes() == first
    assert not list(released.glob(".per_query.jsonl.tmp-*"))


def test_per_query_takes_the_lock_of_its_file(released, capsys):
    out = released / "per_query.jsonl"
    with held_by_another_process(out, kind="file") as pid:
        refused(capsys, _score_released(released, str(out)), f"pid {pid}")
    assert not out.exists()


# --------------------------------------------------------------- G7, C4: released files of the wrong shape


def _demographics(released: Path, change) -> Path:
    queries = json.loads((released / "DemographicsBasedQuery.json").read_text(encoding="utf-8"))
    change(queries)
    path = released / "q.json"
    path.write_text(json.dumps(queries), encoding="utf-8")
    return path


def _set(key: str, value):
    def change(queries):
        queries[0]["query & ground true"][0][key] = value

    return change


def _groups_of(value):
    def change(queries):
        queries[0]["query & ground true"] = value

    return change


@pytest.mark.parametrize("compat", [[], ["--compat", "released"]])
@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_groups_of("nope"), "is not a list of queries"),
        (_set("movie subset", [1, None, {"a": 1}]), "is not a list of titles"),
        (_set("movie subset", []), "has no ground truth"),
    ],
)
def test_released_query_file_with_wrongly_typed_fields_is_refused_in_one_line(
    released, capsys, compat, change, says
):
    queries = _demographics(released, change)
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", str(queries)]
    args += ["--responses", str(released / "responses.jsonl"), "--catalogue", str(released / "movies.dat")]
    refused(capsys, [*args, *compat], says, "not a released query file")


def test_released_condition_query_with_wrongly_typed_ids_is_refused(released, capsys):
    records = json.loads((released / "ExplicitQuery.json").read_text(encoding="utf-8"))
    records[0]["movieSubsetId"] = "12"
    path = released / "e.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    args = ["--no-progress", "score", "--task", "recbench-plus", "--released-queries", str(path)]
    args += ["--responses", str(released / "responses.jsonl"), "--catalogue", str(released / "movies.dat")]
    refused(capsys, args, "not a list of numbers")


def test_released_responses_with_a_byte_order_mark_name_it(released, capsys):
    path = released / "responses.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    args = ["--no-progress", "score", "--task", "recbench-plus"]
    args += ["--released-queries", str(released / "DemographicsBasedQuery.json")]
    args += ["--responses", str(path), "--catalogue", str(released / "movies.dat")]
    refused(capsys, args, "without a byte order mark")


# ----------------------------------------------------- G4, G5, C5: every family's build checked on reading


@pytest.fixture(scope="module")
def llmrec_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.dataset_builder.llmrec.fixture import synth_build

    return synth_build(tmp_path_factory.mktemp("round3_llmrec"))


def _copy(build: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(build, copy)
    return copy


def _one(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


def _evaluate(task: str, data: Path, out: Path) -> list[str]:
    args = ["--no-progress", "evaluate", "--task", task, "--data", str(data)]
    return [*args, "--engine", "fake", "--model", "constant", "--out", str(out)]


def test_build_records_the_sha256_of_every_file_its_manifest_names(llmrec_build, rbp_build):
    for build in (llmrec_build, rbp_build):
        manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))
        listed = [path for splits in manifest["outputs"].values() for path in splits.values()]
        assert sorted(manifest["checksums"]) == sorted(set(listed))


@pytest.mark.parametrize(
    ("task", "source", "target"),
    [
        ("llmrec", "rating/train-*.parquet", "rating/test-*.parquet"),  # train rows scored as test
        ("recbench-plus", "explicit/train-*.parquet", "explicit/test-*.parquet"),
        ("recbench-plus", "explicit/test-*.parquet", "catalogue/items-*.parquet"),  # was a KeyError
    ],
)
def test_evaluate_refuses_a_build_whose_file_was_replaced(
    llmrec_build, rbp_build, tmp_path, capsys, task, source, target
):
    data = _copy(llmrec_build if task == "llmrec" else rbp_build, tmp_path)
    replaced = _one(data, target)
    shutil.copyfile(_one(data, source), replaced)
    out = tmp_path / "run"
    refused(capsys, _evaluate(task, data, out), str(replaced), "does not hold the rows", "--overwrite")
    assert not (out / "run.json").exists()


@pytest.mark.parametrize("task", ["llmrec", "recbench-plus"])
def test_evaluate_and_score_refuse_a_build_with_a_missing_file(
    llmrec_build, rbp_build, tmp_path, capsys, task
):
    data = _copy(llmrec_build if task == "llmrec" else rbp_build, tmp_path)
    missing = _one(data, "rating/test-*.parquet" if task == "llmrec" else "explicit/test-*.parquet")
    missing.unlink()
    refused(capsys, _evaluate(task, data, tmp_path / "run"), str(missing), "is missing", "--overwrite")
    predictions = tmp_path / "any.jsonl"
    predictions.write_text('{"config": "x", "id": "1", "prediction": null}\n', encoding="utf-8")
    args = ["--no-progress", "score", "--task", task, "--data", str(data), "--predictions", str(predictions)]
    refused(capsys, args, "is missing", "--overwrite")


def test_evaluate_and_score_of_an_intact_family_build_run(rbp_build, tmp_path, capsys):
    assert main(_evaluate("recbench-plus", rbp_build, tmp_path / "run")) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    from perrec_eval.evaluation import fingerprint

    # the checksums leave the fingerprint as it was: a hash of the family's own manifest
    manifest = json.loads((rbp_build / "manifest.json").read_text(encoding="utf-8"))
    manifest.pop("checksums")
    import hashlib

    own = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    assert run["dataset_fingerprint"] == fingerprint(str(rbp_build)) == hashlib.sha256(own).hexdigest()


def test_perrecbench_evaluate_on_another_familys_build_names_its_task(llmrec_build, tmp_path, capsys):
    # without --task the build's family is taken (test_family_report); a contradicting one is refused
    args = ["--no-progress", "evaluate", "--task", "perrecbench", "--data", str(llmrec_build)]
    args += ["--engine", "fake"]
    refused(capsys, [*args, "--model", "constant", "--out", str(tmp_path / "r")], "pass --task llmrec")
    sft = ["--no-progress", "sft", "data", "--task", "perrecbench", "--data", str(llmrec_build)]
    sft += ["--format", "pairwise"]
    sft += ["--no-profile", "--out", str(tmp_path / "s")]
    refused(capsys, sft, "pass --task llmrec")


# ------------------------------------------------------------------------- C1, C3, C6: the right cause


def test_score_of_a_run_being_written_names_the_writer(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with held_by_another_process(run) as pid:
        refused(capsys, ["--no-progress", "score", str(run), "--write"], f"pid {pid}", "wait for it")
    refused(capsys, ["--no-progress", "score", str(run)], "is not a run folder")  # the writer is gone


def test_push_results_names_a_run_scored_from_a_predictions_file(rbp_build, tmp_path, capsys):
    import pyarrow.parquet as pq

    manifest = json.loads((rbp_build / "manifest.json").read_text(encoding="utf-8"))
    rows = pq.read_table(rbp_build / manifest["outputs"]["explicit"]["test"]).to_pylist()
    predictions = tmp_path / "mine.jsonl"
    cell = {"config": "explicit", "protocol": "recommend"}
    lines = [json.dumps({**cell, "id": row["id"], "prediction": "x"}) for row in rows]
    predictions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    args = ["--no-progress", "score", "--task", "recbench-plus", "--data", str(rbp_build)]
    assert main([*args, "--predictions", str(predictions), "--out", str(out)]) == 0
    push = ["push", "results", str(out), "--repo", "org/m", "--dataset", "org/d"]
    push += ["--dataset-revision", "a" * 40, "--task", "recbench-plus", "--dry-run"]
    line = refused(capsys, push, "scored from the predictions file 'mine.jsonl'")
    assert "evaluate again" not in line and "run the same evaluate" not in line


def test_push_leaderboard_of_a_report_without_a_page_says_why(tmp_path, capsys):
    report = tmp_path / "report"
    report.mkdir()
    (report / "leaderboard.md").write_text("## LLMRec\n", encoding="utf-8")
    (report / "leaderboard.json").write_text("[]\n", encoding="utf-8")
    line = refused(capsys, ["push", "leaderboard", str(report), "--repo", "org/x", "--dry-run"], "index.html")
    assert "write a report first" not in line


# ------------------------------------------------------------------------------------ G9, C7, C8


def test_convert_gguf_names_a_cut_file(tmp_path, capsys):
    pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    refused(capsys, ["convert-gguf", str(bad), "--out", str(tmp_path / "new")], "is cut short", "GGUF")
    assert not (tmp_path / "new").exists()


def _raw_books(tmp_path: Path, change) -> Path:
    from tests.dataset_builder.recbench_plus import fixture

    raw = fixture.synth(tmp_path / "raw")
    meta = raw / "meta_Books.jsonl"
    records = [json.loads(line) for line in meta.read_text(encoding="utf-8").splitlines()]
    meta.write_text("".join(json.dumps(change(record)) + "\n" for record in records), encoding="utf-8")
    return raw


def test_llmrec_build_without_titles_names_the_titles(tmp_path, capsys):
    raw = _raw_books(tmp_path, lambda record: {k: v for k, v in record.items() if k != "title"})
    args = ["--no-progress", "build", "--task", "llmrec", "--source", str(raw), "--domains", "Books"]
    line = refused(capsys, [*args, "--out", str(tmp_path / "b")], "title", "metadata")
    assert "--kcore" not in line


@pytest.mark.parametrize("task", ["llmrec", "recbench-plus", "perrecbench"])
def test_build_reads_a_title_that_is_not_text_as_missing(tmp_path, capsys, task):
    # C8: `"title": 123` named every item "123" (and RecBench+ matched answers by it); now it is missing,
    # as a review's title of the wrong type is, and a build left with no title says so
    raw = _raw_books(tmp_path, lambda record: {**record, "title": 123, "categories": "Books"})
    args = ["--no-progress", "build", "--task", task, "--source", str(raw), "--domains", "Books"]
    line = refused(capsys, [*args, "--out", str(tmp_path / "b")], "title", "metadata")
    assert "twins" not in line and "--min-history" not in line and "--kcore" not in line


# --------------------------------------------- a family that plugs in inherits the checks (the toy families)


def test_toy_family_build_inherits_the_checksums_and_their_check(tmp_path, monkeypatch, capsys):
    # tests/dataset_builder/toy_family.py names its files plainly (no hash in the name) and writes no
    # checksum itself: the shared build records them, and the shared check refuses a replaced or missing file
    from dataset_builder import tasks as builder_tasks
    from dataset_builder.manifest import check_files
    from perrec_eval.errors import DataError
    from tests.dataset_builder.test_build_tasks import write_raw

    module = "tests.dataset_builder.toy_family"
    family = builder_tasks._Family(f"{module}:ToyConfig", f"{module}:BUILDER")
    monkeypatch.setitem(builder_tasks._FAMILIES, "toy", family)
    out = tmp_path / "bench"
    args = ["build", "--task", "toy", "--source", str(write_raw(tmp_path / "raw")), "--out", str(out)]
    assert main([*args, "--domains", "Books"]) == 0
    recorded = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(recorded["checksums"]) == ["Books-meta.parquet", "Books-reviews.parquet"]
    check_files(out)  # as built
    missing = tmp_path / "missing"
    shutil.copytree(out, missing)
    (missing / "Books-meta.parquet").unlink()
    with pytest.raises(DataError, match="Books-meta.parquet is missing"):
        check_files(missing)
    shutil.copyfile(out / "Books-meta.parquet", out / "Books-reviews.parquet")
    with pytest.raises(DataError, match="Books-reviews.parquet does not hold the rows the build wrote"):
        check_files(out)


@pytest.fixture
def toy_task(tmp_path: Path):
    """The toy Task (tests/perrec_eval/tasks/toy.py) on data whose manifest names its files and their
    checksums, as the shared build writes them."""
    from dataset_builder.manifest import record_checksums
    from perrec_eval import registry
    from tests.perrec_eval.tasks import toy

    registry.register(toy.TASK, replace=True)
    data = toy.write_data(tmp_path / "toy-data")
    outputs = {s: {split: f"{s}/{split}.jsonl" for split in ("train", "test")} for s in toy.SUBSETS}
    (data / "manifest.json").write_text(json.dumps({"task": "toy", "outputs": outputs}), encoding="utf-8")
    record_checksums(data)
    yield data
    registry.unregister("toy")


def test_toy_task_evaluate_and_score_check_its_build(toy_task, tmp_path, capsys):
    argv = ["--no-progress", "evaluate", "--task", "toy", "--data", str(toy_task), "--engine", "fake"]
    argv += ["--model", "constant"]
    assert main([*argv, "--out", str(tmp_path / "ok")]) == 0
    (toy_task / "small" / "test.jsonl").write_text((toy_task / "small" / "train.jsonl").read_text())
    refused(capsys, [*argv, "--out", str(tmp_path / "bad")], "small/test.jsonl", "does not hold the rows")
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"config": "small", "id": "small-test-0", "prediction": 3}\n', encoding="utf-8")
    score = ["score", "--task", "toy", "--data", str(toy_task), "--predictions", str(predictions)]
    refused(capsys, score, "small/test.jsonl", "does not hold the rows")


def test_toy_task_run_records_no_engine_option_secret(toy_task, tmp_path, capsys):
    # the general run writer redacts every part of run.json, whatever a family or engine puts there
    from tests.perrec_eval.openai_stub import StubServer

    server = StubServer(default="ok").start()
    try:
        extra = {"api_key": "EXTRAKEY123", "user": {"private_key": "EBSECRET3"}}
        argv = ["--no-progress", "evaluate", "--task", "toy", "--data", str(toy_task), "--engine", "openai"]
        argv += [
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--max-docs",
            "2",
            "--out",
            str(tmp_path / "r"),
        ]
        assert main([*argv, "--engine-arg", f"extra_body={json.dumps(extra)}"]) == 0
    finally:
        server.stop()
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "r").rglob("*") if p.is_file())
    assert "EXTRAKEY123" not in written and "EBSECRET3" not in written


def test_toy_task_per_query_like_file_outputs_follow_the_output_rule(tmp_path):
    # outputs.file_target is the rule of every output that is one file, whatever the command or family
    from perrec_eval import outputs
    from perrec_eval.errors import ConfigError, DataError

    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"id": "a"}\n', encoding="utf-8")
    owned = lambda path: path.read_text(encoding="utf-8").startswith('{"id"')  # noqa: E731
    assert outputs.file_target(mine, inputs={}, owned=owned, command="x") == mine.resolve()
    other = tmp_path / "notes.txt"
    other.write_text("notes", encoding="utf-8")
    with pytest.raises(DataError, match="did not write"):
        outputs.file_target(other, inputs={}, owned=owned, command="x")
    with pytest.raises(ConfigError, match="is --data"):
        outputs.file_target(mine, inputs={"--data": mine}, owned=owned, command="x")
    with pytest.raises(ConfigError, match="is empty"):
        outputs.file_target("", inputs={}, owned=owned, command="x")
    with pytest.raises(DataError, match="is a folder"):
        outputs.file_target(tmp_path, inputs={}, owned=owned, command="x")


def test_profiles_out_follows_the_same_file_output_rule(tmp_path, capsys):
    # the other output that is one file: a file of something else is named as such, not as a profiles file
    # "written with other settings"
    from tests.benchmark_fixture import write_tiny_benchmark

    bench = write_tiny_benchmark(tmp_path / "bench")
    other = tmp_path / "predictions.jsonl"
    other.write_text('{"group_id": "t0", "ranking": ["u1", "u2"]}\n', encoding="utf-8")
    argv = ["--no-progress", "profiles", "--data", str(bench), "--engine", "fake", "--model", "constant"]
    argv += ["--levels", "easy", "--max-groups", "1"]
    refused(capsys, [*argv, "--out", str(other)], "did not write", "name a new file")
    assert other.read_text(encoding="utf-8") == '{"group_id": "t0", "ranking": ["u1", "u2"]}\n'
    refused(capsys, [*argv, "--out", str(bench / "manifest.json")], "--data")
    assert main([*argv, "--out", str(tmp_path / "p.jsonl")]) == 0
    assert main([*argv, "--out", str(tmp_path / "p.jsonl")]) == 0  # its own file: extended


def test_sft_data_of_a_family_build_with_a_replaced_file_is_refused(llmrec_build, tmp_path, capsys):
    data = _copy(llmrec_build, tmp_path)
    replaced = _one(data, "rating/train-*.parquet")
    shutil.copyfile(_one(data, "rating/test-*.parquet"), replaced)  # test rows as training examples
    argv = ["--no-progress", "sft", "data", "--task", "llmrec", "--data", str(data), "--format", "rating"]
    refused(capsys, [*argv, "--out", str(tmp_path / "sft")], str(replaced), "does not hold the rows")
