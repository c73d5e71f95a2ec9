"""The main job's report read at a glance: counts as counts, rates as percentages, plurals
right, a plot whose panels are labelled, and a plain statement, with the likely reasons, of each
trained model that did not beat its baseline (and of each that did)."""

from __future__ import annotations

import json

from leanloop.agent.run_report import (
    DataSummary,
    GeneratorResults,
    RetrieverResults,
    RunReport,
    SearchSummary,
)
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.report import EvaluationReport
from leanloop.trainer.evaluation import TacticAccuracy


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


def figures(r10: float, steps: int = 33) -> dict[str, float]:
    return {"R@1": r10 / 2, "R@10": r10, "MRR": r10 / 3, "steps": steps}


def report(*, trained_r10: float, after_hits: tuple[int, int], found: int) -> RunReport:
    """A quick run's report: the retriever trained to ``trained_r10`` against BM25 at 5 % and
    the untrained encoder at 3.4 %; the generator's (top-1, top-2) hits on 4 steps after
    training, none before; the trained search finding ``found`` of 4 theorems, the recorded
    diagnostic all 10."""
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
        retriever=RetrieverResults(
            test_steps=33,
            pool="train split",
            pool_premises=281,
            reachable_steps=7,
            best_possible_r10=0.2,
            bm25=figures(0.05),
            untrained=figures(0.034),
            trained=figures(trained_r10),
            train_steps=279,
            optimizer_steps=12,
            epochs=0.34,
            best_val_r10=None,
            device="cpu",
            train_seconds=10.2,
            seconds=20.0,
        ),
        generator=GeneratorResults(
            model="tinycoder",
            before=TacticAccuracy(steps=4, k=2, top1_hits=0, topk_hits=0),
            after=TacticAccuracy(steps=4, k=2, top1_hits=after_hits[0], topk_hits=after_hits[1]),
            train_steps=1,
            train_examples=372,
            train_seconds=8.3,
            batch_size=4,
            device="cpu",
            seconds=30.0,
        ),
        search=SearchSummary(
            model=attempts("trained", [replayed] * found + [failed] * (4 - found)),
            diagnostic=attempts("recorded", [replayed] * 10),
        ),
    )


def test_a_run_below_its_baselines_says_so_and_why():
    below = report(trained_r10=0.034, after_hits=(0, 0), found=0)
    verdicts = {(c.subject, c.baseline): c for c in below.comparisons}
    assert [c.better for c in below.comparisons] == [False, False, False, False]

    bm25 = verdicts["trained retriever", "BM25"]
    assert bm25.relation() == "below BM25"
    assert bm25.sentence() == (
        "The trained retriever did not beat BM25: R@10 3.4 % against 5.0 %. Likely why: "
        "short training: 10 s on a CPU, 12 optimizer steps (0.34 epochs over 279 training "
        "steps); no validation finished within the time, so the last weights were kept "
        "rather than the best; only 7 of 33 test steps use a premise among the candidates "
        "(the train split's premises: the data has no corpus.jsonl), so no ranker can score "
        "above 20.0 % R@10; a small test sample: 33 steps, each worth up to 3.0 points of "
        "R@10; the gap is about 1 test step."
    )
    untrained = verdicts["trained retriever", "the untrained encoder"]
    assert untrained.relation() == "equal to the untrained encoder"
    assert "the gap" not in untrained.sentence()  # equal: no gap to tell

    generator = verdicts["trained generator", "the untrained tinycoder"]
    assert generator.sentence() == (
        "The trained generator did not beat the untrained tinycoder: top-2 accuracy 0 of 4 "
        "test steps (0 %) against 0 of 4 (0 %). Likely why: short training: 1 optimizer step "
        "in 8 s on a CPU, 0.01 of an epoch over 372 examples; the base model is tinycoder, a "
        "tiny model for a first look (--quick); a small test sample: 4 steps; neither model "
        "proposed the recorded tactic among its top 2 on any test step."
    )
    search = verdicts["trained generator's search", "the recorded diagnostic"]
    assert search.sentence().startswith(
        "The trained generator's search did not reach the recorded diagnostic: recorded "
        "proofs found (replay) 0 of 4 theorems (0 %) against 10 of 10 (100 %). Likely why: "
    )
    assert "a small search budget: 2 expansions and 5 s per theorem" in search.sentence()

    # the Markdown, the JSON and the console say the same
    markdown = below.markdown()
    assert "## Trained models against their baselines" in markdown
    assert "- **The trained retriever did not beat BM25**: R@10 3.4 % against 5.0 %." in markdown
    rows = {row[0]: row[1:] for row in below.rows()}
    assert rows["data"][0] == "177 theorems from 1 repository (train 141, val 18, test 18)"
    assert rows["retriever R@10 (33 test steps, 281 candidates: train split)"] == (
        "3.4 % trained",
        "BM25 5.0 %, untrained 3.4 %: trained is below BM25, equal to the untrained encoder",
    )
    assert rows["tactic accuracy (4 test steps, k=2)"] == (
        "top-1 0 of 4 (0 %), top-2 0 of 4 (0 %) trained",
        "untrained tinycoder: top-1 0 of 4 (0 %), top-2 0 of 4 (0 %): trained is equal to the "
        "untrained tinycoder",
    )
    assert rows["search, replay environment (no Lean)"] == (
        "recorded proofs found for 0 of 4 theorems (trained generator)",
        "recorded diagnostic: 10 of 10: trained is below the recorded diagnostic",
    )
    data = json.loads(json.dumps(below.model_dump(mode="json")))
    assert [c["better"] for c in data["comparisons"]] == [False] * 4
    assert data["comparisons"][0]["reasons"][0].startswith("short training: 10 s on a CPU")
    assert below.findings() == [c.sentence() for c in below.comparisons]
    assert RunReport.model_validate(data).comparisons == below.comparisons  # reads back


def test_a_run_above_its_baselines_says_so_without_excuses():
    above = report(trained_r10=0.12, after_hits=(1, 2), found=4)
    assert [c.better for c in above.comparisons] == [True, True, True, True]
    assert all(not c.reasons for c in above.comparisons)
    sentences = above.findings()
    assert sentences[0] == "The trained retriever beat BM25: R@10 12.0 % against 5.0 %."
    assert sentences[2] == (
        "The trained generator beat the untrained tinycoder: top-2 accuracy 2 of 4 test steps "
        "(50 %) against 0 of 4 (0 %)."
    )
    assert sentences[3].startswith("The trained generator's search reached the recorded diagnostic")
    assert "Likely why" not in above.markdown()
    assert "trained is above BM25, above the untrained encoder" in above.markdown()


def test_the_plot_is_labelled_and_shows_counts_as_counts():
    figure = report(trained_r10=0.034, after_hits=(0, 1), found=0).figure()
    retriever, generator, search = figure.axes
    assert retriever.get_ylabel() == "R@10 (%)" and retriever.get_xlabel() == "ranker"
    assert "retriever R@10 on 33 test steps" in retriever.get_title()
    assert retriever.get_title() == (
        "retriever R@10 on 33 test steps\ntrained is below BM25, equal to the untrained encoder"
    )
    assert [t.get_text() for t in retriever.texts] == ["5.0 %", "3.4 %", "3.4 %"]  # on the bars
    assert {t.get_text() for t in retriever.get_legend().get_texts()} == {
        "baseline",
        "trained",
        "highest possible (20.0 %)",
    }

    assert generator.get_ylabel() == "test steps"
    assert generator.get_title() == "tactic accuracy on 4 test steps"
    assert [t.get_text() for t in generator.get_legend().get_texts()] == [
        "untrained tinycoder",
        "trained",
    ]
    bar_labels = [t.get_text() for t in generator.texts]
    assert bar_labels == ["0 of 4", "0 of 4", "0 of 4", "1 of 4"]

    assert search.get_ylabel() == "test theorems"
    assert search.get_title() == "replayed search (no Lean): theorems by outcome"
    assert [t.get_text() for t in search.get_legend().get_texts()] == ["replayed", "failed"]
    assert [t.get_text() for t in search.texts] == ["0 of 4 replayed", "10 of 10 replayed"]
    ticks = [t.get_text() for t in search.get_xticklabels()]
    assert ticks == ["trained generator\n(4 theorems)", "recorded diagnostic\n(10 theorems)"]
    # the bars are as tall as the counts: 4 failed, 10 replayed
    heights = sorted(round(p.get_height()) for p in search.patches if p.get_height())
    assert heights == [4, 10]
