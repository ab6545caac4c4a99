"""Where the hf engine's memory goes with ``--structured-outputs``: one outlines-core index per answer format.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/structured_bench.py [--model FILE.gguf]`` (about 2
minutes; the model is `make demo-llm`'s SmolLM2-135M-Instruct GGUF, fetched into ``benchmarks/_work/`` when
``--model`` is not given).

The hf engine masks each answer with an outlines-core ``Index`` built over the model's whole vocabulary from
the answer format's regular expression: for every state of the regex's automaton it stores every token that
keeps the answer in the format, and where that token leads. A state inside a JSON string accepts almost
every token, so the index grows with (states inside strings) x (vocabulary). Each regex below is indexed
in a child process of its own (the tokenizer loaded, the vocabulary built as the engine builds it), which
reports the index's states, its transitions, its build time and the growth of the process's peak resident
memory; a child whose address space would pass ``--cap-gb`` more than it held before the index is stopped
(the machine is shared), and that is reported as a lower bound.

Rows: every answer format of the three families as they are now, and the formats as they were before this
benchmark was written (LLMRec's title list and text line with bounded repetitions, ``{1,300}``), at smaller
bounds too, to show how the cost grows with the bound.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / "_work" / "structured_bench"

_TITLE = r'"(?:[^"\\\n]|\\.){1,%d}"'
_OLD_LIST = r"\[ ?{t}(, ?{t}){{0,9}} ?\]"


def old_list(bound: int) -> str:
    """LLMRec's title-list regex as it was, with titles of at most `bound` characters."""
    return _OLD_LIST.format(t=_TITLE % bound)


def formats() -> dict[str, str]:
    """Every answer format's regex, by family and format, as the engines receive them now."""
    from perrec_eval import registry

    out = {}
    for name in registry.names():
        task = registry.get(name)
        seen: set[str] = set()
        for protocol in task.protocols:
            for spec in (protocol, f"{protocol}:5"):  # PerRecBench's listwise format names its user count
                try:
                    regex = task.answer_regex(spec)
                except (KeyError, ValueError, TypeError):
                    continue
                if regex not in seen:
                    seen.add(regex)
                    out[f"{name}: {spec}"] = regex
                break
    return out


def _rss_kb(field: str) -> int:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(field)


def child(model: str, regex: str, cap_gb: float) -> None:
    """Index one regex over the model's vocabulary and print the measurements as JSON."""
    import transformers
    from outlines.backends.outlines_core import OutlinesCoreBackend
    from outlines.models.transformers import TransformerTokenizer
    from outlines_core import Index

    path = Path(model)
    tokenizer = TransformerTokenizer(
        transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    )
    vocabulary = OutlinesCoreBackend.create_outlines_core_vocabulary(
        tokenizer.get_vocab(), tokenizer.eos_token_id, tokenizer.eos_token, tokenizer.convert_token_to_string
    )
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")  # the peak (VmHWM) starts again here: the tokenizer's loading peak is not counted
    before = _rss_kb("VmRSS")
    limit = _rss_kb("VmSize") * 1024 + int(cap_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    started = time.perf_counter()
    try:
        index = Index(regex, vocabulary)
    except MemoryError:
        print(json.dumps({"stopped": True, "seconds": time.perf_counter() - started}))
        return
    seconds = time.perf_counter() - started
    transitions = index.get_transitions()
    print(json.dumps({
        "stopped": False,
        "seconds": seconds,
        "states": len(transitions),
        "transitions": sum(len(moves) for moves in transitions.values()),
        "index_mb": (_rss_kb("VmHWM") - before) / 1024,
        "vocabulary": len(vocabulary),
    }))  # fmt: skip


def measure(model: str, regex: str, cap_gb: float) -> dict:
    command = [sys.executable, __file__, "--child", "--model", model, "--regex", regex]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*command, "--cap-gb", str(cap_gb)], capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:  # killed on the cap (Rust aborts when an allocation fails)
        return {"stopped": True, "seconds": None}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="the SmolLM2 GGUF file (default: fetched)")
    parser.add_argument("--cap-gb", type=float, default=6.0, help="stop an index that needs more than this")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--regex", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    if args.child:
        child(args.model, args.regex, args.cap_gb)
        return
    if args.model is None:
        from perrec_eval.demo_model import fetch_smollm2

        args.model = str(fetch_smollm2(WORK))
    rows = {**formats()}
    rows |= {f"before: llmrec title list, titles {{1,{b}}}": old_list(b) for b in (25, 50, 100, 300)}
    rows |= {"before: llmrec text line [^\\n]{1,300}": r"[^\n]{1,300}"}
    machine = platform.processor() or platform.machine()
    print(f"{machine}, {os.cpu_count()} cores, cap {args.cap_gb} GB per index")
    print("| format | states | transitions | build | index memory |")
    print("|---|---:|---:|---:|---:|")
    results = {}
    for name, regex in rows.items():
        found = measure(args.model, regex, args.cap_gb)
        results[name] = found
        if found["stopped"]:
            print(f"| {name} | – | – | – | > {args.cap_gb:.0f} GB (stopped) |", flush=True)
            continue
        print(
            f"| {name} | {found['states']:,} | {found['transitions']:,} | {found['seconds']:.1f} s | "
            f"{found['index_mb']:,.0f} MB |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
