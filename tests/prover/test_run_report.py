"""The one report of a proving run: each theorem's status and why, pass@k by split, source and
file, recorded verdicts labelled as such (their times included), Markdown tables that are
tables, a figure that is never empty, and reports of other settings kept; the benchmark,
evaluation and sorry reports are this report."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leanloop.agent.proving import SorryReport, SorryRow
from leanloop.data.benchmark import BenchmarkFile
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.lean.verification import RecordedVerifier
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.benchmark_report import BenchmarkReport, write_files
from leanloop.prover.config import ProofMode
from leanloop.prover.passk import pass_at_k
from leanloop.prover.report import EvaluationReport
from leanloop.prover.run_report import RunReport, TheoremRow, theorem_row
from leanloop.prover.samplers import RecordedSamples
from leanloop.prover.sampling import run_benchmark
from tests.helpers import run_cli
from tests.test_benchmark_eval import recorded  # noqa: F401  (the fixture)


def attempt(
    name: str,
    index: int,
    status: AttemptStatus,
    *,
    environment: str = "lean",
    error: str | None = None,
    file: str = "P/A.lean",
    lean: float = 0.0,
    model: float = 0.0,
) -> ProofAttempt:
    return ProofAttempt(
        run="r",
        url="https://github.com/example/p",
        commit="c" * 40,
        file_path=file,
        full_name=name,
        attempt=index,
        status=status,
        environment=environment,
        error=error,
        proof=("simp",) if status.found_proof else None,
        axioms=("propext",) if status is AttemptStatus.PROVED else None,
        lean_seconds=lean,
        model_seconds=model,
        seconds=lean + model,
        tokens=5,
    )


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """The rows (header first) of the Markdown table whose header starts with
    ``header_start``, each as its cells."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if set(line) <= set("|-: "):  # the line under the header
            assert line.count("|") == lines[start].count("|"), line
            continue
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def assert_well_formed(markdown: str, header_start: str) -> list[list[str]]:
    """Every row of the table has as many cells as its header, and no header is blank."""
    rows = table_rows(markdown, header_start)
    assert len(rows) >= 1, markdown
    assert all(rows[0]), f"a blank header: {rows[0]}"
    assert all(len(row) == len(rows[0]) for row in rows), rows
    return rows


# -- rows and figures ---------------------------------------------------------------------------


def test_a_theorem_row_says_how_it_ended_and_why():
    failed = theorem_row(
        "t",
        [
            attempt("t", 0, AttemptStatus.FAILED, error="unsolved goals"),
            attempt("t", 1, AttemptStatus.ERROR, error="the server crashed"),
            attempt("t", 2, AttemptStatus.FAILED, error="type mismatch"),
        ],
    )
    assert (failed.status, failed.reason) == ("failed", "unsolved goals")
    assert (failed.samples, failed.found, failed.errors) == (3, 0, 1)
    assert failed.attempts == {"failed": 2, "error": 1}
    only_errors = theorem_row(
        "t", [attempt("t", 0, AttemptStatus.ERROR, error="no verdict")], count_errors=False
    )
    assert (only_errors.status, only_errors.reason, only_errors.samples) == (
        "error",
        "no verdict",
        0,
    )
    nothing = theorem_row("t", [], unsampled="the file has no answer for it")
    assert (nothing.status, nothing.reason) == ("unsampled", "the file has no answer for it")
    proved = theorem_row(
        "t",
        [
            attempt("t", 1, AttemptStatus.PROVED, lean=2.0, model=1.0),
            attempt("t", 0, AttemptStatus.FAILED, lean=1.0),
        ],
    )
    assert proved.status == "proved" and proved.found == 1 and proved.axioms == ["propext"]
    assert proved.proof == "simp" and proved.lean_seconds == 3.0 and proved.tokens == 10
    timeout = theorem_row(
        "t", [attempt("t", 0, AttemptStatus.TIMEOUT, environment="recorded", error="timed out")]
    )
    assert timeout.reason == "Lean's recorded verdict: timed out"


def test_pass_at_k_grouped_by_split_source_and_file():
    rows = [
        theorem_row(
            "a",
            [
                attempt("a", i, AttemptStatus.PROVED if i == 0 else AttemptStatus.FAILED)
                for i in range(4)
            ],
            split="valid",
            source="algebra",
            file_path="P/A.lean",
        ),
        theorem_row(
            "b",
            [attempt("b", i, AttemptStatus.FAILED) for i in range(4)],
            split="valid",
            source="imo",
            file_path="P/A.lean",
        ),
        theorem_row(
            "c",
            [attempt("c", i, AttemptStatus.PROVED) for i in range(2)],  # 2 of 4 asked
            split="test",
            source="algebra",
            file_path="P/B.lean",
        ),
    ]
    report = RunReport(run="r", environment="lean", axioms_audited=True, samples=4, rows=rows)
    valid = report.splits["valid"]
    assert (valid.problems, valid.verified, valid.incomplete) == (2, 1, 0)
    assert valid.pass_at[1] == pytest.approx((pass_at_k(4, 1, 1) + 0) / 2)
    assert valid.pass_at[4] == pytest.approx(0.5)
    test = report.splits["test"]
    assert test.incomplete == 1 and set(test.pass_at) == {1, 2}  # no pass@4 from 2 attempts
    assert report.splits["all"].pass_at[1] == pytest.approx((0.25 + 0 + 1) / 3)
    assert {name: g.verified for name, g in report.sources.items()} == {"algebra": 2, "imo": 0}
    assert {name: g.problems for name, g in report.files.items()} == {"P/A.lean": 2, "P/B.lean": 1}
    assert report.statuses == {"failed": 7, "proved": 3}
    assert report.axioms_used == {"propext": 2} and report.tokens == 50
    assert any("1 theorem has fewer than 4 attempts" in note for note in report.notes)
    markdown = report.markdown()
    split_table = assert_well_formed(markdown, "| split |")
    assert split_table[0] == ["split", "theorems", "with proof", "pass@1", "pass@2", "pass@4"]
    by_split = {row[0]: row for row in split_table[1:]}
    assert list(by_split) == ["valid", "test", "all"]
    assert by_split["test"][-1] == "–"  # no test theorem had 4 attempts
    assert by_split["valid"][1:] == ["2", "1", "12.5 %", "25.0 %", "50.0 %"]
    assert_well_formed(markdown, "| source |")
    assert_well_formed(markdown, "| file |")
    assert_well_formed(markdown, "| theorem |")


def test_early_stop_reports_pass_at_n_only():
    rows = [
        theorem_row("a", [attempt("a", 0, AttemptStatus.PROVED)]),
        theorem_row("b", [attempt("b", i, AttemptStatus.FAILED) for i in range(8)]),
    ]
    report = RunReport(run="r", environment="lean", samples=8, stop_at_first=True, rows=rows)
    assert report.splits["all"].pass_at == {8: 0.5} and report.splits["all"].incomplete == 0
    assert any("only pass@8" in note for note in report.notes)


# -- offline benchmark runs explain themselves ---------------------------------------------------


def test_every_problem_of_an_offline_run_says_why_it_has_no_proof(fixtures, tmp_path, capsys):
    few_shot = fixtures / "minif2f" / "minif2f_valid_few_shot.jsonl"
    verdicts = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    args = ["prove", "--generator", "recorded", "--verifier", f"recorded:{verdicts}"]
    args += ["--db", tmp_path / "d.db", "--out", tmp_path / "out", "--limit", "3", "--json"]
    # the few-shot proofs have no recorded verdict: each problem says so
    code, out, err = run_cli(capsys, *args, "--benchmark", few_shot, "--split", "valid")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3 and {line["status"] for line in lines} == {"error"}
    assert {line["verdict"] for line in lines} == {"recorded"}
    assert all("no verdict is recorded for this code" in line["reason"] for line in lines)
    assert "0 of 3 problems accepted by recorded verdicts" in err
    assert "without a proof: 3 error: no verdict is recorded for this code" in err
    (report_md,) = (tmp_path / "out").glob("*valid*/report.md")
    markdown = report_md.read_text()
    assert "- 0 samples: \n" not in markdown and "- 3 attempts: 3 error" in markdown
    header = assert_well_formed(markdown, "| split |")[0]
    assert header[-1] == "accepted@1"
    problems = assert_well_formed(markdown, "| problem |")
    assert len(problems) == 1 + 3
    assert all(row[2] == "error" and "no verdict is recorded" in row[-1] for row in problems[1:])
    data = json.loads(report_md.with_suffix(".json").read_text())
    assert {row["status"] for row in data["rows"]} == {"error"}
    assert data["verdicts"] == "recorded verdicts"
    # the test split has no formal_proof: no sample, and the problem says why
    bench = fixtures / "minif2f" / "minif2f.jsonl"
    code, out, err = run_cli(capsys, *args, "--benchmark", bench, "--split", "test")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["status"] for line in lines} == {"unsampled"}
    assert all("no formal_proof" in line["reason"] for line in lines)
    assert "3 unsampled: the benchmark file has no formal_proof" in err
    (report_md,) = (tmp_path / "out").glob("*test*/report.md")
    assert "- 0 attempts (none was made)" in report_md.read_text()


def test_recorded_verdicts_are_labelled_as_such_times_included(recorded, tmp_path):  # noqa: F811
    root, verdicts, rows = recorded
    bench = BenchmarkFile(root / "bench.jsonl")
    run = run_benchmark(
        bench,
        bench.problems(),
        RecordedSamples(root / "samples.jsonl"),
        RecordedVerifier(verdicts),
        config=BenchmarkConfig(prompt="chat"),
        run="offline",
        verifier_name=f"recorded:{verdicts.name}",
    )
    report = BenchmarkReport.of(run, "kimina")
    recorded_time = sum(a.lean_seconds for r in run.problems for a in r.attempts)
    assert recorded_time > 10 * max(run.wall_seconds, 1.0)  # the recording's, not this run's
    # no time of a recorded verdict is counted as spent in this run
    assert report.verification_seconds == 0.0
    assert report.recorded_verification_seconds == pytest.approx(recorded_time)
    assert sum(row.seconds for row in report.rows) == pytest.approx(report.generation_seconds)
    accepted = sum(row.found > 0 for row in report.rows)
    assert accepted == report.splits["test"].verified > 60
    markdown = report.markdown()
    assert f"Problems accepted by recorded verdicts: {accepted} of {len(rows)}" in markdown
    assert f"Lean took {recorded_time:.1f} s when they were recorded (not spent" in markdown
    assert "no Lean check ran now (recorded verdicts)" in markdown
    assert f"{accepted} of {len(rows)} problems accepted by recorded verdicts" in report.summary()
    assert "verified" not in report.summary()
    figure = report.figure()
    assert "not checked now, axioms not audited" in figure.get_suptitle()
    _, passk, times = figure.axes
    (legend,) = [text.get_text() for text in passk.get_legend().get_texts()]
    assert legend == f"test ({accepted} of {len(rows)} problems accepted by recorded verdicts)"
    assert passk.get_ylabel() == "accepted@k (%)"
    assert "recorded verdicts' times not counted" in times.get_title()
    written = write_files(run, report, tmp_path / "report")
    data = json.loads(written[0].read_text())
    assert data["environment"] == "recorded" and data["axioms_audited"] is False
    assert data["verification_seconds"] == 0.0
    assert data["recorded_verification_seconds"] == pytest.approx(recorded_time)
    assert [p.name for p in written] == ["report.json", "report.md", "report.png", "verified.jsonl"]
    assert len((tmp_path / "report" / "verified.jsonl").read_text().splitlines()) == accepted


def test_the_figure_of_a_run_without_attempts_says_why():
    report = RunReport(
        run="empty",
        environment="recorded",
        unit="problem",
        rows=[TheoremRow(full_name="p", status="unsampled", reason="no answer")],
    )
    statuses, passk, times = report.figure().axes
    assert [round(p.get_height()) for p in statuses.patches] == [1]
    assert any("no problem has an attempt" in text.get_text() for text in passk.texts)
    assert any("no time measured in this run" in text.get_text() for text in times.texts)


# -- reports are never silently replaced ---------------------------------------------------------


def test_a_report_of_other_settings_is_kept(tmp_path):
    rows = [theorem_row("a", [attempt("a", 0, AttemptStatus.PROVED)])]
    first = RunReport(run="r", environment="lean", samples=1, rows=rows)
    paths = first.write(tmp_path)
    assert [p.name for p in paths] == ["report.json", "report.md", "report.png"]
    before = paths[0].read_bytes()
    other = RunReport(run="r", environment="lean", samples=4, rows=rows)
    moved = other.write(tmp_path)
    assert [p.name for p in moved] == ["report-2.json", "report-2.md", "report-2.png"]
    assert paths[0].read_bytes() == before  # the first run's report is untouched
    assert json.loads(moved[0].read_text())["settings"]["samples"] == 4
    # the same run with the same settings (a rerun, a resumed run) updates its own report
    assert first.write(tmp_path)[0].name == "report.json"
    assert other.write(tmp_path)[0].name == "report-2.json"
    assert not (tmp_path / "report-3.json").exists()
    # overwrite=True replaces whatever is there
    assert other.write(tmp_path, overwrite=True)[0].name == "report.json"
    assert json.loads(paths[0].read_text())["settings"]["samples"] == 4


def test_prove_benchmark_keeps_the_report_of_a_run_with_other_settings(
    recorded,  # noqa: F811
    tmp_path,
    capsys,
):
    root, verdicts, _ = recorded
    args = ["prove", "--benchmark", root / "bench.jsonl", "--split", "all", "--run", "mine"]
    args += ["--generator", f"samples:{root / 'samples.jsonl'}", "--prompt", "chat"]
    args += ["--verifier", f"recorded:{verdicts}", "--out", tmp_path / "out"]
    code, _, err = run_cli(capsys, *args, "--db", tmp_path / "a.db", "--limit", "4")
    assert code == 0, err
    directory = tmp_path / "out" / "mine"
    before = (directory / "report.json").read_bytes()
    code, _, err = run_cli(capsys, *args, "--db", tmp_path / "b.db", "--limit", "6")
    assert code == 0, err
    assert "holds a report of other settings: kept" in err and "report-2.md" in err
    assert (directory / "report.json").read_bytes() == before
    assert len(json.loads((directory / "report-2.json").read_text())["rows"]) == 6
    assert (directory / "verified-2.jsonl").is_file()


# -- the reports that are this report -----------------------------------------------------------


def test_the_evaluation_report_is_the_run_report():
    attempts = [
        attempt("a", 0, AttemptStatus.PROVED, lean=1.0),
        attempt("b", 0, AttemptStatus.ERROR, error="the server crashed", file="P/B.lean"),
    ]
    report = EvaluationReport.from_attempts("eval", attempts)
    assert isinstance(report, RunReport) and report.environment == "lean"
    assert report.pass_at_1 == 0.5 and report.status_counts == report.statuses
    rows = {row.full_name: row for row in report.rows}
    assert rows["b"].status == "error" and rows["b"].reason == "the server crashed"
    assert set(report.files) == {"P/A.lean", "P/B.lean"}
    assert "| `b` | error | 1 | 0 | the server crashed |" in report.markdown()
    assert "without a proof: 1 error: the server crashed" in report.summary()


def test_the_sorry_report_is_the_run_report_plus_the_write_back_columns(tmp_path):
    rows = [
        SorryRow(
            full_name=f"thm{i}",
            file_path="P/A.lean",
            url="https://github.com/example/p",
            commit="c" * 40,
            outcome=outcome,
            status=status,
            proof="by simp" if status is AttemptStatus.PROVED else None,
            detail=None if status is AttemptStatus.PROVED else "unsolved goals",
            seconds=1.0,
            check_seconds=0.5,
            axioms=["propext"] if status is AttemptStatus.PROVED else None,
        )
        for i, (outcome, status) in enumerate(
            [
                ("written", AttemptStatus.PROVED),
                ("not_accepted", AttemptStatus.FAILED),
                ("failed", AttemptStatus.FAILED),
            ]
        )
    ]
    report = SorryReport(
        run="sorries",
        prover="hf:model",
        environment="lean",
        mode=ProofMode.SEARCH,
        project_root="/p",
        started=datetime(2026, 1, 1, tzinfo=UTC),
        rows=rows,
    )
    assert isinstance(report, RunReport) and report.generator == "hf:model"
    assert report.splits["all"].verified == 1 and report.splits["all"].pass_at == {1: 1 / 3}
    assert report.files["P/A.lean"].problems == 3
    assert rows[1].detail == rows[1].reason == "unsolved goals"
    markdown = report.markdown()
    table = assert_well_formed(markdown, "| theorem |")
    write_back = ["file", "outcome", "length", "search (s)", "check (s)", "axioms", "write-back"]
    assert table[0] == ["theorem", *write_back, "status", "attempts", "with proof", "why"]
    assert table[1][:3] == ["`thm0`", "`P/A.lean`", "written"] and table[1][-4] == "proved"
    assert table[3][-4:] == ["failed", "1", "0", "unsolved goals"]
    assert "## Proofs" in markdown and "by simp" in markdown
    paths = report.write(tmp_path)
    data = json.loads(paths[0].read_text())
    assert data["settings"]["mode"] == "search" and data["rows"][0]["outcome"] == "written"
    assert data["statuses"] == {"failed": 2, "proved": 1}
    assert Path(paths[1]).read_text() == markdown
