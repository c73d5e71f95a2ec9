"""Whether a trained model did measurably better than its baseline on the same test items: the
difference of a figure between the two, with a paired bootstrap interval over the test items,
and one rule for wins and losses alike — a difference whose 95 % interval holds 0, or that is
too small to show at the precision the figure is reported with, is "no measurable difference",
whichever way it points.

A difference that one test item makes is never measurable under this rule: an item is left out
of about 37 % of the resamples, so the interval of a difference carried by one item reaches 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

#: Resamples of the bootstrap, its confidence, and its seed (the figures are reproducible).
BOOTSTRAP_SAMPLES = 4000
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 3407

Outcome = Literal["better", "worse", "no measurable difference"]


class Interval(BaseModel):
    """The subject's figure less the baseline's on the same ``items`` test items, and the
    bootstrap interval of that difference (``confidence``: its coverage)."""

    items: int
    difference: float
    low: float
    high: float
    confidence: float = CONFIDENCE


def paired_interval(
    subject: Sequence[float],
    baseline: Sequence[float],
    *,
    subject_weights: Sequence[float] | None = None,
    baseline_weights: Sequence[float] | None = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """The difference of a figure between two models measured on the same test items, with its
    percentile bootstrap interval: the items are drawn with replacement ``samples`` times, the
    same draws for both models.

    The figure is ``Σ values / Σ weights`` over the items (weights of 1: the mean; tokens as
    weights: a per-token figure such as the loss per token).

    Args:
        subject: Each item's value for the trained model.
        baseline: Each item's value for the baseline, in the same order.
        subject_weights: Each item's weight for the subject (default 1 each).
        baseline_weights: Each item's weight for the baseline (default: the subject's).
        samples: Bootstrap resamples.
        seed: The resampling seed.

    Returns:
        The difference (subject less baseline) and its interval.

    Raises:
        ValueError: The two lists do not have the same length.
    """
    import numpy as np

    if len(subject) != len(baseline):
        raise ValueError(f"{len(subject)} subject items against {len(baseline)} baseline items")
    n = len(subject)
    a = np.asarray(subject, dtype=float)
    b = np.asarray(baseline, dtype=float)
    wa = np.ones(n) if subject_weights is None else np.asarray(subject_weights, dtype=float)
    wb = wa if baseline_weights is None else np.asarray(baseline_weights, dtype=float)
    if n == 0 or wa.sum() == 0 or wb.sum() == 0:
        return Interval(items=n, difference=0.0, low=0.0, high=0.0)
    draws = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    if np.array_equal(wa, wb):  # one weight per item: the items' differences, summed
        d = a - b
        difference = float(d.sum() / wa.sum())
        resampled = d[draws].sum(1) / wa[draws].sum(1)
    else:
        difference = float(a.sum() / wa.sum() - b.sum() / wb.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            resampled = a[draws].sum(1) / wa[draws].sum(1) - b[draws].sum(1) / wb[draws].sum(1)
    resampled = resampled[np.isfinite(resampled)]
    if not len(resampled):
        return Interval(items=n, difference=difference, low=-np.inf, high=np.inf)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return Interval(items=n, difference=difference, low=float(low), high=float(high))


def outcome_of(interval: Interval | None, *, higher_is_better: bool = True) -> Outcome:
    """ "better" or "worse" when the interval lies wholly on one side of 0 (in the direction
    that is better, or the other), else "no measurable difference" (always so on fewer than
    two items: one item cannot tell a difference from its own noise)."""
    if interval is None or interval.items < 2:
        return "no measurable difference"
    if interval.low > 0:
        return "better" if higher_is_better else "worse"
    if interval.high < 0:
        return "worse" if higher_is_better else "better"
    return "no measurable difference"


class Comparison(BaseModel):
    """A trained model against one baseline on the same test items: the figures, the
    difference with its bootstrap interval, and the outcome under the noise rule
    (``goal`` "beat": the subject should do better; "reach": the baseline is a ceiling the
    subject should come up to) with, where the subject did not do better, the likely reasons
    the job knows."""

    subject: str = Field(description="What was trained, e.g. 'trained retriever'.")
    baseline: str = Field(description="What it is measured against, e.g. 'BM25'.")
    metric: str
    value: float = Field(description="The subject's figure.")
    baseline_value: float
    shown: str = Field(description="The subject's figure in words (a count or a percentage).")
    baseline_shown: str
    goal: Literal["beat", "reach"] = "beat"
    higher_is_better: bool = True
    interval: Interval | None = Field(
        default=None, description="Subject less baseline, with its bootstrap interval."
    )
    scale: float = Field(default=1.0, description="Multiplies the difference when it is shown.")
    unit: str = Field(default="", description="The difference's unit as shown, e.g. ' points'.")
    digits: int = Field(default=2, description="Decimals of the difference as shown.")
    outcome: Outcome = "no measurable difference"
    better: bool = Field(
        default=False,
        description="Beat: measurably better. Reach: not measurably below the ceiling.",
    )
    reasons: list[str] = Field(default_factory=list)

    @classmethod
    def of(
        cls, interval: Interval | None, *, goal: Literal["beat", "reach"] = "beat", **fields
    ) -> Comparison:
        """A comparison whose outcome follows from ``interval`` under the noise rule (a
        difference that shows as 0 at ``digits`` decimals of ``scale`` times it is none)."""
        higher = fields.get("higher_is_better", True)
        outcome = outcome_of(interval, higher_is_better=higher)
        scale, digits = fields.get("scale", 1.0), fields.get("digits", 2)
        if interval is not None and abs(interval.difference * scale) < 0.5 * 10**-digits:
            outcome = "no measurable difference"
        better = outcome == "better" if goal == "beat" else outcome != "worse"
        return cls(interval=interval, goal=goal, outcome=outcome, better=better, **fields)

    def verdict(self) -> str:
        """'the trained retriever beat BM25', '... did worse than ...', 'no measurable
        difference between the trained retriever and BM25' (or reached, did not reach)."""
        if self.goal == "reach":
            if self.outcome == "worse":
                return f"the {self.subject} did not reach {self.baseline}"
            if self.outcome == "better" or self.value >= self.baseline_value:
                return f"the {self.subject} reached {self.baseline}"
        elif self.outcome == "better":
            return f"the {self.subject} beat {self.baseline}"
        elif self.outcome == "worse":
            return f"the {self.subject} did worse than {self.baseline}"
        return f"no measurable difference between the {self.subject} and {self.baseline}"

    def relation(self) -> str:
        """The subject against the baseline under the noise rule: 'better than BM25', 'worse
        than BM25' or 'no measurable difference from BM25'."""
        if self.outcome == "no measurable difference":
            return f"no measurable difference from {self.baseline}"
        return f"{self.outcome} than {self.baseline}"

    def difference_text(self) -> str:
        """'difference −0.79 nats/token, 95 % interval −0.95 to −0.64 over 24 test steps'
        ("" without an interval)."""
        i = self.interval
        if i is None:
            return ""
        show = self._number
        if math.isclose(i.low, i.high, rel_tol=1e-9, abs_tol=1e-12):
            return f"difference {show(i.difference)}, the same on every resample of {i.items}"
        return (
            f"difference {show(i.difference)}, {100 * i.confidence:.0f} % interval "
            f"{show(i.low)} to {show(i.high)}"
        )

    def _number(self, value: float) -> str:
        scaled = value * self.scale
        if abs(scaled) < 0.5 * 10**-self.digits:
            return f"0{self.unit}"
        return f"{scaled:+.{self.digits}f}".replace("-", "−") + self.unit

    def sentence(self, *, with_reasons: bool = True) -> str:
        """The verdict with the figures, the difference and its interval (and, unless
        ``with_reasons`` is off, the likely reasons) as one sentence."""
        text = (
            f"{_capital(self.verdict())}: {self.metric} {self.shown} against {self.baseline_shown}"
        )
        difference = self.difference_text()
        if difference:
            text += f" ({difference})"
        if with_reasons and self.reasons:
            text += ". Likely why: " + "; ".join(self.reasons)
        return text + "."


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def rule_text() -> str:
    """The noise rule in words, for the report's readers."""
    return (
        f"A difference counts only when its {100 * CONFIDENCE:.0f} % interval (a paired "
        f"bootstrap over the test items, {BOOTSTRAP_SAMPLES:,} resamples) lies on one side of 0; "
        "otherwise it is called no measurable difference, whichever way it points. A "
        "difference that one test item makes never counts, nor one too small to show at the "
        "precision it is reported with."
    )
