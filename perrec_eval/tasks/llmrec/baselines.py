"""LLMRec's no-LLM baselines, each fitted on the build's train interactions only (`predict`).

The train interactions (the build's ``interactions`` config) hold every user's items but the last two:
no validation or test target reaches a fit. A doc is answered from what its prompt shows an LLM (its
history) and from the fitted model; a sequential answer leaves out every item the user had before the
target (`data.seen_before`), a direct answer, and a sequential one in the ``sequential-candidates`` cell,
ranks the row's candidates. Ties go by ``parent_asin``.

Rating (``rating``):

- ``global-mean``, ``user-mean``, ``item-mean``: the mean train rating of everyone, of the user, of the
  item (the last two fall back to the global mean);
- ``mf``: biased matrix factorisation by alternating least squares, the PerRecBench baseline's model
  (`perrec_eval.tasks.perrecbench.cf.MFModel`, :data:`MF`), one per domain; its prediction is clipped to
  1..5, and an item without train ratings gets the item-mean fallback.

Ranking (``sequential``, ``direct``):

- ``random``: a uniform shuffle of the candidates, or 10 uniform catalogue items the user had not seen;
- ``popularity``: items by train interactions, most first;
- ``item-knn``: the sum over the doc's history of each item's cosine similarity with it (item vectors:
  who interacted with it in train);
- ``bpr``: cornac's BPR matrix factorisation (:data:`BPR_PARAMS`), the user's scores;
- ``sasrec``: cornac's SASRec (:data:`SASREC_PARAMS`) trained on the train sequences, scoring the
  doc's history (oldest first).

``bpr`` and ``sasrec`` need the ``cf`` extra (cornac; SASRec also torch): without it they answer no cell
and a warning says so. Hyper-parameters are fixed, small and seeded (the run's ``--seed``), not tuned.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from perrec_eval.tasks.llmrec import data as build

logger = logging.getLogger(__name__)

LIST_LENGTH = 10  # the prompts ask for 10 items
RATING = ("global-mean", "user-mean", "item-mean", "mf")
RANKING = ("random", "popularity", "item-knn", "bpr", "sasrec")
BASELINES = ("random", "popularity", "global-mean", "user-mean", "item-mean", "mf", "item-knn", "bpr",
             "sasrec")  # fmt: skip
MF = {"factors": 8, "reg": 0.1, "iterations": 10}
BPR_PARAMS = {"k": 32, "max_iter": 100, "learning_rate": 0.05, "lambda_reg": 0.01}
SASREC_PARAMS = {
    "embedding_dim": 32,
    "n_epochs": 5,
    "max_len": 10,  # the builds' default --history-length: the doc's history is what it reads
    "num_blocks": 1,
    "num_heads": 1,
    "dropout": 0.2,
    "batch_size": 512,
    "learning_rate": 0.01,
    "n_sample": 256,
}
_CORNAC = {"bpr": "cornac", "sasrec": "cornac and torch"}


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain's catalogue (``parent_asin`` order) and train interactions as codes."""

    items: np.ndarray
    index: dict[str, int]
    users: dict[str, int]
    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    timestamp: np.ndarray
    user_mean: np.ndarray  # each user's mean train rating
    item_mean: np.ndarray  # each item's (NaN: none in train)

    def codes(self, asins: Sequence[str]) -> list[int]:
        return [self.index[asin] for asin in asins if asin in self.index]


def _key(data: str) -> tuple[str, float]:
    folder = str(Path(data).resolve())
    return folder, (Path(folder) / "manifest.json").stat().st_mtime


@functools.cache
def _domains(folder: str, stamp: float) -> dict[str, Domain]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in build.train_interactions(folder):  # each user's items in their order
        rows.setdefault(row["domain"], []).append(row)
    out = {}
    for domain, items in build.catalogue(folder).items():
        asins = np.array([asin for asin, _ in items])
        index = {asin: i for i, asin in enumerate(asins)}
        train = rows.get(domain, [])
        users: dict[str, int] = {}
        for row in train:
            users.setdefault(row["user_id"], len(users))
        user = np.array([users[r["user_id"]] for r in train], dtype=np.int64)
        item = np.array([index[r["parent_asin"]] for r in train], dtype=np.int64)
        rating = np.array([r["rating"] for r in train], dtype=np.float64)
        out[domain] = Domain(
            items=asins,
            index=index,
            users=users,
            user=user,
            item=item,
            rating=rating,
            timestamp=np.array([r["timestamp"] for r in train], dtype=np.int64),
            user_mean=_means(rating, user, len(users)),
            item_mean=_means(rating, item, len(asins)),
        )
    return out


def domains(data: str) -> dict[str, Domain]:
    """Every domain of the build, read once per build."""
    return _domains(*_key(data))


# ----------------------------------------------------------------------------------------------- ranking


def ranked(doc: build.RecDoc, data: str, scores: np.ndarray, *, candidates: bool = False) -> list[str]:
    """A ranking doc's answer from scores of its domain's items: the row's candidates by score (direct, or
    `candidates`), or the 10 best-scored items the user had not seen before the target (sequential); ties
    by ``parent_asin``."""
    domain = domains(data)[doc.domain]
    if doc.kind == "direct" or candidates:
        at = domain.codes(doc.candidates)
        return [str(domain.items[i]) for i in sorted(at, key=lambda i: (-scores[i], domain.items[i]))]
    masked = scores.astype(np.float64, copy=True)
    masked[domain.codes(sorted(build.seen_before(data, doc)))] = -np.inf
    top = np.argsort(-masked, kind="stable")[:LIST_LENGTH]  # stable: the catalogue is in asin order
    return [str(domain.items[i]) for i in top if np.isfinite(masked[i])]


def _random(doc: build.RecDoc, data: str, seed: int, candidates: bool) -> Any:
    rng = random.Random(f"{seed}:{doc.id}")
    if doc.kind == "rating":
        return float(rng.randint(1, 5))
    if doc.kind == "direct" or candidates:
        return rng.sample(list(doc.candidates), len(doc.candidates))
    seen = build.seen_before(data, doc)
    pool = [asin for asin, _ in build.catalogue(data)[doc.domain] if asin not in seen]
    return rng.sample(pool, min(LIST_LENGTH, len(pool)))


@functools.cache
def _popularity(folder: str, stamp: float) -> dict[str, np.ndarray]:
    return {
        name: np.bincount(domain.item, minlength=len(domain.items)).astype(np.float64)
        for name, domain in _domains(folder, stamp).items()
    }


@functools.cache
def _similarities(folder: str, stamp: float) -> dict[str, sp.csr_matrix]:
    """Per domain: the items' cosine similarities (binary user vectors from train; none with itself)."""
    out = {}
    for name, domain in _domains(folder, stamp).items():
        shape = (len(domain.users), len(domain.items))
        matrix = sp.csr_matrix((np.ones(len(domain.user)), (domain.user, domain.item)), shape=shape)
        matrix.data[:] = 1.0  # a user's item counts once
        norms = np.sqrt(np.asarray(matrix.sum(axis=0)).ravel())
        scaled = matrix @ sp.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0))
        similar = (scaled.T @ scaled).tocsr()
        similar.setdiag(0.0)
        similar.eliminate_zeros()
        out[name] = similar
    return out


def _knn_scores(doc: build.RecDoc, data: str) -> np.ndarray:
    domain = domains(data)[doc.domain]
    history = domain.codes([item["parent_asin"] for item in doc.history])
    similar = _similarities(*_key(data))[doc.domain]
    return np.asarray(similar[history].sum(axis=0)).ravel()


@functools.cache  # one warning per process
def _cornac_ready(name: str) -> bool:
    try:
        import cornac  # noqa: F401

        if name == "sasrec":
            import torch  # noqa: F401
    except ImportError:
        logger.warning(
            "baseline %s skipped: it needs %s (pip install 'perrecbench[cf]')", name, _CORNAC[name]
        )
        return False
    return True


@functools.cache
def _bpr(folder: str, stamp: float, seed: int) -> dict[str, Any]:
    import cornac

    out = {}
    for name, domain in _domains(folder, stamp).items():
        triples = list(zip(domain.user.tolist(), domain.item.tolist(), [1.0] * len(domain.user), strict=True))
        train = cornac.data.Dataset.from_uir(triples, seed=seed)
        model = cornac.models.BPR(**BPR_PARAMS, seed=seed, verbose=False)
        out[name] = (model.fit(train), train)
    return out


def _bpr_scores(doc: build.RecDoc, data: str, seed: int) -> np.ndarray:
    domain = domains(data)[doc.domain]
    model, train = _bpr(*_key(data), seed)[doc.domain]
    user = train.uid_map.get(domain.users.get(doc.user_id, -1))
    if user is None:  # no train interaction (not in a leave-last-out build): popularity
        return _popularity(*_key(data))[doc.domain]
    return _catalogue_scores(model.score(user), train.iid_map, len(domain.items))


def _catalogue_scores(scores: np.ndarray, iid_map: dict[int, int], n_items: int) -> np.ndarray:
    """A cornac model's scores of its known items on the domain's item codes (unknown items: -inf)."""
    out = np.full(n_items, -np.inf)
    codes = np.fromiter(iid_map.keys(), dtype=np.int64)
    out[codes] = np.asarray(scores, dtype=np.float64)[np.fromiter(iid_map.values(), dtype=np.int64)]
    return out


@functools.cache
def _sasrec(folder: str, stamp: float, seed: int) -> dict[str, Any]:
    import cornac

    out = {}
    for name, domain in _domains(folder, stamp).items():
        columns = (domain.user.tolist(), domain.item.tolist(), domain.timestamp.tolist())
        quads = [(u, u, i, t) for u, i, t in zip(*columns, strict=True)]  # one session per user
        train = cornac.data.SequentialDataset.build(quads, fmt="USIT", seed=seed)
        model = cornac.models.SASRec(**SASREC_PARAMS, seed=seed, verbose=False)
        out[name] = (model.fit(train), train)
    return out


def _sasrec_scores(doc: build.RecDoc, data: str, seed: int) -> np.ndarray:
    domain = domains(data)[doc.domain]
    model, train = _sasrec(*_key(data), seed)[doc.domain]
    codes = domain.codes([item["parent_asin"] for item in doc.history])
    history = [train.iid_map[i] for i in codes if i in train.iid_map]
    return _catalogue_scores(model.score(0, history), train.iid_map, len(domain.items))


def _scorer(name: str, data: str, seed: int) -> Callable[[build.RecDoc], np.ndarray]:
    if name == "popularity":
        counts = _popularity(*_key(data))
        return lambda doc: counts[doc.domain]
    if name == "item-knn":
        return lambda doc: _knn_scores(doc, data)
    if name == "bpr":
        return lambda doc: _bpr_scores(doc, data, seed)
    return lambda doc: _sasrec_scores(doc, data, seed)


# ------------------------------------------------------------------------------------------------ rating


def _means(values: np.ndarray, groups: np.ndarray, size: int) -> np.ndarray:
    """Each group's mean value (NaN for a group without one).

    >>> _means(np.array([1.0, 3.0, 5.0]), np.array([0, 0, 2]), 3).tolist()
    [2.0, nan, 5.0]
    """
    totals = np.bincount(groups, weights=values, minlength=size)
    counts = np.bincount(groups, minlength=size)
    return np.divide(totals, counts, out=np.full(size, np.nan), where=counts > 0)


def global_mean(data: str) -> float:
    """The mean train rating over every domain."""
    ratings = np.concatenate([d.rating for d in domains(data).values()])
    return float(ratings.mean())


def _rate(name: str, docs: Sequence[build.RecDoc], data: str, seed: int) -> list[float]:
    overall = global_mean(data)
    answers = []
    for doc in docs:
        domain = domains(data)[doc.domain]
        user, item = domain.users.get(doc.user_id, -1), domain.index.get(doc.parent_asin, -1)
        value = np.nan
        if name == "user-mean" and user >= 0:
            value = domain.user_mean[user]
        elif name in ("item-mean", "mf") and item >= 0:
            value = domain.item_mean[item]
            model = _mf(*_key(data), seed)[doc.domain] if name == "mf" else None
            if model is not None and user >= 0 and model.item_known[item]:
                value = float(np.clip(model.score(user, item), 1.0, 5.0))
        answers.append(overall if name == "global-mean" or np.isnan(value) else float(value))
    return answers


@functools.cache
def _mf(folder: str, stamp: float, seed: int) -> dict[str, Any]:
    from perrec_eval.tasks.perrecbench.cf import MFModel, MFParams, Ratings

    out = {}
    for name, domain in _domains(folder, stamp).items():
        ratings = Ratings.make(domain.user, domain.item, domain.rating, domain.timestamp, domain.index)
        out[name] = MFModel.fit(ratings, len(domain.rating), MFParams(**MF, seed=seed))
    return out


def predict(
    name: str, docs: Sequence[build.RecDoc], *, data: str, seed: int, candidates: bool = False
) -> list[Any] | None:
    """A baseline's answer to every doc of a cell (None: it does not answer this cell's task); with
    `candidates` (the ``sequential-candidates`` cell) a sequential doc's candidates are ranked, as a direct
    doc's always are, rather than the catalogue."""
    if not docs:
        return []
    kind = docs[0].kind
    if name == "random":
        return [_random(doc, data, seed, candidates) for doc in docs]
    if kind == "rating":
        return _rate(name, docs, data, seed) if name in RATING else None
    if name not in RANKING or (name in _CORNAC and not _cornac_ready(name)):
        return None
    score = _scorer(name, data, seed)
    return [ranked(doc, data, score(doc), candidates=candidates) for doc in docs]
