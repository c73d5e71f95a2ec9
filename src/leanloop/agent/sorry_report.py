"""The report of a sorry-proving run: the run report
(:class:`~leanloop.prover.run_report.RunReport`) of the theorems tried, plus the write-back's
columns — the outcome in the file (``written``, ``not_accepted``, ...), the proof's length, the time
Lean took to check the filled file, the commit on a branch, the working tree, the backup."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from leanloop.agent.sorry_filling import FillStatus
from leanloop.data.records import AttemptStatus
from leanloop.prover.config import ProofMode
from leanloop.prover.run_report import RunReport, TheoremRow
from leanloop.prover.run_report_render import figure, markdown
from leanloop.words import count_of

#: The outcome of a theorem finished by an earlier call of the same run.
SKIPPED = "skipped"


class SorryRow(TheoremRow):
    """One theorem tried: the run report's row (how the attempt ended and why, ``reason``,
    also read as ``detail``) plus how the write-back ended.

    ``outcome`` is what happened to the file (a ``FillStatus``: ``written``, ``not_accepted``,
    ``check_failed``, ``not_found``, ``changed``, ``write_failed``, ``unsafe_edit``,
    ``read_only``) when a proof was offered to it, else the attempt's (``replayed``,
    ``failed``, ``refused``, ``timeout``, ``budget``, ``error``), or ``skipped`` for a theorem
    an earlier call of the run finished. ``status`` is how the stored attempt ended: for a
    proof offered to the file, ``FillResult.attempt_status`` (Lean's judgement read by
    ``AttemptStatus.judged``, or ``error`` when a proof was not written for another reason).
    """

    url: str
    commit: str
    outcome: str
    status: AttemptStatus = Field(description="How the stored attempt ended.")
    proof_length: int = Field(
        default=0,
        description="Tactics of a search proof, non-blank lines of a whole proof; 0: none.",
    )
    check_seconds: float = Field(default=0.0, description="Time Lean took to check the whole file.")
    expansions: int = 0
    git_commit: str | None = Field(default=None, description="The commit on the branch, if any.")
    working_tree: str | None = Field(
        default=None,
        description="On a branch: whether your working tree's file got the proof too "
        "('written') or was left because it differs from the branch ('left').",
    )
    backup: str | None = Field(
        default=None, description="The copy of the file before it was written."
    )
    detail: str | None = Field(
        default=None, description="Why it ended so (an error, Lean's reason): the row's reason."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_attempt(cls, data: Any) -> Any:
        """A row is its theorem's last attempt: ``detail`` is the reason; one attempt counted
        (none for a theorem an earlier call finished), a proof when it found one."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("detail") is not None:
            data.setdefault("reason", data["detail"])
        status = AttemptStatus(data.get("status", AttemptStatus.FAILED))
        data.setdefault("samples", 1)
        data.setdefault("found", int(status.found_proof))
        data.setdefault("attempts", {status.value: 1})
        return data


class SorryReport(RunReport):
    """Every theorem one call of ``prove_sorries`` tried, with what it found and how the
    write-back ended: a :class:`RunReport` plus the write-back's columns."""

    rows: list[SorryRow] = Field(default_factory=list)  # type: ignore[assignment]
    prover: str = ""
    environment: Literal["lean", "replay"] = Field(
        description="lean: proofs checked by Lean, audited and written back; replay: recorded "
        "steps replayed without Lean (nothing proved, nothing written)."
    )
    mode: ProofMode = Field(description="search (tactic by tactic) or whole (whole proofs).")
    project_root: str | None = None
    branch: str | None = None
    started: datetime
    seconds: float = 0.0
    stop_at_first: bool = True

    @model_validator(mode="after")
    def _described(self) -> SorryReport:
        self.generator = self.generator or self.prover
        self.checker = self.checker or (
            "Lean, then the filled file" if self.environment == "lean" else "replay"
        )
        self.target = self.target or self.project_root or ""
        self.axioms_audited = self.environment == "lean"
        return self

    @property
    def counts(self) -> dict[str, int]:
        """Theorems by outcome."""
        return dict(Counter(row.outcome for row in self.rows).most_common())

    @property
    def written(self) -> list[SorryRow]:
        """The rows whose proof was written into its file."""
        return [row for row in self.rows if row.outcome == FillStatus.WRITTEN.value]

    def summary(self) -> str:
        """One line: how many theorems and how they ended."""
        counts = ", ".join(f"{count} {outcome}" for outcome, count in self.counts.items())
        if self.environment == "replay":
            found = sum(row.status is AttemptStatus.REPLAYED for row in self.rows)
            return (
                f"replay of recorded steps, not proving (no Lean checked anything, no file was "
                f"written): the recorded proof was found again for "
                f"{count_of(found, len(self.rows), 'theorem')} ({counts or 'none tried'})"
            )
        return (
            f"{count_of(len(self.written), len(self.rows), 'sorry')} proved by Lean and written "
            f"({counts or 'none tried'})"
        )

    def write(
        self, directory: str | Path, *, stem: str = "report", overwrite: bool = False
    ) -> list[Path]:
        """Write ``report.json``, ``report.md`` and ``report.png`` (when matplotlib is
        installed) to ``directory``; a report of another run or settings there is kept (see
        :meth:`RunReport.write`). Returns the paths written."""
        return super().write(directory, stem=stem, overwrite=overwrite)

    def settings(self) -> dict[str, Any]:
        """The run report's settings, and the mode and branch."""
        return {**super().settings(), "mode": self.mode.value, "branch": self.branch}

    def to_markdown(self) -> str:
        """The report as Markdown (what ``report.md`` holds): the run report with the
        write-back's columns, the environment in words, and each proof."""
        return self.markdown()

    def markdown(self) -> str:
        """The run report's Markdown with the write-back's columns and each proof."""
        if self.environment == "replay":
            environment = (
                "replay of recorded steps without Lean: a proof found is the recorded one found "
                "again, never proved, and no file is written"
            )
        else:
            environment = (
                "Lean: a proof is written only after Lean accepted the filled declaration in "
                "its file and its axioms passed the audit"
            )
        timed = self.model_copy(update={"wall_seconds": self.seconds})
        text = markdown(timed, self._columns())
        rest = text.partition("\n\n")[2]  # the run report below its title
        lines = [
            f"# Proving sorries: run `{self.run}`",
            "",
            f"- environment: {environment}",
            f"- prover: `{self.prover}`"
            + (" (whole-proof mode)" if self.mode is ProofMode.WHOLE else ""),
        ]
        lines += [f"- project: `{self.project_root}`"] if self.project_root else []
        lines += [f"- branch: `{self.branch}`"] if self.branch else []
        lines += [f"- started: {self.started.isoformat(timespec='seconds')}", f"- {self.summary()}"]
        out = "\n".join(lines) + "\n" + rest
        proofs = [(row, row.proof) for row in self.rows if row.proof]
        if proofs:
            out += "\n## Proofs\n"
            for row, proof in proofs:
                out += f"\n### `{row.full_name}` ({row.outcome})\n\n```lean\n{proof}\n```\n"
        return out

    def _columns(self) -> list[tuple[str, list[str]]]:
        def working(row: SorryRow) -> str:
            return f"working tree: {row.working_tree}" if row.working_tree else ""

        return [
            ("file", [f"`{row.file_path}`" for row in self.rows]),
            ("outcome", [row.outcome for row in self.rows]),
            ("length", [str(row.proof_length) for row in self.rows]),
            ("search (s)", [f"{row.seconds:.2f}" for row in self.rows]),
            ("check (s)", [f"{row.check_seconds:.2f}" for row in self.rows]),
            ("axioms", [", ".join(row.axioms) if row.axioms else "" for row in self.rows]),
            ("write-back", [working(row) for row in self.rows]),
        ]

    def figure(self):
        """The run report's figure with the theorems by write-back outcome, as a matplotlib
        ``Figure``."""
        if self.environment == "replay":
            title = f"{self.run}: replay of recorded steps (no Lean, nothing written)"
        else:
            written = count_of(len(self.written), len(self.rows), "sorry")
            title = f"{self.run}: {written} proved by Lean and written"
        return figure(self, outcomes=self.counts, title=title)
