"""The report of a benchmark evaluation, in the form a paper uses: pass@k against k for each split
(the unbiased estimator; with early stop only pass@n), a breakdown by source (for miniF2F the name
prefixes ``mathd_algebra``, ``amc12a``, ``imo``, ...), the verified proofs as JSON Lines,
generation and verification times, tokens; written as ``report.md``, ``report.json``,
``report.png`` and ``verified.jsonl``."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field

from leanloop.atomic import write_bytes_atomic, write_figure_atomic, write_text_atomic
from leanloop.prover.passk import ks_for, pass_at_k
from leanloop.prover.sampling import BenchmarkRun, ProblemResult
from leanloop.words import count_of, plural


class SplitFigures(BaseModel):
    """pass@k of one split (or of all problems)."""

    problems: int
    verified: int = Field(description="Problems with at least one proof Lean accepted.")
    pass_at: dict[int, float] = Field(
        description="pass@k by k (mean over the problems with at least k samples)."
    )
    incomplete: int = Field(
        default=0,
        description="Problems with fewer samples than asked (errors, or a short recording).",
    )


class SourceFigures(BaseModel):
    problems: int
    verified: int


class BenchmarkReport(BaseModel):
    """What a benchmark run measured, in the form a paper uses: pass@k against k for each
    split (the unbiased estimator; with ``stop_at_first`` only pass@n), the problems verified
    by source (for miniF2F the name prefixes ``mathd_algebra``, ``amc12a``, ``imo``, ...), how
    the samples ended, and the time and tokens spent. ``leanloop prove --benchmark`` writes it
    as ``report.md``, ``report.json`` and ``report.png``, with the verified proofs in
    ``verified.jsonl``.

    Attributes:
        run: The run's name.
        benchmark: The benchmark's name.
        sampler: The model the samples came from.
        verifier: What checked them.
        axioms_audited: Whether the axioms of accepted proofs were audited.
        samples: Samples asked per problem.
        stop_at_first: Whether a problem's sampling stopped at its first verified proof.
        splits: pass@k of each split (and of all problems when there are several).
        sources: Problems and verified problems by source.
        generation_seconds: Time spent sampling, summed over samples.
        verification_seconds: Time spent verifying, summed over samples.
        wall_seconds: The run's wall-clock time.
        samples_made: Samples the report counts.
        tokens: Tokens generated, when the sampler says.
        notes: What a reader of the figures should know.
    """

    run: str
    benchmark: str
    sampler: str
    verifier: str
    verdicts: str = Field(description="'verified now by Lean' or 'recorded verdicts'.")
    axioms_audited: bool
    samples: int
    stop_at_first: bool
    splits: dict[str, SplitFigures]
    sources: dict[str, SourceFigures]
    statuses: dict[str, int] = Field(description="Samples by how they ended.")
    generation_seconds: float
    verification_seconds: float
    wall_seconds: float
    samples_made: int
    tokens: int | None = None
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, run: BenchmarkRun, benchmark: str) -> BenchmarkReport:
        """The report of a run.

        Args:
            run: What ``run_benchmark`` returned.
            benchmark: The benchmark's name.

        Returns:
            The figures of the run.
        """
        config = run.config
        by_split: dict[str, list[ProblemResult]] = defaultdict(list)
        for result in run.problems:
            by_split[result.problem.split].append(result)
        splits = {
            s: _figures(rs, config.samples, config.stop_at_first) for s, rs in by_split.items()
        }
        if len(by_split) > 1:
            splits["all"] = _figures(run.problems, config.samples, config.stop_at_first)
        sources: dict[str, SourceFigures] = {}
        for result in run.problems:
            figures = sources.setdefault(
                result.problem.source, SourceFigures(problems=0, verified=0)
            )
            figures.problems += 1
            figures.verified += bool(result.verified)
        attempts = [a for r in run.problems for a in r.attempts]
        tokens = [a.tokens for a in attempts if a.tokens is not None]
        notes = []
        if config.stop_at_first:
            notes.append(
                f"sampling stopped at a problem's first verified proof: only pass@{config.samples} "
                "(with early stop) is reported; it is not the unbiased pass@k of n samples"
            )
        if run.source == "recorded":
            notes.append(
                "verdicts are Lean's verdicts recorded earlier on the same code, not checks "
                "made now; the axioms of accepted proofs were not audited"
            )
        elif not run.audited:
            notes.append("the axioms of accepted proofs were not audited")
        incomplete = sum(s.incomplete for k, s in splits.items() if k != "all")
        if incomplete:
            notes.append(
                f"{plural(incomplete, 'problem')} {'has' if incomplete == 1 else 'have'} "
                f"fewer than {plural(config.samples, 'sample')} (errors are tried again by a "
                "rerun of the same run); pass@k counts only problems with at least k samples"
            )
        return cls(
            run=run.run,
            benchmark=benchmark,
            sampler=run.sampler,
            verifier=run.verifier,
            verdicts="recorded verdicts" if run.source == "recorded" else "verified now by Lean",
            axioms_audited=run.audited,
            samples=config.samples,
            stop_at_first=config.stop_at_first,
            splits=splits,
            sources=dict(sorted(sources.items(), key=lambda item: (-item[1].problems, item[0]))),
            statuses=dict(Counter(a.status.value for a in attempts).most_common()),
            generation_seconds=sum(a.model_seconds for a in attempts),
            verification_seconds=sum(a.lean_seconds for a in attempts),
            wall_seconds=run.wall_seconds,
            samples_made=len(attempts),
            tokens=sum(tokens) if tokens else None,
            notes=notes,
        )

    def markdown(self) -> str:
        """The report as Markdown (what ``report.md`` holds).

        Returns:
            The text: pass@k by split, verified problems by source, samples, times, notes.
        """
        lines = [
            f"# {self.benchmark}: run {self.run}",
            "",
            f"- Model: {self.sampler}; verifier: {self.verifier} ({self.verdicts}; axioms "
            f"{'audited' if self.axioms_audited else 'not audited'})",
            f"- Samples per problem: {self.samples}"
            + (" (stopping at the first verified proof)" if self.stop_at_first else ""),
            "",
            "| split | problems | verified | " + " | ".join(self._k_headers()) + " |",
            "|---|---|---|" + "---|" * len(self._k_headers()),
        ]
        for name, split in self.splits.items():
            values = [f"{100 * split.pass_at[k]:.1f} %" for k in self._ks()]
            lines.append(
                f"| {name} | {split.problems} | {split.verified} | " + " | ".join(values) + " |"
            )
        lines += ["", "## By source", "", "| source | problems | verified |", "|---|---|---|"]
        lines += [f"| {s} | {f.problems} | {f.verified} |" for s, f in self.sources.items()]
        lines += ["", "## Samples", ""]
        lines.append(
            f"- {plural(self.samples_made, 'sample')}: "
            + ", ".join(f"{n} {status}" for status, n in self.statuses.items())
        )
        lines.append(
            f"- Generation {self.generation_seconds:.1f} s, verification "
            f"{self.verification_seconds:.1f} s (summed over samples); "
            f"wall {self.wall_seconds:.1f} s"
        )
        if self.tokens is not None:
            lines.append(f"- Tokens generated: {self.tokens}")
        if self.notes:
            lines += ["", "## Notes", ""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"

    def _ks(self) -> list[int]:
        return sorted({k for split in self.splits.values() for k in split.pass_at})

    def _k_headers(self) -> list[str]:
        return [f"pass@{k}" for k in self._ks()]

    def summary(self) -> str:
        """The figures for the console.

        Returns:
            One line per split: problems verified, and pass@k for each k.
        """
        out = []
        for name, split in self.splits.items():
            values = ", ".join(f"pass@{k} {100 * v:.1f} %" for k, v in split.pass_at.items())
            verified = count_of(split.verified, split.problems, "problem")
            out.append(f"{name}: {verified} verified; {values}")
        return "\n".join(out)


def _figures(results: list[ProblemResult], samples: int, stop_at_first: bool) -> SplitFigures:
    verified = sum(bool(r.verified) for r in results)
    incomplete = sum(r.samples < samples and not (stop_at_first and r.verified) for r in results)
    if stop_at_first:
        return SplitFigures(
            problems=len(results),
            verified=verified,
            pass_at={samples: verified / len(results) if results else 0.0},
            incomplete=incomplete,
        )
    pass_at = {}
    for k in ks_for(samples):
        counted = [pass_at_k(r.samples, r.verified, k) for r in results if r.samples >= k]
        if counted:
            pass_at[k] = sum(counted) / len(counted)
    return SplitFigures(
        problems=len(results), verified=verified, pass_at=pass_at, incomplete=incomplete
    )


def verified_rows(run: BenchmarkRun) -> list[dict[str, Any]]:
    """Each problem's verified proofs: name, id, split, sample index, proof, the code Lean
    checked, axioms (None when not audited)."""
    rows = []
    for result in run.problems:
        for attempt in result.attempts:
            if not attempt.status.found_proof:
                continue
            proof = attempt.proof[0] if attempt.proof else ""
            rows.append(
                {
                    "name": result.problem.name,
                    "id": result.problem.id,
                    "split": result.problem.split,
                    "sample": attempt.attempt,
                    "proof": proof,
                    "code": result.problem.code(proof),
                    "axioms": list(attempt.axioms) if attempt.axioms is not None else None,
                    "verdict": attempt.environment,
                }
            )
    return rows


def write_report(run: BenchmarkRun, report: BenchmarkReport, directory: str | Path) -> Path:
    """``report.md``, ``report.json``, ``report.png`` and ``verified.jsonl`` in ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(directory / "report.md", report.markdown())
    write_bytes_atomic(
        directory / "report.json",
        orjson.dumps(report.model_dump(mode="json"), option=orjson.OPT_INDENT_2),
    )
    lines = b"".join(orjson.dumps(row) + b"\n" for row in verified_rows(run))
    write_bytes_atomic(directory / "verified.jsonl", lines)
    _plot(report, directory / "report.png")
    return directory


def _plot(report: BenchmarkReport, path: Path) -> None:
    write_figure_atomic(path, benchmark_figure(report))


def benchmark_figure(report: BenchmarkReport):
    """pass@k against k for each split (the value at the largest k written on it), as a
    matplotlib ``Figure``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.5, 4.2))
    ax = figure.subplots()
    for name, split in report.splits.items():
        ks = sorted(split.pass_at)
        values = [100 * split.pass_at[k] for k in ks]
        (line,) = ax.plot(
            ks,
            values,
            marker="o",
            label=f"{name} ({count_of(split.verified, split.problems, 'problem')} verified)",
        )
        if ks:
            ax.annotate(
                f"{values[-1]:.1f} %",
                (ks[-1], values[-1]),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                color=line.get_color(),
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples per problem)")
    ax.set_ylabel("pass@k (%)")
    ax.set_ylim(0, 105)
    title = f"{report.benchmark}: {report.sampler}"
    if report.stop_at_first:
        title += " (early stop: pass@n only)"
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if report.splits:
        ax.legend(title="split")
    figure.tight_layout()
    return figure
