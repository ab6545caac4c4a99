"""RecBench+'s movie half with a film graph: the build without the graph, with a graph of ≈ 19k rows (the
1,596 most rated films) and with one of every film (MovieLens-1M's size, ≈ 47k rows), side by side.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recbench_graph_bench.py --movielens DIR --work
/tmp/rb-graph [--rounds 3] [--baseline CODE]`` with DIR holding MovieLens-1M's ``movies.dat`` and
``users.dat`` (its ``ratings.dat`` too if there is one; otherwise 190 seeded draws per user are written, ≈ 1M
ratings: `recbench_movie.synthetic_ratings`). The graphs are `recbench_movie.film_graph`'s seven relations
(director, writer, producer, actor, language, country, studio). Every build runs in a subprocess (wall, CPU,
peak RSS of its tree), in rotating order within each round; ``--baseline CODE`` (a folder of another
checkout's packages, e.g. from ``git archive``) runs the same builds with that code too, for a before/after
(without a graph and with ≈ 19k rows only: it enumerated every combination of shared values, far slower on
every film's graph).
The ``--item-attributes`` stress of the audit (a hundred thousand and a million rows of one relation on 1,682
films) runs last, once per code (the million rows with this checkout's code only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_bench import run_measured, stage_seconds  # noqa: E402
from recbench_movie import film_graph, movielens_folder  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def build(code: Path, source: Path, out: Path, attributes: Path | None, extra: list[str]) -> dict:
    command = [sys.executable, "-m", "perrec_eval.cli", "-v", "build", "--task", "recbench-plus", "--source",
               str(source), "--out", str(out), "--overwrite", "--no-progress", *extra]  # fmt: skip
    if attributes is not None:
        command += ["--item-attributes", str(attributes)]
    shutil.rmtree(out.with_name(out.name + ".stages"), ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    wall, peak, _, log, cpu = run_measured(command, cwd=code, env=env)
    outputs = json.loads((out / "manifest.json").read_text())["outputs"]
    row = {"wall": round(wall, 1), "cpu": round(cpu, 1), "peak_rss_mb": round(peak / 2**20)}
    return {**row, "stages": stage_seconds(log), "outputs": outputs, "load": round(os.getloadavg()[0], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--movielens", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout's packages, for a before/after")
    args = parser.parse_args()
    source, _ = movielens_folder(args.movielens, args.work, 190, 0)
    graphs = {}
    for films in (1596, 3883):
        graphs[films] = args.work / f"graph-{films}.csv"
        rows = film_graph(source, films, 0)
        (source / "attributes.csv").replace(graphs[films])
        print(f"graph of the {films} most rated films: {rows:,} rows", flush=True)
    stress = args.work / "stress.csv"
    with stress.open("w") as handle:
        handle.write("item_id,relation,value\n")
        for i in range(1_000_000):
            handle.write(f"{i % 1682 + 1},actor,Actor {i % 5000}\n")
    codes = {"this checkout": REPO, **({"baseline": args.baseline} if args.baseline else {})}
    cases = {"no graph": None, "graph ≈ 19k rows": graphs[1596], "graph of every film": graphs[3883]}
    results: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        # the baseline enumerated every combination of shared values: with every film's graph it would
        # take most of the session, so it runs without a graph and with ≈ 19k rows only
        order = [(c, k) for c in codes for k in cases if c == "this checkout" or cases[k] != graphs[3883]]
        order = order[round_ % len(order) :] + order[: round_ % len(order)]
        for code, case in order:
            row = build(codes[code], source, args.work / "out", cases[case], [])
            results.setdefault(f"{code} | {case}", []).append(row)
            print(json.dumps({"code": code, "case": case, "round": round_, **row}), flush=True)
    for code, path in codes.items():
        # the audit's stress: a million rows took the first version more than 180 s (stopped there)
        for rows in (100_000, 1_000_000) if code == "this checkout" else (100_000,):
            cut = args.work / f"stress-{rows}.csv"
            with stress.open() as src, cut.open("w") as dst:
                for n, line in enumerate(src):
                    if n > rows:
                        break
                    dst.write(line)
            extra = ["--max-share", "0.5", "--users", "20", "--train-users", "0"]
            row = build(path, source, args.work / "out", cut, extra)
            print(json.dumps({"code": code, "case": f"stress {rows:,} rows", **row}), flush=True)
    for name, rows in results.items():
        same = len({json.dumps(r["outputs"], sort_keys=True) for r in rows}) == 1
        walls = ", ".join(str(r["wall"]) for r in rows)
        cpus = ", ".join(str(r["cpu"]) for r in rows)
        print(f"| {name} | {walls} | {cpus} | {max(r['peak_rss_mb'] for r in rows)} | {same} |")


if __name__ == "__main__":
    main()
