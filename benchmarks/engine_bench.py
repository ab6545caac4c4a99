"""The same benchmark slice through every engine: vLLM offline, vLLM's server (concurrency 1 and 16), hf.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/engine_bench.py [--data DIR] [--groups 8]`` (~8 min;
needs ``.venv-vllm``: ``make vllm-venv``).

Without ``--data`` a benchmark is synthesised and built into ``benchmarks/_work/engine_bench/``
(``perrecbench synth --reviews-per-domain 60000`` + ``perrecbench build --test-groups 200``). Every user gets
a fixed 600-character profile (an LLM profile's usual size), so prompts have the paper's shape.

1. The runner records what it sends: `perrec_eval.tasks.perrecbench.run.evaluate` with a recording fake
   engine, once on the
   whole test split (the request count and prompt size of the full benchmark, for the H100 estimate) and
   once on a stratified slice of ``--groups`` groups per level (the requests replayed below). Each
   ``generate`` call is one ranking step (9: 3 levels x 3 methods, pairwise asks all pairs at once).
2. Each engine answers the slice's steps in order, after its model is loaded and one warm-up request: the
   tiny local model of ``tests/tiny_model.py`` on CPU, float32, eager mode, the runner's sampling
   (temperature 0.1, per-request seeds) with ``max_tokens`` capped at ``--max-tokens`` for every engine (the
   random model rarely stops by itself). Engines: ``vllm`` (offline, one LLM.chat per step), ``openai-1``
   and ``openai-16`` (the openai engine against ``vllm.entrypoints.openai.api_server`` at concurrency 1, the
   paper's way, and 16), ``hf`` (transformers, batch 8, in the main venv).

Reported per engine: wall seconds, requests/s, prompt and output tokens/s, engine calls (``generate``; vLLM
also ``LLM.chat``), and the prefix-cache hit rate (offline: cached prompt tokens vLLM reports per request;
server: its ``vllm:prefix_cache_hits``/``queries`` counters). Results print as Markdown for
``benchmarks/RESULTS.md``; ``--json FILE`` also writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / "_work" / "engine_bench"
MAIN_PYTHON = Path(sys.executable)
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
PROFILE = ("Enjoys well-made practical items and reads reviews before buying. " * 10)[:600]
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "NO_PROXY": "127.0.0.1,localhost",
}


# ----------------------------------------------------------------------------------------- recording


class Recorder:
    """A fake engine that records each `generate` call (one ranking step) and answers constants."""

    name = "fake"
    model = "constant"
    adapter = None

    def __init__(self) -> None:
        from perrec_eval.engines import load_engine

        self.inner = load_engine("fake", "constant")
        self.steps: list[dict[str, Any]] = []

    def generate(self, requests, params, *, on_results=None):
        self.steps.append(
            {"params": params.as_dict(), "requests": [list(map(dict, r.messages)) for r in requests]}
        )
        return self.inner.generate(requests, params, on_results=on_results)

    def info(self) -> dict[str, Any]:
        return self.inner.info()

    def with_adapter(self, name: str, path: str):
        raise NotImplementedError


def record(data: Path, profiles: Path, groups: int | None) -> list[dict[str, Any]]:
    """The steps `perrecbench evaluate` sends for `groups` groups per level (None: all)."""
    import tempfile

    from perrec_eval.tasks.perrecbench.config import EvalConfig
    from perrec_eval.tasks.perrecbench.run import evaluate

    recorder = Recorder()
    with tempfile.TemporaryDirectory() as out:
        config = EvalConfig(
            engine="fake",
            model="constant",
            data=str(data),
            out=out,
            profiles=str(profiles),
            max_groups=groups,
        )
        evaluate(config, engine=recorder)
    return recorder.steps


def write_profiles(data: Path, path: Path) -> Path:
    import datasets

    with path.open("w", encoding="utf-8") as handle:
        for level in ("easy", "medium", "hard"):
            for split in ("test", "train"):
                rows = datasets.load_dataset(str(data), level, split=split)
                for row in rows:
                    for user in row["users"]:
                        record = {"group_id": row["group_id"], "user_id": user["user_id"], "profile": PROFILE}
                        handle.write(json.dumps(record) + "\n")
    return path


# ------------------------------------------------------------------------------------------- replay


def replay(engine_name: str, model: str, steps_path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Load the engine, warm it up, answer every recorded step in order; the measurements."""
    from perrec_eval.engines import load_engine
    from perrec_eval.types import ChatRequest, GenParams

    steps = [json.loads(line) for line in steps_path.read_text(encoding="utf-8").splitlines()]
    start = time.perf_counter()
    engine = load_engine(engine_name, model, options=options)
    first = steps[0]
    engine.generate([ChatRequest(messages=tuple(first["requests"][0]))], GenParams(**first["params"]))
    loaded = time.perf_counter() - start
    calls_before = getattr(engine, "chat_calls", 0)
    completions = []
    start = time.perf_counter()
    for step in steps:
        requests = [ChatRequest(messages=tuple(messages)) for messages in step["requests"]]
        completions += engine.generate(requests, GenParams(**step["params"]))
    wall = time.perf_counter() - start
    failed = [c.error for c in completions if not c.ok]
    cached = [c.extra.get("cached_prompt_tokens") for c in completions]
    prompt = sum(c.prompt_tokens or 0 for c in completions)
    return {
        "load_s": loaded,
        "wall_s": wall,
        "requests": len(completions),
        "failed": len(failed),
        "first_error": failed[0] if failed else None,
        "prompt_tokens": prompt,
        "output_tokens": sum(c.completion_tokens or 0 for c in completions),
        "generate_calls": len(steps),
        "chat_calls": getattr(engine, "chat_calls", calls_before) - calls_before or None,
        "prefix_hit_rate": sum(cached) / prompt if prompt and all(x is not None for x in cached) else None,
    }


def run_replay(
    python: Path, engine: str, model: Path, steps: Path, options: dict[str, Any], label: str | None = None
) -> dict[str, Any]:
    """`replay` in a subprocess of `python` (the venv that has the engine's dependencies)."""
    out = steps.with_name(f"replay-{label or engine}.json")
    out.unlink(missing_ok=True)
    command = [str(python), __file__, "replay", engine, str(model), str(steps), json.dumps(options), str(out)]
    result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not out.exists():
        raise RuntimeError(f"{engine} replay failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------- server


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    command += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--seed",
        "0",
    ]
    # vllm-cpu crashes on per-request seeds with chunked prefill (see perrec_eval/engines/vllm.py).
    command += ["--no-enable-chunked-prefill"]
    env = {**ENV, "VLLM_SERVER_DEV_MODE": "1"}  # for POST /reset_prefix_cache between runs
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the vLLM server exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the vLLM server did not come up")


def reset_prefix_cache(port: int) -> None:
    """Empty the server's prefix cache, so a run does not reuse what the run before it computed."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/reset_prefix_cache", method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def prefix_counters(port: int) -> tuple[float, float]:
    """(hits, queries) of the server's prefix cache, in tokens."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:{name}_total\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M))

    return total("prefix_cache_hits"), total("prefix_cache_queries")


# ------------------------------------------------------------------------------------------ driver


def build_data(folder: Path) -> Path:
    bench = folder / "perrecbench"
    if not (bench / "README.md").exists():
        cli = str(MAIN_PYTHON.with_name("perrecbench"))
        subprocess.run(
            [cli, "synth", "--out", str(folder / "raw"), "--reviews-per-domain", "60000"], check=True
        )
        subprocess.run(
            [
                cli,
                "build",
                "--source",
                str(folder / "raw"),
                "--out",
                str(bench),
                "--test-groups",
                "200",
                "--overwrite",
            ],
            check=True,
        )
    return bench


def shape(steps: list[dict[str, Any]]) -> dict[str, Any]:
    requests = [messages for step in steps for messages in step["requests"]]
    chars = [sum(len(m["content"]) for m in messages) for messages in requests]
    return {"requests": len(requests), "prompt_chars": sum(chars), "steps": len(steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="benchmark folder (default: synthesise and build one)")
    parser.add_argument("--groups", type=int, default=24, help="groups per level in the replayed slice")
    parser.add_argument("--max-tokens", type=int, default=32, help="answer budget for every engine")
    parser.add_argument("--engines", default="vllm,openai-1,openai-16,hf")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))  # for tests.tiny_model
    from tests.tiny_model import build_tiny_chat_model

    model = WORK / "model"
    if not (model / "config.json").exists():
        build_tiny_chat_model(model)
    data = args.data or build_data(WORK / "data")
    profiles = write_profiles(data, WORK / "profiles.jsonl")
    full = shape(record(data, profiles, None))
    steps = record(data, profiles, args.groups)
    for step in steps:
        step["params"]["max_tokens"] = min(step["params"]["max_tokens"], args.max_tokens)
    steps_path = WORK / "steps.jsonl"
    steps_path.write_text("".join(json.dumps(step) + "\n" for step in steps), encoding="utf-8")

    results: dict[str, dict[str, Any]] = {}
    wanted = args.engines.split(",")
    if "vllm" in wanted:
        options = {"dtype": "float32", "enforce_eager": True}
        results["vllm"] = run_replay(VLLM_PYTHON, "vllm", model, steps_path, options)
    servers = [name for name in wanted if name.startswith("openai-")]
    if servers:
        port = 8391
        server = start_server(model, port, WORK / "server.log")
        try:
            for name in servers:
                concurrency = int(name.split("-")[1])
                reset_prefix_cache(port)
                before = prefix_counters(port)
                options = {"base_url": f"http://127.0.0.1:{port}/v1", "concurrency": concurrency}
                results[name] = run_replay(MAIN_PYTHON, "openai", model, steps_path, options, name)
                after = prefix_counters(port)
                queries = after[1] - before[1]
                results[name]["prefix_hit_rate"] = (after[0] - before[0]) / queries if queries else None
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=60)
    if "hf" in wanted:
        results["hf"] = run_replay(MAIN_PYTHON, "hf", model, steps_path, {"device": "cpu"})

    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "full": full,
        "slice": shape(steps),
        "max_tokens": args.max_tokens,
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print_markdown(report)


def print_markdown(report: dict[str, Any]) -> None:
    results = report["results"]
    print(
        f"slice: {report['slice']['requests']} requests in {report['slice']['steps']} steps; "
        f"full benchmark: {report['full']['requests']} requests, "
        f"{report['full']['prompt_chars'] / report['full']['requests']:.0f} prompt characters per request\n"
    )
    print(
        "| engine | load s | wall s | requests/s | prompt tok/s | output tok/s | generate calls "
        "| LLM.chat calls | prefix-cache hits | failed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        hits = "–" if r["prefix_hit_rate"] is None else f"{r['prefix_hit_rate']:.0%}"
        print(
            f"| {name} | {r['load_s']:.1f} | {r['wall_s']:.1f} | {r['requests'] / r['wall_s']:.1f} "
            f"| {r['prompt_tokens'] / r['wall_s']:,.0f} | {r['output_tokens'] / r['wall_s']:,.0f} "
            f"| {r['generate_calls']} | {r['chat_calls'] or '–'} | {hits} | {r['failed']} |"
        )
    if "vllm" in results and "openai-1" in results:
        speedup = results["openai-1"]["wall_s"] / results["vllm"]["wall_s"]
        print(f"\noffline vLLM vs the server at concurrency 1: {speedup:.1f}x")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "replay":
        _, _, name, model_path, steps_file, options_json, out_file = sys.argv
        measured = replay(name, model_path, Path(steps_file), json.loads(options_json))
        Path(out_file).write_text(json.dumps(measured), encoding="utf-8")
    else:
        main()
