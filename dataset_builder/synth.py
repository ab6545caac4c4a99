"""Synthetic raw Amazon Reviews 2023 files with a planted, documented personal preference signal.

``perrecbench synth --out DIR`` writes, per domain, ``<Category>.jsonl`` and ``meta_<Category>.jsonl`` (or
``.jsonl.gz``) in the raw schema of PROTOCOL §1, and ``synth_truth.json`` with the planted parameters (the
builder ignores that file). The demo, the tests and the benchmarks build the benchmark from these files.

The generative model (per domain; independent random streams seeded by ``(seed, domain)``; :class:`Signal`):

* **Topics.** Each domain has six topics of eight topic words. Item ``i`` has one topic ``k(i)``; its title
  carries two of that topic's words among generic words shared by all topics, so BM25 over a user's history
  titles finds the same-topic items.
* **Ratings.** ``rating = clip(round(3.7 + b_u + q_i + a_{u,k(i)} + e), 1, 5)`` with user bias
  ``b_u ~ N(0, 0.5)``, item quality ``q_i ~ N(0, 0.4)``, user-by-topic affinity ``a_{u,k} ~ N(0, 1)`` and
  noise ``e ~ N(0, 0.5)``. Within a group the item quality is shared and the relative rating (rating minus
  the user's average) removes the bias, so what separates the users is their affinity for the query's topic:
  a method that reads the user's ratings of same-topic history items can rank them (ranking by the mean
  rating of the 4 history items whose titles overlap most with the query's gives Kendall tau ≈ 0.5 at 10,000
  reviews per domain), a method that ignores the history cannot (tau 0 in expectation).
* **Activity.** Reviews per user follow ``1 + floor(3 * Lomax(1.8))`` (capped at 400, and at a quarter of the
  items): most users write one or two reviews, a heavy tail writes dozens to hundreds (at 60,000 reviews per
  domain about 14,000 users, 350 of them with more than 20 reviews, writing 28 % of the reviews). Item
  popularity follows ``1 + floor(6 * Lomax(1.3))`` (capped at 1,500); each review picks its item by
  popularity, redrawn until no user reviews an item twice (the clean data has no duplicate reviews).
* **Bursts.** Item ``i`` launches at a uniform time in 2016–2022; 85 % of its reviews come within a
  half-normal burst after launch (sd 12 days: most within a few weeks), 15 % in a long tail (exponential,
  mean 200 days; a tail that would pass 2023-09-01 wraps around to the launch).
* **Equal timestamps,** as in the real data: a review takes the timestamp of the same user's previous review
  with probability 0.06 (several items rated in one millisecond) and that of the previous review of the same
  item with probability 0.01, when that review is at most 30 days earlier.
* **Texts and layout.** Review title/text come from three templates per star rating naming a topic word;
  metadata has every field of PROTOCOL §1 (Books with ``subtitle`` and ``author``: 70 % full, 20 % name only,
  10 % absent); 2 % of items have ``main_category: null``; the review lines are in random order.

Calibration (measured; ``seed`` 0–3): the selection of PROTOCOL §2 finds 430–510 groups at the default
60,000 reviews per domain (240,000 in total), about 1,700 at 240,000 per domain, and 1,680 per domain at
960,000 per domain: roughly 1.8 groups per 1,000 reviews, linear above ~30,000 reviews per domain (fewer
below).
Items and users that fail each criterion occur naturally: most users have at most 20 reviews, long-tail
reviews fall outside any 30-day window, and most co-buyers' relative ratings lie within 0.6 of each other.

``dirty=True`` plants faults in the first domain written; ``synth_truth.json`` records each under ``faults``
with the 1-based line number in the (decompressed) file. The faulty review lines are *extra* lines (copies of
clean reviews with the fault applied), so a reader that skips bad lines sees the clean reviews plus the
duplicate:

* ``duplicate_review`` at line 1: a second review by the domain's most active user of the most reviewed item
  they rated, 7 days after the original and with another rating; the original (earliest) must win.
* ``non_numeric_rating`` before clean line ``n // 3``: ``"rating": "five"``.
* ``missing_field`` before clean line ``n // 2``: the line without ``user_id``.
* ``truncated_line`` before clean line ``2 * n // 3``: the first half of a line (invalid JSON).
* ``no_metadata``: the most reviewed item of the domain has no line in the metadata file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from dataset_builder.schema import DOMAINS

logger = logging.getLogger(__name__)

TRUTH_FILE = "synth_truth.json"
MIN_REVIEWS_PER_DOMAIN = 200
_CHUNK = 100_000
_MS_PER_DAY = 86_400_000
_START_MS = 1_451_606_400_000  # 2016-01-01
_SPAN_DAYS = 7 * 365  # launches until 2022-12-30; every review before 2023-09-01
_END_MS = 1_693_526_400_000  # 2023-09-01


@dataclass(frozen=True, slots=True)
class Signal:
    """The planted rating model and the activity/burst laws (all documented in the module docstring)."""

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


SIGNAL = Signal()


# ------------------------------------------------------------------------------------------------ vocabulary


@dataclass(frozen=True, slots=True)
class _Vocab:
    """Words of one domain; word lists are written as space-separated strings."""

    main_category: str
    category_path: tuple[str, ...]
    topic_text: dict[str, str]  # topic -> its eight topic words
    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]
    templates: tuple[str, ...]  # placeholders {adj} {w1} {w2} {noun} {brand}
    stores: tuple[str, ...]
    detail_keys: tuple[str, ...]

    @property
    def topics(self) -> dict[str, tuple[str, ...]]:
        return {topic: tuple(words.split()) for topic, words in self.topic_text.items()}


_BRANDS = tuple("Zelvo Kimora Arbeck Nuvana Trellis Quorra Halden Vexo Lumina Brisco".split())
_MERCH_STORES = _BRANDS
_VOCABS: dict[str, _Vocab] = {
    "Books": _Vocab(
        main_category="Books",
        category_path=("Books",),
        topic_text={
            "Fantasy": "dragon wizard kingdom sword quest sorcerer elf prophecy",
            "Mystery": "murder detective clue alibi suspect inspector poison witness",
            "Romance": "love heart kiss wedding bride duke passion sweetheart",
            "Science Fiction": "galaxy starship robot planet alien android colony quantum",
            "Cookbooks": "recipes baking bread soup grill vegan pastry skillet",
            "History": "empire war revolution battle dynasty ancient president republic",
        },
        adjectives=tuple("Last Silent Hidden Golden Broken Lost Secret Long Dark Bright".split()),
        nouns=tuple("Story Chronicle Tale Book Guide Saga Journey Legacy".split()),
        templates=(
            "The {adj} {w1}: A {w2} {noun}",
            "{w1} and {w2}",
            "The {w1} of the {adj} {w2}",
            "A {noun} of {w1} and {w2}",
        ),
        stores=("Harbor Press", "Penrose Books", "Oakleaf Publishing", "Northwind House", "Bluejay Editions"),
        detail_keys=("Publisher", "Language", "Paperback", "ISBN-13"),
    ),
    "Clothing_Shoes_and_Jewelry": _Vocab(
        main_category="AMAZON FASHION",
        category_path=("Clothing, Shoes & Jewelry",),
        topic_text={
            "Running": "running athletic mesh sneaker jogging breathable sport trainer",
            "Formal": "dress tuxedo satin silk evening blazer cocktail necktie",
            "Winter": "wool fleece thermal parka insulated snow knit beanie",
            "Jewelry": "necklace pendant sterling silver earrings bracelet gemstone charm",
            "Kids": "toddler baby girls boys cartoon school playful princess",
            "Outdoor": "hiking waterproof cargo boots camping rugged utility canvas",
        },
        adjectives=("Women's", "Men's", "Unisex", "Classic", "Slim", "Relaxed", "Premium", "Casual"),
        nouns=tuple("Shirt Jacket Pants Shoe Set Top Collection Piece".split()),
        templates=(
            "{brand} {adj} {w1} {w2} {noun}",
            "{brand} {w1} {noun} with {w2} Detail",
            "{adj} {w1} {w2} {noun} by {brand}",
        ),
        stores=_MERCH_STORES,
        detail_keys=("Package Dimensions", "Department", "Date First Available"),
    ),
    "Home_and_Kitchen": _Vocab(
        main_category="Amazon Home",
        category_path=("Home & Kitchen",),
        topic_text={
            "Coffee": "coffee espresso grinder brew latte kettle carafe barista",
            "Baking": "baking cake muffin mixer rolling cookie sheet whisk",
            "Bedding": "pillow duvet sheets mattress comforter blanket quilt linen",
            "Cleaning": "vacuum mop scrub microfiber duster broom spray squeegee",
            "Storage": "organizer shelf basket drawer container rack bin hanger",
            "Decor": "candle vase frame rug curtain mirror lantern tapestry",
        },
        adjectives=("Stainless", "Large", "Compact", "Modern", "Rustic", "Deluxe", "Everyday", "Heavy Duty"),
        nouns=tuple("Set Kit Pack Tool Bundle Collection Essentials Station".split()),
        templates=(
            "{brand} {adj} {w1} {w2} {noun}",
            "{adj} {w1} {noun} for {w2}",
            "{brand} {w1} and {w2} {noun}",
        ),
        stores=_MERCH_STORES,
        detail_keys=("Material", "Color", "Product Dimensions", "Date First Available"),
    ),
    "Electronics": _Vocab(
        main_category="All Electronics",
        category_path=("Electronics",),
        topic_text={
            "Audio": "headphones speaker bluetooth earbuds bass soundbar amplifier stereo",
            "Camera": "camera lens tripod zoom photography mirrorless flash gimbal",
            "Gaming": "gaming controller joystick console keyboard mouse headset rgb",
            "Phone": "phone charger case screen protector magsafe cable powerbank",
            "Computer": "laptop monitor ssd router webcam usb hub dock",
            "Smart Home": "smart plug thermostat doorbell alexa sensor bulb outlet",
        },
        adjectives=tuple("Wireless Portable Ultra Pro Mini Fast Dual 4K".split()),
        nouns=tuple("Adapter Kit Device System Bundle Accessory Edition Set".split()),
        templates=(
            "{brand} {adj} {w1} {w2} {noun}",
            "{brand} {w1} {noun} with {w2}",
            "{adj} {w1} for {w2} by {brand}",
        ),
        stores=_MERCH_STORES,
        detail_keys=("Item Weight", "Batteries", "Date First Available", "Manufacturer"),
    ),
}

# Per star rating: (review title, review text with {word}); all JSON-safe ASCII.
_REVIEW_TEMPLATES: dict[int, tuple[tuple[str, str], ...]] = {
    1: (
        ("Very disappointed", "The {word} part was a letdown. Would not buy again."),
        ("Waste of money", "Nothing about the {word} worked for me."),
        ("Returned it", "I expected much more from a {word} item."),
    ),
    2: (
        ("Not great", "The {word} was below what I hoped for."),
        ("Meh", "Some good ideas but the {word} side is weak."),
        ("Could be better", "Not my kind of {word}, sadly."),
    ),
    3: (
        ("It's okay", "Average {word}. Does the job."),
        ("Fine", "Neither good nor bad as {word} goes."),
        ("Three stars", "The {word} is fine, nothing special."),
    ),
    4: (
        ("Pretty good", "Nice {word}, a few small issues."),
        ("Solid", "I enjoy the {word} a lot. Recommended."),
        ("Good value", "Good {word} for the price."),
    ),
    5: (
        ("Love it!", "Exactly the {word} I was looking for."),
        ("Five stars", "Best {word} I have had in years."),
        ("Perfect", "Wonderful {word}. Buying another one."),
    ),
}
_FIRST_NAMES = ("Maria", "James", "Aiko", "Omar", "Elena", "David", "Priya", "Lucas", "Grace", "Tomas")
_LAST_NAMES = ("Hart", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Reyes", "Castell", "Brennan", "Novak")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


# ------------------------------------------------------------------------------------------------ generation


@dataclass(slots=True)
class _Domain:
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


def _variants(name: str) -> int:
    """Asins per item: the parent plus child variants (sizes, colours) in some categories."""
    return {"Books": 1, "Clothing_Shoes_and_Jewelry": 3}.get(name, 2)


def _domain_rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode())]))


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
    close = ts[order][1:] - ts[order][:-1] <= 30 * _MS_PER_DAY
    pick = same & close & (rng.random(same.size) < share)
    ts[order[1:][pick]] = ts[order[:-1][pick]]


def _generate(name: str, n: int, seed: int, signal: Signal = SIGNAL) -> _Domain:
    rng = _domain_rng(seed, name)
    n_topics = len(_VOCABS[name].topics)
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
    item_launch = _START_MS + (rng.random(n_items) * _SPAN_DAYS * _MS_PER_DAY).astype(np.int64)

    user = np.repeat(np.arange(n_users), per_user)
    item = _draw_items(rng, user, popularity)
    in_burst = rng.random(n) < signal.burst_share
    offset_days = np.where(
        in_burst,
        np.abs(rng.normal(0.0, signal.burst_sd_days, n)),
        rng.exponential(signal.tail_mean_days, n),
    )
    # wrap long tails that would pass the end of the data (clipping would pile them onto one millisecond)
    timestamp = item_launch[item] + (offset_days * _MS_PER_DAY).astype(np.int64) % (
        _END_MS - item_launch[item]
    )
    _share_timestamps(rng, user, timestamp, signal.same_user_timestamp_share)
    _share_timestamps(rng, item, timestamp, signal.same_item_timestamp_share)

    latent = (
        signal.base
        + user_bias[user]
        + item_quality[item]
        + affinity[user, item_topic[item]]
        + rng.normal(0.0, signal.noise_sd, n)
    )
    rating = np.clip(np.rint(latent), 1, 5).astype(np.int64)
    order = rng.permutation(n)  # file order: shuffled, as builders must not rely on it
    return _Domain(
        name=name,
        user=user[order],
        item=item[order],
        timestamp=timestamp[order],
        rating=rating[order],
        template=rng.integers(0, 3, n),
        child=rng.integers(0, _variants(name), n),
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


def _user_ids(n_users: int) -> np.ndarray:
    """28-character ids like the real ones (``A`` + 27 base-32 characters); user i has one id everywhere."""
    index = np.arange(n_users, dtype=np.uint64)
    head = _encode(_mix64(index, 0x5EED), 13, _B32)  # unique: 13 base-32 digits hold 64 bits
    tail = _encode(_mix64(index, 0xA11CE), 14, _B32)
    return np.char.add(np.char.add("A", head), tail)


def _item_ids(name: str, n_items: int, variants: int) -> np.ndarray:
    """``(n_items, variants)`` distinct asins; column 0 is the parent asin. Books use ISBN-10-like digits."""
    salt = zlib.crc32(name.encode())
    if name == "Books":
        return _encode(_affine(n_items * variants, salt, 10**10), 10, _B36[:10]).reshape(n_items, variants)
    body = _encode(_affine(n_items * variants, salt, 36**8), 8, _B36)
    return np.char.add("B0", body).reshape(n_items, variants)


# ------------------------------------------------------------------------------------------------ text


def _item_titles(name: str, data: _Domain, rng: np.random.Generator) -> list[str]:
    vocab = _VOCABS[name]
    words = list(vocab.topics.values())
    n = data.item_topic.size
    w1, w2 = rng.integers(0, 8, n), rng.integers(1, 8, n)
    picks = zip(
        data.item_topic.tolist(),
        w1.tolist(),
        ((w1 + w2) % 8).tolist(),  # a different word of the same topic
        rng.integers(0, len(vocab.templates), n).tolist(),
        rng.integers(0, len(vocab.adjectives), n).tolist(),
        rng.integers(0, len(vocab.nouns), n).tolist(),
        rng.integers(0, len(_BRANDS), n).tolist(),
        strict=True,
    )
    return [
        vocab.templates[t].format(
            adj=vocab.adjectives[a],
            w1=words[k][i].title(),
            w2=words[k][j].title(),
            noun=vocab.nouns[o],
            brand=_BRANDS[b],
        )
        for k, i, j, t, a, o, b in picks
    ]


def _date_text(ms: int) -> str:
    day = time.gmtime(ms // 1000)
    return f"{_MONTHS[day.tm_mon - 1]} {day.tm_mday}, {day.tm_year}"


_q = json.encoder.encode_basestring_ascii  # a JSON string literal, exactly as json.dumps writes it


def _meta_lines(name: str, data: _Domain, asins: np.ndarray, titles: list[str], rng: np.random.Generator,
                skip: set[str]) -> Iterator[str]:  # fmt: skip
    """One metadata JSON line per reviewed item not in ``skip``, in item order.

    Keys in the order of the real files; the text is what ``json.dumps`` would write (tested), rendered
    with f-strings because this loop runs once per item.
    """
    vocab = _VOCABS[name]
    topic_words = list(vocab.topics.items())
    n_items = data.item_topic.size
    counts = np.bincount(data.item, minlength=n_items)
    average = np.round(
        np.bincount(data.item, weights=data.rating, minlength=n_items) / np.maximum(counts, 1), 1
    )
    price = np.round(np.exp(rng.normal(3.0, 0.8, n_items)), 2)
    has_price = rng.random(n_items) < 0.7
    store = rng.integers(0, len(vocab.stores), n_items)
    pages = rng.integers(90, 900, n_items)
    author_kind = rng.random(n_items)
    first, last = rng.integers(0, len(_FIRST_NAMES), n_items), rng.integers(0, len(_LAST_NAMES), n_items)
    no_main = rng.random(n_items) < 0.02
    main = _q(vocab.main_category)
    keep = np.flatnonzero(counts)  # items nobody reviewed are left out
    rows = zip(
        keep.tolist(),
        asins[keep, 0].tolist(),
        data.item_topic[keep].tolist(),
        data.item_launch[keep].tolist(),
        counts[keep].tolist(),
        average[keep].tolist(),
        np.where(has_price, price, np.nan)[keep].tolist(),
        store[keep].tolist(),
        pages[keep].tolist(),
        author_kind[keep].tolist(),
        first[keep].tolist(),
        last[keep].tolist(),
        no_main[keep].tolist(),
        strict=True,
    )
    for i, parent, topic_index, launch, count, avg, cost, shop, n_pages, kind, fst, lst, no_mc in rows:
        if parent in skip:
            continue
        topic, words = topic_words[topic_index]
        launched = _date_text(launch)
        title = _q(titles[i])
        shop_name = vocab.stores[shop]
        details = {
            "Publisher": shop_name,
            "Language": "English",
            "Paperback": f"{n_pages} pages",
            "ISBN-13": f"978-{parent}",
            "Date First Available": launched,
            "Manufacturer": shop_name,
            "Department": "Unisex-adult" if i % 3 else "Womens",
            "Material": words[0].title(),
            "Color": ("Black", "White", "Gray", "Blue")[i % 4],
            "Item Weight": f"{n_pages / 100:.1f} ounces",
            "Product Dimensions": f"{n_pages // 40} x {n_pages // 60} x 2 inches",
            "Package Dimensions": f"{n_pages // 50} x 8 x 2 inches",
            "Batteries": "1 Lithium Ion batteries required." if i % 2 else "No batteries",
        }
        detail_text = ", ".join(f"{_q(key)}: {_q(details[key])}" for key in vocab.detail_keys)
        description = f"[{_q(f'A {topic.lower()} favourite: {titles[i]}.')}]" if i % 4 else "[]"
        categories = ", ".join(_q(c) for c in (*vocab.category_path, topic))
        books = ""
        if name == "Books":
            books = f', "subtitle": {_q(f"Paperback – {launched}")}'
            author = f"{_FIRST_NAMES[fst]} {_LAST_NAMES[lst]}"
            if kind < 0.7:
                about = _q(f"{author} writes about {words[2]} and {words[3]}.")
                avatar = f"https://m.media-amazon.com/images/S/author-{fst}{lst}.jpg"
                books += f', "author": {{"name": {_q(author)}, "avatar": "{avatar}", "about": [{about}]}}'
            elif kind < 0.9:
                books += f', "author": {{"name": {_q(author)}}}'  # partial; the other 10 % have no author
        image = f"https://m.media-amazon.com/images/I/{parent}"
        yield (
            f'{{"main_category": {"null" if no_mc else main}, "title": {title}, "average_rating": {avg!r}, '
            f'"rating_number": {count}, "features": [{_q(f"Great for {words[0]} and {words[1]} fans")}, '
            f'{_q(f"{topic} collection")}], "description": {description}, '
            f'"price": {"null" if cost != cost else repr(cost)}, '
            f'"images": [{{"thumb": "{image}._SS40_.jpg", "large": "{image}.jpg", "variant": "MAIN", '
            f'"hi_res": null}}], "videos": [], "store": {_q(shop_name)}, "categories": [{categories}], '
            f'"details": {{{detail_text}}}, "parent_asin": "{parent}", "bought_together": null{books}}}\n'
        )


# ------------------------------------------------------------------------------------------------ writing


@dataclass(frozen=True, slots=True)
class _Lines:
    """Pre-rendered JSON pieces (object arrays); a review line is ``head + item + user + timestamp + tail``.

    * ``heads[((rating - 1) * topics + topic) * 3 + template]``:
      ``{"rating": ..., "title": ..., "text": ..., "images": [], "asin": "``
    * ``items[item * variants + child]``: ``ASIN", "parent_asin": "P", "user_id": "``
    * ``users[user]``: ``UID", "timestamp": ``
    * ``tails[helpful * 2 + verified]``: ``, "helpful_vote": ..., "verified_purchase": ...}`` and a newline
    """

    heads: np.ndarray
    items: np.ndarray
    users: np.ndarray
    tails: np.ndarray
    variants: int

    @classmethod
    def make(cls, name: str, user_ids: np.ndarray, asins: np.ndarray, max_helpful: int) -> _Lines:
        heads = []
        for rating in range(1, 6):
            for words in _VOCABS[name].topics.values():
                for variant, (title, text) in enumerate(_REVIEW_TEMPLATES[rating]):
                    body = text.format(word=words[(variant * 3 + rating) % len(words)])
                    heads.append(
                        f'{{"rating": {float(rating)}, "title": {_q(title)}, "text": {_q(body)}, '
                        '"images": [], "asin": "'
                    )
        parents = np.repeat(asins[:, 0], asins.shape[1])
        items = [
            f'{a}", "parent_asin": "{p}", "user_id": "'
            for a, p in zip(asins.ravel().tolist(), parents.tolist(), strict=True)
        ]
        tails = [
            f', "helpful_vote": {h}, "verified_purchase": {v}}}\n'
            for h in range(max_helpful + 1)
            for v in ("false", "true")
        ]
        return cls(
            heads=np.array(heads, dtype=object),
            items=np.array(items, dtype=object),
            users=np.array([f'{u}", "timestamp": ' for u in user_ids.tolist()], dtype=object),
            tails=np.array(tails, dtype=object),
            variants=asins.shape[1],
        )

    def render(self, data: _Domain, start: int, stop: int) -> list[str]:
        """The clean JSON lines of reviews ``[start, stop)``."""
        sl = slice(start, stop)
        item = data.item[sl]
        topic = data.item_topic[item]
        head = ((data.rating[sl] - 1) * data.affinity.shape[1] + topic) * 3 + data.template[sl]
        parts = zip(
            self.heads[head].tolist(),
            self.items[item * self.variants + data.child[sl]].tolist(),
            self.users[data.user[sl]].tolist(),
            map(str, data.timestamp[sl].tolist()),
            self.tails[data.helpful[sl] * 2 + data.verified[sl]].tolist(),
            strict=True,
        )
        return list(map("".join, parts))


@dataclass(frozen=True, slots=True)
class _Fault:
    kind: str
    before: int  # the clean line index this extra line is inserted before
    line: str
    detail: dict


class _AtomicWriter:
    """Write to a hidden temp file next to ``path``; ``commit`` renames it into place, ``abort`` drops it."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self._raw = self.tmp.open("wb")
        # mtime=0 and no file name in the header: the same data gives the same bytes
        self._gz = (
            gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=6)
            if compress
            else None
        )

    def write(self, text: str) -> None:
        (self._gz or self._raw).write(text.encode())

    def _close(self) -> None:
        if self._gz is not None:
            self._gz.close()
        self._raw.close()

    def commit(self) -> None:
        self._close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self._close()
        self.tmp.unlink(missing_ok=True)


def _write_lines(path: Path, compress: bool, chunks: Iterator[str]) -> None:
    writer = _AtomicWriter(path, compress)
    try:
        for chunk in chunks:
            writer.write(chunk)
        writer.commit()
    except BaseException:
        writer.abort()
        raise


def _plan_faults(data: _Domain, lines: _Lines) -> list[_Fault]:
    """The dirty faults of one domain (see the module docstring), as extra lines."""
    n = data.user.size

    def line_at(i: int) -> str:
        return lines.render(data, i, i + 1)[0]

    heavy = int(np.argmax(np.bincount(data.user)))
    own = np.flatnonzero(data.user == heavy)
    original = json.loads(line_at(int(own[np.argmax(np.bincount(data.item)[data.item[own]])])))
    duplicate = {
        **original,
        "rating": 1.0 if original["rating"] >= 3 else 5.0,
        "timestamp": original["timestamp"] + 7 * _MS_PER_DAY,
    }
    kept = {k: original[k] for k in ("user_id", "parent_asin", "rating", "timestamp")}
    non_numeric = {**json.loads(line_at(n // 3)), "rating": "five"}
    missing = json.loads(line_at(n // 2))
    del missing["user_id"]
    whole = line_at(2 * n // 3)
    return [
        _Fault("duplicate_review", 0, json.dumps(duplicate) + "\n", {"kept": kept}),
        _Fault("non_numeric_rating", n // 3, json.dumps(non_numeric) + "\n", {"value": "five"}),
        _Fault("missing_field", n // 2, json.dumps(missing) + "\n", {"field": "user_id"}),
        _Fault(
            "truncated_line", 2 * n // 3, whole[: len(whole) // 2] + "\n", {"kept_chars": len(whole) // 2}
        ),
    ]


def _review_chunks(data: _Domain, lines: _Lines, faults: list[_Fault]) -> Iterator[str]:
    inserts: dict[int, str] = {}
    for fault in faults:
        inserts[fault.before] = inserts.get(fault.before, "") + fault.line
    with tqdm(total=data.user.size, unit="review", desc=f"synth {data.name}", leave=False) as bar:
        for start in range(0, data.user.size, _CHUNK):
            stop = min(start + _CHUNK, data.user.size)
            chunk = lines.render(data, start, stop)
            for before, extra in inserts.items():
                if start <= before < stop:
                    chunk[before - start] = extra + chunk[before - start]
            yield "".join(chunk)
            bar.update(stop - start)


def _batched(lines: Iterator[str], size: int = 20_000) -> Iterator[str]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield "".join(batch)
            batch.clear()
    yield "".join(batch)


class _RawJSON(str):
    """Already serialized JSON (the planted parameters, dumped per domain to keep memory flat)."""


def _write_truth(path: Path, truth: dict) -> None:
    """JSON with one line per top-level key, per domain and per fault (readable, yet fast to write)."""

    def dump(value) -> str:
        return value if isinstance(value, _RawJSON) else json.dumps(value, separators=(", ", ": "))

    parts = []
    for key, value in truth.items():
        if isinstance(value, dict) and value:
            body = ",\n".join(f"  {dump(k)}: {dump(v)}" for k, v in value.items())
            parts.append(f"{dump(key)}: {{\n{body}\n}}")
        elif isinstance(value, list) and value:
            body = ",\n".join(f"  {dump(v)}" for v in value)
            parts.append(f"{dump(key)}: [\n{body}\n]")
        else:
            parts.append(f"{dump(key)}: {dump(value)}")
    _write_lines(path, False, iter(["{\n" + ",\n".join(parts) + "\n}\n"]))


# ------------------------------------------------------------------------------------------------ public API


def parse_domains(domains: str | Sequence[str] | None) -> tuple[str, ...]:
    """The domains to write: ``None`` means the paper's four; a comma-separated string or a sequence.

    >>> parse_domains("Books, Electronics")
    ('Books', 'Electronics')
    >>> parse_domains(None) == DOMAINS
    True
    """
    if domains is None:
        return DOMAINS
    names = [d.strip() for d in (domains.split(",") if isinstance(domains, str) else domains) if d.strip()]
    unknown = [d for d in names if d not in _VOCABS]
    if unknown or not names:
        raise ValueError(f"unknown or empty domains {unknown or names}; choose from {', '.join(DOMAINS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"domains listed twice in {names}; list each once")
    return tuple(names)


def write_synthetic(
    out: str | Path,
    *,
    reviews_per_domain: int = 60_000,
    domains: str | Sequence[str] | None = None,
    seed: int = 0,
    gzip: bool = False,
    dirty: bool = False,
) -> dict:
    """Write synthetic raw files for each domain plus ``synth_truth.json``; return a small summary.

    Args:
        out: output folder (created; our files in it are replaced atomically, other files are left alone).
        reviews_per_domain: clean review lines per domain (``dirty`` adds four faulty lines to the first).
        domains: categories to write (default: the paper's four).
        seed: the random seed; the same seed gives byte-identical files.
        gzip: write ``.jsonl.gz`` instead of ``.jsonl``.
        dirty: plant the faults of the module docstring in the first domain.

    Returns:
        ``{"out", "truth", "seed", "reviews_per_domain", "domains": {name: counts}, "faults", "seconds",
        "reviews_per_second"}``; ``synth_truth.json`` holds the same plus the planted per-user and per-item
        parameters.
    """
    names = parse_domains(domains)
    if isinstance(reviews_per_domain, bool) or not isinstance(reviews_per_domain, int):
        raise ValueError(f"reviews_per_domain must be an integer, got {reviews_per_domain!r}")
    if reviews_per_domain < MIN_REVIEWS_PER_DOMAIN:
        raise ValueError(
            f"reviews_per_domain must be at least {MIN_REVIEWS_PER_DOMAIN}, got {reviews_per_domain}"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; pass a folder path")
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".jsonl.gz" if gzip else ".jsonl"
    started = time.perf_counter()
    summary: dict = {
        "generator": "perrecbench synth (dataset_builder/synth.py)",
        "seed": seed,
        "reviews_per_domain": reviews_per_domain,
        "gzip": gzip,
        "dirty": dirty,
        "model": "rating = clip(round(base + user_bias[u] + item_quality[i] + user_topic_affinity[u, "
        "item_topic[i]] + noise), 1, 5)",
        "signal": asdict(SIGNAL),
        "domains": {},
        "faults": [],
    }
    planted: dict[str, _RawJSON] = {}
    for position, name in enumerate(tqdm(names, desc="synth domains", unit="domain", leave=False)):
        counts, parameters, faults = _write_domain(
            out, name, reviews_per_domain, seed, suffix, dirty and position == 0
        )
        summary["domains"][name] = counts
        summary["faults"].extend(faults)
        planted[name] = parameters
    _write_truth(out / TRUTH_FILE, {**summary, "planted": planted})
    seconds = time.perf_counter() - started
    total = reviews_per_domain * len(names)
    logger.info("wrote %d reviews in %.1f s (%.0f reviews/s) to %s", total, seconds, total / seconds, out)
    return {
        "out": str(out),
        "truth": str(out / TRUTH_FILE),
        **summary,
        "seconds": round(seconds, 3),
        "reviews_per_second": round(total / seconds),
    }


def _write_domain(
    out: Path, name: str, n: int, seed: int, suffix: str, dirty: bool
) -> tuple[dict, _RawJSON, list[dict]]:
    data = _generate(name, n, seed)
    text_rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode()), 1]))
    n_users, n_items = data.user_bias.size, data.item_topic.size
    users = _user_ids(n_users)
    asins = _item_ids(name, n_items, _variants(name))
    titles = _item_titles(name, data, text_rng)
    lines = _Lines.make(name, users, asins, int(data.helpful.max()))
    review_file, meta_file = f"{name}{suffix}", f"meta_{name}{suffix}"
    compress = suffix.endswith(".gz")

    faults = _plan_faults(data, lines) if dirty else []
    no_meta = {str(asins[int(np.argmax(np.bincount(data.item))), 0])} if dirty else set()
    _write_lines(out / review_file, compress, _review_chunks(data, lines, faults))
    _write_lines(
        out / meta_file, compress, _batched(_meta_lines(name, data, asins, titles, text_rng, no_meta))
    )

    recorded = []
    for position, fault in enumerate(faults):
        # extra lines inserted before the same clean line keep their planning order
        shift = sum(other.before < fault.before for other in faults)
        shift += sum(other.before == fault.before for other in faults[:position])
        line = fault.before + shift + 1
        recorded.append({"kind": fault.kind, "file": review_file, "line": line, **fault.detail})
    recorded += [{"kind": "no_metadata", "file": meta_file, "parent_asin": asin} for asin in sorted(no_meta)]

    activity = np.bincount(data.user, minlength=n_users)
    counts = {
        "review_file": review_file,
        "meta_file": meta_file,
        "reviews": int(n),
        "users": int(n_users),
        "items": int(n_items),
        "items_with_metadata": int((np.bincount(data.item, minlength=n_items) > 0).sum()) - len(no_meta),
        "users_over_20_reviews": int((activity > 20).sum()),
        "reviews_by_users_over_20": int(activity[activity > 20].sum()),
        "same_user_same_ms_reviews": _equal_timestamp_count(data),
    }
    parameters = {
        "topics": {topic: list(words) for topic, words in _VOCABS[name].topics.items()},
        "user_id": users.tolist(),
        "user_bias": np.round(data.user_bias, 3).tolist(),
        "user_topic_affinity": np.round(data.affinity, 3).tolist(),
        "parent_asin": asins[:, 0].tolist(),
        "item_topic": data.item_topic.tolist(),
        "item_quality": np.round(data.item_quality, 3).tolist(),
        "item_launch_ms": data.item_launch.tolist(),
    }
    return counts, _RawJSON(json.dumps(parameters, separators=(", ", ": "))), recorded


def _equal_timestamp_count(data: _Domain) -> int:
    """Reviews sharing their millisecond with another review of the same user."""
    order = _order_by(data.user, data.timestamp)
    user, ts = data.user[order], data.timestamp[order]
    return int(((user[1:] == user[:-1]) & (ts[1:] == ts[:-1])).sum())


def main(args: argparse.Namespace) -> int:
    """``perrecbench synth``: write the files and print a one-screen summary."""
    try:
        summary = write_synthetic(
            args.out,
            reviews_per_domain=args.reviews_per_domain,
            domains=args.domains,
            seed=args.seed,
            gzip=args.gzip,
            dirty=args.dirty,
        )
    except ValueError as err:
        print(f"perrecbench synth: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {summary['out']} in {summary['seconds']} s ({summary['reviews_per_second']:,} reviews/s)")
    for name, info in summary["domains"].items():
        print(
            f"  {name}: {info['reviews']:,} reviews, {info['users']:,} users "
            f"({info['users_over_20_reviews']:,} with >20 reviews), {info['items']:,} items"
        )
    for fault in summary["faults"]:
        where = f"line {fault['line']}" if "line" in fault else fault["parent_asin"]
        print(f"  planted fault {fault['kind']}: {fault['file']} {where}")
    print(f"  planted parameters: {summary['truth']}")
    return 0
