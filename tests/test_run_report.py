"""The main job's report read at a glance: counts as counts, rates as percentages, plurals
right, a figure whose panels are labelled with their units, and each trained model against its
baseline under one noise rule for wins and losses — a difference whose paired bootstrap interval
over the test items holds 0 (as any difference one item makes does) is "no measurable
difference" in the console, the Markdown, the JSON and the figure, whichever way it points."""

from __future__ import annotations

import json

import pytest

from leanloop.agent.run_compare import Comparison, outcome_of, paired_interval
from leanloop.agent.run_report import (
    DataSummary,
    GeneratorResults,
    RetrieverResults,
    RunReport,
    SearchSummary,
    TrainingCurve,
)
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.report import EvaluationReport
from leanloop.trainer.evaluation import CompletionLoss, StepLoss, TacticAccuracy

NONE = "no measurable difference"


def attempts(run: str, statuses: list[AttemptStatus]) -> EvaluationReport:
    return EvaluationReport.from_attempts(
        run,
        [
            ProofAttempt(
                run=run,
                url="https://github.com/example/sample",
                commit="c" * 40,
                file_path="Sample.lean",
                full_name=f"thm{index}",
                status=status,
                environment="replay",
                seconds=0.5 + index,
            )
            for index, status in enumerate(statuses)
        ],
    )


#: The rank of each of 33 test steps' first premise for BM25: 7 steps have one among the
#: candidates, the other 26 none.
BM25_RANKS = [2, 40, 11, 7, 90, 25, 3] + [None] * 26


def retriever(trained: list[int | None], untrained: list[int | None] | None = None):
    ranks = {"bm25": BM25_RANKS, "untrained": untrained or BM25_RANKS, "trained": trained}
    recall10 = {k: [1.0 if r is not None and r <= 10 else 0.0 for r in v] for k, v in ranks.items()}

    def figures(name: str) -> dict[str, float]:
        r10 = sum(recall10[name]) / 33
        return {"R@1": 0.0, "R@10": r10, "MRR": 0.0, "steps": 33}

    return RetrieverResults(
        test_steps=33,
        pool="train split",
        pool_premises=281,
        reachable_steps=7,
        best_possible_r10=0.2,
        bm25=figures("bm25"),
        untrained=figures("untrained"),
        trained=figures("trained"),
        ranks=ranks,
        recall10=recall10,
        train_steps=279,
        optimizer_steps=12,
        epochs=0.34,
        best_val_r10=None,
        device="cpu",
        curve=TrainingCurve(unit="nats per query, contrastive", steps=[1, 2, 3], values=[3, 2, 1]),
        train_seconds=10.2,
        seconds=20.0,
    )


def losses(nll: list[float], correct: list[int], tokens: int = 10) -> CompletionLoss:
    return CompletionLoss(
        per_step=[
            StepLoss(tokens=tokens, nll=n, correct=c) for n, c in zip(nll, correct, strict=True)
        ]
    )


def accuracy(topk: list[bool]) -> TacticAccuracy:
    per_step = [(False, hit) for hit in topk]
    return TacticAccuracy(steps=len(topk), k=2, top1_hits=0, topk_hits=sum(topk), per_step=per_step)


def generator(
    nll: tuple[list[float], list[float]],
    correct: tuple[list[int], list[int]],
    topk: tuple[list[bool], list[bool]],
) -> GeneratorResults:
    """Before and after training: each step's summed loss of its 10 tokens and how many of them
    the model got right, and each step's top-2 hit."""
    return GeneratorResults(
        model="tinycoder",
        model_description="tinycoder (GGUF from PyPI, de-quantised to fp32)",
        before=accuracy(topk[0]),
        after=accuracy(topk[1]),
        loss_before=losses(nll[0], correct[0]),
        loss_after=losses(nll[1], correct[1]),
        train_steps=1,
        train_examples=372,
        train_seconds=8.3,
        batch_size=4,
        device="cpu",
        curve=TrainingCurve(unit="nats per completion token", steps=[1, 2], values=[8.2, 5.4]),
        seconds=30.0,
    )


def report(
    trained: list[int | None], g: GeneratorResults, found: int, *, untrained=None
) -> RunReport:
    replayed, failed = AttemptStatus.REPLAYED, AttemptStatus.FAILED
    return RunReport(
        config={"quick": True, "search_expansions": 2, "search_seconds": 5.0},
        expected_seconds=50,
        seconds=61,
        data=DataSummary(
            dataset="sample",
            repositories=["https://github.com/example/sample@cccccccc"],
            theorems=177,
            tactics=500,
            splits={"train": 141, "val": 18, "test": 18},
            export="export",
        ),
        retriever=retriever(trained, untrained),
        generator=g,
        search=SearchSummary(
            model=attempts("trained", [replayed] * found + [failed] * (4 - found)),
            diagnostic=attempts("recorded", [replayed] * 10),
        ),
    )


def one_item_apart(direction: int) -> RunReport:
    """Trained and baselines the same on every test item but one, which the trained model
    does better (``direction`` 1) or worse (-1) on."""
    trained = list(BM25_RANKS)
    trained[1] = 1 if direction > 0 else None  # 40 → 1 (into the top 10), or out of reach
    if direction < 0:
        trained[1] = 40
        trained[0] = 200  # 2 → 200: out of the top 10
    base = [12.0] * 10
    changed = list(base)
    changed[3] = 2.0 if direction > 0 else 40.0
    return report(
        trained,
        generator(
            (base, changed),
            ([3] * 10, [3] * 3 + [9 if direction > 0 else 0] + [3] * 6),
            ([False] * 10, [direction > 0] + [False] * 9)
            if direction > 0
            else ([True] + [False] * 9, [False] * 10),
        ),
        found=0,
    )


@pytest.mark.parametrize("direction", [1, -1])
def test_what_one_test_item_changes_is_no_measurable_difference(direction):
    apart = one_item_apart(direction)
    by_metric = {(c.baseline, c.metric.split(" ")[0]): c for c in apart.comparisons}
    for key in [
        ("BM25", "MRR"),
        ("BM25", "mean"),
        ("BM25", "R@10"),
        ("the untrained tinycoder", "held-out"),
        ("the untrained tinycoder", "token"),
        ("the untrained tinycoder", "top-2"),
    ]:
        comparison = by_metric[key]
        assert comparison.interval is not None and comparison.interval.difference != 0, key
        assert comparison.outcome == NONE and not comparison.better, key
        assert comparison.verdict().startswith("no measurable difference between the trained")
        assert comparison.interval.low <= 0 <= comparison.interval.high, key
    # said the same way on the console, in the Markdown, the JSON and the figure
    console = "\n".join(apart.summary_lines())
    assert "beat" not in console and "worse" not in console
    assert console.count("  - No measurable difference between the trained") == 9
    markdown = apart.markdown()
    assert "- **Beat" not in markdown and "- **The trained retriever beat" not in markdown
    assert (
        "- **No measurable difference between the trained generator and the untrained" in markdown
    )
    data = json.loads(json.dumps(apart.model_dump(mode="json")))
    assert {c["outcome"] for c in data["comparisons"][:-1]} == {NONE}
    titles = [axes.get_title() for axes in apart.figure().axes]
    assert any("trained vs BM25: no measurable difference" in t for t in titles)
    assert any("top-2, trained vs untrained: no measurable difference" in t for t in titles)
    assert not any("better" in t or "worse" in t for t in titles)


UNTRAINED_NLL = [12.0, 11.0, 14.0, 12.5, 13.0, 12.0, 11.5, 12.2, 13.3, 12.8]
TRAINED_NLL = [6.0, 7.5, 5.0, 8.0, 6.5, 7.0, 6.2, 5.9, 7.7, 6.4]
UNTRAINED_CORRECT = [2, 3, 2, 3, 2, 3, 2, 3, 2, 3]
TRAINED_CORRECT = [6, 5, 7, 6, 5, 6, 7, 5, 6, 6]


def test_a_difference_on_many_items_is_a_win_or_a_loss():
    better = [1, 3, 1, 2, 9, 4, 1] + [None] * 26  # every reachable step ranked higher
    no_hits = ([False] * 10, [False] * 10)
    improved = report(
        better,
        generator((UNTRAINED_NLL, TRAINED_NLL), (UNTRAINED_CORRECT, TRAINED_CORRECT), no_hits),
        found=4,
    )
    verdicts = {(c.baseline, c.metric.split(" ")[0]): c for c in improved.comparisons}
    assert verdicts["BM25", "MRR"].outcome == "better"
    assert verdicts["BM25", "MRR"].sentence().startswith("The trained retriever beat BM25: MRR")
    assert verdicts["BM25", "mean"].outcome == "better"  # a lower mean rank is better
    loss = verdicts["the untrained tinycoder", "held-out"]
    assert loss.outcome == "better" and loss.interval is not None and loss.interval.high < 0
    interval = loss.difference_text().split("interval ")[1]
    assert loss.sentence() == (
        "The trained generator beat the untrained tinycoder: held-out loss of the recorded "
        "tactic on 10 test steps (100 tokens) 0.66 nats/token (perplexity 1.9) against 1.24 "
        f"(3.5) (difference −0.58 nats/token, 95 % interval {interval})."
    )
    assert verdicts["the untrained tinycoder", "token"].outcome == "better"
    # the same figures the other way round: measurably worse, said as plainly
    worse = report(
        BM25_RANKS,
        generator((TRAINED_NLL, UNTRAINED_NLL), (TRAINED_CORRECT, UNTRAINED_CORRECT), no_hits),
        found=0,
        untrained=better,
    )
    verdicts = {(c.baseline, c.metric.split(" ")[0]): c for c in worse.comparisons}
    assert verdicts["the untrained encoder", "MRR"].outcome == "worse"
    assert verdicts["the untrained encoder", "MRR"].verdict() == (
        "the trained retriever did worse than the untrained encoder"
    )
    assert verdicts["the untrained tinycoder", "held-out"].outcome == "worse"
    assert verdicts["the untrained tinycoder", "held-out"].reasons  # the likely reasons
    assert "did worse than the untrained tinycoder" in worse.markdown()
    # the search: 0 of 4 theorems against the diagnostic's 4 of the same 4 is measurable
    search = worse.comparisons[-1]
    assert search.goal == "reach" and search.outcome == "worse"
    assert search.baseline_shown == "4 of 4 (100 %) of the same theorems"


def test_the_bootstrap_interval():
    shift = paired_interval([3.0, 4.0, 5.0], [1.0, 2.0, 3.0])
    assert shift.difference == shift.low == shift.high == 2.0  # the same on every resample
    assert (
        "the same on every resample of 3"
        in Comparison.of(
            shift,
            subject="s",
            baseline="b",
            metric="m",
            value=4,
            baseline_value=2,
            shown="4",
            baseline_shown="2",
        ).difference_text()
    )
    assert outcome_of(shift) == "better" and outcome_of(shift, higher_is_better=False) == "worse"
    # one item of 50 carries the difference: left out of ~36 % of the resamples, so the
    # interval reaches 0
    single = paired_interval([1.0] + [0.0] * 49, [0.0] * 50)
    assert single.low == 0.0 and single.high > 0 and outcome_of(single) == NONE
    # a ratio of sums: tokens as weights
    ratio = paired_interval([2.0, 6.0], [4.0, 8.0], subject_weights=[1, 3])
    assert ratio.difference == pytest.approx(8 / 4 - 12 / 4)
    # a single item can never tell, whatever its difference
    assert outcome_of(paired_interval([5.0], [0.0])) == NONE
    # a difference too small to show at the reported precision is none either
    tiny = Comparison.of(
        paired_interval([1.0001, 2.0001, 3.0001], [1.0, 2.0, 3.0]),
        subject="trained generator",
        baseline="the untrained tinycoder",
        metric="held-out loss",
        value=2.0001,
        baseline_value=2.0,
        shown="2.00",
        baseline_shown="2.00",
        higher_is_better=False,
    )
    assert tiny.interval is not None and tiny.interval.low > 0
    assert tiny.outcome == NONE


def test_the_report_says_what_the_models_are_and_why_they_did_not_do_better():
    same = report(
        BM25_RANKS,
        generator(([12.0] * 10, [12.0] * 10), ([3] * 10, [3] * 10), ([False] * 10,) * 2),
        found=0,
    )
    assert all(c.outcome == NONE for c in same.comparisons[:-1])
    lines = same.summary_lines()
    why = [line for line in lines if line.startswith("    Likely why")]
    assert why[0] == (
        "    Likely why (the trained retriever): short training: 10 s on a CPU, 12 optimizer "
        "steps (0.34 epochs over 279 training steps); no validation finished within the time, "
        "so the last weights were kept rather than the best; only 7 of 33 test steps use a "
        "premise among the candidates (the train split's premises: the data has no "
        "corpus.jsonl), so no ranker can score above 20.0 % R@10; a small test sample: 33 "
        "steps, each worth up to 3.0 points of R@10."
    )
    assert "neither model proposed the recorded tactic among its top 2" in why[1]
    markdown = same.markdown()
    assert "Tactic generator: tinycoder (GGUF from PyPI, de-quantised to fp32)." in markdown
    assert "a paired bootstrap over the test items" in markdown
    rows = {row[0]: row[1:] for row in same.rows()}
    assert rows["data"][0] == "177 theorems from 1 repository (train 141, val 18, test 18)"
    key = "retriever MRR (mean rank) on the 7 of 33 test steps with a premise among the candidates"
    assert rows[key] == (
        "0.163 (25.4) trained",
        "BM25 0.163 (25.4), untrained 0.163 (25.4): trained's MRR no measurable difference "
        "from BM25, no measurable difference from the untrained encoder; mean rank no "
        "measurable difference from BM25, no measurable difference from the untrained encoder",
    )
    assert rows["held-out loss, perplexity, token accuracy (10 test steps)"][0] == (
        "1.20 nats/token, 3.3, 30.0 % trained"
    )
    assert rows["tactic accuracy (10 test steps, k=2)"][0] == (
        "top-1 0 of 10 (0 %), top-2 0 of 10 (0 %) trained"
    )
    data = json.loads(json.dumps(same.model_dump(mode="json")))
    assert RunReport.model_validate(data).comparisons == same.comparisons  # reads back


def test_the_figure_is_labelled_with_units_and_shows_the_training_curves():
    figure = one_item_apart(1).figure()
    mrr, rank, recall, retriever_curve, loss, acc, search, generator_curve = figure.axes
    assert mrr.get_ylabel() == "MRR (1 / rank of the first premise)"
    assert mrr.get_title().startswith("retriever MRR on the 7 of 33 test steps")
    assert rank.get_ylabel() == "mean rank of the first premise (lower is better)"
    assert recall.get_ylabel() == "R@10 (%)" and recall.get_xlabel() == "ranker"
    assert [t.get_text() for t in recall.texts] == ["9.1 %", "9.1 %", "12.1 %"]  # on the bars
    assert loss.get_ylabel() == "held-out loss (nats per completion token)"
    assert [t.get_text() for t in loss.texts] == ["1.20 (perplexity 3.3)", "1.10 (perplexity 3.0)"]
    assert acc.get_ylabel() == "accuracy (%)"
    assert [t.get_text() for t in acc.get_legend().get_texts()] == [
        "untrained tinycoder",
        "trained",
    ]
    assert search.get_ylabel() == "test theorems"
    assert [t.get_text() for t in search.texts] == ["0 of 4 replayed", "10 of 10 replayed"]
    for curve, unit in (
        (retriever_curve, "nats per query, contrastive"),
        (generator_curve, "nats per completion token"),
    ):
        assert curve.get_xlabel() == "optimizer step"
        assert curve.get_ylabel() == f"training loss ({unit})"
        assert len(curve.get_lines()[0].get_xdata()) in (2, 3)
