"""Counts in words: the noun in the number the count needs, counts out of totals, rates as
percentages."""

from __future__ import annotations

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
