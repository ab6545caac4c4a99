"""RecBench+ through the general path on a synthetic build: the ground truth scores 1, an empty answer
fails, a one-item answer does not; baselines, the fake engine, score, report and sft data end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.evaluation import TaskEvalConfig, evaluate
from perrec_eval.registry import get
from perrec_eval.tasks.recbench_plus import metrics
from perrec_eval.tasks.recbench_plus.task import TYPES, Recommend, load_docs
from tests.dataset_builder.recbench_plus.fixture import build, synth

TASK = get("recbench-plus")


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rb-task")
    return build(root / "bench", synth(root / "raw"))


def _truths(bench: Path) -> dict[str, list[str]]:
    """Each rendered request → its ground-truth titles (the oracle's knowledge); one query text can be
    asked by several users, so the protocol's history variant tells them apart."""
    truths: dict[str, list[str]] = {}
    for protocol in TASK.protocols.values():
        for subset in TASK.subsets:
            for doc in load_docs(str(bench), subset, "test"):
                message = protocol.render(doc, "recommend")[-1]["content"]
                titles = [item["title"] for item in doc.truth["ground_truth"]]
                assert truths.setdefault(message, titles) == titles, "two docs with one request"
    return truths


@pytest.fixture(autouse=True)
def history_variant(monkeypatch):
    monkeypatch.setitem(TASK.protocols, "recommend", Recommend(variant="history"))
    monkeypatch.setitem(
        TASK.protocols, "recommend-k", Recommend("recommend-k", variant="history", fixed_k=True)
    )


def _run(bench: Path, out: Path, answer, **options):
    truths = _truths(bench)

    def respond(request, params, index):
        return answer(truths[request.messages[-1]["content"]])

    config = TaskEvalConfig(
        task="recbench-plus", data=str(bench), engine="fake", model="m", out=str(out), **options
    )
    return evaluate(config, engine=FakeEngine(respond, model="m"))


def _metric(scores, name: str) -> list[float | None]:
    return [cell.metrics[name].value for cell in scores.cells]


def _by_type(scores, name: str) -> dict[str, set[float | None]]:
    """The values of metric `name` in the cells of each query type (its condition-count groups included)."""
    found: dict[str, set[float | None]] = {}
    for cell in scores.cells:
        found.setdefault(cell.subset.split("-")[0], set()).add(cell.metrics[name].value)
    return found


def test_recbench_plus_ground_truth_titles_score_one_and_never_fail(bench, tmp_path):
    # the titles with a year appended still match: the released code never matched those
    scores = _run(bench, tmp_path / "r", lambda titles: " [SEP] ".join(f"{t} (2001)" for t in titles[:5]))
    assert {cell.subset for cell in scores.cells} == set(TASK.subsets) - {"demographics"}  # Amazon: none
    assert {cell.protocol for cell in scores.cells} == {"recommend", "recommend-k"}
    for name in ("precision", "ftr", "hallucination"):
        assert set(_metric(scores, name)) == {0.0 if name != "precision" else 1.0}
    # the oracle names the first 5: recall 1 wherever the ground truth holds 5 items or fewer
    small = [c for c in scores.cells if c.subset in ("explicit-1", "explicit-2", "interest")]
    assert all(c.metrics["recall"].value <= 1.0 for c in scores.cells)
    assert any(c.metrics["recall"].value == 1.0 for c in small)
    assert _by_type(scores, "condition_match") == {t: {1.0} for t in TYPES[:3]} | {"interest": {None}}
    assert _by_type(scores, "rejection") == {"explicit": {None}, "implicit": {None}, "misinformed": {0.0},
                                             "interest": {None}}  # fmt: skip
    # a user's queries are one cluster of the bootstrap
    whole = [cell for cell in scores.cells if cell.subset in ("explicit", "implicit", "misinformed")]
    assert all(cell.num_clusters is not None and cell.num_clusters < cell.num_docs for cell in whole)


def test_recbench_plus_refusal_declines_rejects_a_false_premise_and_is_no_hallucination(bench, tmp_path):
    refusal = "I'm sorry, but none of these movies is in the category you name, so I cannot recommend any."
    scores = _run(bench, tmp_path / "r", lambda titles: refusal, max_docs=5)
    assert set(_metric(scores, "ftr")) == {1.0} and set(_metric(scores, "recall")) == {0.0}
    assert set(_metric(scores, "hallucination")) == {0.0}  # it named no title
    assert _by_type(scores, "rejection")["misinformed"] == {1.0}  # the paper's reverse reading
    assert all(cell.num_failed == 0 for cell in scores.cells)  # a refusal is an answer


def test_recbench_plus_empty_answer_fails_to_recommend_and_rejects_nothing(bench, tmp_path):
    scores = _run(bench, tmp_path / "r", lambda titles: "", max_docs=5)
    assert set(_metric(scores, "ftr")) == {1.0} and set(_metric(scores, "recall")) == {0.0}
    assert _by_type(scores, "rejection")["misinformed"] == {0.0}
    assert all(cell.num_failed == cell.num_docs for cell in scores.cells)


def test_recbench_plus_one_item_correct_answer_is_not_a_failure(bench, tmp_path):
    scores = _run(
        bench, tmp_path / "r", lambda titles: titles[0], max_docs=5, subsets=("explicit", "implicit")
    )
    assert set(_metric(scores, "ftr")) == {0.0} and set(_metric(scores, "precision")) == {1.0}
    assert all(0 < recall < 1 for recall in _metric(scores, "recall"))  # every ground truth holds 2 or more


def test_recbench_plus_fixed_k_scores_only_the_first_k_titles(bench, tmp_path):
    junk = [f"Zzyzx Qwerty Volume {n}" for n in range(8)]
    scores = _run(
        bench, tmp_path / "r", lambda titles: " [SEP] ".join([*junk, *titles]), subsets=("explicit",)
    )
    free, fixed = (next(c for c in scores.cells if c.protocol == p) for p in ("recommend", "recommend-k"))
    assert fixed.metrics["recall"].value == 0.0 and fixed.metrics["hallucination"].value == 1.0  # 5 junk only
    assert free.metrics["recall"].value == 1.0 and 0 < free.metrics["hallucination"].value < 1
    lines = [json.loads(line) for line in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert {len(line["prediction"]) for line in lines if line["protocol"] == "recommend-k"} == {5}


def test_recbench_plus_condition_groups_split_their_type(bench):
    explicit = {doc.id for doc in load_docs(str(bench), "explicit", "test")}
    groups = [{doc.id for doc in load_docs(str(bench), f"explicit-{g}", "test")} for g in ("1", "2", "3-4")]
    assert all(groups) and set().union(*groups) == explicit and sum(map(len, groups)) == len(explicit)
    for doc in load_docs(str(bench), "explicit-3-4", "test"):
        assert len(doc.truth["conditions"]) in (3, 4)


def test_recbench_plus_metrics_match_hand_computed_values():
    truth = {"ground_truth": [{"parent_asin": g} for g in "abc"]}
    prediction = [
        {"title": "X", "parent_asin": "x", "satisfies": True},
        {"title": "B", "parent_asin": "b", "satisfies": True},
        {"title": "?", "parent_asin": None, "satisfies": False},
        {"title": "Y", "parent_asin": "y", "satisfies": False},
    ]
    ideal = 1 + 1 / 1.584962500721156 + 1 / 2
    expected = {"recall": 1 / 3, "precision": 1 / 4, "ndcg": (1 / 1.584962500721156) / ideal,
                "condition_match": 2 / 3, "hallucination": 1 / 4, "ftr": 0.0}  # fmt: skip
    for name, value in expected.items():
        assert metrics.value(name, prediction, truth) == pytest.approx(value)
    assert metrics.value("ftr", None, truth) == 1.0 and metrics.value("recall", None, truth) == 0.0
    assert metrics.value("rejection", prediction, truth) == 0 and metrics.value("rejection", None, truth) == 0
    assert metrics.value("rejection", [], truth) == 1.0 and metrics.value("ftr", [], truth) == 1.0
    assert metrics.value("hallucination", [], truth) == 0.0


def test_recbench_plus_true_answer_reads_back_through_the_parser(bench):
    protocol = TASK.protocols["recommend"]
    for doc in load_docs(str(bench), "implicit", "train", max_docs=5):
        text = protocol.format_answer(protocol.true_answer(doc, "recommend"), "recommend")
        assert protocol.parse(text, "recommend").value == protocol.true_answer(doc, "recommend")


def test_recbench_plus_answer_format_is_a_json_list_that_can_be_empty_and_the_parser_reads():
    import re

    regex, schema = TASK.answer_formats("recommend")
    answer = json.dumps(["Dune", 'The "Hobbit"'])
    assert re.fullmatch(regex, answer) and re.fullmatch(regex, "[]") and not re.fullmatch(regex, "Dune")
    assert "minItems" not in schema  # a constrained answer can decline
    assert TASK.protocols["recommend"].parse(answer, "recommend").value == ["Dune", 'The "Hobbit"']
    declined = TASK.protocols["recommend"].parse("[]", "recommend")
    assert declined.ok and declined.value == []


def test_recbench_plus_prompt_variants_render_the_released_shapes(bench):
    (doc,) = load_docs(str(bench), "explicit", "test", max_docs=1)
    protocol = TASK.protocols["recommend"]
    system, user = protocol.render(doc, "recommend", variant="default")
    assert system["content"].startswith("You are a book recommender system.")
    assert user["content"] == f"Query: {doc.row['query']}\nRecommended books (separated by [SEP]):"
    fixed, _ = protocol.render(doc, "recommend", variant="k")  # the release asked for K in the system message
    assert "5 recommended books" in fixed["content"]
    _, history = protocol.render(doc, "recommend", variant="history")
    assert history["content"].startswith("The user has read the following books:[")


def test_recbench_plus_cli_baselines_fake_score_report_and_sft_data(bench, tmp_path, capsys):
    runs, argv = (
        tmp_path / "runs",
        ["--no-progress", "evaluate", "--task", "recbench-plus", "--data", str(bench)],
    )
    assert main([*argv, "--engine", "baseline", "--model", "all", "--out", str(runs / "b")]) == 0
    assert main([*argv, "--engine", "fake", "--model", "constant", "--out", str(runs / "c")]) == 0
    scores = {
        name: json.loads((runs / name / "scores.json").read_text())
        for name in ("b/popularity", "b/condition-filter", "c")
    }
    explicit = {name: s["cells"][0]["metrics"] for name, s in scores.items()}
    assert explicit["b/condition-filter"]["condition_match"]["value"] == 1.0
    assert explicit["b/condition-filter"]["recall"]["value"] > explicit["b/popularity"]["recall"]["value"]
    assert explicit["c"]["hallucination"]["value"] == 1.0 and explicit["c"]["ftr"]["value"] == 0.0
    capsys.readouterr()
    assert main(["score", str(runs / "c"), "--task", "recbench-plus", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == scores["c"]
    report = tmp_path / "report"
    assert main(["report", str(runs / "b"), str(runs / "c"), "--out", str(report)]) == 0
    board = (report / "leaderboard.md").read_text()
    assert "## RecBench+: recall (higher is better)" in board and "| condition-filter | **" in board
    sft = tmp_path / "sft"
    assert main(["sft", "data", "--task", "recbench-plus", "--data", str(bench), "--out", str(sft)]) == 0
    info = json.loads((sft / "sft_data.json").read_text())
    assert info["task"] == "recbench-plus" and info["examples_per_format"]["recommend"] > 0


def _tiny_doc(query: str, history: list[str], conditions: list[dict], truth: list[str]):
    """A query over a hand-made four-item catalogue (popularity: d > c > b > a)."""
    from perrec_eval.tasks.recbench_plus.task import QueryDoc, catalogue_of

    items = {
        "a": ("Dragon Quest", {"author": "Ann Lee", "categories": "Fantasy"}),
        "b": ("Dragon Tales", {"author": "Bo Li", "categories": "Fantasy"}),
        "c": ("Soup Basics", {"author": "Ann Lee", "categories": "Cookbooks"}),
        "d": ("Bread Every Day", {"author": "Cy Ma", "categories": "Cookbooks"}),
    }
    catalogue = catalogue_of(
        [
            {"parent_asin": a, "title": title, "domain": "Books", "popularity": popularity,
             "relations": [{"relation": r, "value": v} for r, v in facts.items()]}
            for popularity, (a, (title, facts)) in enumerate(items.items(), start=1)
        ]
    )  # fmt: skip
    shown = [{"parent_asin": a, "title": items[a][0]} for a in history]
    gt = [{"parent_asin": a, "title": items[a][0]} for a in truth]
    truth_json = {"type": "explicit", "ground_truth": gt, "conditions": conditions, "domain": "Books", "k": 2}
    row = {"query": query, "history": shown, "domain": "Books"}
    return QueryDoc("q", truth_json, "u", row=row, catalogue=catalogue)


def _asins(name: str, doc) -> list[str]:
    [answer] = TASK.predict_baseline(name, [doc], data="", seed=0)
    return [entry["parent_asin"] for entry in answer]


def test_recbench_plus_baselines_rank_as_hand_computed():
    doc = _tiny_doc(
        "Any dragon quest books by Ann Lee?", ["d"], [{"relation": "author", "value": "Ann Lee"}], ["a"]
    )
    assert _asins("popularity", doc) == ["c", "b"]  # d is in the history shown
    assert _asins("condition-filter", doc) == ["c", "a"]  # Ann Lee's, most reviewed first
    assert _asins("bm25", doc) == [
        "a",
        "c",
    ]  # "dragon quest ann lee" all in a; "ann lee" in c; b has "dragon"
    # the history shown (d: cy ma, cookbooks) shares "cookbooks" with c only; then the most reviewed
    assert _asins("history-popularity", doc) == ["c", "b"]


def test_recbench_plus_baselines_never_read_the_ground_truth():
    conditions = [{"relation": "categories", "value": "Fantasy"}]
    for name in TASK.baselines:
        with_truth = _tiny_doc("fantasy please", ["c"], conditions, ["a", "b"])
        without = _tiny_doc("fantasy please", ["c"], conditions, [])
        assert _asins(name, with_truth) == _asins(name, without)
        assert "c" not in _asins(name, with_truth)  # nor answer an item of the history shown


def test_recbench_plus_build_k_sets_the_fixed_k_prompt_and_the_baselines_length(bench, tmp_path):
    other = build(tmp_path / "k3", bench.parent / "raw", "--k", "3")
    (doc,) = load_docs(str(other), "explicit", "test", max_docs=1)
    assert doc.truth["k"] == 3
    system, _ = Recommend("recommend-k", fixed_k=True).render(doc, "recommend")
    assert "3 recommended books" in system["content"]  # the release asked for K in the system message
    assert all(len(answer) == 3 for answer in TASK.predict_baseline("popularity", [doc], data="", seed=0))


def test_recbench_plus_sft_data_holds_train_users_only_each_query_once(bench, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "sft"
    assert main(["sft", "data", "--task", "recbench-plus", "--data", str(bench), "--out", str(out)]) == 0
    rows = pq.read_table(next(out.glob("train-*.parquet"))).to_pylist()
    train = {(s, d.id): d for s in TASK.subsets for d in load_docs(str(bench), s, "train")}
    test_users = {d.cluster for s in TYPES for d in load_docs(str(bench), s, "test")}
    assert rows and {train[(r["subset"], r["id"])].cluster for r in rows}.isdisjoint(test_users)
    keys = [(r["format"], r["subset"].split("-")[0], r["id"]) for r in rows]
    assert len(keys) == len(set(keys))  # a query scored in its type and its group is one example
    for row in rows:
        doc = train[(row["subset"], row["id"])]
        titles = [item["title"] for item in doc.truth["ground_truth"]]
        wanted = titles[: doc.truth["k"]] if row["format"] == "recommend-k" else titles
        assert json.loads(row["answer"]) == wanted
        assert not any(t in row["prompt"][-1]["content"] for t in titles)  # the answer is not in the prompt


def test_recbench_plus_predictions_file_reads_the_first_k_titles_in_the_fixed_k_cell(bench):
    from perrec_eval.tasks.recbench_plus.task import prediction_from

    (doc,) = load_docs(str(bench), "explicit", "test", max_docs=1)
    titles = [f"Zzyzx Qwerty Volume {n}" for n in range(7)] + [g["title"] for g in doc.truth["ground_truth"]]
    assert len(prediction_from(doc, "recommend-k", titles)) == 5
    assert len(prediction_from(doc, "recommend", titles)) == len(titles)


@pytest.mark.parametrize("form", ["{t} by Erin Morgenstern", '"{t}" by Susanna Clarke', "{t} — Markus Zusak"])
def test_recbench_plus_titles_written_with_their_author_match_their_books(bench, tmp_path, form):
    plain = _run(bench, tmp_path / "plain", lambda titles: " [SEP] ".join(titles[:5]), max_docs=8)
    named = _run(bench, tmp_path / "named",
                 lambda titles: " [SEP] ".join(form.format(t=t) for t in titles[:5]), max_docs=8)  # fmt: skip
    assert _metric(named, "recall") == _metric(plain, "recall")
    assert max(_metric(named, "recall")) == 1.0 and set(_metric(named, "hallucination")) == {0.0}
