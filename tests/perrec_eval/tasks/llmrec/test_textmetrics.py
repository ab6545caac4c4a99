"""BLEU and ROUGE in both implementations against hand-computed values; the truth scores the maximum."""

from __future__ import annotations

import math
import sys

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

from perrec_eval.errors import MissingExtraError
from perrec_eval.stats import MetricSpec
from perrec_eval.tasks.llmrec import text, textmetrics
from perrec_eval.tasks.llmrec.task import TASK

PAIRS = [  # (hypothesis, reference)
    ("the cat the cat", "the cat sat"),
    ("a b", "a b c d"),
]
SENTENCE = "The scent of this soap lasts all day."


def _corpus(metric: str, pairs=PAIRS) -> float:
    (spec,) = [m for m in TASK.metrics if m.name == metric]
    return spec.value([textmetrics.doc_item(metric, h, r) for h, r in pairs])


def test_textmetrics_p5_bleu_matches_hand_counts() -> None:
    # unigrams: clipped matches 2/4 + 2/2, bigrams 1/3 + 1/1; lengths c = 6, r = 7: BP = exp(1 - 7/6)
    penalty = math.exp(1 - 7 / 6)
    assert _corpus("bleu-1/p5") == pytest.approx(100 * 4 / 6 * penalty)
    assert _corpus("bleu-2/p5") == pytest.approx(100 * math.sqrt(4 / 6 * 2 / 4) * penalty)
    assert _corpus("bleu-4/p5") == 0.0  # no 4-gram in either hypothesis: a zero precision, no smoothing
    assert _corpus("bleu-1/p5", PAIRS[:1]) == pytest.approx(50.0)  # c = 4 > r = 3: no penalty


def test_textmetrics_p5_rouge_matches_hand_sets() -> None:
    # "the cat the cat" vs "the cat sat": unigram sets {the, cat} / {the, cat, sat}; bigram sets share 1 of 2
    assert textmetrics.doc_item("rouge-1/p5", *PAIRS[0]) == pytest.approx(100 * 2 * (2 / 3) / (5 / 3))
    assert textmetrics.doc_item("rouge-2/p5", *PAIRS[0]) == pytest.approx(50.0)
    # LCS 2 of 4 and 3 words: P = 1/2, R = 2/3, beta = P / R (tf-seq2seq's, not the harmonic mean)
    precision, recall = 1 / 2, 2 / 3
    beta = precision / recall
    expected = 100 * (1 + beta**2) * recall * precision / (recall + beta**2 * precision)
    assert textmetrics.doc_item("rouge-l/p5", *PAIRS[0]) == pytest.approx(expected)
    assert _corpus("rouge-1/p5") == pytest.approx((80.0 + 100 * 2 * 0.5 / 1.5) / 2)  # mean over docs
    # single-space words: a double space makes an empty word, which the reference lacks
    assert textmetrics.doc_item("rouge-1/p5", "a  b", "a b") == pytest.approx(100 * 2 * (2 / 3) / (5 / 3))


def test_textmetrics_standard_bleu_is_sacrebleus_corpus_score() -> None:
    hypotheses, references = zip(*PAIRS, ("The Cat sat, on a mat!", "the cat sat on the mat"), strict=True)
    for metric, order in textmetrics.BLEU_ORDERS.items():
        expected = BLEU(max_ngram_order=order).corpus_score(list(hypotheses), [list(references)]).score
        items = [textmetrics.doc_item(metric, h, r) for h, r in zip(hypotheses, references, strict=True)]
        assert textmetrics.sacrebleu_corpus(items, order) == pytest.approx(expected, abs=1e-9)


def test_textmetrics_standard_rouge_is_rouge_score_and_hand_value() -> None:
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    for metric, kind in textmetrics.ROUGE_TYPES.items():
        for h, r in PAIRS:
            assert textmetrics.doc_item(metric, h, r) == pytest.approx(
                100 * scorer.score(r, h)[kind].fmeasure
            )
    # case and punctuation dropped by rouge-score's tokenizer: P = 3/3, R = 3/4
    assert textmetrics.doc_item("rouge-1", "The CAT, sat!", "the cat sat on") == pytest.approx(
        100 * 2 * 0.75 / 1.75
    )


@pytest.mark.parametrize("metric", textmetrics.TEXT_METRICS)
def test_textmetrics_the_truth_scores_the_maximum(metric) -> None:
    value = _corpus(metric, [(SENTENCE, SENTENCE), ("Soft and warm towels", "Soft and warm towels")])
    if metric in ("rouge-1/p5", "rouge-2/p5"):  # tf-seq2seq's F1 has 1e-8 in its denominator
        assert value == pytest.approx(100 * 2 / (2 + 1e-8), abs=1e-12)
    else:
        assert value == pytest.approx(100.0, abs=1e-9)
    assert value > _corpus(metric, [(SENTENCE, "The soap lasts."), ("Warm towels", "Soft and warm towels")])


def test_textmetrics_failed_doc_scores_as_an_empty_answer() -> None:
    truth = {"explanation": SENTENCE}
    for metric in textmetrics.TEXT_METRICS:
        item = TASK.score_doc(metric, None, truth)
        (spec,) = [m for m in TASK.metrics if m.name == metric]
        assert spec.value([item]) == 0.0


def test_textmetrics_summaries_have_no_bleu_4_and_other_docs_no_text_metric() -> None:
    summary = {"summary": "Lovely scent"}
    assert TASK.score_doc("bleu-4", "Lovely scent", summary) is None
    assert TASK.score_doc("bleu-4/p5", "Lovely scent", summary) is None
    assert TASK.score_doc("bleu-2", "Lovely scent", summary) is not None
    assert TASK.score_doc("rouge-l", "B01", "B01") is None  # a ranking doc
    assert TASK.score_doc("ndcg@10", "Lovely scent", summary) is None
    assert TASK.score_doc("rmse", "Lovely scent", summary) is None


def test_textmetrics_specs_are_corpus_bleu_and_mean_rouge() -> None:
    specs = {m.name: m for m in TASK.metrics if m.name in textmetrics.TEXT_METRICS}
    assert set(specs) == set(textmetrics.TEXT_METRICS)
    assert all(isinstance(m, MetricSpec) for m in specs.values())
    assert {n for n, m in specs.items() if m.aggregation == "corpus"} == {
        n for n in specs if n.startswith("bleu")
    }
    items = [textmetrics.doc_item("bleu-4", SENTENCE, SENTENCE)] * 5
    assert specs["bleu-4"].paired_test(items, items).p_value == 1.0


def test_textmetrics_missing_library_names_the_install(monkeypatch) -> None:
    for module in ("sacrebleu", "sacrebleu.metrics"):  # as if never installed, even once imported
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=r'pip install "perrecbench\[text\]"') as err:
        textmetrics.check_installed()
    assert "\n" not in str(err.value)


def test_text_parse_strips_labels_quotes_and_thinking() -> None:
    assert text.parse_text('<think>x</think> Explanation: "The scent lasts."').value == "The scent lasts."
    assert text.parse_text("").ok is False
