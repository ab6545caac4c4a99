"""Synthetic raw Amazon Reviews 2023 files with a planted, documented personal preference signal.

``perrecbench synth --out DIR`` writes, per domain (any Amazon Reviews 2023 category; default the paper's
four), ``<Category>.jsonl`` and ``meta_<Category>.jsonl`` (or ``.jsonl.gz``) in the raw schema of PROTOCOL
§1, ``synth_truth.json`` with the planted parameters (the builder ignores that file), and the provenance
marker ``synth_marker.json``: the size and sha256 of every file written (merged with an earlier marker in the
same folder). ``perrecbench build`` compares its inputs' content hashes with the marker and records
``"source_kind": "synthetic"`` (or ``"mixed"``) in its manifest and card; a file replaced later by another no
longer matches. The demo, the tests and the benchmarks build the benchmark from these files.

The generative model (per domain; independent random streams seeded by ``(seed, domain)``; :class:`Signal`):

* **Topics.** Each domain has six topics of eight topic words (the paper's four domains their own; any
  other category a generic set, its ``main_category`` and category path named after it). Item ``i`` has
  one topic ``k(i)``; its title carries two of that topic's words among generic words shared by all topics,
  so BM25 over a user's history titles finds the same-topic items.
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
* **Sequences** (LLMRec's sequential signal): each item has one successor, another item of its topic drawn
  once by popularity; with probability 0.3 a review's item is replaced by the successor of the same user's
  previous item (by time), unless the user already has it. A user's next item is then predictable from
  the last one, which sequential recommenders (SASRec, item kNN) learn from the train sequences.
* **Texts and layout.** Review title/text come from three templates per star rating naming a topic word;
  metadata has every field of PROTOCOL §1 (Books with ``subtitle``; Books and Kindle_Store with an
  ``author`` object, as in the real files: 70 % full, 20 % name only, 10 % absent); 2 % of items have
  ``main_category: null``; the review lines are in random order.

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

``twins=True`` (off by default: the files stay those of earlier versions) plants twin items in every domain:
every 20th reviewed item gets a second id (its ASIN + ``T``) whose metadata line is the original's with an
edition or format note added to the title (`` (Kindle Edition)`` for Books, `` [DVD]`` for Movies_and_TV,
`` (2nd Edition)`` otherwise), and each review of the original gets a copy on the twin, same user and rating,
ten days earlier (appended at the end of the review file). ``synth_truth.json`` records ``twin_items``,
``twin_reviews`` and the ``twins`` mapping per domain. A build must leave these out of the histories of the
original's queries (``dataset_builder/perrecbench/twins.py``).

``shape="amazon"`` (``--shape amazon``) writes another kind of data instead: a real category's sparsity,
sizes and text lengths (most users with one or two reviews, a 5-core of a third of the reviews, Books'
29.5M reviews by 10.3M users on 4.4M items at ``--reviews-per-domain 29500000``), a block of users at a time,
for measuring the builders at a real category's scale (:mod:`dataset_builder.synth.amazon`, with the figures
it matches and where they come from).

Modules: ``vocab`` (words, titles, review texts), ``model`` (the draws above), ``amazon`` (the Amazon
shape) and ``writer`` (raw lines, faults, atomic files); the settings are
:class:`dataset_builder.config.SynthConfig`.
"""

from __future__ import annotations

from dataset_builder.config import MIN_REVIEWS_PER_DOMAIN, SYNTH_MARKER
from dataset_builder.synth.model import SIGNAL, Signal
from dataset_builder.synth.writer import TRUTH_FILE, write_synthetic

__all__ = ["MIN_REVIEWS_PER_DOMAIN", "SIGNAL", "SYNTH_MARKER", "TRUTH_FILE", "Signal", "write_synthetic"]
