"""`build --task recbench-plus --phrasing llm`: rewrites through an engine, checked (a leak or an omission is
asked again, then dropped, and counted), cached (a second build asks nothing), recorded in the card."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataset_builder.recbench_plus import phrasing
from perrec_eval.cli import main
from perrec_eval.engines.fake import FakeEngine
from perrec_eval.types import Completion
from tests.dataset_builder.recbench_plus.fixture import build, synth


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return synth(tmp_path_factory.mktemp("rb-phrasing") / "raw")


def _rows(bench: Path, config: str, split: str = "test") -> list[dict]:
    outputs = json.loads((bench / "manifest.json").read_text())["outputs"]
    return pq.read_table(bench / outputs[config][split]).to_pylist()


def _template(request) -> str:
    return request.messages[-1]["content"].rpartition("Request: ")[2]


def test_recbench_plus_phrasing_rewrites_every_query_and_records_the_engine(raw, tmp_path):
    bench = build(tmp_path / "b", raw, "--phrasing", "llm", "--engine", "fake", "--model", "constant")
    for config in ("explicit", "implicit", "misinformed", "interest"):
        rows = _rows(bench, config)
        assert rows and all(row["query"] == row["template_query"] for row in rows)  # constant: the template
    card = (bench / "README.md").read_text()
    assert "LLM rewrites by `fake:constant`" in card and "0 dropped" in card
    params = json.loads((bench / "manifest.json").read_text())["parameters"]
    assert (params["phrasing"], params["engine"], params["model"]) == ("llm", "fake", "constant")


def test_recbench_plus_phrasing_redoes_leaks_and_omissions_then_drops_and_counts():
    implicit = {"id": "i", "domain": "Books", "query": 'Books by the author of "Storms"?',
                "conditions": [{"relation": "author", "value": "Ann Lee"}],
                "references": [{"title": "Storms"}], "ground_truth": []}  # fmt: skip
    explicit = {"id": "e", "domain": "Books", "query": "Books written by Ann Lee?",
                "conditions": [{"relation": "author", "value": "Ann Lee"}], "ground_truth": []}  # fmt: skip
    interest = {"id": "n", "domain": "Books", "query": 'I recently enjoyed "Storms". More?', "conditions": [],
                "seeds": [{"title": "Storms"}], "ground_truth": [{"title": "Dragon Tales"}]}  # fmt: skip
    asked: list[tuple[str, int]] = []

    def respond(request, params, index):
        text = _template(request)
        asked.append((text, params.seed))
        if "author of" in text:  # leaks the hidden author on the first try, then behaves
            return "Something by Ann Lee, like Storms?" if params.seed == 0 else 'A read like "Storms"?'
        if "enjoyed" in text:  # always names a ground-truth title: dropped
            return 'After "Storms" I loved Dragon Tales, more please'
        return "I'd love more books, anything?"  # explicit: leaves the author out, always

    counts: dict[str, int] = {}
    rows = {"implicit": [implicit], "explicit": [explicit], "interest": [interest], "misinformed": []}
    written = phrasing.phrase(rows, FakeEngine(respond, model="m"), counts, retries=2)
    assert [r["query"] for r in written["implicit"]] == ['A read like "Storms"?']
    assert written["explicit"] == [] and written["interest"] == []
    assert written["implicit"][0]["template_query"] == implicit["query"]
    assert counts["implicit_phrasing_leaks"] == 1 and counts["implicit_phrasing_redone"] == 1
    assert counts["implicit_phrasing_dropped"] == 0
    assert counts["explicit_phrasing_omits"] == 3 and counts["explicit_phrasing_dropped"] == 1
    assert counts["interest_phrasing_leaks"] == 3 and counts["interest_phrasing_dropped"] == 1
    assert sorted({seed for _, seed in asked}) == [0, 1, 2]  # each redo is another sample


def test_recbench_plus_phrasing_never_shows_an_implicit_hidden_value(raw, tmp_path):
    seen: list[str] = []

    def respond(request, params, index):
        seen.append(" ".join(m["content"] for m in request.messages))
        return _template(request)

    bench = build(tmp_path / "t", raw)
    rows = {c: _rows(bench, c) for c in ("implicit",)}
    phrasing.phrase(rows, FakeEngine(respond, model="m"), {}, retries=0)
    for row, text in zip(rows["implicit"], seen, strict=True):
        assert not phrasing.leaks(text, [phrasing.Fact(**c) for c in row["conditions"]])


def test_recbench_plus_phrasing_is_cached_and_a_failed_engine_ends_in_one_line(
    raw, tmp_path, capsys, monkeypatch
):
    args = ["--phrasing", "llm", "--engine", "fake", "--model", "constant"]
    first = build(tmp_path / "b", raw, *args)
    cache = tmp_path / "b.stages" / "phrasing.cache.jsonl"
    lines = cache.read_text().count("\n")
    assert lines > 0
    build(tmp_path / "b", raw, *args, "--overwrite")
    assert cache.read_text().count("\n") == lines  # every rewrite came from the cache
    assert _rows(first, "explicit") == _rows(tmp_path / "b", "explicit")

    from perrec_eval.engines import fake

    monkeypatch.setitem(fake.SCRIPTS, "broken", lambda request, params, index: Completion((), error="boom"))
    capsys.readouterr()
    argv = ["--no-progress", "build", "--task", "recbench-plus", "--source", str(raw), "--out",
            str(tmp_path / "c"), "--domains", "Books", "--threads", "1", "--phrasing", "llm",
            "--engine", "fake", "--model", "broken"]  # fmt: skip
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "phrasing requests failed (first: boom)" in line and "run the same command again" in line


def test_recbench_plus_phrasing_options_refused_in_one_line(raw, tmp_path, capsys):
    base = [
        "--no-progress",
        "build",
        "--task",
        "recbench-plus",
        "--source",
        str(raw),
        "--out",
        str(tmp_path / "x"),
    ]
    for extra, said in ((["--phrasing", "llm"], "needs --engine and --model"),
                        (["--engine", "fake", "--model", "m"], "add --phrasing llm"),
                        (["--phrasing", "gpt"], "template or llm")):  # fmt: skip
        capsys.readouterr()
        assert main([*base, *extra]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert said in line
