"""Raw files from the generative model: review and metadata JSON lines, dirty faults, and the truth file.

Lines are rendered from pre-built JSON pieces (a review line is five looked-up strings joined), so writing is
fast and the text is exactly what ``json.dumps`` would write. Every file is written through
:func:`perrec_eval.fileio.atomic_open` (whole or absent); ``.gz`` files carry no name or time in their header,
so the same seed gives byte-identical files.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from dataset_builder.config import MS_PER_DAY, SYNTH_MARKER, BuildConfigError, SynthConfig, parse_domains
from dataset_builder.synth import amazon, model
from dataset_builder.synth.vocab import (
    AUTHOR_CATEGORIES,
    FIRST_NAMES,
    LAST_NAMES,
    REVIEW_TEMPLATES,
    date_text,
    item_titles,
    vocab,
)
from perrec_eval import progress
from perrec_eval.fileio import atomic_open, read_json, write_json, write_text

logger = logging.getLogger(__name__)

TRUTH_FILE = "synth_truth.json"
_CHUNK = 100_000


_q = json.encoder.encode_basestring_ascii  # a JSON string literal, exactly as json.dumps writes it


def _shared_relations(
    data: model.Domain, store: np.ndarray, n_stores: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stores, authors (first and last name indices) and publishing houses whose values items share at once,
    as RecBench+'s knowledge graph needs for queries of several conditions.

    Each item gets one of three authors of its topic (a quarter of a topic's items go to an author of the
    next topic, so every author writes in two topics); an author sells 70 % of their items through one home
    store (the rest keep the drawn `store`); the house (details Publisher, Manufacturer) is the store's 80 %
    of the time, else the next store. Derived from the item index by a hash, so synth's random streams, and
    everything else it writes, stay as they were.
    """
    n_topics = int(data.item_topic.max(initial=0)) + 1
    digits = (model._mix64(np.arange(data.item_topic.size), 0xB00C5) % np.uint64(10_000)).astype(np.int64)
    author = (data.item_topic.astype(np.int64) + (digits % 4 == 3)) % n_topics * 3 + digits // 4 % 3
    store = np.where(digits // 12 % 10 < 7, author % n_stores, store)
    house = np.where(digits // 120 % 5 > 0, store, (store + 1) % n_stores)
    return store, author % len(FIRST_NAMES), (author * 7 + 3) % len(LAST_NAMES), house


def _meta_lines(name: str, data: model.Domain, asins: np.ndarray, titles: list[str], rng: np.random.Generator,
                skip: set[str]) -> Iterator[str]:  # fmt: skip
    """One metadata JSON line per reviewed item not in ``skip``, in item order.

    Keys in the order of the real files; the text is what ``json.dumps`` would write (tested), rendered
    with f-strings because this loop runs once per item.
    """
    vocabulary = vocab(name)
    topic_words = list(vocabulary.topics.items())
    n_items = data.item_topic.size
    counts = np.bincount(data.item, minlength=n_items)
    average = np.round(
        np.bincount(data.item, weights=data.rating, minlength=n_items) / np.maximum(counts, 1), 1
    )
    price = np.round(np.exp(rng.normal(3.0, 0.8, n_items)), 2)
    has_price = rng.random(n_items) < 0.7
    store = rng.integers(0, len(vocabulary.stores), n_items)
    pages = rng.integers(90, 900, n_items)
    author_kind = rng.random(n_items)
    first, last = rng.integers(0, len(FIRST_NAMES), n_items), rng.integers(0, len(LAST_NAMES), n_items)
    no_main = rng.random(n_items) < 0.02
    store, first, last, house = _shared_relations(data, store, len(vocabulary.stores))
    main = _q(vocabulary.main_category)
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
        house[keep].tolist(),
        strict=True,
    )
    for i, parent, topic_index, launch, count, avg, cost, shop, n_pages, kind, fst, lst, no_mc, home in rows:
        if parent in skip:
            continue
        topic, words = topic_words[topic_index]
        launched = date_text(launch)
        title = _q(titles[i])
        shop_name, house_name = vocabulary.stores[shop], vocabulary.stores[home]
        details = {
            "Publisher": house_name,
            "Language": "English",
            "Paperback": f"{n_pages} pages",
            "ISBN-13": f"978-{parent}",
            "Date First Available": launched,
            "Manufacturer": house_name,
            "Department": "Unisex-adult" if i % 3 else "Womens",
            "Material": words[0].title(),
            "Color": ("Black", "White", "Gray", "Blue")[i % 4],
            "Item Weight": f"{n_pages / 100:.1f} ounces",
            "Product Dimensions": f"{n_pages // 40} x {n_pages // 60} x 2 inches",
            "Package Dimensions": f"{n_pages // 50} x 8 x 2 inches",
            "Batteries": "1 Lithium Ion batteries required." if i % 2 else "No batteries",
        }
        detail_text = ", ".join(f"{_q(key)}: {_q(details[key])}" for key in vocabulary.detail_keys)
        description = f"[{_q(f'A {topic.lower()} favourite: {titles[i]}.')}]" if i % 4 else "[]"
        categories = ", ".join(_q(c) for c in (*vocabulary.category_path, topic))
        extra = ""
        if name == "Books":
            extra = f', "subtitle": {_q(f"Paperback – {launched}")}'
        if name in AUTHOR_CATEGORIES:
            author = f"{FIRST_NAMES[fst]} {LAST_NAMES[lst]}"
            if kind < 0.7:
                about = _q(f"{author} writes about {words[2]} and {words[3]}.")
                avatar = f"https://m.media-amazon.com/images/S/author-{fst}{lst}.jpg"
                extra += f', "author": {{"name": {_q(author)}, "avatar": "{avatar}", "about": [{about}]}}'
            elif kind < 0.9:
                extra += f', "author": {{"name": {_q(author)}}}'  # partial; the other 10 % have no author
        image = f"https://m.media-amazon.com/images/I/{parent}"
        yield (
            f'{{"main_category": {"null" if no_mc else main}, "title": {title}, "average_rating": {avg!r}, '
            f'"rating_number": {count}, "features": [{_q(f"Great for {words[0]} and {words[1]} fans")}, '
            f'{_q(f"{topic} collection")}], "description": {description}, '
            f'"price": {"null" if cost != cost else repr(cost)}, '
            f'"images": [{{"thumb": "{image}._SS40_.jpg", "large": "{image}.jpg", "variant": "MAIN", '
            f'"hi_res": null}}], "videos": [], "store": {_q(shop_name)}, "categories": [{categories}], '
            f'"details": {{{detail_text}}}, "parent_asin": "{parent}", "bought_together": null{extra}}}\n'
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
            for words in vocab(name).topics.values():
                for variant, (title, text) in enumerate(REVIEW_TEMPLATES[rating]):
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

    def render(self, data: model.Domain, start: int, stop: int) -> list[str]:
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


def _write_lines(path: Path, compress: bool, chunks: Iterable[str]) -> None:
    """Write text chunks to ``path`` atomically, gzip-compressed when ``compress``."""
    with atomic_open(path, "wb") as raw:
        # mtime=0 and no file name in the header: the same data gives the same bytes
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
            if compress
            else contextlib.nullcontext(raw)
        ) as sink:
            for chunk in chunks:
                sink.write(chunk.encode())


def _plan_faults(data: model.Domain, lines: _Lines) -> list[_Fault]:
    """The dirty faults of one domain (see :mod:`dataset_builder.synth`), as extra lines."""
    n = data.user.size

    def line_at(i: int) -> str:
        return lines.render(data, i, i + 1)[0]

    heavy = int(np.argmax(np.bincount(data.user)))
    own = np.flatnonzero(data.user == heavy)
    original = json.loads(line_at(int(own[np.argmax(np.bincount(data.item)[data.item[own]])])))
    duplicate = {
        **original,
        "rating": 1.0 if original["rating"] >= 3 else 5.0,
        "timestamp": original["timestamp"] + 7 * MS_PER_DAY,
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


def _review_chunks(data: model.Domain, lines: _Lines, faults: list[_Fault]) -> Iterator[str]:
    inserts: dict[int, str] = {}
    for fault in faults:
        inserts[fault.before] = inserts.get(fault.before, "") + fault.line
    with progress.bar(total=data.user.size, unit="review", desc=f"synth {data.name}", leave=False) as bar:
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
    write_text(path, "{\n" + ",\n".join(parts) + "\n}\n")


def _write_marker(out: Path, seed: int, names: list[str]) -> None:
    """Record the size and sha256 of every file written, merged with the marker of earlier runs into ``out``.

    ``perrecbench build`` compares its inputs' content hashes with these (``source_kind`` in its manifest),
    so a file replaced later by a real one is no longer counted as synthetic.
    """
    path = out / SYNTH_MARKER
    files = read_json(path).get("files", {}) if path.exists() else {}
    for name in names:
        files[name] = {"size": (out / name).stat().st_size, "sha256": _sha256(out / name), "seed": seed}
    write_json(
        path,
        {
            "generator": "perrecbench synth",
            "about": "These files are SYNTHETIC: drawn by a generative model (dataset_builder/synth of the "
            "perrecbench repository), not Amazon Reviews 2023. A build from them says so in its card.",
            "files": dict(sorted(files.items())),
        },
    )


def claim_files(out: Path, names: Sequence[str]) -> None:
    """Refuse to replace a file of `out` that synth did not write; then mark `names` as being written.

    A file is synth's when the marker lists it with its current size and sha256, or as pending (a synth
    killed before it wrote the marker); anything else (a downloaded ``Books.jsonl``, a file edited since)
    would be lost.

    Raises:
        BuildConfigError: `out` holds such a file.
    """
    path = out / SYNTH_MARKER
    marker = read_json(path) if path.is_file() else {}
    known, pending = marker.get("files", {}), set(marker.get("pending", []))
    for name in names:
        file = out / name
        if not file.exists() or name in pending:
            continue
        entry = known.get(name) or {}
        if entry.get("size") != file.stat().st_size or entry.get("sha256") != _sha256(file):
            raise BuildConfigError(
                f"--out {out} holds {name}, which synth did not write (or which changed since): synth "
                "would replace it; choose another --out"
            )
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, {**marker, "files": known, "pending": sorted(pending | set(names))})


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# ------------------------------------------------------------------------------------------------ public API


def write_synthetic(
    out: str | Path,
    *,
    reviews_per_domain: int = 60_000,
    domains: str | Sequence[str] | None = None,
    seed: int = 0,
    gzip: bool = False,
    dirty: bool = False,
    twins: bool = False,
    shape: str = "dense",
) -> dict:
    """Write synthetic raw files for each domain plus ``synth_truth.json``; return a small summary.

    Args:
        out: output folder (created; our files in it are replaced atomically, other files are left alone).
        reviews_per_domain: clean review lines per domain (``dirty`` adds four faulty lines to the first).
        domains: categories to write (default: the paper's four).
        seed: the random seed; the same seed gives byte-identical files.
        gzip: write ``.jsonl.gz`` instead of ``.jsonl``.
        dirty: plant the faults documented in :mod:`dataset_builder.synth` in the first domain.
        twins: plant twin items (:func:`_twin_lines`); off, the files are those of earlier versions.
        shape: ``dense`` (the planted model of :mod:`dataset_builder.synth`) or ``amazon`` (a real
            category's sparsity and text lengths, written a block of users at a time:
            :mod:`~dataset_builder.synth.amazon`).

    Returns:
        ``{"out", "truth", "seed", "reviews_per_domain", "domains": {name: counts}, "faults", "seconds",
        "reviews_per_second"}``; ``synth_truth.json`` holds the same plus the planted per-user and per-item
        parameters.

    Raises:
        BuildConfigError: an unknown domain, too few reviews, or ``out`` is a file.
    """
    config = SynthConfig(
        out=Path(out),
        reviews_per_domain=reviews_per_domain,
        domains=parse_domains(domains),
        seed=seed,
        gzip=gzip,
        dirty=dirty,
        twins=twins,
        shape=shape,
    )
    out, names = config.out, config.domains
    if out.exists() and not out.is_dir():
        raise BuildConfigError(f"--out {out} is a file; pass a folder path")
    if shape == "amazon":
        amazon.check_disk(config)
    suffix = ".jsonl.gz" if gzip else ".jsonl"
    claim_files(out, [f for name in names for f in (f"{name}{suffix}", f"meta_{name}{suffix}")])
    started = time.perf_counter()
    summary: dict = {
        "generator": "perrecbench synth (dataset_builder/synth)",
        "seed": seed,
        "reviews_per_domain": reviews_per_domain,
        "gzip": gzip,
        "dirty": dirty,
        **({"shape": shape} if shape != "dense" else {}),  # the dense files' truth stays as it was
        "model": "rating = clip(round(base + user_bias[u] + item_quality[i] + user_topic_affinity[u, "
        "item_topic[i]] + noise), 1, 5)",
        "signal": asdict(model.SIGNAL),
        "domains": {},
        "faults": [],
    }
    planted: dict[str, _RawJSON] = {}
    for position, name in enumerate(progress.bar(names, desc="synth domains", unit="domain", leave=False)):
        if shape == "amazon":
            counts, parameters, faults = _write_amazon_domain(out, name, reviews_per_domain, seed, suffix)
        else:
            counts, parameters, faults = _write_domain(
                out, name, reviews_per_domain, seed, suffix, dirty and position == 0, twins
            )
        summary["domains"][name] = counts
        summary["faults"].extend(faults)
        planted[name] = parameters
    _write_truth(out / TRUTH_FILE, {**summary, "planted": planted})
    _write_marker(
        out,
        seed,
        [f for counts in summary["domains"].values() for f in (counts["review_file"], counts["meta_file"])],
    )
    seconds = time.perf_counter() - started
    total = reviews_per_domain * len(names)
    logger.info("wrote %d reviews in %.1f s (%.0f reviews/s) to %s", total, seconds, total / seconds, out)
    return {
        "out": str(out),
        "truth": str(out / TRUTH_FILE),
        "marker": str(out / SYNTH_MARKER),
        **summary,
        "seconds": round(seconds, 3),
        "reviews_per_second": round(total / seconds),
    }


def _twin_lines(
    name: str, data: model.Domain, lines: _Lines, asins: np.ndarray
) -> tuple[dict[str, str], list[str]]:
    """Twins of every 20th reviewed item: ``{parent_asin: twin id}`` and the twins' review lines.

    Each review of such an item gets a copy on the twin id (same user and rating), ten days earlier, so the
    twin sits in the reviewer's history when the original is the query; the twin's metadata line
    (:func:`_with_twins`) is the original's with an edition or format note added to its title.
    """
    reviewed = np.flatnonzero(np.bincount(data.item, minlength=data.item_topic.size))
    chosen = {int(i): f"{asins[i, 0]}T" for i in reviewed[::20].tolist()}
    out = []
    for i in np.flatnonzero(np.isin(data.item, list(chosen))).tolist():
        review = json.loads(lines.render(data, i, i + 1)[0])
        twin = chosen[int(data.item[i])]
        review.update(asin=twin, parent_asin=twin, timestamp=review["timestamp"] - 10 * MS_PER_DAY)
        out.append(json.dumps(review) + "\n")
    return {str(asins[i, 0]): twin for i, twin in chosen.items()}, out


_TWIN_NOTES = {"Books": " (Kindle Edition)", "Movies_and_TV": " [DVD]"}


def _with_twins(name: str, meta: Iterator[str], twins: dict[str, str]) -> Iterator[str]:
    """The metadata lines, each twinned item's line followed by its twin's."""
    note = _TWIN_NOTES.get(name, " (2nd Edition)")
    for line in meta:
        yield line
        record = json.loads(line)
        twin = twins.get(record["parent_asin"])
        if twin is not None:
            yield json.dumps({**record, "parent_asin": twin, "title": record["title"] + note}) + "\n"


def _write_domain(
    out: Path,
    name: str,
    n: int,
    seed: int,
    suffix: str,
    dirty: bool,
    twins: bool = False,
) -> tuple[dict, _RawJSON, list[dict]]:
    data = model.generate(name, n, seed)
    text_rng = model.domain_rng(seed, name, 1)
    n_users, n_items = data.user_bias.size, data.item_topic.size
    users = model.user_ids(n_users)
    asins = model.item_ids(name, n_items, model.asins_per_item(name))
    titles = item_titles(name, data.item_topic, text_rng)
    lines = _Lines.make(name, users, asins, int(data.helpful.max()))
    review_file, meta_file = f"{name}{suffix}", f"meta_{name}{suffix}"
    compress = suffix.endswith(".gz")

    faults = _plan_faults(data, lines) if dirty else []
    no_meta = {str(asins[int(np.argmax(np.bincount(data.item))), 0])} if dirty else set()
    twin_of, twin_reviews = _twin_lines(name, data, lines, asins) if twins else ({}, [])
    reviews = chain(_review_chunks(data, lines, faults), twin_reviews)
    _write_lines(out / review_file, compress, reviews)
    meta_lines = _meta_lines(name, data, asins, titles, text_rng, no_meta)
    if twins:
        meta_lines = _with_twins(name, meta_lines, twin_of)
    _write_lines(out / meta_file, compress, _batched(meta_lines))

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
        "same_user_same_ms_reviews": model.equal_timestamp_count(data),
    }
    if twins:
        counts.update(twin_items=len(twin_of), twin_reviews=len(twin_reviews), twins=twin_of)
    parameters = {
        "topics": {topic: list(words) for topic, words in vocab(name).topics.items()},
        "user_id": users.tolist(),
        "user_bias": np.round(data.user_bias, 3).tolist(),
        "user_topic_affinity": np.round(data.affinity, 3).tolist(),
        "parent_asin": asins[:, 0].tolist(),
        "item_topic": data.item_topic.tolist(),
        "item_quality": np.round(data.item_quality, 3).tolist(),
        "item_launch_ms": data.item_launch.tolist(),
    }
    return counts, _RawJSON(json.dumps(parameters, separators=(", ", ": "))), recorded


def _write_amazon_domain(
    out: Path, name: str, n: int, seed: int, suffix: str
) -> tuple[dict, _RawJSON, list[dict]]:
    """One domain of the Amazon shape (:mod:`dataset_builder.synth.amazon`): its review lines a block of users
    at a time, then its metadata lines."""
    review_file, meta_file = f"{name}{suffix}", f"meta_{name}{suffix}"
    compress = suffix.endswith(".gz")
    catalogue, degrees, chunks, totals = amazon.review_chunks(name, n, seed)
    _write_lines(out / review_file, compress, chunks)
    _write_lines(out / meta_file, compress, amazon.meta_chunks(name, catalogue, totals[0], seed))
    counts = {
        "review_file": review_file,
        "meta_file": meta_file,
        **amazon.summary(name, n, degrees, catalogue, totals[0], seed),
    }
    return counts, _RawJSON(json.dumps(amazon.parameters(name), separators=(", ", ": "))), []
