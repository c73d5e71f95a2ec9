"""Every plot leanloop writes is labelled: each panel has a title and axis labels, a legend where
it shows more than one series, and bars of counts carry their count ("2 of 6"); checked on the
matplotlib figures before they are saved."""

from __future__ import annotations

from datetime import UTC, datetime

from leanloop.agent.proving import SorryReport, SorryRow
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.benchmark_report import BenchmarkReport, benchmark_figure
from leanloop.prover.config import ProofMode
from leanloop.prover.report import EvaluationReport
from leanloop.prover.run_report import TheoremRow
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
    outcomes_panel, passk, times = figure.axes
    assert outcomes_panel.get_title() == "6 theorems by outcome"
    assert (outcomes_panel.get_xlabel(), outcomes_panel.get_ylabel()) == ("outcome", "theorems")
    assert texts(outcomes_panel.texts) == ["3 of 6", "2 of 6", "1 of 6"]  # failed, written, ...
    assert [round(p.get_height()) for p in outcomes_panel.patches] == [3, 2, 1]
    assert passk.get_ylabel() == "pass@k (%)" and passk.get_xlabel() == "k (attempts per theorem)"
    assert times.get_title() == "time per theorem" and times.get_xlabel()
    assert "search, other" in texts(times.get_legend().get_texts())
    assert figure.get_suptitle() == "sorries: 2 of 6 sorries proved by Lean and written"
    assert "2 of 6 sorries proved by Lean and written" in report.summary()


def test_evaluation_report_figure():
    statuses = [AttemptStatus.PROVED, AttemptStatus.FAILED, AttemptStatus.FAILED]
    report = EvaluationReport.from_attempts("eval", [attempt(i, s) for i, s in enumerate(statuses)])
    figure = report.figure()
    statuses_panel, passk, times = figure.axes
    assert statuses_panel.get_title() == "3 theorems by status"
    assert texts(statuses_panel.texts) == ["2 of 3", "1 of 3"]  # failed, proved
    assert passk.get_ylabel() == "pass@k (%)"
    assert texts(passk.get_legend().get_texts()) == ["all (1 of 3 theorems proved)"]
    assert texts(passk.texts) == ["33.3 %"]
    assert times.get_ylabel() == "seconds (measured in this run)"
    assert figure.get_suptitle() == "eval: 1 of 3 theorems proved"
    one = EvaluationReport.from_attempts(
        "replay", [attempt(0, AttemptStatus.REPLAYED, "replay")]
    ).figure()
    assert one.get_suptitle() == (
        "replay: 1 of 1 theorem found again (replay) (no Lean, not proving)"
    )
    assert one.axes[1].get_ylabel() == "replayed@k (%)"


def test_benchmark_figure():
    def row(name: str, split: str, samples: int, found: int) -> TheoremRow:
        status = "recorded" if found else "failed"
        return TheoremRow(
            full_name=name,
            split=split,
            status=status,
            samples=samples,
            found=found,
            attempts={"recorded": found, "failed": samples - found},
        )

    report = BenchmarkReport(
        run="r",
        benchmark="minif2f",
        sampler="model",
        verifier="recorded",
        environment="recorded",
        samples=4,
        unit="problem",
        rows=[row(f"v{i}", "valid", 4, 1 if i < 3 else 0) for i in range(10)]
        + [row("t0", "test", 4, 2)],
    )
    figure = benchmark_figure(report)
    _, axes, _ = figure.axes
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("k (attempts per problem)", "accepted@k (%)")
    assert axes.get_title() == "accepted@k by split: recorded verdicts"
    legend = axes.get_legend()
    assert legend.get_title().get_text() == "split"
    assert texts(legend.get_texts()) == [
        "valid (3 of 10 problems accepted by recorded verdicts)",
        "test (1 of 1 problem accepted by recorded verdicts)",
        "all (4 of 11 problems accepted by recorded verdicts)",
    ]
    assert texts(axes.texts)[:2] == ["30.0 %", "100.0 %"]  # at the largest k
    assert "not checked now" in figure.get_suptitle()
    assert "valid: 3 of 10 problems accepted by recorded verdicts; accepted@1 7.5 %" in (
        report.summary()
    )
    assert "- 44 attempts: 39 failed, 5 recorded" in report.markdown()


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
