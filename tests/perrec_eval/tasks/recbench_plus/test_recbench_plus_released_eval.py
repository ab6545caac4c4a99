"""Any model on RecBench+'s released queries (`perrecbench evaluate --task recbench-plus --released-queries`)
on hand-made files in the release's shapes: the oracle scores recall 1, another system's released answers
score as `score --released-queries` scores them (corrected and `--compat released`), the report shows the
published rows beside the run, a condition query shows its user's history, a tiny local model runs, and
bad settings end in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import evaluate
from perrec_eval.tasks.recbench_plus import released, released_eval
from perrec_eval.tasks.recbench_plus.released_eval import ReleasedEvalConfig

DATA = Path(__file__).resolve().parents[3] / "data" / "recbench_plus_released"
QUERIES = str(DATA / "DemographicsBasedQuery.json")
MOVIES = str(DATA / "movies.dat")
ARGS = ["evaluate", "--task", "recbench-plus", "--released-queries", QUERIES, "--catalogue", MOVIES]


def _scores(run: Path) -> dict[str, dict]:
    cells = json.loads((run / "scores.json").read_text())["cells"]
    return {f"{c['subset']}/{c['protocol']}": c for c in cells}


def test_released_eval_oracle_scores_recall_one(tmp_path, capsys):
    assert main([*ARGS, "--engine", "fake", "--model", "oracle", "--out", str(tmp_path / "run")]) == 0
    cells = _scores(tmp_path / "run")
    assert set(cells) == {"demographics/recommend", "demographics/recommend-k"}
    for cell in cells.values():
        assert cell["num_docs"] == 4 and cell["num_failed"] == 0
        assert cell["metrics"]["recall"]["value"] == 1.0 and cell["metrics"]["precision"]["value"] == 1.0
        assert cell["metrics"]["condition_match"]["value"] is None  # the release's graph is not readable
        assert cell["metrics"]["hallucination"]["value"] == 0.0
    assert "published rows" in capsys.readouterr().out


def test_released_eval_report_shows_the_published_rows_unranked(tmp_path):
    run, report = tmp_path / "run", tmp_path / "report"
    assert main([*ARGS, "--engine", "fake", "--model", "oracle", "--out", str(run)]) == 0
    assert main(["report", str(run), "--out", str(report)]) == 0
    board = (report / "leaderboard.md").read_text()
    assert "published rows" in board and "DeepSeek-R1" in board and "| oracle |" in board
    published = board[board.index("published rows") :]
    assert "**" not in published  # never bolded against the run


def _released_answers(compat: str | None, tmp_path: Path) -> dict[str, dict]:
    """The released responses answered through the evaluate path (the fake engine says each response)."""
    queries = {q.query: q.id for q in released.read_queries(QUERIES)}
    responses = released.read_responses(str(DATA / "responses.jsonl")).answers

    def respond(request, params, index):
        text = request.messages[-1]["content"].removeprefix("Query: ").partition("\n")[0]
        return responses[queries[text]]

    config = ReleasedEvalConfig(
        task="recbench-plus", released_queries=QUERIES, catalogue=MOVIES, compat=compat, engine="fake",
        model="released", out=str(tmp_path / f"run-{compat}"), protocols=("recommend",),
        subsets=("demographics",),
    )  # fmt: skip
    released_eval.write_folder(QUERIES, MOVIES, None, Path(config.data), compat=compat)
    evaluate(config.general(), engine=FakeEngine(respond, model="released"))
    lines = (tmp_path / f"run-{compat}" / "predictions.jsonl").read_text().splitlines()
    return {record["id"]: record for record in map(json.loads, lines)}


def test_released_eval_compat_scores_as_the_released_evaluator(tmp_path):
    from perrec_eval.tasks.recbench_plus.task import score_doc

    predictions = _released_answers("released", tmp_path)
    for expected in json.loads((DATA / "released_results.json").read_text()):
        record = predictions[expected["id"]]
        for name in ("recall", "precision", "ndcg", "ftr"):
            assert score_doc(name, record["prediction"], record["truth"]) == float(expected[name])
        assert score_doc("hallucination", record["prediction"], record["truth"]) is None


def test_released_eval_corrected_scoring_equals_score_released_files(tmp_path):
    from perrec_eval.tasks.recbench_plus.task import score_doc

    predictions = _released_answers(None, tmp_path)
    reference = released.score_released(
        released.read_queries(QUERIES),
        released.read_responses(str(DATA / "responses.jsonl")).answers,
        released.read_movies(MOVIES),
    )
    for expected in reference:
        record = predictions[expected["id"]]
        for name in ("recall", "precision", "ndcg"):
            assert score_doc(name, record["prediction"], record["truth"]) == pytest.approx(expected[name])


def test_released_eval_condition_query_shows_its_users_history(tmp_path):
    ratings = tmp_path / "ratings.dat"
    ratings.write_text("7::6::5::100\n7::1::4::200\n7::3::4::300\n8::2::3::100\n", encoding="latin-1")
    folder = tmp_path / "data"
    assert released_eval.write_folder(str(DATA / "ExplicitQuery.json"), MOVIES, str(ratings), folder) == [
        "explicit"
    ]
    from perrec_eval.tasks.recbench_plus.task import TASK, load_docs

    (doc,) = load_docs(str(folder), "explicit", "test")
    assert [item["title"] for item in doc.row["history"]] == ["Alien (1979)", "Heat (1995)"]  # no truth
    assert [item["parent_asin"] for item in doc.truth["ground_truth"]] == ["1", "4"]
    prompt = TASK.protocols["recommend"].render(doc, "recommend")[-1]["content"]
    assert prompt.startswith("The user has watched the following movies:['Alien (1979)', 'Heat (1995)']")
    assert doc.truth["condition_match"] is False


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--data", "somewhere"], "not both"),
        (["--compat", "released"], "--released-queries"),
    ],
)
def test_released_eval_bad_settings_end_in_one_line(tmp_path, capsys, extra, needle):
    args = ["evaluate", "--task", "recbench-plus", "--engine", "fake", "--model", "oracle"]
    if needle == "not both":
        args += ["--released-queries", QUERIES, "--catalogue", MOVIES]
    assert main([*args, *extra, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_released_eval_movie_file_needs_the_catalogue(tmp_path, capsys):
    args = ["evaluate", "--task", "recbench-plus", "--released-queries", QUERIES, "--engine", "fake"]
    assert main([*args, "--model", "oracle", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--catalogue" in err and "movies.dat" in err


def test_released_eval_tiny_local_model_answers_every_query(tmp_path, tiny_model_dir):
    run = tmp_path / "tiny"
    args = [*ARGS, "--engine", "hf", "--model", str(tiny_model_dir), "--engine-arg", "device=cpu"]
    assert main([*args, "--max-new-tokens", "16", "--protocols", "recommend", "--out", str(run)]) == 0
    (cell,) = _scores(run).values()
    assert cell["num_docs"] == 4 and cell["num_requests"] == 4 and cell["num_engine_errors"] == 0
    assert 0.0 <= cell["metrics"]["recall"]["value"] <= 1.0


def test_released_eval_book_file_needs_no_catalogue(tmp_path):
    book = tmp_path / "ExplicitQuery.json"
    record = {"source_user": "u1", "condition_num": 1, "bookSubset": ["Dune", "Children of Dune"],
              "sharedRelationships": [["WRITTEN_BY", "Frank Herbert"]], "data_idx": 0,
              "situational_description_query": "More by the author of Dune?"}  # fmt: skip
    book.write_text(json.dumps([record]), encoding="utf-8")
    args = ["evaluate", "--task", "recbench-plus", "--released-queries", str(book), "--engine", "fake"]
    assert main([*args, "--model", "oracle", "--out", str(tmp_path / "run")]) == 0
    cells = _scores(tmp_path / "run")
    assert set(cells) >= {"explicit/recommend", "explicit-1/recommend"}
    cell = cells["explicit/recommend"]
    assert cell["metrics"]["recall"]["value"] == 1.0 and cell["metrics"]["hallucination"]["value"] is None
    manifest = json.loads((tmp_path / "run.data" / "manifest.json").read_text())
    assert manifest["released"]["catalogue"] is None


def test_released_eval_never_replaces_a_folder_it_did_not_write(tmp_path, capsys):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me", encoding="utf-8")
    args = [*ARGS, "--engine", "fake", "--model", "oracle", "--released-data", str(other)]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--released-data" in err
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_released_eval_folder_is_kept_while_its_inputs_are_unchanged(tmp_path):
    folder = tmp_path / "data"
    released_eval.write_folder(QUERIES, MOVIES, None, folder)
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    released_eval.write_folder(QUERIES, MOVIES, None, folder)
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp
    released_eval.write_folder(QUERIES, MOVIES, None, folder, compat="released")  # another scoring: rewritten
    assert json.loads((folder / "manifest.json").read_text())["parameters"]["compat"] == "released"
