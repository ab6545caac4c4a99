"""Fine-tuning cost: examples and lengths per format, CPU training throughput, and the paper-scale run.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sft_bench.py [--data DIR] [--steps 12]``
(under a minute on 2 cores; DIR defaults to ``demo_out/perrecbench``). Prints Markdown for
``benchmarks/RESULTS.md`` (``## Fine-tuning``).

1. **Examples.** ``perrecbench sft data`` on the build (default ``demo_out/perrecbench``, written by ``make
   demo``) for every format, without profiles and with a stand-in profile of `PROFILE_CHARS` characters per
   user (the length of the paper's Table 10 example profile), so the length of the paper's prompts can be
   measured without an LLM. Lengths are characters; tokens of the tiny test tokenizer are shown too, but
   its 1,024-word BPE vocabulary (trained on 400 lines) splits text far more finely than a real model's.
2. **Training throughput.** ``python -m sft.train`` (the same code as ``perrecbench sft train``) on the
   pairwise examples with the tiny random chat model of the tests (``tests/tiny_model.py``, ~230K
   parameters), `--steps` optimizer steps of 8 examples (4 per device × 2 accumulation), fp32 on CPU, with
   and without activation checkpointing. Each run is its own process: wall time includes imports and loading,
   peak memory is that process's maximum resident set (``os.wait4``). Steps/s, examples/s and the loss come
   from the trainer (``sft_train.json``); tokens/s = the trainer's ``num_tokens`` (prompt + answer tokens
   seen) / its runtime.
3. **Paper scale.** The held-out split of the paper (466 groups, Table 4) with this build's examples per
   group, the measured characters per example with profiles at `CHARS_PER_TOKEN` characters per token, an
   8B model, 2 epochs, and ≈ 6·N FLOPs per token for LoRA with activation checkpointing (forward 2N, backward
   through the frozen weights 2N, recomputed forward 2N; the LoRA weight gradients are negligible), on an
   RTX A6000 (154.8 TFLOPS dense BF16): GPU-hours at an assumed model-FLOPs utilization, and the utilization
   implied by the paper's reported hours.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perrec_eval.tasks.perrecbench import context  # noqa: E402
from sft.perrecbench.config import DataConfig  # noqa: E402
from sft.perrecbench.data import build  # noqa: E402
from tests.tiny_model import build_tiny_chat_model  # noqa: E402

WORK = ROOT / "benchmarks" / "_work" / "sft_bench"
FORMATS = ("pointwise", "pairwise", "listwise", "mixed")
PROFILE_CHARS = 1_100  # the paper's Table 10 example profile: ~170 words
CHARS_PER_TOKEN = 4.0  # English BPE (Llama 3, Qwen 2.5) on this text: ~4 characters per token (±20%)
PAPER_GROUPS = 466
PARAMS_8B = 8.03e9
A6000_BF16 = 154.8e12
PAPER_HOURS = {"pointwise": 9, "pairwise": 4, "listwise": 12, "mixed": 25}  # §B: "9, 4, 12 and 25 hours"


def write_profiles(data: Path, path: Path) -> None:
    """A stand-in profile of PROFILE_CHARS characters for every train user of every level."""
    text = ("Enjoys practical, well-made things and reads reviews before buying. " * 20)[:PROFILE_CHARS]
    with path.open("w", encoding="utf-8") as f:
        for level in ("easy", "medium", "hard"):
            for group in context.load_groups(str(data), level, "train"):
                for user in group.users:
                    f.write(
                        json.dumps({"group_id": group.group_id, "user_id": user.user_id, "profile": text})
                        + "\n"
                    )


def examples(data: Path, tiny: Path) -> dict[str, dict[str, Any]]:
    """Per format: sft_data.json without profiles (in tiny tokens and in characters) and with profiles."""
    profiles = WORK / "profiles.jsonl"
    write_profiles(data, profiles)
    facts = {}
    for fmt in FORMATS:
        plain = build(
            DataConfig(
                data=str(data),
                format=fmt,
                out=str(WORK / "data" / fmt),
                no_profile=True,
                tokenizer=str(tiny),
            )
        )[1]
        with_profile = build(
            DataConfig(
                data=str(data),
                format=fmt,
                out=str(WORK / "data_profiles" / fmt),
                profiles=str(profiles),
            )
        )[1]
        chars = build(
            DataConfig(
                data=str(data),
                format=fmt,
                out=str(WORK / "data_chars" / fmt),
                no_profile=True,
            )
        )[1]
        facts[fmt] = {"plain": plain, "profiles": with_profile, "chars": chars}
    return facts


def train_run(tiny: Path, data: Path, out: Path, steps: int, checkpointing: bool) -> dict[str, Any]:
    """One `python -m sft.train` process: its record, wall time and peak RSS."""
    argv = [
        sys.executable,
        "-m",
        "sft.train",
        "--model_name_or_path",
        str(tiny),
        "--data",
        str(data),
        "--output_dir",
        str(out),
        "--max_steps",
        str(steps),
        "--gradient_accumulation_steps",
        "2",
        "--per_device_train_batch_size",
        "4",
        "--learning_rate",
        "1e-3",
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--activation_checkpointing",
        str(checkpointing).lower(),
    ]
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"training failed: {child.stderr.read()[-2000:]}")
    record = json.loads((out / "sft_train.json").read_text())
    logs = [entry for entry in record["log_history"] if "loss" in entry]
    metrics = record["metrics"]
    return {
        "checkpointing": checkpointing,
        "wall": wall,
        "runtime": metrics["train_runtime"],
        "steps_per_s": metrics["train_steps_per_second"],
        "samples_per_s": metrics["train_samples_per_second"],
        "tokens_per_s": logs[-1]["num_tokens"] / metrics["train_runtime"],
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "loss": (logs[0]["loss"], logs[-1]["loss"]),
        "steps": record["steps"],
    }


def paper_scale(facts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Examples, tokens, FLOPs and A6000 hours of the paper's held-out split for an 8B model."""
    rows = []
    for fmt in FORMATS:
        info = facts[fmt]["profiles"]
        per_group = info["examples"] / info["groups"]
        tokens_per_example = mean_length(info) / CHARS_PER_TOKEN
        examples_paper = per_group * PAPER_GROUPS
        tokens = examples_paper * tokens_per_example * 2  # 2 epochs
        flops = 6 * PARAMS_8B * tokens
        rows.append(
            {
                "format": fmt,
                "per_group": per_group,
                "examples": examples_paper,
                "tokens_per_example": tokens_per_example,
                "tokens": tokens,
                "flops": flops,
                "hours_35": flops / (A6000_BF16 * 0.35) / 3600,
                "hours_10": flops / (A6000_BF16 * 0.10) / 3600,
                "paper_hours": PAPER_HOURS[fmt],
                "implied_mfu": flops / (PAPER_HOURS[fmt] * 3600 * A6000_BF16),
            }
        )
    return rows


def mean_length(info: dict[str, Any]) -> float:
    """Mean length over all examples of an sft_data.json (its lengths are per format)."""
    total = sum(s["mean"] * info["examples_per_format"][f] for f, s in info["lengths"].items())
    return total / info["examples"]


def report(
    data: Path, facts: dict[str, dict[str, Any]], runs: list[dict[str, Any]], scale: list[dict]
) -> str:
    lines = [
        f"Examples from `{data}` (train split: {facts['mixed']['plain']['groups']} groups; levels easy, "
        "medium, hard; k = 4):",
        "",
        "| format | examples | per train group | mean chars, no profile | mean tiny-tokenizer tokens, no "
        f"profile | mean chars, {PROFILE_CHARS}-char profiles | longest, with profiles |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt in FORMATS:
        plain, prof, chars = (facts[fmt][k] for k in ("plain", "profiles", "chars"))
        n = plain["examples"]
        longest = max(s["max"] for s in prof["lengths"].values())
        lines.append(
            f"| {fmt} | {n:,} | {n / plain['groups']:.1f} | {mean_length(chars):,.0f} "
            f"| {mean_length(plain):,.0f} | {mean_length(prof):,.0f} | {longest:,} |"
        )
    lines += [
        "",
        "CPU training, tiny model (pairwise examples, batch 8 = 4 × 2 accumulation, fp32):",
        "",
        "| activation checkpointing | steps | wall s (process) | train s | steps/s | examples/s | tokens/s "
        "| peak RSS MB | loss first → last |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        lines.append(
            f"| {'on' if run['checkpointing'] else 'off'} | {run['steps']} | {run['wall']:.1f} "
            f"| {run['runtime']:.1f} "
            f"| {run['steps_per_s']:.2f} | {run['samples_per_s']:.1f} | {run['tokens_per_s']:,.0f} "
            f"| {run['peak_rss_mb']:,.0f} | {run['loss'][0]:.2f} → {run['loss'][1]:.2f} |"
        )
    lines += [
        "",
        f"Paper scale: {PAPER_GROUPS} held-out groups, an 8B model, 2 epochs, profiles, {CHARS_PER_TOKEN:g} "
        "chars per token, 6·N FLOPs per token, RTX A6000 at 154.8 TFLOPS:",
        "",
        "| format | examples per group | examples | tokens per example | tokens (2 epochs) | PFLOPs "
        "| A6000 h at 35% MFU | at 10% MFU | paper's hours | implied MFU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in scale:
        lines.append(
            f"| {row['format']} | {row['per_group']:.1f} | {row['examples']:,.0f} "
            f"| {row['tokens_per_example']:,.0f} "
            f"| {row['tokens'] / 1e6:.1f} M | {row['flops'] / 1e15:,.0f} | {row['hours_35']:.1f} | "
            f"{row['hours_10']:.1f} | {row['paper_hours']} | {row['implied_mfu']:.1%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "demo_out" / "perrecbench"), help="a built benchmark")
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps per training run")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    data = Path(args.data)
    if not (data / "README.md").is_file():
        sys.exit(f"{data} is not a built benchmark: run `make demo` (or pass --data DIR)")
    WORK.mkdir(parents=True, exist_ok=True)
    tiny = build_tiny_chat_model(WORK / "tiny-chat")
    facts = examples(data, tiny)
    runs = [
        train_run(tiny, WORK / "data" / "pairwise", WORK / f"adapter-{flag}", args.steps, flag)
        for flag in (True, False)
    ]
    print(report(data, facts, runs, paper_scale(facts)))


if __name__ == "__main__":
    main()
