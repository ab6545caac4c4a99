"""Amazon-shaped synthetic data (``perrecbench synth --shape amazon``): a category's sparsity, size ratios and
text lengths as the real Amazon Reviews 2023 release has them, written a block of users at a time.

The dense default (:mod:`dataset_builder.synth.model`) is made for the tests and the demo: many groups per
review, every user active. The real data is much sparser: most users review once or twice and most items a
handful of times, so a 5-core keeps a third of the reviews. This shape reproduces that, at any size up to a
whole category, without holding the reviews: what stays in memory is a few integers per review (each
review's item, shuffled once), per user (its number of reviews) and per item, about 25 bytes per review; the
lines are drawn and written a block of about :attr:`Shape.block_reviews` reviews at a time.

**What it matches**, per category (:data:`CATEGORY_STATS`, the release's table "Grouped by Category" on
amazon-reviews-2023.github.io: users, items (counted in the reviews), ratings, review tokens and metadata
tokens):

* reviews per user and per item: ``ratings / users`` and ``ratings / items`` (Books: 29.5M / 10.3M = 2.86,
  29.5M / 4.4M = 6.7), so ``--reviews-per-domain`` of the real count gives the real numbers of users and
  items;
* the 5-core (Books' 5-core files of the same release: 776,370 users, 495,063 items, 9,488,297 ratings, that
  is 32% of the reviews, 7.5% of the users and 11% of the items): both counts are drawn from discrete Lomax
  laws, ``1 + floor(s * Lomax(a))``, whose shapes (users 1.7, items 1.4) were chosen so that the 5-core of
  the drawn data keeps 28.5% of the reviews, 7.1% of the users and 11.4% of the items (measured at 3M and 10M
  reviews: stable in size); the scales ``s`` give the means above. 56% of the users have one review, 19% two;
* review text length: ``review_tokens / ratings`` tokens of 4 characters (Books: 98 tokens, ≈ 390
  characters), drawn per review from a log-normal law (sigma 1: the median review is 61% of the mean);
* metadata line length: ``meta_tokens / items`` tokens of 4 characters (Books: 841 tokens, ≈ 3,400
  characters, most of it the description);
* metadata for most but not all items ("some items lack metadata", the release says; the share is not
  published): 97% here.

**What it assumes.** Items are paired with users at random in proportion to their drawn counts (a
configuration model: each user's reviews take the next items of one shuffled list of every item's slots, a
repeat within a user drawn again by popularity), so heavy users are not drawn to niche items as real ones
may be: that is why its 5-core is a little smaller than the real one. Ratings follow the dense model's
planted law (:class:`~dataset_builder.synth.model.Signal`), times its item bursts and same-user equal
timestamps; there are no item chains (LLMRec's sequential signal) and no faults or twins. Titles are unique
(a pseudo-word per item), authors and publishers heavy-tailed (most authors one or two books, a few hundred),
so a knowledge graph and a title match meet real cardinalities. Review lines are in random order within a
block of users (blocks in user order); ``synth_truth.json`` records the shape, not per-user parameters.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dataset_builder.config import MS_PER_DAY, BuildConfigError, SynthConfig
from dataset_builder.synth import model
from dataset_builder.synth.vocab import AUTHOR_CATEGORIES, REVIEW_TEMPLATES, date_text, vocab
from perrec_eval import progress

_q = json.encoder.encode_basestring_ascii


class Stats(NamedTuple):
    """One category of the real release: users, items (counted in the reviews), ratings, review tokens and
    metadata tokens."""

    users: float
    items: float
    ratings: float
    review_tokens: float
    meta_tokens: float


K, M, B = 1e3, 1e6, 1e9
# amazon-reviews-2023.github.io, "Grouped by Category" (the release's 33 categories and Unknown).
CATEGORY_STATS: dict[str, Stats] = {
    "All_Beauty": Stats(632.0 * K, 112.6 * K, 701.5 * K, 31.6 * M, 74.1 * M),
    "Amazon_Fashion": Stats(2.0 * M, 825.9 * K, 2.5 * M, 94.9 * M, 510.5 * M),
    "Appliances": Stats(1.8 * M, 94.3 * K, 2.1 * M, 92.8 * M, 95.3 * M),
    "Arts_Crafts_and_Sewing": Stats(4.6 * M, 801.3 * K, 9.0 * M, 350.0 * M, 695.4 * M),
    "Automotive": Stats(8.0 * M, 2.0 * M, 20.0 * M, 824.9 * M, 1.7 * B),
    "Baby_Products": Stats(3.4 * M, 217.7 * K, 6.0 * M, 323.3 * M, 218.6 * M),
    "Beauty_and_Personal_Care": Stats(11.3 * M, 1.0 * M, 23.9 * M, 1.1 * B, 913.7 * M),
    "Books": Stats(10.3 * M, 4.4 * M, 29.5 * M, 2.9 * B, 3.7 * B),
    "CDs_and_Vinyl": Stats(1.8 * M, 701.7 * K, 4.8 * M, 514.8 * M, 287.5 * M),
    "Cell_Phones_and_Accessories": Stats(11.6 * M, 1.3 * M, 20.8 * M, 935.4 * M, 1.3 * B),
    "Clothing_Shoes_and_Jewelry": Stats(22.6 * M, 7.2 * M, 66.0 * M, 2.6 * B, 5.9 * B),
    "Digital_Music": Stats(101.0 * K, 70.5 * K, 130.4 * K, 11.4 * M, 22.3 * M),
    "Electronics": Stats(18.3 * M, 1.6 * M, 43.9 * M, 2.7 * B, 1.7 * B),
    "Gift_Cards": Stats(132.7 * K, 1.1 * K, 152.4 * K, 3.6 * M, 630.0 * K),
    "Grocery_and_Gourmet_Food": Stats(7.0 * M, 603.2 * K, 14.3 * M, 579.5 * M, 462.8 * M),
    "Handmade_Products": Stats(586.6 * K, 164.7 * K, 664.2 * K, 23.3 * M, 125.8 * M),
    "Health_and_Household": Stats(12.5 * M, 797.4 * K, 25.6 * M, 1.2 * B, 787.2 * M),
    "Health_and_Personal_Care": Stats(461.7 * K, 60.3 * K, 494.1 * K, 23.9 * M, 40.3 * M),
    "Home_and_Kitchen": Stats(23.2 * M, 3.7 * M, 67.4 * M, 3.1 * B, 3.8 * B),
    "Industrial_and_Scientific": Stats(3.4 * M, 427.5 * K, 5.2 * M, 235.2 * M, 363.1 * M),
    "Kindle_Store": Stats(5.6 * M, 1.6 * M, 25.6 * M, 2.2 * B, 1.7 * B),
    "Magazine_Subscriptions": Stats(60.1 * K, 3.4 * K, 71.5 * K, 3.8 * M, 1.3 * M),
    "Movies_and_TV": Stats(6.5 * M, 747.8 * K, 17.3 * M, 1.0 * B, 415.5 * M),
    "Musical_Instruments": Stats(1.8 * M, 213.6 * K, 3.0 * M, 182.2 * M, 200.1 * M),
    "Office_Products": Stats(7.6 * M, 710.4 * K, 12.8 * M, 574.7 * M, 682.8 * M),
    "Patio_Lawn_and_Garden": Stats(8.6 * M, 851.7 * K, 16.5 * M, 781.3 * M, 875.1 * M),
    "Pet_Supplies": Stats(7.8 * M, 492.7 * K, 16.8 * M, 905.9 * M, 511.0 * M),
    "Software": Stats(2.6 * M, 89.2 * K, 4.9 * M, 179.4 * M, 67.1 * M),
    "Sports_and_Outdoors": Stats(10.3 * M, 1.6 * M, 19.6 * M, 986.2 * M, 1.3 * B),
    "Subscription_Boxes": Stats(15.2 * K, 641, 16.2 * K, 1.0 * M, 447.0 * K),
    "Tools_and_Home_Improvement": Stats(12.2 * M, 1.5 * M, 27.0 * M, 1.3 * B, 1.5 * B),
    "Toys_and_Games": Stats(8.1 * M, 890.7 * K, 16.3 * M, 707.9 * M, 848.3 * M),
    "Video_Games": Stats(2.8 * M, 137.2 * K, 4.6 * M, 347.9 * M, 137.3 * M),
    "Unknown": Stats(23.1 * M, 13.2 * M, 63.8 * M, 3.3 * B, 232.8 * M),
}
# Books' 5-core in the same release (its "5-core" benchmark files): users, items, ratings.
BOOKS_5CORE = (776_370, 495_063, 9_488_297)


@dataclass(frozen=True, slots=True)
class Shape:
    """The laws of the Amazon shape (see the module docstring for what each matches)."""

    user_pareto_shape: float = 1.7
    user_max_reviews: int = 5_000
    item_pareto_shape: float = 1.4
    item_max_reviews: int = 100_000
    meta_share: float = 0.97
    chars_per_token: float = 4.0
    text_sigma: float = 1.0
    block_reviews: int = 250_000  # reviews drawn at a time (whole users)
    render_lines: int = 10_000  # lines rendered into one string at a time


SHAPE = Shape()


def lomax_scale(mean: float, shape: float, cap: int) -> float:
    """The scale ``s`` for which ``min(1 + floor(s * Lomax(shape)), cap)`` has the given mean.

    ``E = sum_{j=1..cap} P(D >= j) = sum_j (1 + (j - 1) / s) ** -shape``, increasing in ``s``: bisection.

    >>> round(lomax_scale(29.5 / 10.3, 1.7, 5000), 2)
    1.6
    """
    j = np.arange(cap, dtype=np.float64)
    low, high = 1e-6, 1e6
    for _ in range(200):
        mid = math.sqrt(low * high)
        if float(((1.0 + j / mid) ** -shape).sum()) < mean:
            low = mid
        else:
            high = mid
    return math.sqrt(low * high)


def check_disk(config: SynthConfig) -> None:
    """Refuse an Amazon-shaped write larger than the free disk (a whole category is tens of GB).

    Raises:
        BuildConfigError: the files would not fit under ``config.out``.
    """
    need = sum(estimated_bytes(name, config.reviews_per_domain) for name in config.domains)
    if config.gzip:
        need //= 4
    folder = Path(config.out).resolve()
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if need > free:
        raise BuildConfigError(
            f"--shape amazon with --reviews-per-domain {config.reviews_per_domain:,} writes about "
            f"{need / 1e9:,.1f} GB, more than the {free / 1e9:,.1f} GB free under {folder}: free space, "
            "write fewer reviews or domains, or add --gzip"
        )


def estimated_bytes(name: str, reviews: int) -> int:
    """The files' size for `reviews` reviews of a category (review lines plus metadata lines)."""
    stats = CATEGORY_STATS[name]
    chars = SHAPE.chars_per_token
    review = 240 + chars * stats.review_tokens / stats.ratings
    meta = 700 + chars * stats.meta_tokens / stats.items
    return int(reviews * (review + meta * stats.items / stats.ratings))


# ------------------------------------------------------------------------------------------------ words

_SYLLABLES = tuple(
    "ka lo mi ra ven tor sa li na del mar quin bel ro tha sen dor wy lan fe ris co mo jun pa "
    "hal ber tin vor esk ul gan phe ria zor cam bri nol ter osh ana ele imo ura yev xan".split()
)
_FILLER = tuple(
    "the a this that it my our story book one really quite very some more much many every time page "
    "chapter reading read characters plot ending writing author style world series first second new old "
    "good great nice well better best little long short slow fast easy hard simple clear deep warm bright "
    "and but so because while though when after before also just still again never always often".split()
)
_QUALIFIERS = tuple(
    "Classic Contemporary Historical Literary Epic Short Illustrated Collected Modern Dark Light Cozy "
    "Urban Regional Military Political Family Young Adult Teen Children's Graphic Essential Popular".split()
)
_LANGUAGES = (("English", 0.9), ("Spanish", 0.04), ("French", 0.02), ("German", 0.02), ("Italian", 0.01),
              ("Japanese", 0.01))  # fmt: skip
_FORMATS = (("Paperback", 0.45), ("Hardcover", 0.25), ("Kindle", 0.15), ("Mass Market Paperback", 0.08),
            ("Audio CD", 0.04), ("Board book", 0.03))  # fmt: skip
_COLORS = ("Black", "White", "Gray", "Blue", "Red", "Green", "Silver", "Brown", "Pink", "Multicolor")
_MATERIALS = ("Cotton", "Polyester", "Plastic", "Stainless Steel", "Wood", "Glass", "Leather", "Aluminum")


def pseudo_words(index: np.ndarray, salt: int, syllables: int = 3) -> list[str]:
    """A capitalized pseudo-word per index (``syllables`` syllables picked by a hash of the index and
    `salt`): names and title words that do not repeat across a catalogue of millions.

    >>> pseudo_words(np.arange(3), 1)
    ['Lieletha', 'Mirisven', 'Mitorbri']
    """
    mixed = model._mix64(np.asarray(index, dtype=np.uint64), salt)
    n = np.uint64(len(_SYLLABLES))
    parts = []
    for _ in range(syllables):
        parts.append((mixed % n).astype(np.int64))
        mixed = mixed // n
    table = np.array(_SYLLABLES, dtype=object)
    words = table[parts[0]]
    for part in parts[1:]:
        words = words + table[part]
    return [word.capitalize() for word in words.tolist()]


def _sentences(name: str, rng: np.random.Generator, count: int = 2048) -> tuple[list[str], np.ndarray]:
    """A pool of filler sentences (plain ASCII, nothing to escape in JSON) and their lengths + 1 (a space)."""
    words = [w for topic in vocab(name).topics.values() for w in topic] + list(_FILLER) * 3
    table = np.array(words, dtype=object)
    out = []
    for size in rng.integers(6, 30, count).tolist():
        picked = table[rng.integers(0, len(table), size)].tolist()
        out.append(" ".join(picked).capitalize() + ".")
    return out, np.array([len(s) + 1 for s in out], dtype=np.int64)


def _texts(
    rng: np.random.Generator, first: list[str], target: np.ndarray, pool: list[str], lengths: np.ndarray
) -> list[str]:
    """Each text: its `first` sentence, then pool sentences until about `target` characters."""
    mean = float(lengths.mean())
    extra = np.maximum(0, np.rint((target - np.array([len(f) for f in first])) / mean)).astype(np.int64)
    picks = rng.integers(0, len(pool), int(extra.sum())).tolist()
    table = pool
    out = []
    at = 0
    for head, k in zip(first, extra.tolist(), strict=True):
        if k:
            out.append(" ".join([head, *[table[i] for i in picks[at : at + k]]]))
            at += k
        else:
            out.append(head)
    return out


# ------------------------------------------------------------------------------------------------ the draws


@dataclass(slots=True)
class Catalogue:
    """Per item: its topic, quality, launch time and slots (its number of reviews), and its id."""

    topic: np.ndarray
    quality: np.ndarray
    launch: np.ndarray
    slots: np.ndarray
    asins: np.ndarray  # bytes, one per item (the parent asin; Books: ISBN-10-like)


def _catalogue(name: str, n: int, seed: int, shape: Shape) -> tuple[Catalogue, np.ndarray]:
    """The items and the degrees of the users (the numbers of reviews of each)."""
    stats = CATEGORY_STATS[name]
    rng = model.domain_rng(seed, name, 10)
    # caps in proportion at small sizes (a sample of a category has no user of 5,000 reviews), so that the
    # drawn counts' means, hence the numbers of users and items, are the real ratios at every size
    item_cap = min(shape.item_max_reviews, max(50, n // 50))
    user_cap = min(shape.user_max_reviews, max(20, n // 500))
    item_scale = lomax_scale(stats.ratings / stats.items, shape.item_pareto_shape, item_cap)
    user_scale = lomax_scale(stats.ratings / stats.users, shape.user_pareto_shape, user_cap)
    slots = model._pareto_counts(rng, n, shape.item_pareto_shape, item_scale, item_cap).astype(np.int32)
    users = model._pareto_counts(rng, n, shape.user_pareto_shape, user_scale, user_cap).astype(np.int32)
    n_items = slots.size
    topics = len(vocab(name).topics)
    variants = model.asins_per_item(name)
    asins = model.item_ids(name, n_items, variants)[:, 0].astype("S")
    cat = Catalogue(
        topic=rng.integers(0, topics, n_items).astype(np.int8),
        quality=rng.normal(0.0, model.SIGNAL.item_quality_sd, n_items).astype(np.float32),
        launch=model._START_MS + (rng.random(n_items) * model._SPAN_DAYS * MS_PER_DAY).astype(np.int64),
        slots=slots,
        asins=asins,
    )
    return cat, users


def _items_of_reviews(cat: Catalogue, seed: int, name: str) -> np.ndarray:
    """Every review's item: each item repeated by its slots, shuffled once (int32)."""
    rng = model.domain_rng(seed, name, 11)
    items = np.repeat(np.arange(cat.slots.size, dtype=np.int32), cat.slots)
    rng.shuffle(items)
    return items


def _distinct_per_user(rng: np.random.Generator, user: np.ndarray, item: np.ndarray, cdf: np.ndarray) -> None:
    """Redraw (in place, by popularity) each item a user already has, until no user has an item twice."""
    n = np.int64(cdf.size)
    for _ in range(1000):
        key = user.astype(np.int64) * n + item
        order = np.argsort(key, kind="stable")
        dup = order[1:][key[order][1:] == key[order][:-1]]
        if dup.size == 0:
            return
        item[dup] = np.minimum(np.searchsorted(cdf, rng.random(dup.size), side="right"), cdf.size - 1)
    raise RuntimeError("could not draw distinct items per user; use more reviews per domain")


@dataclass(slots=True)
class Block:
    """The reviews of one block of users, in file order."""

    user: np.ndarray  # global user index
    item: np.ndarray
    timestamp: np.ndarray
    rating: np.ndarray
    template: np.ndarray
    helpful: np.ndarray
    verified: np.ndarray
    length: np.ndarray  # target text length in characters


def _block(
    cat: Catalogue,
    items: np.ndarray,
    degrees: np.ndarray,
    first_user: int,
    first_review: int,
    number: int,
    seed: int,
    name: str,
    cdf: np.ndarray,
) -> Block:
    """Draw one block of users' reviews (their items come from `items` at `first_review`)."""
    rng = model.domain_rng(seed, name, 12, number)
    signal = model.SIGNAL
    stats = CATEGORY_STATS[name]
    local = np.repeat(np.arange(degrees.size, dtype=np.int64), degrees)
    item = items[first_review : first_review + local.size].astype(np.int64)
    _distinct_per_user(rng, local, item, cdf)
    n = local.size
    in_burst = rng.random(n) < signal.burst_share
    offset_days = np.where(
        in_burst, np.abs(rng.normal(0.0, signal.burst_sd_days, n)), rng.exponential(signal.tail_mean_days, n)
    )
    launch = cat.launch[item]
    timestamp = launch + (offset_days * MS_PER_DAY).astype(np.int64) % (model._END_MS - launch)
    model._share_timestamps(rng, local, timestamp, signal.same_user_timestamp_share)
    bias = rng.normal(0.0, signal.user_bias_sd, degrees.size)
    affinity = rng.normal(0.0, signal.affinity_sd, (degrees.size, len(vocab(name).topics)))
    topic = cat.topic[item].astype(np.int64)
    latent = (
        signal.base
        + bias[local]
        + cat.quality[item]
        + affinity[local, topic]
        + rng.normal(0.0, signal.noise_sd, n)
    )
    mean_chars = SHAPE.chars_per_token * stats.review_tokens / stats.ratings
    sigma = SHAPE.text_sigma
    length = np.exp(rng.normal(math.log(mean_chars) - sigma**2 / 2, sigma, n))
    order = rng.permutation(n)  # file order within the block
    return Block(
        user=(local + first_user)[order],
        item=item[order],
        timestamp=timestamp[order],
        rating=np.clip(np.rint(latent), 1, 5).astype(np.int64)[order],
        template=rng.integers(0, 3, n)[order],
        helpful=np.minimum(rng.geometric(0.6, n) - 1, 500)[order],
        verified=(rng.random(n) < 0.9)[order],
        length=length[order],
    )


def _review_lines(
    name: str,
    cat: Catalogue,
    block: Block,
    start: int,
    stop: int,
    rng: np.random.Generator,
    pool: tuple[list[str], np.ndarray],
) -> str:
    """The JSON lines of reviews ``[start, stop)`` of a block, as one string."""
    sl = slice(start, stop)
    topics = list(vocab(name).topics.values())
    item, rating, template = block.item[sl], block.rating[sl], block.template[sl]
    topic = cat.topic[item].tolist()
    heads, firsts = [], []
    for r, t, k in zip(rating.tolist(), template.tolist(), topic, strict=True):
        title, text = REVIEW_TEMPLATES[r][t]
        words = topics[k]
        heads.append(f'{{"rating": {float(r)}, "title": {_q(title)}, "text": "')
        firsts.append(text.format(word=words[(t * 3 + r) % len(words)]))
    texts = _texts(rng, firsts, block.length[sl], *pool)
    asins = [a.decode() for a in cat.asins[item].tolist()]
    ids = model.user_ids_of(block.user[sl])
    tails = [
        f'{h}{t}", "images": [], "asin": "{a}", "parent_asin": "{a}", "user_id": "{u}", "timestamp": {ts}, '
        f'"helpful_vote": {v}, "verified_purchase": {"true" if ok else "false"}}}\n'
        for h, t, a, u, ts, v, ok in zip(
            heads,
            texts,
            asins,
            ids.tolist(),
            block.timestamp[sl].tolist(),
            block.helpful[sl].tolist(),
            block.verified[sl].tolist(),
            strict=True,
        )
    ]
    return "".join(tails)


class Totals(NamedTuple):
    """What the meta lines and the summary need from every block: per-item counts and rating sums, per-user
    counts over 20, equal timestamps."""

    count: np.ndarray
    rating_sum: np.ndarray
    equal_ms: int


def review_chunks(
    name: str, n: int, seed: int, shape: Shape = SHAPE
) -> tuple[Catalogue, np.ndarray, Iterator[str], list[Totals]]:
    """The catalogue, the users' degrees, the review file's text in chunks (a generator) and, once it is
    exhausted, one :class:`Totals` in the list."""
    cat, degrees = _catalogue(name, n, seed, shape)
    totals: list[Totals] = []

    def chunks() -> Iterator[str]:
        items = _items_of_reviews(cat, seed, name)
        cdf = np.cumsum(cat.slots, dtype=np.float64)
        cdf /= cdf[-1]
        pool = _sentences(name, model.domain_rng(seed, name, 13))
        count = np.zeros(cat.slots.size, dtype=np.int64)
        rating_sum = np.zeros(cat.slots.size, dtype=np.int64)
        equal = 0
        ends = np.cumsum(degrees, dtype=np.int64)
        first_user, first_review, number = 0, 0, 0
        with progress.bar(total=n, unit="review", desc=f"synth {name}", leave=False) as bar:
            while first_user < degrees.size:
                last = int(np.searchsorted(ends, first_review + shape.block_reviews, side="left")) + 1
                last = min(max(last, first_user + 1), degrees.size)
                block = _block(
                    cat, items, degrees[first_user:last], first_user, first_review, number, seed, name, cdf
                )
                count += np.bincount(block.item, minlength=count.size)
                rated = np.bincount(block.item, weights=block.rating, minlength=count.size)
                rating_sum += rated.astype(np.int64)
                equal += _equal_ms(block)
                rng = model.domain_rng(seed, name, 14, number)
                for start in range(0, block.user.size, shape.render_lines):
                    stop = min(start + shape.render_lines, block.user.size)
                    yield _review_lines(name, cat, block, start, stop, rng, pool)
                    bar.update(stop - start)
                first_review += block.user.size
                first_user, number = last, number + 1
        totals.append(Totals(count, rating_sum, equal))

    return cat, degrees, chunks(), totals


def _equal_ms(block: Block) -> int:
    order = np.lexsort((block.timestamp, block.user))
    user, ts = block.user[order], block.timestamp[order]
    return int(((user[1:] == user[:-1]) & (ts[1:] == ts[:-1])).sum())


# ------------------------------------------------------------------------------------------------ metadata


def _has_meta(n_items: int, seed: int, name: str, share: float) -> np.ndarray:
    return model.domain_rng(seed, name, 15).random(n_items) < share


def _people(rng: np.random.Generator, cat: Catalogue) -> tuple[np.ndarray, np.ndarray]:
    """Each item's author and publisher index: authors write in one topic (most one or two books, a few
    hundreds: Lomax counts), each with a home publisher (heavy-tailed) for 80 % of their books."""
    n = cat.topic.size
    per_author = model._pareto_counts(rng, n, 1.6, 1.2, 500)
    order = np.lexsort((rng.random(n), cat.topic))  # items by topic: an author's books share one
    author = np.empty(n, dtype=np.int64)
    author[order] = np.repeat(np.arange(per_author.size), per_author)
    n_publishers = max(1, n // 40)
    home = np.minimum((n_publishers * rng.random(per_author.size) ** 3).astype(np.int64), n_publishers - 1)
    other = np.minimum((n_publishers * rng.random(n) ** 3).astype(np.int64), n_publishers - 1)
    publisher = np.where(rng.random(n) < 0.8, home[author], other)
    return author, publisher


def _pick(rng: np.random.Generator, choices: tuple[tuple[str, float], ...], n: int) -> np.ndarray:
    names = np.array([c for c, _ in choices], dtype=object)
    weights = np.array([w for _, w in choices])
    return names[rng.choice(len(choices), n, p=weights / weights.sum())]


@dataclass(frozen=True, slots=True)
class _MetaRow:
    """What one metadata line says beyond the item's reviews."""

    word: str  # the title's pseudo-word
    author: str
    house: str  # the publisher (Books) or manufacturer
    qualifier: str
    language: str
    form: str
    price: float
    pages: int
    no_main: bool
    author_kind: float
    w1: int
    w2: int
    description: str


def _meta_rows(
    crng: np.random.Generator,
    index: np.ndarray,
    author: np.ndarray,
    publisher: np.ndarray,
    lead: list[str],
    target: float,
    pool: tuple[list[str], np.ndarray],
) -> list[_MetaRow]:
    n = index.size
    first, last = pseudo_words(author[index], 0xF1125, 2), pseudo_words(author[index], 0x1A57)
    houses = pseudo_words(publisher[index], 0x9B11, 2)
    price = np.round(np.exp(crng.normal(2.7, 0.7, n)), 2)
    price = np.where(crng.random(n) < 0.7, price, np.nan)
    wanted = np.exp(crng.normal(math.log(max(target - 700, 50.0)) - 0.5, 1.0, n))
    columns = (
        pseudo_words(index, 0x7171E),
        [f"{f} {name}" for f, name in zip(first, last, strict=True)],
        [
            f"{w} {'Press' if p % 3 else 'Books'}"
            for w, p in zip(houses, publisher[index].tolist(), strict=True)
        ],
        np.array(_QUALIFIERS, dtype=object)[crng.integers(0, len(_QUALIFIERS), n)].tolist(),
        _pick(crng, _LANGUAGES, n).tolist(),
        _pick(crng, _FORMATS, n).tolist(),
        price.tolist(),
        crng.integers(60, 900, n).tolist(),
        (crng.random(n) < 0.02).tolist(),
        crng.random(n).tolist(),
        crng.integers(0, 8, n).tolist(),
        crng.integers(0, 8, n).tolist(),
        _texts(crng, lead, wanted, *pool),
    )
    return [_MetaRow(*values) for values in zip(*columns, strict=True)]


def _details(books: bool, i: int, parent: str, row: _MetaRow, launched: str) -> tuple[str, str]:
    """The store and the details object's text of one item."""
    if books:
        store = _q(f"{row.author} (Author)" if row.author_kind < 0.85 else row.house)
        publisher = _q(f"{row.house} ({launched})")
        details = (
            f'"Publisher": {publisher}, "Language": "{row.language}", "Format": "{row.form}", '
            f'"{row.form}": "{row.pages} pages", "ISBN-13": "978-{parent}"'
        )
        return store, details
    brand = f"{row.word} {_COLORS[i % len(_COLORS)]}" if i % 5 == 0 else row.house.split()[0]
    details = (
        f'"Brand": {_q(brand)}, "Manufacturer": {_q(row.house)}, "Material": "{_MATERIALS[i % 8]}", '
        f'"Color": "{_COLORS[(i // 8) % len(_COLORS)]}", "Date First Available": "{launched}"'
    )
    return _q(brand), details


def meta_chunks(name: str, cat: Catalogue, totals: Totals, seed: int, shape: Shape = SHAPE) -> Iterator[str]:
    """The metadata file's text in chunks: one line per reviewed item with metadata, in item order."""
    stats = CATEGORY_STATS[name]
    domain_vocab = vocab(name)
    topic_names, topic_words = list(domain_vocab.topics), list(domain_vocab.topics.values())
    main = _q(domain_vocab.main_category)
    path = _q(domain_vocab.category_path[0])
    author, publisher = _people(model.domain_rng(seed, name, 16), cat)
    keep = np.flatnonzero(_has_meta(cat.topic.size, seed, name, shape.meta_share) & (totals.count > 0))
    pool = _sentences(name, model.domain_rng(seed, name, 17))
    target = shape.chars_per_token * stats.meta_tokens / stats.items
    books = name in AUTHOR_CATEGORIES
    for start in range(0, keep.size, shape.render_lines):
        index = keep[start : start + shape.render_lines]
        lead = [f"A {topic_names[k].lower()} title." for k in cat.topic[index].tolist()]
        rows = _meta_rows(
            model.domain_rng(seed, name, 18, start), index, author, publisher, lead, target, pool
        )
        count = totals.count[index]
        average = np.round(totals.rating_sum[index] / count, 1).tolist()
        lines = []
        items = zip(
            index.tolist(),
            cat.asins[index].tolist(),
            cat.topic[index].tolist(),
            cat.launch[index].tolist(),
            count.tolist(),
            average,
            rows,
            strict=True,
        )
        for i, asin, k, launch, n, avg, row in items:
            parent = asin.decode()
            topic, tw = topic_names[k], topic_words[k]
            title = f"The {row.word} {tw[row.w1].title()}" + (
                f": A {tw[row.w2].title()} Story" if i % 2 else ""
            )
            launched = date_text(launch)
            store, details = _details(books, i, parent, row, launched)
            extra = f', "subtitle": {_q(f"{row.form} – {launched}")}' if name == "Books" else ""
            if books and row.author_kind < 0.9:
                about = _q(f"{row.author} writes about {tw[row.w1]}.")
                extra += f', "author": {{"name": {_q(row.author)}, "about": [{about}]}}'
            image = f"https://m.media-amazon.com/images/I/{parent}"
            features = f"{_q(f'Great for {tw[row.w1]} and {tw[row.w2]} fans')}, {_q(f'{topic} collection')}"
            categories = f"{path}, {_q(topic)}, {_q(f'{row.qualifier} {topic}')}"
            price = "null" if row.price != row.price else repr(row.price)
            lines.append(
                f'{{"main_category": {"null" if row.no_main else main}, "title": {_q(title)}, '
                f'"average_rating": {avg!r}, "rating_number": {n}, "features": [{features}], '
                f'"description": ["{row.description}"], "price": {price}, '
                f'"images": [{{"thumb": "{image}._SS40_.jpg", "large": "{image}.jpg", "variant": "MAIN", '
                f'"hi_res": null}}], "videos": [], "store": {store}, "categories": [{categories}], '
                f'"details": {{{details}}}, "parent_asin": "{parent}", "bought_together": null{extra}}}\n'
            )
        yield "".join(lines)


def summary(
    name: str, n: int, degrees: np.ndarray, cat: Catalogue, totals: Totals, seed: int, shape: Shape = SHAPE
) -> dict:
    """The domain's counts (the same keys as the dense shape's) and what its shape matches."""
    stats = CATEGORY_STATS[name]
    has_meta = _has_meta(cat.topic.size, seed, name, shape.meta_share)
    reviewed = totals.count > 0
    return {
        "reviews": int(n),
        "users": int(degrees.size),
        "items": int(reviewed.sum()),
        "items_with_metadata": int((reviewed & has_meta).sum()),
        "users_over_20_reviews": int((degrees > 20).sum()),
        "reviews_by_users_over_20": int(degrees[degrees > 20].sum()),
        "same_user_same_ms_reviews": int(totals.equal_ms),
        "users_with_one_review": int((degrees == 1).sum()),
        "users_with_two_reviews": int((degrees == 2).sum()),
        "real": {
            "reviews_per_user": round(stats.ratings / stats.users, 3),
            "reviews_per_item": round(stats.ratings / stats.items, 3),
            "review_characters": round(shape.chars_per_token * stats.review_tokens / stats.ratings, 1),
            "meta_characters": round(shape.chars_per_token * stats.meta_tokens / stats.items, 1),
        },
    }


def parameters(name: str, shape: Shape = SHAPE) -> dict:
    """What ``synth_truth.json`` records of an Amazon-shaped domain (no per-user parameters at this size)."""
    return {
        "shape": "amazon",
        "laws": asdict(shape),
        "category": CATEGORY_STATS[name]._asdict(),
        "topics": {topic: list(words) for topic, words in vocab(name).topics.items()},
        "signal": asdict(model.SIGNAL),
    }
