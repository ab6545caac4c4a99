"""RecBench+'s movie half at MovieLens-1M scale: build time and memory, and what the BM25 baseline reads.

Needs MovieLens-1M's ``movies.dat`` and ``users.dat`` (GroupLens ``ml-1m.zip``, or the copies in
`jiani-huang/RecAssistBench`'s ``dataset/movie/``) and, if there is one, its ``ratings.dat``. Without one
(the release's is over 4 MiB and not readable here) the script writes synthetic ratings of the real users
over the real titles: ``--per-user`` (165, ML-1M's mean) seeded draws per user, three quarters by a
popularity law over the movies, a quarter from one favourite genre per user.

1. ``perrecbench build --task recbench-plus`` of the folder (``--users 500 --train-users 500 --max-share
   0.5``): wall time and the peak RSS of the build's process, and the query-diversity counts it prints;
2. ``evaluate --engine baseline`` of ``bm25`` and ``condition-filter`` on the explicit queries: recall and
   condition match of each. BM25's query drops stop words and the templates' words
   (`perrec_eval.tasks.recbench_plus.retrieval.query_stopwords`); run the script on an older checkout to
   measure the baseline before issue 35.

Run from the repository root: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recbench_movie.py --movielens
DIR --work /tmp/rb-movie``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def synthetic_ratings(folder: Path, per_user: int, seed: int) -> int:
    """Write ``ratings.dat`` for the users of ``users.dat`` over the movies of ``movies.dat``."""
    rng = random.Random(seed)
    raw = (folder / "movies.dat").read_bytes()
    text = raw.decode("utf-8") if raw.isascii() or _utf8(raw) else raw.decode("latin-1")
    movies = [line.split("::") for line in text.splitlines() if line.strip()]
    ids = [int(m[0]) for m in movies]
    genres = {int(m[0]): m[2].split("|") for m in movies}
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(ids))]
    people = (folder / "users.dat").read_text(encoding="latin-1").splitlines()
    users = [line.split("::")[0] for line in people if line.strip()]
    lines = []
    for user in users:
        favourite = rng.choice(sorted({g for gs in genres.values() for g in gs}))
        pool = [i for i in ids if favourite in genres[i]]
        chosen = set(rng.choices(ids, weights=weights, k=per_user * 3 // 4))
        chosen |= set(rng.sample(pool, min(len(pool), per_user // 4)))
        for movie in sorted(chosen):
            lines.append(f"{user}::{movie}::{rng.randint(1, 5)}::{978300000 + rng.randint(0, 10**7)}")
    (folder / "ratings.dat").write_text("\n".join(lines) + "\n", encoding="latin-1")
    return len(lines)


# A film graph of realistic degree (IMDb/Wikidata-like): relation -> (values per film, distinct values per
# film, Zipf exponent of how often a value recurs). About 12 rows a film, as the ≈ 19k rows of director,
# writer, producer, actor, language, country and studio of 1,596 MovieLens films a Wikidata export gives.
FILM_RELATIONS = {
    "director": (1.05, 0.55, 0.6),
    "writer": (1.7, 1.0, 0.6),
    "producer": (1.8, 1.1, 0.6),
    "actor": (3.8, 2.4, 0.8),
    "language": (1.25, 0.012, 1.6),
    "country": (1.3, 0.012, 1.6),
    "studio": (1.3, 0.12, 1.1),
}


def film_graph(folder: Path, films: int, seed: int) -> int:
    """Write ``attributes.csv`` (``item_id,relation,value``) for the `films` most rated movies of the
    folder's ``ratings.dat``: per film and relation ``1 + Poisson(mean - 1)`` values, each drawn by a Zipf
    law over that relation's people, studios, languages or countries (a few recur in dozens of films, most
    in one or two). Returns the rows written."""
    import numpy as np

    from dataset_builder.synth.amazon import pseudo_words

    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for line in (folder / "ratings.dat").read_text(encoding="latin-1").splitlines():
        movie = line.split("::")[1]
        counts[movie] = counts.get(movie, 0) + 1
    chosen = sorted(counts, key=lambda m: (-counts[m], int(m)))[:films]
    rows = ["item_id,relation,value"]
    for number, (relation, (per_film, distinct, zipf)) in enumerate(FILM_RELATIONS.items()):
        pool = max(2, int(distinct * films))
        weights = 1.0 / np.arange(1, pool + 1) ** zipf
        first = pseudo_words(np.arange(pool), 0xF11 + number, 2)
        names = [
            f"{a} {b}" for a, b in zip(first, pseudo_words(np.arange(pool), 0xA11 + number), strict=True)
        ]
        for movie in chosen:
            k = 1 + rng.poisson(per_film - 1)
            for value in sorted(set(rng.choice(pool, size=k, p=weights / weights.sum()).tolist())):
                rows.append(f"{movie},{relation},{names[value]}")
    (folder / "attributes.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(rows) - 1


def movielens_folder(movielens: Path, work: Path, per_user: int, seed: int) -> tuple[Path, str]:
    """``work/ml-1m`` (`work` replaced) with the three files of `movielens`, its ratings written by
    `synthetic_ratings` when it has none; and which ratings it holds ("real" or "N synthetic")."""
    shutil.rmtree(work, ignore_errors=True)
    source = work / "ml-1m"
    source.mkdir(parents=True)
    for name in ("movies.dat", "users.dat", "ratings.dat"):
        if (movielens / name).is_file():
            shutil.copy(movielens / name, source / name)
    if (source / "ratings.dat").is_file():
        return source, "real"
    return source, f"{synthetic_ratings(source, per_user, seed):,} synthetic"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _cli(*args: str) -> tuple[float, int, str]:
    """Run ``python -m perrec_eval ARGS``: wall seconds, peak RSS (MB) of the child, its stdout."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "perrec_eval", "--no-progress", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return time.perf_counter() - started, peak, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--movielens", required=True, type=Path, help="a folder of movies.dat and users.dat")
    parser.add_argument("--work", required=True, type=Path, help="scratch folder (replaced)")
    parser.add_argument("--per-user", type=int, default=165)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    source, ratings = movielens_folder(args.movielens, args.work, args.per_user, args.seed)
    build = ["build", "--task", "recbench-plus", "--source", str(source), "--out", str(args.work / "bench")]
    wall, peak, printed = _cli(*build, "--users", "500", "--train-users", "500", "--max-share", "0.5")
    print(f"ratings: {ratings}; build: {wall:.1f} s wall, peak RSS {peak:,} MB")
    print(printed.strip().splitlines()[-1])
    print("| baseline | explicit recall | explicit condition match |\n|---|---:|---:|")
    for name in ("bm25", "condition-filter"):
        out = args.work / name
        bench = str(args.work / "bench")
        _cli("evaluate", "--task", "recbench-plus", "--data", bench, "--engine", "baseline", "--model", name,
             "--subsets", "explicit", "--protocols", "recommend", "--out", str(out))  # fmt: skip
        (cell,) = json.loads((out / "scores.json").read_text())["cells"]
        metrics = cell["metrics"]
        print(f"| {name} | {metrics['recall']['value']:.3f} | {metrics['condition_match']['value']:.3f} |")


if __name__ == "__main__":
    main()
