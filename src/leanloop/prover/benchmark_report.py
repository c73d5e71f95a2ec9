"""The report of a benchmark run: the one run report
(:class:`~leanloop.prover.run_report.RunReport`) of its problems — pass@k against k for each
split (the unbiased estimator; with early stop only pass@n), the problems by source (for miniF2F
the name prefixes ``mathd_algebra``, ``amc12a``, ``imo``, ...), each problem's status and why,
times and tokens — plus the verified proofs as JSON Lines; written as ``report.md``,
``report.json``, ``report.png`` and ``verified.jsonl``.

``BenchmarkReport`` is kept for one release as the name of a run report built from a
``BenchmarkRun``, with the names it had (``benchmark``, ``sampler``, ``verifier``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from pydantic import model_validator

from leanloop.atomic import write_bytes_atomic
from leanloop.data.benchmark import BenchmarkProblem
from leanloop.prover.run_report import GroupFigures, RunReport, benchmark_rows
from leanloop.prover.sampling import BenchmarkRun

#: pass@k of one split (or of all problems): the run report's group figures.
SplitFigures = GroupFigures
#: Problems and verified problems of one source: the run report's group figures.
SourceFigures = GroupFigures

_RENAMED = {"benchmark": "target", "sampler": "generator", "verifier": "checker"}


class BenchmarkReport(RunReport):
    """A run report of a benchmark run (see :class:`~leanloop.prover.run_report.RunReport`),
    built by :meth:`of`; ``benchmark``, ``sampler`` and ``verifier`` are the report's
    ``target``, ``generator`` and ``checker``."""

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {_RENAMED.get(key, key): value for key, value in data.items()}
        return data

    @property
    def benchmark(self) -> str:
        return self.target

    @property
    def sampler(self) -> str:
        return self.generator

    @property
    def verifier(self) -> str:
        return self.checker

    @classmethod
    def of(
        cls,
        run: BenchmarkRun,
        benchmark: str,
        why_unsampled: Callable[[BenchmarkProblem], str | None] | None = None,
    ) -> BenchmarkReport:
        """The report of a run.

        Args:
            run: What ``run_benchmark`` returned.
            benchmark: The benchmark's name.
            why_unsampled: Why the sampler gave a problem no sample (e.g. the sampler's
                ``missing``); by default the report says the generator gave none.

        Returns:
            The figures of the run, problem by problem.
        """
        return cls(
            run=run.run,
            target=benchmark,
            generator=run.sampler,
            checker=run.verifier,
            environment="recorded" if run.source == "recorded" else "lean",
            axioms_audited=run.audited,
            samples=run.config.samples,
            stop_at_first=run.config.stop_at_first,
            wall_seconds=run.wall_seconds,
            unit="problem",
            rows=benchmark_rows(run, why_unsampled),
        )


def verified_rows(run: BenchmarkRun) -> list[dict[str, Any]]:
    """Each problem's verified proofs: name, id, split, sample index, proof, the code Lean
    checked, axioms (None when not audited), and where the verdict came from."""
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


def write_files(
    run: BenchmarkRun, report: RunReport, directory: str | Path, *, overwrite: bool = False
) -> list[Path]:
    """``report.json``, ``report.md``, ``report.png`` and ``verified.jsonl`` in ``directory``;
    a report of another run or other settings there is kept, and this one is written as
    ``report-2.*`` and ``verified-2.jsonl`` (see :meth:`RunReport.write`).

    Returns:
        The paths written, the JSON first.
    """
    directory = Path(directory)
    written = report.write(directory, overwrite=overwrite)
    suffix = written[0].stem.removeprefix("report")
    lines = b"".join(orjson.dumps(row) + b"\n" for row in verified_rows(run))
    write_bytes_atomic(directory / f"verified{suffix}.jsonl", lines)
    return [*written, directory / f"verified{suffix}.jsonl"]


def write_report(run: BenchmarkRun, report: RunReport, directory: str | Path) -> Path:
    """:func:`write_files`, returning ``directory`` (kept for one release)."""
    write_files(run, report, directory)
    return Path(directory)


def benchmark_figure(report: RunReport):
    """The run report's figure (kept for one release: use ``report.figure()``)."""
    return report.figure()
