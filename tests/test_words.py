"""Counts in words: the noun in the number the count needs, counts out of totals, rates as
percentages."""

from __future__ import annotations

from leanloop.agent.evaluation import ProgressEvaluation, RetrievalEvaluation, TacticEvaluation
from leanloop.words import count_of, percent, plural, plural_of, share


def test_plural_puts_the_noun_in_the_right_number():
    assert plural(1, "repository") == "1 repository"
    assert plural(2, "repository") == "2 repositories"
    assert plural(0, "theorem") == "0 theorems"
    assert plural(1, "theorem") == "1 theorem"
    assert plural(3, "step") == "3 steps"
    assert plural(1.0, "file") == "1 file"  # a whole float is written as an integer
    assert plural(2.5, "epoch") == "2.5 epochs"
    assert plural(2, "sorry") == "2 sorries"
    assert plural(4, "batch") == "4 batches"
    assert plural(2, "premise") == "2 premises"
    assert plural(2, "day") == "2 days"  # a vowel before y
    assert plural(2, "criterion", "criteria") == "2 criteria"
    assert [plural_of(w) for w in ("sample", "index", "box", "epoch")] == [
        "samples",
        "indices",
        "boxes",
        "epochs",
    ]


def test_counts_and_rates():
    assert count_of(0, 10) == "0 of 10"
    assert count_of(3, 10, "theorem") == "3 of 10 theorems"
    assert count_of(1, 1, "theorem") == "1 of 1 theorem"
    assert share(3, 12) == "3 of 12 (25 %)"
    assert share(0, 4, "step") == "0 of 4 steps (0 %)"
    assert share(0, 0, "step") == "0 of 0 steps"  # no rate of nothing
    assert percent(0.034) == "3.4 %"
    assert percent(1.0, 0) == "100 %"


def test_evaluation_summaries_read_as_counts_and_percentages():
    where = {"checkpoint": "out", "dataset": "data", "split": "random/test"}
    tactics = TacticEvaluation(**where, k=4, steps=40, top1=0.25, topk=0.5)
    assert str(tactics) == (
        "tactics on random/test of data: top-1 10 of 40 steps (25 %), top-4 20 of 40 (50 %)"
    )
    retrieval = RetrievalEvaluation(
        **where,
        steps=1,
        recall_at_1=0.0,
        recall_at_10=1.0,
        mrr=0.25,
        pool="corpus.jsonl",
        pool_premises=12,
    )
    assert str(retrieval) == (
        "retrieval on random/test of data: R@1 0.0 %, R@10 100.0 %, MRR 0.250 on 1 step; "
        "candidates: the 12 premises of corpus.jsonl"
    )
    progress = ProgressEvaluation(**where, rows=7, mae=1.234, mse=2.5)
    assert str(progress).endswith(": MAE 1.23 steps, MSE 2.50 over 7 proof steps")
