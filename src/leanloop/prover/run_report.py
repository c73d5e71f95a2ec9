"""The report of a proving run: one row per theorem (how it ended and why, its samples, the
proofs accepted, axioms, times and tokens), grouped by split, source and file with pass@k
(:mod:`leanloop.prover.passk`), rendered as Markdown, JSON and a figure
(:mod:`leanloop.prover.run_report_render`). Every run — a dataset, a benchmark, a project's
sorries — is reported by :class:`RunReport`; the sorry report adds the write-back's columns.

Where the verdicts came from is said everywhere: a proof is *proved* only when Lean checked it
now (and its axioms passed the audit); a recorded verdict *accepted* it (Lean's answer recorded
earlier, axioms not audited, its check time not spent in this run); a replay *found again* a
recorded proof (no Lean at all)."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, computed_field

from leanloop.atomic import write_bytes_atomic, write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.passk import ks_for, pass_at_k
from leanloop.words import plural, plural_of

if TYPE_CHECKING:
    from leanloop.data.benchmark import BenchmarkProblem
    from leanloop.prover.sampling import BenchmarkRun

log = logging.getLogger(__name__)

Environment = Literal["lean", "replay", "recorded", "mixed", "unknown"]

#: How each environment's verdicts are named, in every rendering.
VERDICTS: dict[str, str] = {
    "lean": "verified now by Lean",
    "recorded": "recorded verdicts",
    "replay": "replay of recorded steps, no Lean",
    "mixed": "mixed (some verified now, some recorded or replayed)",
    "unknown": "unknown (attempts stored before leanloop recorded where they ran)",
}
#: The status of a theorem that has no attempt at all.
UNSAMPLED = "unsampled"


class TheoremRow(BaseModel):
    """One theorem (or benchmark problem) of a run: how it ended and why.

    ``status`` is ``proved`` (Lean accepted a proof now, axioms audited), ``recorded`` (a
    recorded verdict accepted one), ``replayed`` (a replay found the recorded proof again), or,
    with no proof, how its attempts ended (``failed``, ``refused``, ``changed``, ``timeout``,
    ``budget``, ``error``) or ``unsampled`` (no attempt was made); ``reason`` says why.
    """

    full_name: str
    file_path: str = ""
    split: str | None = None
    source: str | None = Field(default=None, description="A benchmark's source (name prefix).")
    status: str
    reason: str | None = Field(default=None, description="Why it ended so.")
    samples: int = Field(default=0, description="Attempts counted by pass@k.")
    found: int = Field(default=0, description="Attempts that found a proof.")
    errors: int = Field(default=0, description="Attempts that ended in an error (retried).")
    attempts: dict[str, int] = Field(
        default_factory=dict, description="The theorem's attempts by how they ended."
    )
    axioms: list[str] | None = Field(
        default=None, description="The axioms of the proof accepted, when Lean audited it."
    )
    proof: str | None = None
    seconds: float = Field(default=0.0, description="Time measured in this run.")
    model_seconds: float = 0.0
    lean_seconds: float = Field(default=0.0, description="Lean's time, measured in this run.")
    recorded_lean_seconds: float = Field(
        default=0.0,
        description="Lean's time as recorded with recorded verdicts (not spent in this run).",
    )
    tokens: int | None = None

    @property
    def proved(self) -> bool:
        """Whether the theorem has a proof found (proved, recorded or replayed)."""
        return self.found > 0


class GroupFigures(BaseModel):
    """The theorems of one group (a split, a source, a file, or all): how many, how many with a
    proof, pass@k."""

    problems: int
    verified: int = Field(
        description="Theorems with a proof found (Lean, a recorded verdict or a replay: the "
        "report's ``verdicts`` says which)."
    )
    pass_at: dict[int, float] = Field(
        default_factory=dict,
        description="pass@k by k (mean over the theorems with at least k attempts).",
    )
    incomplete: int = Field(
        default=0, description="Theorems with fewer attempts than asked (none, or errors)."
    )


class RunReport(BaseModel):
    """What a proving run found, theorem by theorem (see the module's text).

    The figures (``statuses``, ``splits``, ``sources``, ``files``, ``axioms_used``, times and
    tokens, ``notes``) are computed from ``rows``, so a report whose rows change stays right.

    Attributes:
        run: The run's name.
        target: What was proved (a benchmark, a dataset, a project).
        generator: What wrote the proofs (a model, a sampler, a prover).
        checker: What checked them (a verifier, Lean servers, a replay).
        environment: Where the verdicts came from: lean, recorded, replay, mixed or unknown.
        axioms_audited: Whether the axioms of accepted proofs were audited.
        samples: Attempts asked per theorem.
        stop_at_first: Whether a theorem's attempts stopped at its first proof.
        wall_seconds: The run's wall-clock time, when known.
        unit: What a row is called (``theorem``; a benchmark's ``problem``).
        rows: One row per theorem.
        remarks: What else a reader of the figures should know.
    """

    run: str
    target: str = ""
    generator: str = ""
    checker: str = ""
    environment: Environment = "unknown"
    axioms_audited: bool = False
    samples: int = 1
    stop_at_first: bool = False
    wall_seconds: float | None = None
    unit: str = Field(default="theorem", description="What a row is: theorem, or problem.")
    rows: list[TheoremRow] = Field(default_factory=list)
    remarks: list[str] = Field(default_factory=list)

    # -- the figures ---------------------------------------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdicts(self) -> str:
        """Where the verdicts came from, in words (``recorded verdicts``, ...)."""
        return VERDICTS[self.environment]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate_name(self) -> str:
        """What pass@k is here: ``pass`` on Lean, ``accepted`` by recorded verdicts,
        ``replayed`` in a replay (not proving)."""
        return {"lean": "pass", "recorded": "accepted"}.get(self.environment, "replayed")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def theorem_statuses(self) -> dict[str, int]:
        """Theorems by how they ended."""
        return dict(Counter(row.status for row in self.rows).most_common())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def statuses(self) -> dict[str, int]:
        """Attempts by how they ended."""
        counts: Counter[str] = Counter()
        for row in self.rows:
            counts.update(row.attempts)
        return dict(counts.most_common())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def splits(self) -> dict[str, GroupFigures]:
        """pass@k of each split (and of all theorems when there are several splits, or none)."""
        by = self._grouped(lambda row: row.split)
        if len(by) != 1:
            by["all"] = self.figures(self.rows)
        return by

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sources(self) -> dict[str, GroupFigures]:
        """Theorems and theorems with a proof by source (a benchmark's name prefixes)."""
        return self._grouped(lambda row: row.source)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def files(self) -> dict[str, GroupFigures]:
        """Theorems and theorems with a proof by file."""
        return self._grouped(lambda row: row.file_path or None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def axioms_used(self) -> dict[str, int]:
        """How many theorems' accepted proofs depend on each axiom (Lean's audit)."""
        counts = Counter(axiom for row in self.rows for axiom in row.axioms or ())
        return dict(sorted(counts.items()))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def samples_made(self) -> int:
        """Attempts the report counts (errors included)."""
        return sum(sum(row.attempts.values()) for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def generation_seconds(self) -> float:
        """Time the generator took, summed over attempts."""
        return sum(row.model_seconds for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verification_seconds(self) -> float:
        """Time Lean took in this run, summed over attempts (recorded verdicts' times apart)."""
        return sum(row.lean_seconds for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recorded_verification_seconds(self) -> float:
        """Lean's time as the recorded verdicts say (spent when they were recorded, not now)."""
        return sum(row.recorded_lean_seconds for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens(self) -> int | None:
        """Tokens generated, when the generator says."""
        counted = [row.tokens for row in self.rows if row.tokens is not None]
        return sum(counted) if counted else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def notes(self) -> list[str]:
        """What a reader of the figures should know (the verdicts' source, early stop, theorems
        without enough attempts and why)."""
        notes = []
        if self.stop_at_first and self.samples > 1:
            notes.append(
                f"attempts stopped at a theorem's first proof: only pass@{self.samples} (with "
                "early stop) is reported; it is not the unbiased pass@k of n attempts"
            )
        if self.environment == "recorded":
            notes.append(
                "verdicts are Lean's verdicts recorded earlier on the same code, not checks "
                "made now; the axioms of accepted proofs were not audited; their check times "
                "are the recording's, not time spent in this run"
            )
        elif self.environment == "replay":
            notes.append("a replay of recorded steps: no Lean checked anything, nothing is proved")
        elif not self.axioms_audited and self.environment != "unknown":
            notes.append("the axioms of accepted proofs were not audited")
        short = [row for row in self.rows if self._incomplete(row)]
        errors = any(row.errors for row in short)
        if short:
            why = Counter(_short_reason(row) for row in short).most_common(3)
            notes.append(
                f"{plural(len(short), self.unit)} {'has' if len(short) == 1 else 'have'} fewer "
                f"than {plural(self.samples, 'attempt')} counted ("
                + "; ".join(f"{n}: {reason}" for reason, n in why)
                + ")"
                + ("; errors are tried again by a rerun of the same run" if errors else "")
                + f"; pass@k counts only {plural_of(self.unit)} with at least k attempts"
            )
        return [*notes, *self.remarks]

    def figures(self, rows: list[TheoremRow]) -> GroupFigures:
        """The figures of ``rows``: how many, how many with a proof, pass@k."""
        verified = sum(row.proved for row in rows)
        incomplete = sum(self._incomplete(row) for row in rows)
        if self.stop_at_first:  # pass@n with early stop: the share with a proof
            share = verified / len(rows) if rows else 0.0
            return GroupFigures(
                problems=len(rows),
                verified=verified,
                pass_at={self.samples: share},
                incomplete=incomplete,
            )
        pass_at = {}
        for k in ks_for(max(self.samples, 1)):
            counted = [pass_at_k(r.samples, r.found, k) for r in rows if r.samples >= k]
            if counted:
                pass_at[k] = sum(counted) / len(counted)
        return GroupFigures(
            problems=len(rows), verified=verified, pass_at=pass_at, incomplete=incomplete
        )

    def ks(self) -> list[int]:
        """The k that pass@k is reported at (1, 2, 4, ... up to the attempts asked)."""
        return [self.samples] if self.stop_at_first else ks_for(max(self.samples, 1))

    def _incomplete(self, row: TheoremRow) -> bool:
        return row.samples < self.samples and not (self.stop_at_first and row.proved)

    def _grouped(self, key: Callable[[TheoremRow], str | None]) -> dict[str, GroupFigures]:
        groups: dict[str, list[TheoremRow]] = defaultdict(list)
        for row in self.rows:
            name = key(row)
            if name is not None:
                groups[name].append(row)
        ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
        return {name: self.figures(rows) for name, rows in ordered}

    # -- in words --------------------------------------------------------------------------------

    @property
    def found_word(self) -> str:
        """What a theorem with a proof is called here: proved, accepted by recorded verdicts,
        or found again."""
        return {
            "lean": "proved",
            "recorded": "accepted by recorded verdicts",
            "replay": "found again (replay)",
        }.get(self.environment, "with a proof found (mixed sources)")

    def why_not(self, limit: int = 5) -> list[str]:
        """Why the theorems without a proof have none, most common first: ``'12 error: no
        verdict is recorded for this code ...'`` (at most ``limit`` lines)."""
        reasons = Counter(
            (row.status, _first_line(row.reason) or "no reason recorded")
            for row in self.rows
            if not row.proved
        )
        lines = [f"{n} {status}: {reason}" for (status, reason), n in reasons.most_common(limit)]
        rest = sum(n for _, n in reasons.most_common()[limit:])
        if rest:
            lines.append(f"{rest} more, with other reasons (see the report's table)")
        return lines

    def summary(self) -> str:
        """The figures for the console: one line per split (theorems with a proof, pass@k) and
        why the others have none."""
        from leanloop.prover.run_report_render import summary_lines

        return "\n".join(summary_lines(self))

    def markdown(self) -> str:
        """The report as Markdown (what ``report.md`` holds)."""
        from leanloop.prover.run_report_render import markdown

        return markdown(self)

    def figure(self):
        """Theorems by status, pass@k against k by split, and the time per theorem (measured
        in this run), as a matplotlib ``Figure``."""
        from leanloop.prover.run_report_render import figure

        return figure(self)

    def plot(self, path: str | Path) -> Path:
        """Write :meth:`figure` as a PNG (written aside and renamed into place)."""
        return write_figure_atomic(path, self.figure())

    def to_json(self, path: str | Path) -> Path:
        """Write the report as JSON (written aside and renamed into place)."""
        path = Path(path)
        write_text_atomic(path, self.model_dump_json(indent=1, exclude_none=True) + "\n")
        return path

    def settings(self) -> dict[str, Any]:
        """What makes two reports reports of the same run with the same settings."""
        return {
            "run": self.run,
            "target": self.target,
            "generator": self.generator,
            "checker": self.checker,
            "samples": self.samples,
            "stop_at_first": self.stop_at_first,
            "theorems": len(self.rows),
        }

    def write(
        self, directory: str | Path, *, stem: str = "report", overwrite: bool = False
    ) -> list[Path]:
        """Write ``<stem>.json``, ``<stem>.md`` and ``<stem>.png`` in ``directory``.

        A report already there is replaced only when it is this run's with the same settings
        (a rerun or a resumed run: the database holds every attempt, the new report all of
        them) or with ``overwrite``; a report of another run or other settings is kept, and
        this one is written as ``<stem>-2.*`` (``-3``, ...), so no report is silently lost.

        Returns:
            The paths written (no PNG when matplotlib is not installed).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        stem = stem if overwrite else free_stem(directory, stem, self.settings())
        paths = [directory / f"{stem}.json", directory / f"{stem}.md"]
        data = self.model_dump(mode="json", exclude_none=True)
        data["settings"] = self.settings()
        write_bytes_atomic(paths[0], json.dumps(data, indent=1).encode() + b"\n")
        write_text_atomic(paths[1], self.markdown())
        try:
            paths.append(self.plot(directory / f"{stem}.png"))
        except ImportError:  # matplotlib is leanloop[train]'s; the JSON and Markdown say all
            log.warning("no plot of the report: matplotlib is not installed (leanloop[train])")
        return paths


def free_stem(directory: Path, stem: str, settings: Mapping[str, Any]) -> str:
    """``stem`` when ``directory`` holds no report under it or one with the same ``settings``,
    else the first ``stem-2``, ``stem-3``, ... that is free or holds the same settings."""
    candidate, number = stem, 1
    while True:
        existing = directory / f"{candidate}.json"
        if not any((directory / f"{candidate}{ext}").exists() for ext in (".json", ".md")):
            return candidate
        try:
            if json.loads(existing.read_text()).get("settings") == dict(settings):
                return candidate
        except (OSError, ValueError, AttributeError):
            pass  # unreadable or not ours: kept
        number += 1
        candidate = f"{stem}-{number}"


def slug(run: str) -> str:
    """A file name for ``run``."""
    return re.sub(r"[^\w.-]+", "_", run).strip("_") or "run"


def _short_reason(row: TheoremRow) -> str:
    """Why a theorem has fewer attempts than asked."""
    if row.samples == 0 and not row.errors:
        return _first_line(row.reason) or "no attempt was made"
    if row.errors:
        return f"{plural(row.errors, 'error')} (tried again by a rerun)"
    return "the generator gave fewer samples than asked"


def _first_line(text: str | None, width: int = 200) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


# -- building rows -------------------------------------------------------------------------------


def environment_of(attempts: Iterable[ProofAttempt]) -> Environment:
    """Where ``attempts`` ran: ``lean``, ``replay``, ``recorded``, ``mixed`` or ``unknown`` (an
    attempt stored without it counts as a replay when it replayed, as Lean when Lean proved
    it; attempts that failed before reaching a server say nothing)."""
    known = set()
    for attempt in attempts:
        environment = attempt.environment
        if environment is None and attempt.status is AttemptStatus.REPLAYED:
            environment = "replay"
        elif environment is None and attempt.status is AttemptStatus.PROVED:
            environment = "lean"
        if environment is not None:
            known.add(environment)
    if len(known) > 1:
        return "mixed"
    found = known.pop() if known else "unknown"
    return found if found in VERDICTS else "unknown"


def theorem_row(
    full_name: str,
    attempts: list[ProofAttempt],
    *,
    count_errors: bool = True,
    unsampled: str = "no attempt was made",
    **placement: Any,
) -> TheoremRow:
    """The row of one theorem from its attempts: its status and why, its counts, axioms, proof,
    times (a recorded verdict's time apart) and tokens.

    Args:
        full_name: The theorem's (or problem's) name.
        attempts: Its attempts (none: ``unsampled``).
        count_errors: Whether errors count as attempts for pass@k (a benchmark retries them).
        unsampled: Why a theorem without attempts has none.
        **placement: ``file_path``, ``split``, ``source``.
    """
    if not attempts:
        return TheoremRow(full_name=full_name, status=UNSAMPLED, reason=unsampled, **placement)
    ordered = sorted(attempts, key=lambda a: a.attempt)
    errors = [a for a in ordered if a.status is AttemptStatus.ERROR]
    found = [a for a in ordered if a.status.found_proof]
    counted = ordered if count_errors else [a for a in ordered if a not in errors]
    if found:
        first = found[0]
        status, reason = first.status.value, first.error
    else:
        ended = [a for a in ordered if a not in errors] or errors
        common = Counter(a.status for a in ended).most_common(1)[0][0]
        first = next(a for a in ended if a.status is common)
        status, reason = common.value, first.error or _default_reason(common)
        if first.environment == "recorded" and common is not AttemptStatus.ERROR:
            reason = f"Lean's recorded verdict: {reason}"  # not a check made now
    recorded = [a for a in ordered if a.environment == "recorded"]
    live = [a for a in ordered if a.environment != "recorded"]
    tokens = [a.tokens for a in ordered if a.tokens is not None]
    return TheoremRow(
        full_name=full_name,
        status=status,
        reason=reason,
        samples=len(counted),
        found=len(found),
        errors=len(errors),
        attempts=dict(Counter(a.status.value for a in ordered).most_common()),
        axioms=list(found[0].axioms) if found and found[0].axioms is not None else None,
        proof="\n".join(found[0].proof) if found and found[0].proof else None,
        seconds=sum(a.seconds for a in live) + sum(a.model_seconds for a in recorded),
        model_seconds=sum(a.model_seconds for a in ordered),
        lean_seconds=sum(a.lean_seconds for a in live),
        recorded_lean_seconds=sum(a.lean_seconds for a in recorded),
        tokens=sum(tokens) if tokens else None,
        **placement,
    )


def _default_reason(status: AttemptStatus) -> str:
    return {
        AttemptStatus.FAILED: "no proof found",
        AttemptStatus.TIMEOUT: "the time budget ran out",
        AttemptStatus.BUDGET: "the expansion budget ran out",
    }.get(status, status.value)


def rows_of_attempts(attempts: Iterable[ProofAttempt]) -> list[TheoremRow]:
    """One row per theorem (its key and commit) of ``attempts``, in the order first seen."""
    by_theorem: dict[tuple, list[ProofAttempt]] = defaultdict(list)
    for attempt in attempts:
        by_theorem[(attempt.key, attempt.commit)].append(attempt)
    return [
        theorem_row(found[0].full_name, found, file_path=found[0].file_path)
        for found in by_theorem.values()
    ]


def benchmark_rows(
    run: BenchmarkRun, why_unsampled: Callable[[BenchmarkProblem], str | None] | None = None
) -> list[TheoremRow]:
    """The rows of a benchmark run: each problem's samples (the errors of this call too, which
    a rerun tries again), with its split and source; a problem without a sample says why."""
    errors: dict[str, list[ProofAttempt]] = defaultdict(list)
    for attempt in run.new:
        if attempt.status is AttemptStatus.ERROR:
            errors[attempt.full_name].append(attempt)
    rows = []
    for result in run.problems:
        problem = result.problem
        why = why_unsampled(problem) if why_unsampled is not None else None
        rows.append(
            theorem_row(
                problem.name,
                [*result.attempts, *errors.get(problem.id, [])],
                count_errors=False,
                unsampled=why or f"the generator ({run.sampler}) gave no sample for it",
                split=problem.split,
                source=problem.source,
            )
        )
    return rows
