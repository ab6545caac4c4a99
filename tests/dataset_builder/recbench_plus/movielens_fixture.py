"""A small hand-made MovieLens-1M folder (GroupLens layout: ``::``-separated, Latin-1) for the movie half's
tests: 40 movies of ten genres and ten years, 60 users of three ages, two genders and three occupations, and
ratings with planted group tastes (each occupation prefers its own genres)."""

from __future__ import annotations

import random
from pathlib import Path

GENRES = (
    "Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi", "Western", "Musical", "War", "Film-Noir",
)  # fmt: skip
OCCUPATION_GENRES = {2: ("Horror", "Sci-Fi"), 12: ("Western", "War"), 20: ("Romance", "Musical")}
USER_CODES = [(g, a, o) for g in "MF" for a in (18, 25, 35) for o in OCCUPATION_GENRES]  # 18 profiles


def movies() -> list[tuple[int, str, str]]:
    """(id, title with year, genres): every fourth movie holds two genres; titles in MovieLens's forms."""
    out = []
    for i in range(1, 41):
        genres = [GENRES[i % 10]] + ([GENRES[(i + 3) % 10]] if i % 4 == 0 else [])
        title = f"Movie {i}, The ({1980 + i % 10})" if i % 5 == 0 else f"Film Number {i} ({1980 + i % 10})"
        out.append((i, title, "|".join(genres)))
    out[0] = (1, "Amélie (Le Fabuleux destin d'Amélie Poulain) (1981)", out[0][2])  # a Latin-1 title
    return out


def write(folder: Path, *, users: int = 60, seed: int = 0) -> Path:
    """Write ratings.dat, movies.dat and users.dat into `folder` (Latin-1, as GroupLens ships them)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    catalogue = movies()
    lines = [f"{i}::{title}::{genres}" for i, title, genres in catalogue]
    (folder / "movies.dat").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    people, ratings = [], []
    for user in range(1, users + 1):
        gender, age, occupation = USER_CODES[user % len(USER_CODES)]
        people.append(f"{user}::{gender}::{age}::{occupation}::0{user:04d}")
        liked = [i for i, _, g in catalogue if set(g.split("|")) & set(OCCUPATION_GENRES[occupation])]
        others = [i for i, _, _ in catalogue if i not in liked]
        chosen = rng.sample(liked, min(len(liked), 6)) + rng.sample(others, 4)
        for n, movie in enumerate(chosen):
            ratings.append(f"{user}::{movie}::{rng.randint(1, 5)}::{978300000 + user * 100 + n}")
    (folder / "users.dat").write_bytes(("\n".join(people) + "\n").encode("latin-1"))
    (folder / "ratings.dat").write_bytes(("\n".join(ratings) + "\n").encode("latin-1"))
    return folder
