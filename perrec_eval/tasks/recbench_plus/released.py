"""RecBench+'s released files scored: the query JSON of every type, the models' responses and MovieLens-1M's
``movies.dat`` (`perrecbench score --task recbench-plus --released-queries ... --responses ...`).

The release (`jiani-huang/RecAssistBench`) ships queries, raw responses and per-query results, but its
evaluator needs a Neo4j knowledge graph and has defects that change the numbers. Two scorings:

- **corrected** (the default): an answer is read by `parsing.split_answer` (a one-item answer is an
  answer); titles are matched to MovieLens-1M items by `parsing.Matcher` (normalized on both sides, so
  "Forrest Gump" matches "Forrest Gump (1994)"; MovieLens's "Breakfast Club, The" and its alternative
  titles in brackets are read as titles too); one matcher serves every metric, repeats of an item count
  once, and the metrics are `metrics.value`'s. ``not_in_catalogue`` is the share of titles that name no
  MovieLens-1M item (films after 2000 among them: not a hallucination rate here). Condition match needs the
  release's knowledge graph, which is not in readable form: it is not computed.
- **released** (``--compat released``): the released evaluator's rules, written from its description (see
  `released_scores`), to reproduce its per-query numbers.

Every query type's JSON is read (explicit, implicit and misinformed: a list of records with ``data_idx``;
interest and demographics: a list of groups with ``"query & ground true"``, ids ``"GROUP-N"`` counting
the group's non-empty queries); responses as ``{"id", "response"}`` lines, ``{"custom_id", "response"}``
lines, or OpenAI batch output (``response.body.choices[0].message.content``).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Literal

import numpy as np

from perrec_eval import fileio
from perrec_eval.answers import MAX_ANSWER_CHARS
from perrec_eval.cliconfig import check_seed, option
from perrec_eval.errors import ConfigError, DataError
from perrec_eval.evaluation import CONFIDENCE_LEVEL, N_RESAMPLES, TaskScoreConfig
from perrec_eval.evaluation import score_command as general_score_command
from perrec_eval.stats import MetricSpec
from perrec_eval.tasks.recbench_plus import metrics, parsing

SEP = "[SEP]"
RELEASED_THRESHOLD = 0.8  # the released movie evaluator's difflib ratio (0.65 for books)
_RELEASED_YEAR = re.compile(r"\s\(\d{4}\)$")
MAX_K = 1_000  # --k: the answers' lengths matter, not a padding of millions of "none" titles
COMPAT_METRICS = ("recall", "precision", "ndcg", "ftr")
CORRECTED_METRICS = ("recall", "precision", "ndcg", "ftr", "not_in_catalogue")
CI_METHOD = "percentile bootstrap over queries, resampling a group's (or a source user's) queries together"


@dataclass(frozen=True, slots=True)
class ReleasedQuery:
    """One released query: its id, type, text, ground-truth titles (and MovieLens ids where given),
    conditions as ``(relation, value)`` pairs and the cluster its intervals resample it with."""

    id: str
    query_type: str
    query: str
    titles: tuple[str, ...]
    movie_ids: tuple[int, ...] | None
    conditions: tuple[tuple[str, str], ...]
    cluster: str

    @property
    def condition_num(self) -> int | None:
        return len(self.conditions) if self.query_type in ("explicit", "implicit", "misinformed") else None


def read_queries(path: str) -> list[ReleasedQuery]:
    """The queries of a released query file of any type.

    Raises:
        DataError: not such a file; the message names the two shapes.
    """
    records = _read_json(path)
    shapes = (
        f"{path} is not a released RecBench+ query file: pass dataset/<domain>/<Type>Query.json (a list of "
        'records with "data_idx" and "movieSubset", or of groups with "query & ground true")'
    )
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise DataError(shapes)
    if all("query & ground true" in r for r in records):
        return [q for i, record in enumerate(records) for q in _profile_queries(i, record)]
    if all("data_idx" in r and _subset_key(r) for r in records):
        queries = [_condition_query(record) for record in records]
        seen: set[str] = set()
        for query in queries:
            if query.id in seen:  # one response would be scored for both
                raise DataError(
                    f"{path}: data_idx {query.id} names two queries: not a released query file (each "
                    "query's data_idx is its own)"
                )
            seen.add(query.id)
        return queries
    raise DataError(shapes)


def _read_json(path: str) -> Any:
    try:
        return fileio.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"{path}: no such file: fetch the released files (docs/reproducing-recbench-plus.md)"
        ) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"{path} is not a JSON file ({err}): pass the released query JSON") from None


def _subset_key(record: Mapping[str, Any]) -> str | None:
    return next((key for key in ("movieSubset", "bookSubset") if key in record), None)


def _profile_queries(group: int, record: Mapping[str, Any]) -> list[ReleasedQuery]:
    kind = "demographics" if "group_type" in record else "interest"
    listed = record["query & ground true"]
    if not isinstance(listed, list):
        raise DataError(
            f'group {group}: "query & ground true" is not a list of queries: not a released query file'
        )
    entries = [entry for entry in listed if entry != {}]
    queries = []
    for n, entry in enumerate(entries):
        subset = entry.get("movie subset", entry.get("book subset")) if isinstance(entry, dict) else None
        if not isinstance(subset, list) or not isinstance(entry.get("query"), str):
            raise DataError(f'query {group}-{n} has no "query" and "movie subset": not a released query file')
        queries.append(
            ReleasedQuery(
                f"{group}-{n}", kind, entry["query"], _titles(f"{group}-{n}", subset), None, (), str(group)
            )
        )
    return queries


def _titles(query: str, subset: Any) -> tuple[str, ...]:
    """A query's ground-truth titles, checked: a non-empty list of titles.

    Raises:
        DataError: anything else, naming the query.
    """
    if not isinstance(subset, list) or not all(isinstance(title, str) and title.strip() for title in subset):
        raise DataError(f"query {query}: its ground truth is not a list of titles: not a released query file")
    if not subset:
        raise DataError(
            f"query {query} has no ground truth (an empty list of titles): not a released query file"
        )
    return tuple(subset)


def _condition_query(record: Mapping[str, Any]) -> ReleasedQuery:
    kind = (
        "misinformed" if "misinformed" in record else "implicit" if "multihop_info" in record else "explicit"
    )
    index = record["data_idx"]
    if isinstance(index, bool) or not (isinstance(index, int) or (isinstance(index, str) and index.strip())):
        raise DataError(
            f"a query's data_idx is {str(index)[:40]!r}, not a number or a name: not a released query file"
        )
    key = str(index)
    text = record.get("query") or record.get("situational_description_query") or ""
    ids = record.get("movieSubsetId", record.get("bookSubsetId"))
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise DataError(
            f"query {key}: its ground-truth ids are not a list of numbers: not a released query file"
        )
    if ids is not None and not all(0 <= i < 2**63 for i in ids):
        raise DataError(
            f"query {key}: a ground-truth id is not a movie id (0 to 2^63 - 1): not a released query file"
        )
    shared = record.get("sharedRelationships", ())
    if not isinstance(shared, list | tuple) or not all(isinstance(p, list) and len(p) == 2 for p in shared):
        raise DataError(f"query {key}: sharedRelationships is not a list of pairs: not a released query file")
    if not isinstance(text, str):
        raise DataError(f"query {key}: its query is not a text: not a released query file")
    return ReleasedQuery(
        key,
        kind,
        text,
        _titles(key, record[_subset_key(record)]),
        tuple(ids) if ids is not None else None,
        tuple((str(r), str(v)) for r, v in shared),
        str(record.get("source_user", record["data_idx"])),
    )


@dataclass(frozen=True, slots=True)
class Responses:
    """A responses file read: each query id's raw answer (None: the request failed), and how many lines
    answered an id a line before them had answered (`REPEATS`)."""

    answers: dict[str, str | None]
    repeats: int


# A query answered on several lines (DeepSeek-R1's fixed-K movie files answer some ids twice) is scored by its
# first answer; the others are counted, never scored and never a reason to refuse the file.
REPEATS = "the first answer of a query answered more than once is scored; the later ones are counted"


def response_lines(path: str) -> Iterator[tuple[str, str | None]]:
    """Every answer line of a released responses file, in order: (query id, raw answer or None).

    Raises:
        DataError: no such file, or a line of an unknown shape (the message names the line).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file: pass a released llm_results/ responses JSONL") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = fileio.loads(line)
        except ValueError as err:
            if line.startswith("\ufeff"):
                raise DataError(
                    f"{path} line {number} is not JSON ({err}): save the file as UTF-8 without a byte order "
                    "mark"
                ) from None
            record = None
        found = _response(record) if isinstance(record, dict) else None
        if found is None:
            raise DataError(
                f'{path} line {number}: not a released response: lines are {{"id", "response"}} or OpenAI '
                'batch output ({"custom_id", "response": {"body": {"choices": ...}}})'
            )
        yield found


def read_responses(path: str) -> Responses:
    """Each query id's raw answer, the first where a query is answered more than once (`REPEATS`).

    Raises:
        DataError: a line of an unknown shape; the message names the line.
    """
    answers: dict[str, str | None] = {}
    repeats = 0
    for key, text in response_lines(path):
        if key in answers:
            repeats += 1
        else:
            answers[key] = text
    return Responses(answers, repeats)


def _response(record: Mapping[str, Any]) -> tuple[str, str | None] | None:
    key = record.get("custom_id", record.get("id"))  # batch output's own "id" names the request
    if key is None or not isinstance(key, str | int):
        return None
    response = record.get("response")
    if isinstance(response, str):
        return str(key), response
    if isinstance(response, dict):  # OpenAI batch output; a failed request has no choices
        body = response.get("body") or {}
        choices = (body.get("choices") or [{}]) if isinstance(body, dict) else None
        first = choices[0] if isinstance(choices, list) else None
        message = (first.get("message") or {}) if isinstance(first, dict) else None
        if not isinstance(message, dict):
            return None  # another shape: the caller names the line
        content = message.get("content")
        return str(key), content if isinstance(content, str) else None
    if response is None and record.get("error") is not None:
        return str(key), None
    return None


@dataclass(frozen=True, slots=True)
class Movie:
    id: int
    title: str  # as movies.dat writes it, "Breakfast Club, The (1985)"


def read_movies(path: str) -> list[Movie]:
    """MovieLens-1M's ``movies.dat`` (``MovieID::Title (Year)::Genres``; UTF-8 or Latin-1).

    Raises:
        DataError: a line without an id and a title.
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file: pass MovieLens-1M's movies.dat with --catalogue") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # the GroupLens original
    movies = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split("::")
        if not line.strip():
            continue
        if len(parts) != 3 or not _number(parts[0]) or not parts[1].strip():
            raise DataError(
                f"{path} line {number} has no movie id and title (MovieID::Title (Year)::Genres, the id in "
                "digits 0-9): pass MovieLens-1M's movies.dat with --catalogue"
            )
        movies.append(Movie(int(parts[0]), parts[1].strip()))
    if not movies:
        raise DataError(f"{path} holds no movie: pass MovieLens-1M's movies.dat with --catalogue")
    return movies


def _number(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits (``"¹"`` passes ``isdigit`` but is none).

    >>> _number(" 12 "), _number("¹"), _number("1²")
    (True, False, False)
    """
    text = text.strip()
    return text.isascii() and text.isdigit()


def check_users(path: str) -> int:
    """The number of users of a MovieLens-1M ``users.dat`` (``UserID::Gender::Age::Occupation::Zip``).

    Raises:
        DataError: a line of another shape.
    """
    try:
        lines = [line for line in Path(path).read_text(encoding="latin-1").splitlines() if line.strip()]
    except FileNotFoundError:
        raise DataError(f"{path}: no such file: pass MovieLens-1M's users.dat with --users") from None
    for number, line in enumerate(lines, start=1):
        if len(line.split("::")) != 5:
            raise DataError(
                f"{path} line {number} is not UserID::Gender::Age::Occupation::Zip: pass MovieLens-1M's "
                "users.dat with --users"
            )
    return len(lines)


def matcher(movies: Sequence[Movie]) -> parsing.Matcher:
    """MovieLens-1M's movies by title (`parsing.Matcher`, which reads "Breakfast Club, The (1985)" and "Boat,
    The (Das Boot) (1981)" in every form an answer writes them; equal titles: the lower id first)."""
    return parsing.Matcher((f"{movie.id:08d}", movie.title, 0) for movie in movies)


def corrected_scores(
    query: ReleasedQuery, response: str | None, titles_matcher: parsing.Matcher, *, k: int | None = None
) -> dict[str, float]:
    """A query's metrics under the corrected scoring (module docstring)."""
    truth_keys = []
    for i, title in enumerate(query.titles):
        if query.movie_ids is not None and i < len(query.movie_ids):
            truth_keys.append(f"{int(query.movie_ids[i]):08d}")
        else:
            truth_keys.append(_key(title, titles_matcher))
    parsed = parsing.split_answer(response)
    titles = parsed.value[:k] if parsed.ok and k is not None else parsed.value if parsed.ok else []
    relevant = set(truth_keys)
    seen: set[str] = set()
    prediction = []
    for title in titles:
        key = _key(title, titles_matcher)
        if key in seen:
            continue
        seen.add(key)
        in_catalogue = not key.startswith("title:") or key in relevant
        prediction.append({"title": title, "parent_asin": key if in_catalogue else None, "satisfies": False})
    truth = {"ground_truth": [{"parent_asin": key} for key in dict.fromkeys(truth_keys)]}
    values = {
        name: metrics.value(name, prediction or None, truth) for name in ("recall", "precision", "ndcg")
    }
    values["ftr"] = metrics.value("ftr", prediction or None, truth)
    values["not_in_catalogue"] = metrics.value("hallucination", prediction or None, truth)
    return values


def _key(title: str, titles_matcher: parsing.Matcher) -> str:
    """The item a title names (its MovieLens id), else the title itself, normalized."""
    found = titles_matcher.match(title)
    return found[0] if found else "title:" + parsing.normalize_title(title)


def released_titles(response: str) -> list[str]:
    """The released evaluator's reading of an answer: split on [SEP], each piece stripped of spaces and
    then of single and double quotes, then of one trailing " (YYYY)".

    >>> released_titles('"Heat (1995)" [SEP] Alien')
    ['Heat', 'Alien']
    """
    pieces = [piece.strip().strip("'").strip('"') for piece in response.split(SEP)]
    return [_RELEASED_YEAR.sub("", piece.strip()).strip() for piece in pieces]


class MovieIds:
    """The released evaluator's reading of a title as a catalogue id, precomputed once per catalogue: the
    first movie whose title without its year equals the title without its year (double quotes as single
    ones), else the first whose title contains it; movies.dat stands in for the release's graph."""

    def __init__(self, movies: Sequence[Movie]) -> None:
        bare = [(movie.id, _RELEASED_YEAR.sub("", movie.title)) for movie in movies]
        self._exact: dict[str, int] = {}
        for movie_id, title in bare:
            self._exact.setdefault(title, movie_id)
        self._ids = [movie_id for movie_id, _ in bare]
        self._starts = list(itertools.accumulate((len(title) + 1 for _, title in bare), initial=0))
        self._joined = "\n".join(title for _, title in bare)  # one search: the first title holding a name
        self._found: dict[str, int | None] = {}

    def __bool__(self) -> bool:
        return bool(self._ids)

    def find(self, title: str) -> int | None:
        name = _RELEASED_YEAR.sub("", title).strip().replace('"', "'")
        if name in self._exact:
            return self._exact[name]
        if name not in self._found:
            if len(self._found) > 100_000:
                self._found.clear()
            at = -1 if "\n" in name else self._joined.find(name)
            self._found[name] = None if at < 0 else self._ids[bisect.bisect_right(self._starts, at) - 1]
        return self._found[name]


def released_scores(
    query: ReleasedQuery,
    response: str | None,
    movies: Sequence[Movie] | MovieIds = (),
    *,
    k: int | None = None,
) -> dict[str, float]:
    """A query's recall, precision, NDCG and FTR as the released evaluator computes them.

    - FTR is 1 whenever the answer has no ``[SEP]`` (a one-item answer fails), yet the answer is scored;
    - titles are `released_titles`; with `k`, cut to k and padded with the literal "none";
    - each title becomes the first ground-truth title (year kept) whose difflib ratio to it is >= 0.8;
    - recall = ground-truth titles found / ground-truth titles; precision = the same count / titles read
      (empty pieces and repeats included); NDCG = DCG of the titles (each one in the ground truth scores 1,
      repeats again) / DCG of as many hits as ground-truth titles;
    - condition queries also read each title as a catalogue item (`MovieIds`) and each metric takes the
      larger of the two readings separately.

    A failed request reads as an empty answer, and so does an answer of more than
    `perrec_eval.answers.MAX_ANSWER_CHARS` characters (the bound every reader keeps).
    """
    text = response or ""
    if len(text) > MAX_ANSWER_CHARS:
        text = ""
    titles = released_titles(text)
    if k:
        titles = titles[:k] + ["none"] * max(0, k - len(titles))
    truth = list(query.titles)
    matched = [next((t for t in truth if _similar(title, t)), title) for title in titles]
    values = _released_metrics(matched, truth)
    if query.movie_ids is not None and movies:
        ids = movies if isinstance(movies, MovieIds) else MovieIds(movies)
        by_id = _released_metrics([ids.find(title) for title in titles], list(query.movie_ids))
        values = {name: max(values[name], by_id[name]) for name in values}
    values["ftr"] = float(SEP not in text)
    return values


@functools.lru_cache(maxsize=65_536)
def _similar(left: str, right: str) -> bool:
    return SequenceMatcher(None, left, right).ratio() >= RELEASED_THRESHOLD


def _released_metrics(predicted: Sequence[Any], truth: Sequence[Any]) -> dict[str, float]:
    hits = sum(1 for item in truth if item in predicted)
    dcg = np.sum([(1 if item in truth else 0) / np.log2(rank + 2) for rank, item in enumerate(predicted)])
    ideal = np.sum([1 / np.log2(rank + 2) for rank in range(len(truth))])
    return {
        "recall": hits / len(truth) if truth else 0.0,
        "precision": hits / len(predicted) if predicted else 0.0,
        "ndcg": float(dcg / ideal) if ideal else 0.0,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasedScoreConfig(TaskScoreConfig):
    """Settings of `perrecbench score --task recbench-plus`, which also scores the released files."""

    released_queries: str | None = option(
        "a released RecBench+ query file (dataset/movie/<Type>Query.json); with --responses and --catalogue",
        default=None,
    )
    responses: str | None = option(
        'a released responses JSONL ({"id", "response"} lines or OpenAI batch output)', default=None
    )
    catalogue: str | None = option("MovieLens-1M movies.dat the released titles are matched in", default=None)
    users: str | None = option(
        "MovieLens-1M users.dat (checked; the query file names each group)", default=None
    )
    compat: Literal["released"] | None = option(
        "score as the released evaluator did, defects included",
        default=None,
        shown="the corrected scoring",
    )
    k: int | None = option("read only the first K titles of each answer (the fixed-K variant)", default=None)
    per_query: str | None = option("write one JSON line of metrics per query here", default=None)

    def __post_init__(self) -> None:
        released = (self.released_queries, self.responses, self.catalogue)
        if all(value is None for value in (*released, self.users, self.compat, self.per_query, self.k)):
            TaskScoreConfig.__post_init__(self)
            return
        if any(value is None for value in released):
            raise ConfigError("score the released files with --released-queries, --responses and --catalogue")
        if self.run_dir is not None or self.data is not None or self.predictions is not None:
            raise ConfigError(
                "--released-queries scores released files: leave out the run, --data, --predictions"
            )
        check_seed(self.seed)
        if self.k is not None and not 1 <= self.k <= MAX_K:
            raise ConfigError(f"--k must be between 1 and {MAX_K:,} (titles an answer lists), got {self.k}")


def score_released(
    queries: Sequence[ReleasedQuery],
    responses: Mapping[str, str | None],
    movies: Sequence[Movie],
    *,
    compat: str | None = None,
    k: int | None = None,
) -> list[dict[str, Any]]:
    """One record per query: its id, type, condition count and metrics (a query left unanswered fails).

    Raises:
        DataError: a response to a query the file does not hold.
    """
    known = {query.id for query in queries}
    unknown = [key for key in responses if key not in known]
    if unknown:
        raise DataError(
            f"the responses answer {len(unknown)} queries the query file does not hold (first: "
            f"{unknown[0]!r}): pass the query file these responses were made from"
        )
    titles_matcher = matcher(movies) if compat is None else None
    ids = MovieIds(movies) if compat == "released" else None
    records = []
    for query in queries:
        response = responses.get(query.id)
        if compat == "released":
            values = released_scores(query, response, ids or (), k=k)
        else:
            values = corrected_scores(query, response, titles_matcher, k=k)
        extra = {"condition_num": query.condition_num} if query.condition_num is not None else {}
        records.append(
            {
                "id": query.id,
                **values,
                "query_type": query.query_type,
                **extra,
                "answered": query.id in responses,
            }
        )
    return records


def summary(
    records: Sequence[Mapping[str, Any]], clusters: Sequence[str], *, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Per query type (and condition count), each metric's mean and bootstrap interval over queries."""
    groups: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        groups.setdefault(record["query_type"], []).append(i)
        if record.get("condition_num") is not None:
            groups.setdefault(f"{record['query_type']}/{record['condition_num']} conditions", []).append(i)
    names = [name for name in CORRECTED_METRICS if name in records[0]] if records else []
    out = {}
    for group, rows in groups.items():
        cells = {}
        for name in names:
            values = [float(records[i][name]) for i in rows]
            spec = MetricSpec(name, higher_is_better=name not in ("ftr", "not_in_catalogue"))
            grouped = [clusters[i] for i in rows]
            low, high = spec.interval(
                values,
                grouped if len(set(grouped)) < len(grouped) else None,
                confidence_level=CONFIDENCE_LEVEL,
                n_resamples=N_RESAMPLES,
                seed=seed,
            )
            cells[name] = {"value": spec.value(values), "ci_low": _finite(low), "ci_high": _finite(high)}
        out[group] = {
            "num_queries": len(rows),
            "num_unanswered": sum(not records[i]["answered"] for i in rows),
            "metrics": cells,
        }
    return out


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def score_command(config: ReleasedScoreConfig) -> int:
    """`perrecbench score --task recbench-plus`: the released files (``--released-queries``) or the
    general path's `score` (a run, or a predictions file)."""
    from perrec_eval import outputs
    from perrec_eval.lock import file_lock

    if config.released_queries is None:
        return general_score_command(config)
    if config.per_query is None:
        return _score_released_files(config, None)
    inputs = {
        "--released-queries": config.released_queries,
        "--responses": config.responses,
        "--catalogue": config.catalogue,
        "--users": config.users,
    }
    out = outputs.file_target(
        config.per_query, inputs=inputs, owned=is_per_query_file, command="score", flag="--per-query"
    )
    with file_lock(out):  # checked before the lock, so a refusal leaves no lock file behind
        return _score_released_files(config, out)


def is_per_query_file(path: Path) -> bool:
    """Whether `path` is a ``--per-query`` file (its first line a query's record), the one file
    ``--per-query`` may replace."""
    from perrec_eval import fileio

    return fileio.starts_with_record(path, ("id", "query_type", "answered", "recall"))


def _score_released_files(config: ReleasedScoreConfig, per_query: Path | None) -> int:
    import sys

    from perrec_eval import fileio

    assert config.released_queries is not None
    assert config.responses is not None and config.catalogue is not None
    queries = read_queries(config.released_queries)
    read = read_responses(config.responses)
    responses = read.answers
    movies = read_movies(config.catalogue)
    users = check_users(config.users) if config.users is not None else None
    records = score_released(queries, responses, movies, compat=config.compat, k=config.k)
    result = {
        "task": "recbench-plus",
        "scoring": "released" if config.compat == "released" else "corrected",
        "queries": config.released_queries,
        "responses": config.responses,
        "num_queries": len(queries),
        "num_responses": len(responses),
        "num_repeated_answers": read.repeats,
        "repeated_answers": REPEATS,
        "num_catalogue_items": len(movies),
        "num_users": users,
        "k": config.k,
        "confidence_level": CONFIDENCE_LEVEL,
        "ci_method": CI_METHOD,
        "query_types": summary(records, [query.cluster for query in queries], seed=config.seed),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    if per_query is not None:
        fileio.write_jsonl(per_query, records)
        print(f"written to {config.per_query} (one line per query)", file=sys.stderr)
    return 0
