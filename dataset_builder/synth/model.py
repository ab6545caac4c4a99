"""The generative model of the synthetic data: users, items, timestamps and ratings with the planted signal.

:func:`generate` draws one domain's reviews as arrays (the laws are documented in :mod:`dataset_builder.synth`
and parameterized by :class:`Signal`); :func:`user_ids` and :func:`item_ids` give users and items ids shaped
like the real ones. Random streams are independent per ``(seed, domain)``, so adding a domain changes no
other domain's data.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from dataset_builder.config import MS_PER_DAY
from dataset_builder.synth.vocab import vocab

_START_MS = 1_451_606_400_000  # 2016-01-01
_SPAN_DAYS = 7 * 365  # launches until 2022-12-30; every review before 2023-09-01
_END_MS = 1_693_526_400_000  # 2023-09-01


@dataclass(frozen=True, slots=True)
class Signal:
    """The planted rating model and the activity and burst laws (see :mod:`dataset_builder.synth`)."""

    base: float = 3.7
    user_bias_sd: float = 0.5
    item_quality_sd: float = 0.4
    affinity_sd: float = 1.0
    noise_sd: float = 0.5
    user_pareto_shape: float = 1.8
    user_pareto_scale: float = 3.0
    user_max_reviews: int = 400
    item_pareto_shape: float = 1.3
    item_pareto_scale: float = 6.0
    item_max_reviews: int = 1500
    burst_share: float = 0.85
    burst_sd_days: float = 12.0
    tail_mean_days: float = 200.0
    same_user_timestamp_share: float = 0.06
    same_item_timestamp_share: float = 0.01
    chain_share: float = 0.3


SIGNAL = Signal()


@dataclass(slots=True)
class Domain:
    """All arrays of one synthetic domain; reviews are in file order."""

    name: str
    user: np.ndarray  # int64 user index per review
    item: np.ndarray  # int64 item index per review
    timestamp: np.ndarray  # int64 ms
    rating: np.ndarray  # int64 1..5
    template: np.ndarray  # int64 review template variant
    child: np.ndarray  # int64 child-asin variant (0 = the parent asin itself)
    helpful: np.ndarray
    verified: np.ndarray  # bool
    user_bias: np.ndarray
    affinity: np.ndarray  # users x topics
    item_topic: np.ndarray
    item_quality: np.ndarray
    item_launch: np.ndarray  # ms


def asins_per_item(name: str) -> int:
    """Asins per item: the parent plus child variants (sizes, colours) in some categories."""
    return {"Books": 1, "Clothing_Shoes_and_Jewelry": 3}.get(name, 2)


def domain_rng(seed: int, name: str, *stream: int) -> np.random.Generator:
    """The random stream of one domain (``stream`` numbers further independent streams of that domain)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode()), *stream]))


def _pareto_counts(rng: np.random.Generator, total: int, shape: float, scale: float, cap: int) -> np.ndarray:
    """Counts ``1 + floor(scale * Lomax(shape))``, capped, drawn until they sum exactly to ``total``."""
    draws = np.minimum(1 + np.floor(scale * rng.pareto(shape, size=total)).astype(np.int64), cap)
    cum = np.cumsum(draws)
    keep = int(np.searchsorted(cum, total)) + 1
    counts = draws[:keep].copy()
    counts[-1] -= int(cum[keep - 1]) - total
    return counts


def _draw_items(rng: np.random.Generator, user: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Draw each review's item by popularity, redrawing collisions until no user reviews an item twice."""
    cdf = np.cumsum(weights / weights.sum())
    item = np.minimum(np.searchsorted(cdf, rng.random(user.size), side="right"), weights.size - 1)
    for _ in range(1000):
        key = user * weights.size + item
        order = np.argsort(key, kind="stable")
        dup = order[1:][key[order][1:] == key[order][:-1]]
        if dup.size == 0:
            return item
        item[dup] = np.minimum(np.searchsorted(cdf, rng.random(dup.size), side="right"), weights.size - 1)
    raise RuntimeError("could not draw distinct items per user; use more reviews per domain")


def _order_by(group: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Indices sorting by ``(group, ts)``; a single int64 key when it fits (``ts - start < 2**40`` ms)."""
    if group.size and int(group.max()) < 1 << 22:
        return np.argsort((group << 40) + (ts - _START_MS), kind="stable")
    return np.lexsort((ts, group))


def _share_timestamps(rng: np.random.Generator, group: np.ndarray, ts: np.ndarray, share: float) -> None:
    """Give about ``share`` of reviews the timestamp of the previous review in the same ``group`` (in place).

    Only where that review is at most 30 days earlier, so no review moves far from its item's burst.
    """
    order = _order_by(group, ts)
    same = group[order][1:] == group[order][:-1]
    close = ts[order][1:] - ts[order][:-1] <= 30 * MS_PER_DAY
    pick = same & close & (rng.random(same.size) < share)
    ts[order[1:][pick]] = ts[order[:-1][pick]]


def _plant_chains(
    rng: np.random.Generator,
    user: np.ndarray,
    item: np.ndarray,
    timestamp: np.ndarray,
    item_topic: np.ndarray,
    popularity: np.ndarray,
    share: float,
) -> None:
    """Plant the sequential signal (in place): each item has one successor, another item of its topic
    drawn once by popularity, and with probability ``share`` a review's item becomes the successor of the
    same user's previous item (by time), unless the user already has it. A user's reviews keep their
    times, and no user gets an item twice. (Its own random stream: the other draws do not move.)
    """
    successor = np.arange(item_topic.size)
    for topic in np.unique(item_topic):
        members = np.flatnonzero(item_topic == topic)
        if members.size > 1:
            weights = popularity[members] / popularity[members].sum()
            drawn = rng.choice(members, size=members.size, p=weights)
            clash = drawn == members  # never its own successor: the next member instead
            drawn[clash] = np.roll(members, -1)[clash]
            successor[members] = drawn
    order = _order_by(user, timestamp)
    users, items = user[order].tolist(), item[order].tolist()
    picks = (rng.random(user.size) < share).tolist()
    first = 0
    while first < len(users):
        last = first
        while last < len(users) and users[last] == users[first]:
            last += 1
        owned = set(items[first:last])
        for at in range(first + 1, last):
            chained = int(successor[items[at - 1]])
            if picks[at] and chained not in owned:
                owned.discard(items[at])
                owned.add(chained)
                items[at] = chained
        first = last
    item[order] = items


def generate(name: str, n: int, seed: int, signal: Signal = SIGNAL) -> Domain:
    """Draw one domain's reviews and the planted per-user and per-item parameters.

    Args:
        name: the category (any of :data:`dataset_builder.config.CATEGORIES`).
        n: the number of reviews.
        seed: the random seed (with ``name``, it fixes every draw).
        signal: the parameters of the laws.

    Returns:
        The arrays of the domain, reviews in (shuffled) file order.
    """
    rng = domain_rng(seed, name)
    n_topics = len(vocab(name).topics)
    popularity = _pareto_counts(
        rng, n, signal.item_pareto_shape, signal.item_pareto_scale, signal.item_max_reviews
    ).astype(np.float64)
    # nobody can review more distinct items than a quarter of the catalogue (only binds at tiny sizes)
    user_cap = max(1, min(signal.user_max_reviews, popularity.size // 4))
    per_user = _pareto_counts(rng, n, signal.user_pareto_shape, signal.user_pareto_scale, user_cap)
    n_users, n_items = per_user.size, popularity.size
    user_bias = rng.normal(0.0, signal.user_bias_sd, n_users)
    affinity = rng.normal(0.0, signal.affinity_sd, (n_users, n_topics))
    item_topic = rng.integers(0, n_topics, n_items)
    item_quality = rng.normal(0.0, signal.item_quality_sd, n_items)
    item_launch = _START_MS + (rng.random(n_items) * _SPAN_DAYS * MS_PER_DAY).astype(np.int64)

    user = np.repeat(np.arange(n_users), per_user)
    item = _draw_items(rng, user, popularity)
    in_burst = rng.random(n) < signal.burst_share
    offset_days = np.where(
        in_burst,
        np.abs(rng.normal(0.0, signal.burst_sd_days, n)),
        rng.exponential(signal.tail_mean_days, n),
    )
    # wrap long tails that would pass the end of the data (clipping would pile them onto one millisecond)
    timestamp = item_launch[item] + (offset_days * MS_PER_DAY).astype(np.int64) % (
        _END_MS - item_launch[item]
    )
    _share_timestamps(rng, user, timestamp, signal.same_user_timestamp_share)
    _share_timestamps(rng, item, timestamp, signal.same_item_timestamp_share)
    _plant_chains(
        domain_rng(seed, name, 2), user, item, timestamp, item_topic, popularity, signal.chain_share
    )

    latent = (
        signal.base
        + user_bias[user]
        + item_quality[item]
        + affinity[user, item_topic[item]]
        + rng.normal(0.0, signal.noise_sd, n)
    )
    rating = np.clip(np.rint(latent), 1, 5).astype(np.int64)
    order = rng.permutation(n)  # file order: shuffled, as builders must not rely on it
    return Domain(
        name=name,
        user=user[order],
        item=item[order],
        timestamp=timestamp[order],
        rating=rating[order],
        template=rng.integers(0, 3, n),
        child=rng.integers(0, asins_per_item(name), n),
        helpful=np.minimum(rng.geometric(0.6, n) - 1, 500),
        verified=rng.random(n) < 0.9,
        user_bias=user_bias,
        affinity=affinity,
        item_topic=item_topic,
        item_quality=item_quality,
        item_launch=item_launch,
    )


# ------------------------------------------------------------------------------------------------ identifiers


def _encode(values: np.ndarray, width: int, alphabet: str) -> np.ndarray:
    """Fixed-width strings of ``values`` (uint64) in base ``len(alphabet)``, most significant digit first."""
    base = np.uint64(len(alphabet))
    digits = np.empty((values.size, width), dtype=np.uint8)
    rest = values.astype(np.uint64)
    table = np.frombuffer(alphabet.encode(), dtype=np.uint8)
    for col in range(width - 1, -1, -1):
        digits[:, col] = table[(rest % base).astype(np.int64)]
        rest = rest // base
    return digits.view(f"S{width}").ravel().astype(f"U{width}")


def _mix64(index: np.ndarray, salt: int) -> np.ndarray:
    """A bijection of the 64-bit integers (splitmix64 finalizer), so distinct indices give distinct ids."""
    x = index.astype(np.uint64) + np.uint64(salt)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _affine(count: int, salt: int, modulus: int) -> np.ndarray:
    """A bijection of ``[0, modulus)`` applied to ``0..count-1`` (the multiplier is a prime above 5)."""
    return np.array([(i * 2_654_435_761 + salt) % modulus for i in range(count)], dtype=np.uint64)


_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def user_ids(n_users: int) -> np.ndarray:
    """28-character ids like the real ones (``A`` + 27 base-32 characters); user i has one id everywhere."""
    return user_ids_of(np.arange(n_users, dtype=np.uint64))


def user_ids_of(index: np.ndarray) -> np.ndarray:
    """The ids of users ``index`` (:func:`user_ids` of a block of users, without the others')."""
    index = np.asarray(index, dtype=np.uint64)
    head = _encode(_mix64(index, 0x5EED), 13, _B32)  # unique: 13 base-32 digits hold 64 bits
    tail = _encode(_mix64(index, 0xA11CE), 14, _B32)
    return np.char.add(np.char.add("A", head), tail)


def item_ids(name: str, n_items: int, variants: int) -> np.ndarray:
    """``(n_items, variants)`` distinct asins; column 0 is the parent asin. Books use ISBN-10-like digits."""
    salt = zlib.crc32(name.encode())
    if name == "Books":
        return _encode(_affine(n_items * variants, salt, 10**10), 10, _B36[:10]).reshape(n_items, variants)
    body = _encode(_affine(n_items * variants, salt, 36**8), 8, _B36)
    return np.char.add("B0", body).reshape(n_items, variants)


def equal_timestamp_count(data: Domain) -> int:
    """Reviews sharing their millisecond with another review of the same user."""
    order = _order_by(data.user, data.timestamp)
    user, ts = data.user[order], data.timestamp[order]
    return int(((user[1:] == user[:-1]) & (ts[1:] == ts[:-1])).sum())
