"""What answer budgets real answers need: token lengths of every released RecBench+ answer, and of a real
small model's free answers, so that each task's default budget leaves room for how instruct models answer.

- **Released answers**: every answer of the seven models in a checkout of `jiani-huang/RecAssistBench`
  (`read_rate.answer_files`: free-length and fixed-K files), preambles, notes and refusals included, counted
  with SmolLM2-135M-Instruct's tokenizer (read from its GGUF file: ``python -m perrec_eval.demo_model DIR``);
  quantiles per model.
- **A real small model**: run folders of `perrecbench evaluate` with a generous ``--max-new-tokens`` (for
  example SmolLM2-135M free-form on a few docs of each cell); per cell the answers' lengths, how many hit the
  budget, and for ratings the tokens an answer needs before it reads as it does in full (the budget below
  which the cap, not the model, decides).

Run from the repository root: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/answer_budgets.py --gguf
DIR/SmolLM2-135M-Instruct.Q4_1.gguf --released PATH/RecAssistBench --runs RUN ...``; ``--write`` replaces the
``## Answer budgets`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
from metric_bench import write_section  # benchmarks/ is the script's folder, so on sys.path
from read_rate import answer_files

from perrec_eval.tasks.llmrec.parsing import parse_rating
from perrec_eval.tasks.recbench_plus import released

logger = logging.getLogger("answer_budgets")
SECTION = "## Answer budgets"


def tokenizer(gguf: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def released_lengths(root: Path, tok) -> dict[tuple[str, str], list[int]]:
    """(model, "free-length" or "fixed K") → the token length of each released answer."""
    out: dict[tuple[str, str], list[int]] = {}
    for model, path in answer_files(root):
        texts = [text or "" for _, text in released.response_lines(str(path))]
        kind = "fixed K" if path.parent.name.endswith("-k") else "free-length"
        for start in range(0, len(texts), 2_000):
            ids = tok(texts[start : start + 2_000], add_special_tokens=False)["input_ids"]
            out.setdefault((model, kind), []).extend(len(i) for i in ids)
    return out


def needed(text: str, tok) -> int | None:
    """Tokens a rating answer needs before it reads as it does in full (None: it does not read)."""
    full = parse_rating(text)
    if not full.ok:
        return None
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return next(n for n in range(1, len(ids) + 1) if parse_rating(tok.decode(ids[:n])).value == full.value)


def run_rows(run: Path, tok) -> list[str]:
    cells: dict[str, list[dict]] = {}
    for line in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        cells.setdefault(f"{sample['subset']}/{sample['protocol']}", []).append(sample)
    budgets = json.loads((run / "run.json").read_text(encoding="utf-8"))["generation"]["max_new_tokens"]
    rows = []
    for cell, samples in cells.items():
        tokens = [sample["completion_tokens"] for sample in samples]
        cut = sum("length" in sample["finish_reasons"] for sample in samples)
        reads = sum(sample["ok"] for sample in samples)
        need = ""
        if cell.endswith("/rating"):
            found = [n for n in (needed(s["texts"][0], tok) for s in samples) if n is not None]
            need = ", ".join(map(str, sorted(found))) or "–"
        rows.append(
            f"| {run.name} | {cell} | {len(samples)} | {budgets[cell.split('/')[1]]} | {min(tokens)}–"
            f"{max(tokens)} | {cut} | {reads} | {need} |"
        )
    return rows


def markdown(lengths: dict[tuple[str, str], list[int]], runs: list[str]) -> str:
    lines = [
        "`benchmarks/answer_budgets.py` (SmolLM2-135M-Instruct's tokenizer). Every released RecBench+ answer "
        "of the seven models (the answer files present; preambles, notes and refusals included), in tokens:",
        "",
        "| model | answers | kind | median | p95 | p99 | p99.9 | max |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for kind in ("free-length", "fixed K"):
        every = [n for (_, k), values in lengths.items() if k == kind for n in values]
        for model, values in [("all", every), *((m, v) for (m, k), v in lengths.items() if k == kind)]:
            q = np.percentile(values, [50, 95, 99, 99.9])
            lines.append(
                f"| {model} | {len(values):,} | {kind} | {q[0]:.0f} | {q[1]:.0f} | {q[2]:.0f} | {q[3]:.0f} | "
                f"{max(values)} |"
            )
    if runs:
        lines += [
            "",
            "A real small model's free answers (no structured outputs) under generous budgets: per cell the "
            "answers, the budget, their length in tokens, how many hit it, how many read (when the run was "
            "made), and for ratings "
            "the tokens each answer needed before it read as it does in full:",
            "",
            "| run | cell | answers | budget | tokens | at budget | read | rating read after |",
            "|---|---|---:|---:|---|---:|---:|---|",
            *runs,
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True, type=Path, help="SmolLM2-135M-Instruct's GGUF file")
    parser.add_argument(
        "--released", required=True, type=Path, help="a checkout of jiani-huang/RecAssistBench"
    )
    parser.add_argument("--runs", nargs="*", type=Path, default=[], help="run folders of free answers")
    parser.add_argument("--write", action="store_true", help=f"replace '{SECTION}' in RESULTS.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    tok = tokenizer(args.gguf)
    rows = [row for run in args.runs for row in run_rows(run, tok)]
    body = markdown(released_lengths(args.released, tok), rows)
    print(body)
    if args.write:
        write_section(body, SECTION)
        logger.info("wrote %s to benchmarks/RESULTS.md", SECTION)


if __name__ == "__main__":
    main()
