"""How well RecBench+'s answer reader reads real answers: every released answer of the seven models.

Reads every answer file of a checkout of `jiani-huang/RecAssistBench` (``llm_results/<model>[-k]/``: the
``*prediction.json[l]`` files and the OpenAI batch ``*_output.jsonl`` files; the batch *input* files hold
prompts, not answers, and ``grpo-predictions_output.jsonl`` is not one of the seven models), each line one
answer (an id answered twice is two answers here), through `recbench_plus.parsing.split_answer`, and counts
per model:

- how each answer is read: **items** (a list of titles), **refusal** (no items: it declines) or **failed**;
- the misread patterns the detectors below find (each checked by hand on samples, ``--samples``):

  - **P1a**, a refusal read as one title: one entry, and the answer apologises, denies or says nothing fits
    (`DECLINES`);
  - **P1b**, prose read as an entry: an entry that reads as a sentence (`is_prose_entry`), in an answer that
    is not P1a;
  - **P2**, the prompt's answer header read as an entry ("Recommended books (separated by", "): Title");
  - **P3**, a title dropped at a list's edge: the first piece's last line or the last piece's first line of a
    ``[SEP]`` list looks like a title (`is_title_line`) and no entry holds it;

- entries still carrying a stray quote (an odd number of ``"``), and entries written "Title by Author".

**Read right** = the share of answers in none of P1a, P1b, P2, P3. The detectors are deliberately simple and
independent of the reader's own rules, so that they can check it.

Run from the repository root: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/read_rate.py --released
PATH/RecAssistBench``; ``--samples 25`` prints 25 random hits of each pattern to check the detectors by hand;
``--write`` replaces the ``## Reading every released RecBench+ answer`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from metric_bench import write_section  # benchmarks/ is the script's folder, so on sys.path

from perrec_eval.tasks.recbench_plus import released
from perrec_eval.tasks.recbench_plus.parsing import split_answer

logger = logging.getLogger("read_rate")

SECTION = "## Reading every released RecBench+ answer"
MODELS = {
    "gpt-4o": "GPT-4o",
    "gpt-4o-mini": "GPT-4o-mini",
    "gemini-1.5-pro": "Gemini-1.5-Pro",
    "claude-3-5-sonnet-20241022": "Claude-3.5-Sonnet",
    "llama-3.1-70b-instruct": "Llama-3.1-70B",
    "DeepSeek-V3": "DeepSeek-V3",
    "DeepSeek-R1": "DeepSeek-R1",
}
ANSWER_FILES = ("prediction.json", "prediction.jsonl", "_output.jsonl")
PATTERNS = ("P1a", "P1b", "P2", "P3")
_APOSTROPHES = str.maketrans("’‘`´", "''''")
DECLINES = re.compile(
    r"\b(?:sorry|apologi[sz]e|apologies|unfortunately|i'm afraid|not aware of|misunderstanding|mix-up|"
    r"mistake|confusion|can ?not|can't|couldn't|could not|unable to|don't|do not|did not|didn't|does not|"
    r"doesn't|has not|hasn't|have not|haven't|is not|isn't|was not|wasn't|are not|aren't|were not|"
    r"no (?:other|additional|more|further|such|known|specific|books?|movies?|films?|titles?|recommendations?|"
    r"results?|matches)\b|"
    r"there (?:are|is|were|was) (?:currently )?no|none of)\b",
    re.IGNORECASE,
)
_PROSE_START = re.compile(
    r"^(?:sorry|however|unfortunately|note:|please|based on|it seems|here (?:are|is) (?:some|a|the|my|more)|"
    r"if you(?:'re| are| enjoy| like| want)|i (?:hope|recommend|suggest|can|cannot|can't|couldn't|don't|"
    r"do not|would|'d|'m|am|think|found)\b|you (?:might|may|could|can|will|would) (?:also )?"
    r"(?:enjoy|like|want|consider|find)|"
    r"these (?:are|books|movies|films|titles|authors|recommendations|works|novels)\b)",
    re.IGNORECASE,
)
_SENTENCE_BREAK = re.compile(r"\b[^\W\d_]{3,}[.!?]\s+[A-Z]")
_ECHO = re.compile(r"separated by|\brecommended (?:movies|books)\b|^\W*\)?\s*:|^query\s*:", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_ASIDE = re.compile(r'"[^"]*"|\([^()]*\)')  # quoted titles and bracketed notes are not the sentence
_SMALL = frozenset(
    "a an the of and or to in on at by for with from as is are was be it its into over under about".split()
)


def _lower_share(words: list[str]) -> float:
    content = [w for w in words[1:] if w.casefold() not in _SMALL and len(w) > 2]
    return sum(w[0].islower() for w in content) / len(content) if len(content) >= 3 else 0.0


def is_prose_entry(entry: str) -> bool:
    """Whether an entry reads as a sentence, not a title: 6 words or more of which half the content words are
    in lower case (titles capitalise theirs), or that open like chat, or two sentences in 10 words or more
    (quoted titles and bracketed notes left out)."""
    text = _ASIDE.sub(" ", entry.translate(_APOSTROPHES)).strip(" *\"'")
    words = _WORD.findall(text)
    if len(words) < 6:
        return False
    lower = _lower_share(words)
    if lower >= 0.5:
        return True
    if _PROSE_START.match(text) and lower >= 0.3:
        return True
    return len(words) >= 10 and bool(_SENTENCE_BREAK.search(text)) and lower >= 0.3


def is_title_line(line: str) -> bool:
    """Whether a line at a list's edge looks like one title: up to 12 words, not prose, not a refusal, not
    the prompt's header, not a lead-in ending in a colon, not a note in brackets, not a short sentence (an
    exclamation or statement in lower case: "Enjoy your movie night!", "All are written by X.")."""
    text = line.strip().strip("*-•\"' ")
    words = _WORD.findall(text)
    sentence = text.endswith((".", "!")) and len(words) >= 4 and (_lower_share(words) >= 0.5 or any(
        w in ("is", "are", "was", "were") for w in words))  # fmt: skip
    return (
        bool(text)
        and len(text.split()) <= 12
        and not text.endswith(":")
        and not text.startswith("(")
        and not sentence
        and not is_prose_entry(text)
        and not DECLINES.search(text.translate(_APOSTROPHES))
        and not _ECHO.search(text)
    )


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def patterns(text: str, entries: list[str] | None) -> list[str]:
    """The misread patterns of one answer, as the module docstring defines them."""
    found = []
    answer = (text or "").translate(_APOSTROPHES)
    listed = entries or []
    p1a = len(listed) == 1 and len(listed[0].split()) >= 4 and bool(DECLINES.search(answer))
    if p1a:
        found.append("P1a")
    if not p1a and any(is_prose_entry(entry) for entry in listed):
        found.append("P1b")
    if any(_ECHO.search(entry) for entry in listed):
        found.append("P2")
    if "[SEP]" in answer and "</think>" not in answer:
        pieces = answer.split("[SEP]")
        first = [line for line in pieces[0].splitlines() if line.strip()]
        last = [line for line in pieces[-1].splitlines() if line.strip()]
        edges = [first[-1] if first else "", last[0] if last else ""]
        held = [_norm(entry) for entry in listed]
        for edge in edges:
            key = _norm(edge)
            if is_title_line(edge) and key and not any(key in h or (h and h in key) for h in held):
                found.append("P3")
                break
    return found


def answer_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(model, path) of every answer file of the seven models."""
    for path in sorted((root / "llm_results").rglob("*")):
        model = MODELS.get(path.parent.name.removesuffix("-k"))
        if model is not None and path.is_file() and path.name.endswith(ANSWER_FILES):
            yield model, path


def answers(root: Path) -> Iterator[tuple[str, str, str | None]]:
    """(model, file, answer) for every answer line of the seven models' files."""
    for model, path in answer_files(root):
        for _, text in released.response_lines(str(path)):
            yield model, str(path.relative_to(root)), text


def measure(root: Path) -> tuple[dict[str, Counter], dict[str, list[tuple[str, str, list[str] | None]]]]:
    """Per model: the counts of each reading and pattern; per pattern, its hits (file, answer, entries)."""
    counts: dict[str, Counter] = {model: Counter() for model in MODELS.values()}
    hits: dict[str, list[tuple[str, str, list[str] | None]]] = {name: [] for name in PATTERNS}
    for model, file, text in answers(root):
        parsed = split_answer(text)
        entries = parsed.value if parsed.ok else None
        count = counts[model]
        count["answers"] += 1
        count["failed" if not parsed.ok else "refusal" if not entries else "items"] += 1
        found = patterns(text or "", entries)
        for name in found:
            count[name] += 1
            hits[name].append((file, text or "", entries))
        count["misread"] += bool(found)
        count["stray quote"] += any(entry.count('"') % 2 for entry in entries or ())
        count["by author"] += any(re.search(r"\sby\s+[A-Z]", entry) for entry in entries or ())
    return counts, hits


def table(counts: dict[str, Counter]) -> list[str]:
    lines = [
        "| model | answers | items | refusal | failed | P1a | P1b | P2 | P1a+P1b+P2 | P3 | read right "
        "| stray quote | Title by Author |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, count in counts.items():
        n = count["answers"]

        def share(name: str, n: int = n, count: Counter = count) -> str:
            return f"{count[name] / n:.2%}"

        misread = sum(count[p] for p in PATTERNS[:3])
        lines.append(
            f"| {model} | {n:,} | {share('items')} | {share('refusal')} | {share('failed')} | "
            + " | ".join(f"{count[p]:,}" for p in PATTERNS[:3])
            + f" | {misread / n:.2%} | {count['P3']:,} | {1 - count['misread'] / n:.2%} | "
            f"{count['stray quote']:,} | {count['by author']:,} |"
        )
    return lines


def markdown(counts: dict[str, Counter], seconds: float, files: int, before: dict | None) -> str:
    total = sum(c["answers"] for c in counts.values())
    lines = [
        f"`benchmarks/read_rate.py`: all {total:,} answers of the seven models in the {files} answer files "
        f"present ({seconds:.0f} s on 2 shared CPU cores). Shares of each model's answers; P1a–P3 as the "
        "script's docstring defines them (counts of answers; an answer may show two); read right = in none "
        f"of them. P3 in all: {sum(c['P3'] for c in counts.values()):,}.",
        "",
        *table(counts),
    ]
    if before is not None:
        lines += [
            "",
            f"Before, the reader of {before['label']} on the same answers with the same detectors (P3 in "
            f"all: {sum(c['P3'] for c in before['counts'].values()):,}):",
            "",
            *table({model: Counter(count) for model, count in before["counts"].items()}),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--released", required=True, type=Path, help="a checkout of jiani-huang/RecAssistBench"
    )
    parser.add_argument("--samples", type=int, default=0, help="print this many random hits of each pattern")
    parser.add_argument("--counts-out", type=Path, help="save the counts as JSON (to show them as --before)")
    parser.add_argument("--before", type=Path, help="a --counts-out file of an earlier reader, shown beside")
    parser.add_argument("--label", default="this checkout", help="what --counts-out records as the reader")
    parser.add_argument("--write", action="store_true", help=f"replace '{SECTION}' in RESULTS.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    counts, hits = measure(args.released)
    seconds = time.perf_counter() - start
    files = sum(1 for _ in answer_files(args.released))
    before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
    body = markdown(counts, seconds, files, before)
    print(body)
    if args.counts_out:
        args.counts_out.write_text(json.dumps({"label": args.label, "counts": counts}), encoding="utf-8")
    rng = random.Random(0)
    for name in PATTERNS if args.samples else ():
        print(f"\n### {name}: {len(hits[name])} answers; {min(args.samples, len(hits[name]))} at random")
        for file, text, entries in rng.sample(hits[name], min(args.samples, len(hits[name]))):
            print(f"- {file}\n  answer: {text[:400]!r}\n  read:   {entries}")
    if args.write:
        write_section(body, SECTION)
        logger.info("wrote %s to benchmarks/RESULTS.md", SECTION)


if __name__ == "__main__":
    main()
