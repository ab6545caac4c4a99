"""What evaluating an 8B model on LLMRec (per task) and RecBench+ (per query type) costs with vLLM on one
H100: prompt and answer tokens counted on a demo-size build, times the per-token rates RESULTS.md uses
(`large_preset_estimate`: ``PREFILL_PER_S``, ``DECODE_PER_S``).

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/family_cost_estimate.py [--reviews 60000] [--write]``

Method (every assumption stated; no GPU, no model download):

- Data: ``perrecbench synth --domains Books --reviews-per-domain N`` (the demo's size), then ``build --task
  llmrec --kcore 5`` (the paper's 5-core) and ``build --task recbench-plus --users 200``, in a temporary
  folder deleted afterwards. Up to ``--docs`` test docs per cell are rendered with the families'
  own protocols (``render``: the real prompts, chat messages).
- Tokens: the real tokenizer of an 8B model is not available offline, so a token is counted as 4
  characters of the messages' text (a common rule for English with Llama-3-class BPE tokenizers; product
  titles with codes and numbers run denser, so it errs low) plus 4 tokens per message (chat template).
- Answers: ``budget`` is the protocol's ``max_tokens`` (what a run reserves and a rambling model may
  spend); ``answer`` is the length of the true answer written as the protocol asks (``format_answer``): what a
  model that follows the format spends.
- Prefix cache: the share of each prompt that the cell's prompts share from their start (the template's
  instructions up to the first user-specific character), measured on the rendered prompts, is served from
  vLLM's prefix cache; the rest is prefilled.
- Seconds per 1,000 requests = 1,000 × (prompt × (1 − cached) / PREFILL_PER_S + answer / DECODE_PER_S), the
  aggregate throughputs of a batched 8B run on one H100 (RESULTS.md "Large preset"); ``at budget`` uses the
  budget in place of the answer. A ranking task's answer is its list of 10 titles: 10 times the true
  (one-title) answer.

``--write`` replaces the ``## Family evaluation cost`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from large_preset_estimate import DECODE_PER_S, PREFILL_PER_S  # noqa: E402
from metric_bench import write_section  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Family evaluation cost"
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # tokens a chat template adds per message
# LLMRec's paper data (P5's Amazon Beauty 2014 5-core, as P5 released it): its users are its test rows.
BEAUTY_2014_USERS = 22_363


def tokens(text: str) -> int:
    """The stated approximation: 4 characters a token (rounded up).

    >>> tokens(""), tokens("abcd"), tokens("abcde")
    (0, 1, 2)
    """
    return -(-len(text) // CHARS_PER_TOKEN)


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    return sum(tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages)


def shared_prefix(texts: list[str]) -> int:
    """Characters every text starts with.

    >>> shared_prefix(["abcx", "abdy"]), shared_prefix(["same", "same"])
    (2, 4)
    """
    return len(os.path.commonprefix(texts))


def cell(protocol, docs, answers_per_truth: int = 1) -> dict[str, float]:
    """Mean prompt tokens, cached share, mean answer tokens (the true answer's, times `answers_per_truth`)
    and the budget of one cell's docs."""
    rendered, answers = [], []
    for doc in docs:
        (slot,) = protocol.runner(doc).pending()
        rendered.append(protocol.render(doc, slot))
        answers.append(tokens(protocol.format_answer(protocol.true_answer(doc, slot), slot)))
    flat = ["\n".join(m["content"] for m in messages) for messages in rendered]
    prompt = statistics.fmean(prompt_tokens(m) for m in rendered)
    cached = min(1.0, tokens(flat[0][: shared_prefix(flat)]) / prompt) if len(flat) > 1 else 0.0
    return {
        "docs": len(docs),
        "prompt": prompt,
        "cached": cached,
        "answer": statistics.fmean(answers) * answers_per_truth,
        "budget": protocol.max_tokens,
    }


def seconds_per_1000(row: dict[str, float], answer: float) -> float:
    return 1000 * (row["prompt"] * (1 - row["cached"]) / PREFILL_PER_S + answer / DECODE_PER_S)


def measure(work: Path, reviews: int, max_docs: int) -> dict[str, dict[str, dict[str, float]]]:
    from dataset_builder.recbench_plus.queries import TYPES
    from perrec_eval import registry
    from perrec_eval.tasks.llmrec.task import LIST_LENGTH, RANKING

    run = [sys.executable, "-m", "perrec_eval.cli"]
    raw = work / "raw"
    steps = [
        ["synth", "--out", str(raw), "--domains", "Books", "--reviews-per-domain", str(reviews)],
        ["build", "--task", "llmrec", "--source", str(raw), "--out", str(work / "llmrec"), "--kcore", "5",
         "--domains", "Books"],
        ["build", "--task", "recbench-plus", "--source", str(raw), "--out", str(work / "rbp"),
         "--users", "200", "--train-users", "0", "--domains", "Books"],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run([*run, *step, "--no-progress"], capture_output=True, text=True, cwd=REPO)
        if done.returncode:
            raise SystemExit(f"{' '.join(step[:3])} failed: {done.stderr.strip()[-500:]}")
    out: dict[str, dict[str, dict[str, float]]] = {"llmrec": {}, "recbench-plus": {}}
    llmrec = registry.get("llmrec")
    for subset in llmrec.subsets:
        docs = llmrec.load_docs(str(work / "llmrec"), subset, "test", max_docs=max_docs, seed=0)
        if docs:
            # a ranking's truth is one title; the prompt asks for LIST_LENGTH of them
            times = LIST_LENGTH if subset in RANKING else 1
            out["llmrec"][subset] = cell(llmrec.protocols[subset], docs, times)
    recbench = registry.get("recbench-plus")
    for subset in TYPES:  # per query type (the condition-count groups are the same queries again)
        docs = recbench.load_docs(str(work / "rbp"), subset, "test", max_docs=max_docs, seed=0)
        if docs:
            out["recbench-plus"][subset] = cell(recbench.protocols["recommend"], docs)
    return out


def table(found: dict[str, dict[str, dict[str, float]]], reviews: int) -> str:
    lines = [
        "`benchmarks/family_cost_estimate.py` (an estimate, no GPU): tokens counted on a demo-size build "
        f"(Books, {reviews:,} synthetic reviews; LLMRec 5-core) with the stated rule of "
        f"{CHARS_PER_TOKEN} characters a token + {MESSAGE_OVERHEAD} per message (the real tokenizer is not "
        'available offline), times the 8B-on-one-H100 vLLM rates of "Large preset" (prefill '
        f"{PREFILL_PER_S:,}/s, decode {DECODE_PER_S:,}/s; `large_preset_estimate`). Cached = the share of a "
        "prompt all the cell's prompts start with (served by the prefix cache). Minutes per 1,000 requests: "
        "with answers as long as the true answer, and with every answer at the budget (`max_tokens`).",
        "",
        "| family | task / query type | docs | prompt tok | cached | answer tok | budget | min / 1k "
        "(answer) | min / 1k (budget) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for family, cells in found.items():
        for name, row in cells.items():
            lines.append(
                f"| {family} | {name} | {row['docs']} | {row['prompt']:,.0f} | {row['cached']:.0%} | "
                f"{row['answer']:.0f} | {row['budget']} | {seconds_per_1000(row, row['answer']) / 60:.2f} | "
                f"{seconds_per_1000(row, row['budget']) / 60:.2f} |"
            )
    llm = found["llmrec"]
    per_user = sum(seconds_per_1000(r, r["answer"]) for r in llm.values()) / 1000
    per_user_budget = sum(seconds_per_1000(r, r["budget"]) for r in llm.values()) / 1000
    lines += [
        "",
        f"LLMRec asks each test user once per task ({len(llm)} tasks): {per_user * 1000 / 60:.1f} min per "
        f"1,000 test users ({per_user_budget * 1000 / 60:.1f} at the budgets). All_Beauty 2023's user count "
        "after the 5-core is not known here (no real data offline); at the size of LLMRec's own data (P5's "
        f"Beauty 2014 5-core, {BEAUTY_2014_USERS:,} users) a full test pass is "
        f"{per_user * BEAUTY_2014_USERS / 60:.0f} min ({per_user_budget * BEAUTY_2014_USERS / 60:.0f} at the "
        "budgets). RecBench+ is one request per query: the table's minutes per 1,000 queries.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=60_000, help="synthetic Books reviews (the demo's)")
    parser.add_argument("--docs", type=int, default=500, help="test docs rendered per cell, at most")
    parser.add_argument("--write", action="store_true", help=f"replace '{SECTION}' in RESULTS.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="family_cost_estimate-"))
    try:
        body = table(measure(work, args.reviews, args.docs), args.reviews)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(body)
    if args.write:
        write_section(body, SECTION)


if __name__ == "__main__":
    main()
