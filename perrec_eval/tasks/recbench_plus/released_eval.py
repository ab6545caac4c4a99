"""Any model on RecBench+'s released queries (`perrecbench evaluate --task recbench-plus --released-queries
FILE.json --catalogue movies.dat [--ratings ratings.dat] --engine E --model M --out RUN`).

The released query file (any type, either domain: `released.read_queries`) becomes a small RecBench+ folder
(`released_folder`: one config per query type present, test split, and a catalogue), written once beside
the run (``RUN.data``, or ``--released-data``) and then evaluated as any build is: the same engines, cache,
resumption, prompts (the released ones: `templates/recommend.yaml`), scoring, intervals and run folder, so
`perrecbench report RUN` shows it, and, for the demographics file, the seven published models' rows
beside it (`published.yaml`: the same queries under the same corrected scoring; never ranked with it).

What the folder holds:

- each query's ground truth as catalogue items: MovieLens ids where the file gives them (condition
  queries' ``movieSubsetId``), else each title matched in ``movies.dat`` (`released.matcher`: "The
  Breakfast Club (1985)" is "Breakfast Club, The (1985)"); a title that names no movie is its own item, so
  an answer naming it still counts;
- the catalogue: every movie of ``movies.dat`` (popularity: its ratings in ``--ratings``, else 0), with its
  genres and year; without ``--catalogue`` (a book file) only the ground-truth titles, and
  ``hallucination`` (a title naming no catalogue item) is not computed;
- a condition query's history: with ``--ratings``, its ``source_user``'s rated movies in time order less the
  ground truth (the released history variant); otherwise none, and the query is asked with the released
  default prompt. Profile queries (interest, demographics) have no user and no history;
- the released conditions are relations of the release's knowledge graph, which is not in readable form:
  ``condition_match`` is not computed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perrec_eval.cliconfig import option
from perrec_eval.errors import ConfigError, DataError, PerrecbenchError
from perrec_eval.evaluation import TaskEvalConfig
from perrec_eval.evaluation import evaluate_command as general_evaluate_command
from perrec_eval.tasks.recbench_plus import released

MOVIE_DOMAIN, BOOK_DOMAIN = "MovieLens-1M", "Books"
_YEAR = re.compile(r"\((\d{4})\)\s*$")
ORACLE = "oracle"  # `--engine fake --model oracle`
FORMAT = 1  # bump when the folder's content changes for the same inputs


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasedEvalConfig(TaskEvalConfig):
    """Settings of `perrecbench evaluate --task recbench-plus`: a build (``--data``) or released queries."""

    data: str | None = option(
        "benchmark folder written by `perrecbench build --task recbench-plus` (or give --released-queries)",
        default=None,
    )
    released_queries: str | None = option(
        "a released RecBench+ query file (dataset/<movie|book>/<Type>Query.json) to evaluate instead of a "
        "build; with --catalogue for movie files",
        default=None,
    )
    catalogue: str | None = option(
        "with --released-queries: MovieLens-1M's movies.dat (the released movie titles are matched in it)",
        default=None,
    )
    ratings: str | None = option(
        "with --released-queries: MovieLens-1M's ratings.dat: each condition query's user history (the "
        "released history variant) and the catalogue's popularity",
        default=None,
    )
    compat: Literal["released"] | None = option(
        "with --released-queries: score as the released evaluator did, defects included (recall, "
        "precision, NDCG and FTR of the raw answers; docs/reproducing-recbench-plus.md)",
        default=None,
        shown="the corrected scoring",
    )
    released_data: str | None = option(
        "with --released-queries: where the queries are written as a RecBench+ folder (default: RUN.data "
        "beside --out)",
        default=None,
    )

    def __post_init__(self) -> None:
        if self.released_queries is None:
            extra = {"--catalogue": self.catalogue, "--ratings": self.ratings, "--compat": self.compat}
            extra["--released-data"] = self.released_data
            given = [flag for flag, value in extra.items() if value is not None]
            if given:
                raise ConfigError(f"{', '.join(given)} go with --released-queries FILE.json")
            if self.data is None:
                raise ConfigError("give --data (a build's folder) or --released-queries (a released file)")
        else:
            folder = self.released_data or f"{str(self.out).rstrip('/')}.data"
            if self.data not in (None, folder):  # (`replace` runs this again with the folder set)
                raise ConfigError("give --data or --released-queries, not both")
            object.__setattr__(self, "data", folder)
        TaskEvalConfig.__post_init__(self)

    def general(self) -> TaskEvalConfig:
        """The same run as the general path's settings (what run.json records)."""
        names = [f.name for f in dataclasses.fields(TaskEvalConfig)]
        return TaskEvalConfig(**{name: getattr(self, name) for name in names})


def evaluate_command(config: ReleasedEvalConfig) -> int:
    """`perrecbench evaluate --task recbench-plus`: a build, or a released query file written as one first;
    ``--engine fake --model oracle`` answers every query with its ground truth (`oracle_engine`).

    The released folder follows the output rule (`data_folder`), and the run holds its lock and the
    ``--out`` lock from before it is written until the run ends: a second command on either is refused
    before it writes anything, and the run's docs and fingerprint are those of the folder it wrote.
    """
    if config.released_queries is None:
        return _evaluate(config)
    from perrec_eval import outputs
    from perrec_eval.lock import file_lock, folder_lock

    assert config.data is not None
    try:
        folder = data_folder(config.data)
        others = {"--out": config.out, "--released-queries": config.released_queries}
        others |= {"--catalogue": config.catalogue, "--ratings": config.ratings}
        outputs.refuse_overlap(folder, others, flag="--released-data", existing=False)
    except PerrecbenchError as err:
        if config.released_data is not None:
            raise
        raise type(err)(f"{err} (without --released-data it is {config.data}, beside --out)") from err
    with file_lock(folder), folder_lock(config.out):
        types = write_folder(
            config.released_queries, config.catalogue, config.ratings, folder, compat=config.compat
        )
        if config.subsets is None:  # every subset the file answers
            from perrec_eval.registry import get

            chosen = tuple(s for s in get(config.task).subsets if s.partition("-")[0] in types)
            config = dataclasses.replace(config, subsets=chosen)
        return _evaluate(config)


def _evaluate(config: ReleasedEvalConfig) -> int:
    general = config.general()
    oracle = general.engine == "fake" and general.model == ORACLE
    return general_evaluate_command(general, oracle_engine(general) if oracle else None)


def data_folder(path: str | os.PathLike[str], *, flag: str = "--released-data") -> Path:
    """The folder a released file is written into, checked by the output rule every output follows, and
    resolved: named, not the current, home or root folder (`outputs.target`), not a file ("is a file":
    a user's file is never moved aside), and, when it exists and holds anything, a folder this command
    wrote (its manifest.json says ``source_kind: released``) holding only the files that manifest names
    (`outputs.refuse_foreign`): it is replaced whole.

    Raises:
        ConfigError, DataError: the reason and the fix.
    """
    from dataset_builder.manifest import data_files
    from perrec_eval import fileio, outputs

    folder = outputs.target(path, flag=flag)
    if folder.exists() and not folder.is_dir():
        raise DataError(
            f"{flag} {path} is a file: the released queries are written as a folder; choose a new folder"
        )
    try:
        recorded = fileio.read_json(folder / "manifest.json")
    except (OSError, ValueError):
        recorded = None
    released = isinstance(recorded, dict) and recorded.get("source_kind") == "released"
    own = {"manifest.json", *data_files(recorded)} if released else set()
    outputs.refuse_foreign(folder, lambda name: str(name) in own, command="evaluate --released-queries",
                           flag=flag)  # fmt: skip
    return folder


def evaluate(config: ReleasedEvalConfig, engine: Any = None) -> Any:
    """A run of a build in Python (`Task.evaluate`, what a suite runs): the general path's evaluate of the
    settings the command records."""
    from perrec_eval.evaluation import evaluate as general_evaluate

    return general_evaluate(config.general(), engine)


def oracle_engine(config: TaskEvalConfig) -> Any:
    """The fake engine answering each rendered request with its query's ground truth, as the protocol
    writes a true answer (recall 1 wherever the ground-truth titles match their items). Queries rendered
    alike share the first one's answer: a build whose texts carry several ground truths (the card's query
    diversity) keeps this oracle below 1 where it shows no history."""
    from perrec_eval.engines.fake import FakeEngine
    from perrec_eval.evaluation import load_docs
    from perrec_eval.types import Completion

    task, docs = config.family, load_docs(config)
    variant = {} if config.prompts is None else {"variant": config.prompts}
    answers: dict[str, str] = {}
    for cell in config.cells():
        protocol = task.protocols[cell.protocol]
        for doc in docs[cell.subset]:
            slot = protocol.runner(doc).pending()[0]
            key = json.dumps(protocol.render(doc, slot, **variant))
            answers.setdefault(key, protocol.format_answer(protocol.true_answer(doc, slot), slot))

    def respond(request: Any, params: Any, sample_index: int) -> str | Completion:
        found = answers.get(json.dumps(list(request.messages)))
        return found if found is not None else Completion(texts=(), error="the oracle knows no such query")

    return FakeEngine(respond, model=ORACLE)


# ------------------------------------------------------------------------------------------ the folder


def ratings_of(path: str) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each user's rated movie ids in time order (ties by id) and each movie's number of ratings, from a
    MovieLens ``ratings.dat``.

    Raises:
        DataError: no such file, or a line of another shape (its number named).
    """
    try:
        text = Path(path).read_bytes().decode("latin-1")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file: pass MovieLens-1M's ratings.dat with --ratings") from None
    rated: dict[str, list[tuple[int, int]]] = {}
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("::")
        if len(parts) != 4 or not all(released._number(part) for part in parts) or int(parts[3]) >= 2**63:
            raise DataError(
                f"{path} line {number} is not UserID::MovieID::Rating::Timestamp (whole numbers, a timestamp "
                "in seconds): pass MovieLens-1M's ratings.dat with --ratings"
            )
        user, movie, _, ts = (part.strip() for part in parts)
        rated.setdefault(user, []).append((int(ts), int(movie)))
        counts[movie] = counts.get(movie, 0) + 1
    return {u: [str(m) for _, m in sorted(items)] for u, items in rated.items()}, counts


def _raw_groups(path: str) -> dict[str, dict[str, Any]]:
    """A profile file's group index -> its group (``group_type``, ``group`` as a mapping); {} otherwise."""
    records = released._read_json(path)
    out = {}
    for i, record in enumerate(records):
        if isinstance(record, dict) and "group_type" in record:
            kind, words = record["group_type"], record.get("group")
            names = kind.split("_") if isinstance(kind, str) else []
            words = words if isinstance(words, list) else [words] if isinstance(words, str | int) else None
            if not names or set(names) - {"age", "gender", "occupation"} or words is None or (
                len(words) != len(names) or not all(isinstance(w, str | int) for w in words)
            ):
                shown = f"group_type {str(kind)[:40]!r} and group {str(record.get('group'))[:60]!r}"
                raise DataError(
                    f"{path}: group {i} has {shown}: a group names one value of each of age, gender, "
                    'occupation in group_type (e.g. "age_gender" and ["25-34", "Female"]): not a released '
                    "query file"
                )
            given = dict(zip(names, map(str, words), strict=True))
            group = {name: given.get(name) for name in ("age", "gender", "occupation")}  # as a build's rows
            out[str(i)] = {"group_type": kind, "group": group}
    return out


def _movie_facts(genres: str, title: str) -> list[dict[str, str]]:
    """A movie's genres and year, as a MovieLens build's catalogue lists them.

    >>> _movie_facts("Drama|War", "Boat, The (Das Boot) (1981)")[1:]
    [{'relation': 'genre', 'value': 'War'}, {'relation': 'year', 'value': '1981'}]
    """
    facts = [{"relation": "genre", "value": g} for g in genres.split("|") if g]
    year = _YEAR.search(title)
    return facts + ([{"relation": "year", "value": year.group(1)}] if year else [])


def folder_rows(
    queries: Sequence[released.ReleasedQuery],
    movies: Sequence[released.Movie] | None,
    genres: Mapping[int, str],
    *,
    histories: Mapping[str, list[str]] | None = None,
    popularity: Mapping[str, int] | None = None,
    groups: Mapping[str, dict[str, Any]] | None = None,
    domain: str = MOVIE_DOMAIN,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The rows of each query type and the catalogue rows of a released query file (module docstring)."""
    from perrec_eval.tasks.recbench_plus.parsing import normalize_title

    catalogue: dict[str, dict[str, Any]] = {}
    for movie in movies or ():
        asin = str(movie.id)
        catalogue[asin] = {
            "parent_asin": asin,
            "title": movie.title,
            "domain": domain,
            "popularity": (popularity or {}).get(asin, 0),
            "relations": _movie_facts(genres.get(movie.id, ""), movie.title),
        }
    matcher = released.matcher(movies) if movies else None

    def item(title: str, movie_id: int | None) -> dict[str, str]:
        if movie_id is not None and str(movie_id) in catalogue:
            asin = str(movie_id)
        else:
            found = _movie_of(title, matcher) if matcher is not None else None
            asin = found if found is not None else "title:" + normalize_title(title)
        if asin not in catalogue:  # a ground-truth title naming no catalogue item is its own item
            catalogue[asin] = {"parent_asin": asin, "title": title, "domain": domain, "popularity": 0,
                               "relations": []}  # fmt: skip
        return {"parent_asin": asin, "title": title}

    rows: dict[str, list[dict[str, Any]]] = {}
    for query in queries:
        ids = list(query.movie_ids or ())
        truth = [item(t, ids[i] if i < len(ids) else None) for i, t in enumerate(query.titles)]
        truth = list({t["parent_asin"]: t for t in truth}.values())  # one item named twice counts once
        user = query.cluster if query.condition_num is not None else None
        hidden = {t["parent_asin"] for t in truth}
        history = [
            {"parent_asin": a, "title": catalogue[a]["title"]}
            for a in (histories or {}).get(user or "", [])
            if a in catalogue and a not in hidden
        ]
        row = {
            "released": {"titles": list(query.titles), "movie_ids": None if query.movie_ids is None
                         else [int(i) for i in query.movie_ids]},  # fmt: skip
            "id": query.id,
            "user_id": query.cluster,
            "domain": domain,
            "query": query.query,
            "conditions": [{"relation": r, "value": v} for r, v in query.conditions],
            "ground_truth": truth,
            "history": history,
        }
        if query.query_type == "demographics" and groups and query.cluster in groups:
            row |= groups[query.cluster]
        rows.setdefault(query.query_type, []).append(row)
    return rows, list(catalogue.values())


def _movie_of(title: str, matcher: Any) -> str | None:
    """The MovieLens id a released title names (in any of its MovieLens forms), or None."""
    found = matcher.match(title)
    return str(int(found[0])) if found else None  # `released.matcher` keys movies by their zero-padded id


def _parquet(folder: Path, name: str, rows: list[dict[str, Any]]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    data = buffer.getvalue()
    path = f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"  # by content (PITFALLS 1)
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_bytes(data)
    return path


def _identity(path: str | None) -> dict[str, str] | None:
    """A file's name and content hash (what the folder is kept for)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except FileNotFoundError:
        raise DataError(
            f"{path}: no such file: fetch the released files (docs/reproducing-recbench-plus.md)"
        ) from None
    return {"file": Path(path).name, "sha256": digest}


def write_folder(
    queries_path: str, catalogue: str | None, ratings: str | None, folder: Path, *, compat: str | None = None
) -> list[str]:
    """Write the released file as a RecBench+ folder into `folder` (kept when its inputs are unchanged);
    return the query types it holds. With `compat` ``"released"`` its queries are scored by the released
    evaluator's rules (each row keeps the released ground-truth titles and ids).

    Raises:
        DataError, ConfigError: a file that cannot be read, or a movie file without --catalogue.
    """
    from perrec_eval import fileio, outputs
    from perrec_eval.fileio import write_json

    queries = released.read_queries(queries_path)
    domain = BOOK_DOMAIN if _is_book(queries_path) else MOVIE_DOMAIN
    if domain == MOVIE_DOMAIN and catalogue is None:
        raise ConfigError(
            f"{queries_path} holds movie queries: pass MovieLens-1M's movies.dat with --catalogue"
        )
    if domain == BOOK_DOMAIN and ratings is not None:
        raise ConfigError("--ratings reads MovieLens-1M's ratings.dat: leave it out for book queries")
    inputs = {
        "format": FORMAT,
        "released_queries": _identity(queries_path),
        "catalogue": _identity(catalogue),
        "ratings": _identity(ratings),
        "compat": compat,
    }
    folder = data_folder(folder)  # (again: a caller that holds its lock checked it before taking it)
    recorded = fileio.read_json(folder / "manifest.json") if (folder / "manifest.json").is_file() else {}
    if recorded.get("released") == inputs:
        return list(recorded["queries"])
    movies = released.read_movies(catalogue) if catalogue is not None else None
    histories, popularity = ratings_of(ratings) if ratings is not None else (None, None)
    rows, items = folder_rows(
        queries,
        movies,
        _genres(catalogue) if catalogue is not None else {},
        histories=histories,
        popularity=popularity,
        groups=_raw_groups(queries_path),
        domain=domain,
    )
    outputs.refuse_overlap(folder, {"--released-queries": queries_path, "--catalogue": catalogue})
    with outputs.replaced(folder) as tmp:
        files = {config: {"test": _parquet(tmp, f"{config}/test", found)} for config, found in rows.items()}
        files["catalogue"] = {"items": _parquet(tmp, "catalogue/items", items)}
        write_json(
            tmp / "manifest.json",
            {
                "task": "recbench-plus",
                "source_kind": "released",
                "released": inputs,
                "parameters": {
                    "k": 5,
                    "condition_match": False,
                    "hallucination": catalogue is not None,
                    "compat": compat,
                },
                "outputs": files,
                "queries": {config: len(config_rows) for config, config_rows in rows.items()},
            },
        )
    return list(rows)


def _is_book(path: str) -> bool:
    records = released._read_json(path)
    first = records[0] if isinstance(records, list) and records else {}
    subset = (first.get("query & ground true") or [{}])[0] if "query & ground true" in first else first
    return any(key in subset for key in ("bookSubset", "book subset"))


def _genres(path: str) -> dict[int, str]:
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    out = {}
    for line in text.splitlines():
        parts = line.split("::")
        if len(parts) == 3 and released._number(parts[0]):
            out[int(parts[0])] = parts[2].strip()
    return out
