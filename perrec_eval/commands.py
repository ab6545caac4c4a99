"""`perrecbench evaluate | score | profiles | report`."""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

ENGINES = ("baseline", "fake", "hf", "openai", "vllm")


def register(subparsers: argparse._SubParsersAction) -> None:
    ev = subparsers.add_parser(
        "evaluate",
        help="rank the benchmark's groups with a model (or a no-LLM baseline) and score PTC",
        description="Evaluate a model on a built benchmark; writes run.json, samples.jsonl, "
        "predictions.jsonl, "
        "scores.json and report.md into --out. Running the same command again resumes from the cache.",
    )
    ev.add_argument(
        "--data", required=True, help="benchmark folder written by `perrecbench build` (or a Hub id)"
    )
    ev.add_argument("--levels", default="easy,medium,hard")
    ev.add_argument("--methods", default="pointwise,pairwise,listwise")
    ev.add_argument("--engine", required=True, choices=ENGINES)
    ev.add_argument(
        "--model",
        required=True,
        help="model id/path; for --engine baseline one of random, rating-bias, item-quality, "
        "history-affinity, "
        "or all; for --engine fake one of: " + ", ".join(sorted(FAKE_MODELS)),
    )
    ev.add_argument("--adapter", default=None, help="LoRA adapter path (hf, vllm)")
    ev.add_argument(
        "--base-url", default=None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"
    )
    ev.add_argument(
        "--api-key-env", default=None, help="name of the environment variable holding the API key"
    )
    ev.add_argument("--k", type=int, default=4, help="retrieved history items per user")
    profile = ev.add_mutually_exclusive_group()
    profile.add_argument(
        "--profiles", default=None, help="saved profiles JSONL (from `perrecbench profiles`)"
    )
    profile.add_argument("--no-profile", action="store_true")
    ev.add_argument("--shots", type=int, default=0, help="few-shot demonstrations from the held-out split")
    ev.add_argument("--cot", action="store_true", help="chain-of-thought prompts")
    ev.add_argument("--samples", type=int, default=1, help="self-consistency: samples per request")
    ev.add_argument(
        "--sc-aggregate",
        choices=("mean", "median", "mode"),
        default="mean",
        help="how pointwise samples combine under --samples (pairwise/listwise always take the majority)",
    )
    ev.add_argument("--pairwise-strategy", choices=("allpairs", "heapsort"), default="allpairs")
    ev.add_argument(
        "--paper-mode",
        action="store_true",
        help="reproduce the published protocol: heapsort pairwise, paper tau on index lists, "
        "failed groups skipped",
    )
    ev.add_argument("--temperature", type=float, default=0.1)
    ev.add_argument("--max-groups", type=int, default=None)
    ev.add_argument("--split", default="test")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--concurrency", type=int, default=16, help="parallel requests (openai engine)")
    ev.add_argument("--batch-size", type=int, default=None, help="batch size (hf engine)")
    ev.add_argument("--out", required=True, help="run folder")
    ev.set_defaults(func=_evaluate)

    sc = subparsers.add_parser("score", help="re-score a finished run from its saved predictions")
    sc.add_argument("run_dir")
    sc.add_argument("--variant", choices=("tau_b", "paper"), default=None)
    sc.add_argument("--invalid", choices=("zero", "skip"), default=None)
    sc.add_argument(
        "--write", action="store_true", help="rewrite scores.json and report.md with the new scores"
    )
    sc.set_defaults(func=_score)

    pr = subparsers.add_parser("profiles", help="write one user profile per (group, user) with an LLM")
    pr.add_argument("--data", required=True)
    pr.add_argument("--levels", default="easy,medium,hard", help="levels whose users get profiles")
    pr.add_argument("--splits", default="test", help="comma-separated splits (add train for few-shot)")
    pr.add_argument("--engine", required=True, choices=ENGINES[1:])
    pr.add_argument("--model", required=True)
    pr.add_argument("--adapter", default=None)
    pr.add_argument("--base-url", default=None)
    pr.add_argument("--api-key-env", default=None)
    pr.add_argument("--concurrency", type=int, default=16)
    pr.add_argument("--max-groups", type=int, default=None)
    pr.add_argument("--max-items", type=int, default=40, help="most recent history items a profile sees")
    pr.add_argument("--max-chars", type=int, default=8000, help="character budget for those items")
    pr.add_argument("--out", required=True, help="profiles JSONL path")
    pr.add_argument(
        "--push-to-hub",
        default=None,
        metavar="ORG/NAME",
        help="also upload the file to this dataset repo (e.g. next to the benchmark) as profiles/<file name>",
    )
    pr.set_defaults(func=_profiles)

    rp = subparsers.add_parser("report", help="one Table-1 style table from several run folders")
    rp.add_argument("run_dirs", nargs="+")
    rp.add_argument("--out", default=None, help="write the markdown table here (default: print)")
    rp.set_defaults(func=_report)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _config(args: argparse.Namespace, model: str | None = None, out: str | None = None):
    from perrec_eval.run import EvalConfig

    options = {"batch_size": args.batch_size} if args.engine == "hf" and args.batch_size else {}
    return EvalConfig(
        data=args.data,
        engine=args.engine,
        model=model or args.model,
        out=out or args.out,
        levels=_split(args.levels),
        methods=_split(args.methods),
        split=args.split,
        adapter=args.adapter,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        k=args.k,
        profiles=args.profiles,
        no_profile=args.no_profile,
        shots=args.shots,
        cot=args.cot,
        samples=args.samples,
        sc_aggregate=args.sc_aggregate,
        pairwise_strategy=args.pairwise_strategy,
        paper_mode=args.paper_mode,
        temperature=args.temperature,
        max_groups=args.max_groups,
        seed=args.seed,
        concurrency=args.concurrency,
        engine_options=options,
    )


def _evaluate(args: argparse.Namespace) -> int:
    from perrec_eval import report, run

    if args.engine == "baseline":
        from perrec_eval.baselines import BASELINES

        names = BASELINES if args.model == "all" else (args.model,)
        unknown = [n for n in names if n not in BASELINES]
        if unknown:
            raise SystemExit(f"unknown baseline {unknown[0]!r}: choose one of {', '.join(BASELINES)} or all")
        systems = run.evaluate_baselines(_config(args), names)
    else:
        engine = _fake_engine(args.model) if args.engine == "fake" else None
        config = _config(args)
        systems = [(args.model, run.evaluate(config, engine=engine))]
    print(report.table(systems))
    print(f"\nwritten to {args.out}/ (report.md, scores.json)")
    return 0


def _score(args: argparse.Namespace) -> int:
    from perrec_eval import report, run

    scores = run.rescore(args.run_dir, variant=args.variant, invalid=args.invalid)
    name, _ = report.load_run(args.run_dir)
    if args.write:
        run.write_json(Path(args.run_dir) / "scores.json", scores)
        report.write_report(Path(args.run_dir), [(name, scores)])
    print(report.table([(name, scores)]))
    json.dump(scores, sys.stdout, indent=2)
    print()
    return 0


def _profiles(args: argparse.Namespace) -> int:
    from perrec_eval.cache import CachedEngine
    from perrec_eval.engines import load_engine
    from perrec_eval.profiles import HistoryBudget, generate_profiles, load_profiles, save_profiles
    from perrec_eval.run import backend_options, load_rows

    options = backend_options(
        args.engine,
        adapter=args.adapter,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        concurrency=args.concurrency,
    )
    engine = (
        _fake_engine(args.model) if args.engine == "fake" else load_engine(args.engine, args.model, **options)
    )
    out = Path(args.out)
    cached = CachedEngine(engine, out.with_name(out.name + ".cache.jsonl"))
    rows = [
        row
        for split in _split(args.splits)
        for level in _split(args.levels)
        for row in load_rows(args.data, level, split, args.max_groups)
    ]
    known = load_profiles(out) if out.is_file() else {}
    budget = HistoryBudget(max_items=args.max_items, max_chars=args.max_chars)
    profiles, failures = generate_profiles(cached, rows, budget=budget, known=known)
    provenance = {
        "engine": engine.name,
        "model": engine.model,
        "max_items": args.max_items,
        "max_chars": args.max_chars,
    }
    save_profiles(out, profiles, provenance)
    print(f"{len(profiles)} profiles written to {out}; {len(failures)} failed (run again to retry them)")
    if args.push_to_hub and not failures:
        from huggingface_hub import HfApi

        api = HfApi()
        api.create_repo(args.push_to_hub, repo_type="dataset", exist_ok=True)
        api.upload_file(
            path_or_fileobj=str(out),
            path_in_repo=f"profiles/{out.name}",
            repo_id=args.push_to_hub,
            repo_type="dataset",
            commit_message=f"Add profiles written by {engine.name}:{engine.model}",
        )
        print(f"uploaded to https://huggingface.co/datasets/{args.push_to_hub}/blob/main/profiles/{out.name}")
    return 1 if failures else 0


def _report(args: argparse.Namespace) -> int:
    from perrec_eval import report

    systems = [report.load_run(d) for d in args.run_dirs]
    text = report.render(systems)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(report.table(systems))
    return 0


# Scripted answers for `--engine fake`: smoke tests and framework benchmarks without a model.
def _n_users(request) -> int:
    return max(1, len(re.findall(r"<\|The Start of User\d+ Data\|>", request.messages[-1]["content"])))


def _constant(request, params, sample_index) -> str:
    system = request.messages[0]["content"]
    if "pair of users" in system:
        return "[User A]"
    if "group of users" in system:
        return json.dumps({"predicted_ranking": list(range(1, _n_users(request) + 1))})
    if "user profile" in request.messages[-1]["content"]:
        return "Likes well-made things; rates generously."
    return '{"predicted_rating": 4}'


FAKE_MODELS = {"constant": _constant}


def _fake_engine(model: str):
    from perrec_eval.engines.fake import FakeEngine

    if model not in FAKE_MODELS:
        raise SystemExit(f"unknown fake model {model!r}: choose one of {', '.join(sorted(FAKE_MODELS))}")
    return FakeEngine(FAKE_MODELS[model], model=model)
