"""The synthetic data's words: per-domain topics, title templates, review texts and names.

Each domain has six topics of eight topic words; an item's title carries two words of its topic among generic
words shared by all topics (see :mod:`dataset_builder.synth`), so BM25 over a user's history titles finds the
same-topic items. Everything here is plain data plus two pure functions that render it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Vocab:
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


BRANDS = tuple("Zelvo Kimora Arbeck Nuvana Trellis Quorra Halden Vexo Lumina Brisco".split())
_MERCH_STORES = BRANDS
VOCABS: dict[str, Vocab] = {
    "Books": Vocab(
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
    "Clothing_Shoes_and_Jewelry": Vocab(
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
    "Home_and_Kitchen": Vocab(
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
    "Electronics": Vocab(
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

# Categories whose real metadata carries an `author` object ({"name", "avatar", "about"}).
AUTHOR_CATEGORIES = ("Books", "Kindle_Store")
# Topics of every category without its own vocabulary above (any other Amazon Reviews 2023 category).
_GENERIC_TOPICS = {
    "Classic": "classic vintage retro heritage timeless nostalgic antique traditional",
    "Travel": "travel portable compact lightweight foldable passport luggage airport",
    "Family": "family kids toddler parents playful educational cartoon friendly",
    "Outdoor": "outdoor garden patio camping hiking weatherproof picnic trail",
    "Tech": "digital wireless smart bluetooth rechargeable usb app sensor",
    "Premium": "premium luxury handcrafted artisan leather walnut velvet gold",
}


def vocab(name: str) -> Vocab:
    """The words of a category: its own for the paper's four, a generic set named after it otherwise.

    >>> vocab("Video_Games").main_category, vocab("Toys_and_Games").category_path
    ('Video Games', ('Toys & Games',))
    """
    if name in VOCABS:
        return VOCABS[name]
    return Vocab(
        main_category=name.replace("_", " "),
        category_path=(name.replace("_and_", " & ").replace("_", " "),),
        topic_text=_GENERIC_TOPICS,
        adjectives=tuple("Essential Everyday Original Signature Ultimate Standard Select Complete".split()),
        nouns=tuple("Set Kit Edition Pack Bundle Collection Series Model".split()),
        templates=(
            "{brand} {adj} {w1} {w2} {noun}",
            "{adj} {w1} {noun} with {w2}",
            "{brand} {w1} and {w2} {noun}",
        ),
        stores=_MERCH_STORES,
        detail_keys=("Date First Available", "Manufacturer", "Item Weight"),
    )


# Per star rating: (review title, review text with {word}); all JSON-safe ASCII.
REVIEW_TEMPLATES: dict[int, tuple[tuple[str, str], ...]] = {
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
FIRST_NAMES = ("Maria", "James", "Aiko", "Omar", "Elena", "David", "Priya", "Lucas", "Grace", "Tomas")
LAST_NAMES = ("Hart", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Reyes", "Castell", "Brennan", "Novak")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


def item_titles(name: str, item_topic: np.ndarray, rng: np.random.Generator) -> list[str]:
    """One title per item: a template of the domain filled with two words of the item's topic.

    Args:
        name: the category.
        item_topic: each item's topic index (into ``vocab(name).topics``).
        rng: the random stream the word and template choices are drawn from.

    Returns:
        The titles, in item order.
    """
    domain_vocab = vocab(name)
    words = list(domain_vocab.topics.values())
    n = item_topic.size
    w1, w2 = rng.integers(0, 8, n), rng.integers(1, 8, n)
    picks = zip(
        item_topic.tolist(),
        w1.tolist(),
        ((w1 + w2) % 8).tolist(),  # a different word of the same topic
        rng.integers(0, len(domain_vocab.templates), n).tolist(),
        rng.integers(0, len(domain_vocab.adjectives), n).tolist(),
        rng.integers(0, len(domain_vocab.nouns), n).tolist(),
        rng.integers(0, len(BRANDS), n).tolist(),
        strict=True,
    )
    return [
        domain_vocab.templates[t].format(
            adj=domain_vocab.adjectives[a],
            w1=words[k][i].title(),
            w2=words[k][j].title(),
            noun=domain_vocab.nouns[o],
            brand=BRANDS[b],
        )
        for k, i, j, t, a, o, b in picks
    ]


def date_text(ms: int) -> str:
    """A timestamp as the metadata files write dates.

    >>> date_text(1_451_606_400_000)
    'January 1, 2016'
    """
    day = time.gmtime(ms // 1000)
    return f"{_MONTHS[day.tm_mon - 1]} {day.tm_mday}, {day.tm_year}"
