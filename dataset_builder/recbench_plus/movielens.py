"""RecBench+'s movie half from MovieLens-1M's files (GroupLens ``ml-1m``: ``::``-separated, Latin-1).

- ``ratings.dat`` ``UserID::MovieID::Rating::Timestamp`` is the users' histories (every rating is an
  interaction, as the paper's; timestamps in seconds);
- ``movies.dat`` ``MovieID::Title (Year)::Genre|Genre`` is the catalogue (the title as written, "Wizard of Oz,
  The (1939)") and its first relations: ``genre`` (each of the ``|``-separated genres) and ``year``;
- ``users.dat`` ``UserID::Gender::Age::Occupation::Zip`` gives the demographic groups (codes as words,
  :data:`AGES`, :data:`OCCUPATIONS`, :data:`GENDERS`).

Further item relations (the paper's director, actors, composer... from Wikipedia) come from an item-attribute
file (`read_item_attributes`, ``--item-attributes``) that any knowledge source can export.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataset_builder.config import BuildError
from dataset_builder.recbench_plus.kg import Fact, normalize_value
from dataset_builder.sources import InputFile, Source
from perrec_eval.fileio import loads

# MovieLens-1M's README: the codes of users.dat
AGES: dict[int, str] = {
    1: "Under 18", 18: "18-24", 25: "25-34", 35: "35-44", 45: "45-49", 50: "50-55", 56: "56+",
}  # fmt: skip
OCCUPATIONS: dict[int, str] = {
    0: "other", 1: "academic/educator", 2: "artist", 3: "clerical/admin", 4: "college/grad student",
    5: "customer service", 6: "doctor/health care", 7: "executive/managerial", 8: "farmer", 9: "homemaker",
    10: "K-12 student", 11: "lawyer", 12: "programmer", 13: "retired", 14: "sales/marketing", 15: "scientist",
    16: "self-employed", 17: "technician/engineer", 18: "tradesman/craftsman", 19: "unemployed", 20: "writer",
}  # fmt: skip
GENDERS: dict[str, str] = {"M": "Male", "F": "Female"}
_TITLE_YEAR = re.compile(r"\((\d{4})\)\s*$")
_FIELDS = {"reviews": 4, "meta": 3, "users": 5}
SHAPES = {
    "reviews": "UserID::MovieID::Rating::Timestamp",
    "meta": "MovieID::Title (Year)::Genres",
    "users": "UserID::Gender::Age::Occupation::Zip",
}


_MAX_TIMESTAMP = 2**63 - 1  # seconds, as the history's int64 column holds them


def _lines(data: bytes) -> list[tuple[str, bool]]:
    """Each line of a MovieLens file and whether it is text in the file's encoding: UTF-8 where at least
    half of its non-ASCII lines are UTF-8 (some copies were converted; a line that is not is a bad line,
    never a reason to read the whole file as Latin-1), else GroupLens's Latin-1 (where any byte is a
    letter). A UTF-8 byte order mark at the start is not part of the first line.

    >>> utf8 = b"1::Am\\xc3\\xa9lie (2001)::Drama\\n3::\\xc3\\x89t\\xc3\\xa9 (2002)::Drama\\n"
    >>> _lines(b"\\xef\\xbb\\xbf" + utf8 + b"2::B\\xe9b\\xe9 (1990)::Drama")[::2]
    [('1::Amélie (2001)::Drama', True), ('2::Bébé (1990)::Drama', False)]
    >>> _lines(b"2::B\\xe9b\\xe9 (1990)::Drama")
    [('2::Bébé (1990)::Drama', True)]
    """
    raw = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    wide = [line for line in raw if not line.isascii()]
    good = sum(_is_utf8(line) for line in wide)  # a Latin-1 line is valid UTF-8 only by rare chance
    utf8 = good > 0 and good * 2 >= len(wide)
    if not utf8:
        return [(line.decode("latin-1").rstrip("\r"), True) for line in raw]
    return [
        (line.decode("utf-8" if good else "latin-1").rstrip("\r"), good)
        for line, good in ((line, _is_utf8(line)) for line in raw)
    ]


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _number(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits (``"1²"`` and ``"١"`` pass ``isdigit`` but are not).

    >>> _number("42"), _number(" 7 "), _number("1²"), _number("-1")
    (True, True, False, False)
    """
    text = text.strip()
    return text.isascii() and text.isdigit()


def _problem(kind: str, parts: list[str]) -> str | None:
    """Why one split line of a MovieLens file is unusable (None: fine).

    >>> _problem("reviews", ["1", "2", "5", "978300760"]), _problem("users", ["1", "X", "1", "10", "4"])
    (None, "gender must be M or F, got 'X'")
    >>> _problem("reviews", ["1", "2", "5", "99999999999999999999999"])
    'the timestamp must be seconds from 0 to 9223372036854775807, got 99999999999999999999999'
    """
    if len(parts) != _FIELDS[kind]:
        return f"expected {SHAPES[kind]}, got {len(parts)} fields"
    if not _number(parts[0]):
        return f"the id must be a number, got {parts[0]!r}"
    if kind == "reviews" and not (_number(parts[1]) and _number(parts[2]) and _number(parts[3])):
        return "movie id, rating and timestamp must be numbers"
    if kind == "reviews" and int(parts[3]) > _MAX_TIMESTAMP:
        return f"the timestamp must be seconds from 0 to {_MAX_TIMESTAMP}, got {parts[3].strip()[:40]}"
    if kind == "meta" and not parts[1].strip():
        return "the title is empty"
    if kind == "users":
        if parts[1] not in GENDERS:
            return f"gender must be M or F, got {parts[1]!r}"
        if not _number(parts[2]) or int(parts[2]) not in AGES:
            return f"age must be one of the codes {sorted(AGES)}, got {parts[2]!r}"
        if not _number(parts[3]) or int(parts[3]) not in OCCUPATIONS:
            return f"occupation must be a code 0-20, got {parts[3]!r}"
    return None


def read_lines(source: Source, file: InputFile, on_bad_line: str) -> tuple[list[list[str]], dict[str, Any]]:
    """The split lines of one MovieLens file, and its bad-line record (`sources.BadLines.as_dict` shape).

    A line is bad when its fields are not what the file's kind holds, when it is not text in the file's
    encoding (`_lines`), or when it repeats the id of an earlier line of ``movies.dat`` or ``users.dat``
    with other fields (the first is kept: a repeat must not rename a movie or regroup a user silently).

    Raises:
        BuildError: a bad line under ``--on-bad-line error`` (file, line, what is wrong, the fix).
    """
    from dataset_builder.sources import BadLines

    with source.fs.open(file.uri, "rb") as handle:
        lines = _lines(handle.read())
    rows, bad = [], BadLines(file.uri)
    first: dict[str, tuple[int, list[str]]] = {}  # movies.dat and users.dat: id -> (line, fields)
    for number, (line, decoded) in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split("::")
        problem = None if decoded else "the line is not UTF-8 text, as the rest of the file is"
        problem = problem or _problem(file.kind, parts)
        if problem is None and file.kind in ("meta", "users"):
            key = parts[0].strip()
            if key in first:
                earlier, fields = first[key]
                if [p.strip() for p in fields] == [p.strip() for p in parts]:
                    continue  # the same line again: nothing to choose between
                problem = f"id {key} is on line {earlier} too, with other fields (the first one is kept)"
            else:
                first[key] = (number, parts)
        if problem is None:
            rows.append(parts)
            continue
        if on_bad_line == "error":
            raise BuildError(
                f"{file.uri}:{number}: {problem}. Fix or delete that line, or rerun with --on-bad-line skip "
                "to count and skip bad lines (they are reported in manifest.json)."
            )
        bad.count += 1
        bad.reasons[problem.split(",")[0]] += 1
        if len(bad.examples) < 20:
            bad.examples.append({"line": number, "problem": problem})
    return rows, bad.as_dict()


def title_year(title: str) -> str | None:
    """The year a MovieLens title ends with.

    >>> title_year("Wizard of Oz, The (1939)"), title_year("Untitled")
    ('1939', None)
    """
    found = _TITLE_YEAR.search(title)
    return found.group(1) if found else None


def movie_facts(genres: str, title: str) -> list[Fact]:
    """The relations movies.dat gives a movie: each genre and the year.

    >>> [(f.relation, f.value) for f in movie_facts("Animation|Children's", "Toy Story (1995)")]
    [('genre', 'Animation'), ('genre', "Children's"), ('year', '1995')]
    """
    facts = [Fact("genre", g.strip()) for g in genres.split("|") if g.strip()]
    year = title_year(title)
    return facts + ([Fact("year", year)] if year else [])


def read_item_attributes(path: str) -> Iterator[tuple[str, Fact]]:
    """(item id, fact) for every row of an item-attribute file: CSV or TSV with the header ``item_id,
    relation,value`` (by the file's extension), or JSONL of ``{"item_id", "relation", "value"}``.

    Raises:
        BuildError: no such file, another header, or a row without the three fields.
    """
    fix = (
        "write rows of item_id, relation, value (CSV/TSV with that header, or JSONL objects), e.g. "
        "2571,director,Lana Wachowski"
    )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BuildError(f"--item-attributes {path}: {err}; {fix}") from None
    if path.endswith(".jsonl"):
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((number, loads(line)))
            except ValueError:
                raise BuildError(f"--item-attributes {path} line {number} is not JSON: {fix}") from None
    else:
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if path.endswith(".tsv") else ",")
        if reader.fieldnames is None or set(reader.fieldnames) != {"item_id", "relation", "value"}:
            raise BuildError(f"--item-attributes {path}: header {reader.fieldnames}; {fix}")
        records = [(number, row) for number, row in enumerate(reader, start=2)]
    normalized: dict[str, str] = {}  # each distinct value normalized once (a cast repeats its names)
    for number, record in records:
        names = ("item_id", "relation", "value")
        values = [record.get(k) if isinstance(record, dict) else None for k in names]
        if not all(isinstance(v, str | int) and str(v).strip() for v in values):
            raise BuildError(f"--item-attributes {path} line {number}: {fix}")
        item, relation, value = (str(v).strip() for v in values)
        if value not in normalized:
            normalized[value] = normalize_value(value)
        if normalized[value]:
            yield item, Fact(relation, normalized[value])
