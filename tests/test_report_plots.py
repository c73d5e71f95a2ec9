"""Every plot leanloop writes is labelled: each panel has a title and axis labels, a legend where
it shows more than one series, and bars of counts carry their count ("2 of 6"); checked on the
matplotlib figures before they are saved."""

from __future__ import annotations

from datetime import UTC, datetime

from leanloop.agent.proving import SorryReport, SorryRow
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.benchmark_report import BenchmarkReport, SplitFigures, benchmark_figure
from leanloop.prover.config import ProofMode
from leanloop.prover.report import EvaluationReport
from leanloop.trainer.plots import curves_figure, plot_curves


def texts(items) -> list[str]:
    return [item.get_text() for item in items]


def attempt(index: int, status: AttemptStatus, environment: str = "lean") -> ProofAttempt:
    return ProofAttempt(
        run="eval",
        url="https://github.com/example/project",
        commit="c" * 40,
        file_path="Project/Basic.lean",
        full_name=f"thm{index}",
        status=status,
        environment=environment,
        seconds=1.0 + index,
        axioms=("propext",) if status is AttemptStatus.PROVED else None,
    )


def test_sorry_report_figure():
    outcomes = ["written", "written", "failed", "failed", "failed", "timeout"]
    report = SorryReport(
        run="sorries",
        prover="hf",
        environment="lean",
        mode=ProofMode.SEARCH,
        started=datetime(2025, 1, 1, tzinfo=UTC),
        rows=[
            SorryRow(
                full_name=f"thm{i}",
                file_path="Project/Basic.lean",
                url="https://github.com/example/project",
                commit="c" * 40,
                outcome=outcome,
                status=AttemptStatus.PROVED if outcome == "written" else AttemptStatus.FAILED,
                seconds=1.0 + i,
                check_seconds=0.5 if outcome == "written" else 0.0,
            )
            for i, outcome in enumerate(outcomes)
        ],
    )
    figure = report.figure()
    outcomes_panel, times = figure.axes
    assert outcomes_panel.get_title() == "6 theorems by outcome"
    assert (outcomes_panel.get_xlabel(), outcomes_panel.get_ylabel()) == ("outcome", "theorems")
    assert texts(outcomes_panel.texts) == ["3 of 6", "2 of 6", "1 of 6"]  # failed, written, ...
    assert [round(p.get_height()) for p in outcomes_panel.patches] == [3, 2, 1]
    assert times.get_title() == "time per theorem" and times.get_ylabel() == "seconds"
    assert texts(times.get_legend().get_texts()) == ["search", "file check"]
    assert figure.get_suptitle() == "sorries: 2 of 6 sorries proved by Lean and written"
    assert "2 of 6 sorries proved by Lean and written" in report.summary()


def test_evaluation_report_figure():
    statuses = [AttemptStatus.PROVED, AttemptStatus.FAILED, AttemptStatus.FAILED]
    report = EvaluationReport.from_attempts("eval", [attempt(i, s) for i, s in enumerate(statuses)])
    figure = report.figure()
    times, budget = figure.axes
    assert times.get_title() == "3 attempts by time and outcome"
    assert (times.get_xlabel(), times.get_ylabel()) == ("seconds per attempt", "attempts")
    assert texts(times.get_legend().get_texts()) == ["proved", "failed"]
    assert budget.get_ylabel() == "theorems proved"
    assert budget.get_title() == "theorems proved within a time budget (of 3 theorems)"
    assert figure.get_suptitle() == "eval: pass@1 33.3 % on 3 theorems"
    one = EvaluationReport.from_attempts(
        "replay", [attempt(0, AttemptStatus.REPLAYED, "replay")]
    ).figure()
    assert one.get_suptitle() == (
        "replay: replayed@1 100.0 % on 1 theorem (recorded proofs found, no Lean)"
    )
    assert one.axes[1].get_ylabel() == "recorded proofs found"


def test_benchmark_figure():
    report = BenchmarkReport(
        run="r",
        benchmark="minif2f",
        sampler="model",
        verifier="recorded",
        verdicts="recorded verdicts",
        axioms_audited=False,
        samples=4,
        stop_at_first=False,
        splits={
            "valid": SplitFigures(problems=10, verified=3, pass_at={1: 0.1, 2: 0.2, 4: 0.3}),
            "test": SplitFigures(problems=1, verified=1, pass_at={1: 0.5, 2: 0.8, 4: 1.0}),
        },
        sources={},
        statuses={"verified": 4, "failed": 36},
        generation_seconds=1.0,
        verification_seconds=1.0,
        wall_seconds=2.0,
        samples_made=44,
    )
    (axes,) = benchmark_figure(report).axes
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("k (samples per problem)", "pass@k (%)")
    assert axes.get_title() == "minif2f: model"
    legend = axes.get_legend()
    assert legend.get_title().get_text() == "split"
    assert texts(legend.get_texts()) == [
        "valid (3 of 10 problems verified)",
        "test (1 of 1 problem verified)",
    ]
    assert texts(axes.texts) == ["30.0 %", "100.0 %"]  # pass@k at the largest k
    assert "valid: 3 of 10 problems verified; pass@1 10.0 %" in report.summary()
    assert "- 44 samples: 4 verified, 36 failed" in report.markdown()


def test_training_curves_figure(tmp_path):
    history = [
        {"step": 1, "loss": 2.0, "learning_rate": 1e-4, "epoch": 0.1},
        {"step": 2, "loss": 1.5, "learning_rate": 5e-5, "epoch": 0.2},
        {"eval_loss": 1.7},  # no step: not plotted
    ]
    figure = curves_figure(history, "SFT example/project")
    assert [ax.get_title() for ax in figure.axes] == ["learning rate", "training loss"]
    assert [ax.get_ylabel() for ax in figure.axes] == ["learning_rate", "loss"]
    assert {ax.get_xlabel() for ax in figure.axes} == {"optimizer step"}
    assert figure.get_suptitle() == "training curves: SFT example/project"
    empty = curves_figure([])
    assert [ax.get_title() for ax in empty.axes] == ["(no metrics logged)"]
    path = plot_curves(history, tmp_path / "curves" / "training_curves.png")
    assert path.read_bytes().startswith(b"\x89PNG")
