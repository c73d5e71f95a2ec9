"""Prove open ``sorry`` theorems and write back what Lean accepts: for each theorem, proof search
(or whole-proof mode) on a warm pooled server, the proof put into its file by ``SorryFiller``
(written only when Lean accepts the whole file), the attempt stored in the database, and a
``SorryReport`` (JSON, Markdown, plot) of every theorem tried. Without a project (a replay of
recorded steps) nothing is written and nothing is called proved."""

from __future__ import annotations

import copy
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from leanloop.agent.git_branch import BranchCommitter
from leanloop.agent.sorry_filling import BACKUP_DIR, FillResult, FillStatus, SorryFiller
from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.result import SearchResult

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase

log = logging.getLogger(__name__)

Servers = ServerPool[LeanServer] | Callable[[], LeanServer]

#: How each write-back outcome is stored as a proof attempt (a proof Lean rejected in its file
#: failed; a file that changed or a check that could not run is tried again by the next run).
_ATTEMPT_STATUS = {
    FillStatus.WRITTEN: AttemptStatus.PROVED,
    FillStatus.REJECTED: AttemptStatus.FAILED,
    FillStatus.FORBIDDEN: AttemptStatus.FAILED,
    FillStatus.NOT_FOUND: AttemptStatus.ERROR,
    FillStatus.CHECK_FAILED: AttemptStatus.ERROR,
}
#: The outcome of a theorem finished by an earlier call of the same run.
SKIPPED = "skipped"
#: The outcome of a proof Lean accepted whose file could not be written.
WRITE_FAILED = "write_failed"


class SorryRow(BaseModel):
    """One theorem tried: how it ended, the proof, its length and the times.

    ``outcome`` is the write-back's (``written``, ``rejected``, ``forbidden``, ``not_found``,
    ``check_failed``, ``write_failed``) when a proof was offered to the file, else the
    search's (``proved`` without a project to write to, ``replayed``, ``failed``, ``timeout``,
    ``budget``, ``error``), or ``skipped`` for a theorem an earlier call of the run finished.
    """

    full_name: str
    file_path: str
    url: str
    commit: str
    outcome: str
    status: AttemptStatus = Field(description="How the stored attempt ended.")
    proof: str | None = Field(None, description="The proof written, or found and not written.")
    proof_length: int = Field(
        0, description="Tactics of a search proof, non-blank lines of a whole proof; 0: none."
    )
    seconds: float = Field(0.0, description="Time of the search (or whole-proof mode).")
    check_seconds: float = Field(0.0, description="Time Lean took to check the whole file.")
    lean_seconds: float = 0.0
    model_seconds: float = 0.0
    expansions: int = 0
    detail: str | None = Field(None, description="Why it ended so (an error, Lean's reason).")
    git_commit: str | None = Field(None, description="The commit on the branch, if any.")
    backup: str | None = Field(None, description="The copy of the file before it was written.")


class SorryReport(BaseModel):
    """Every theorem one call of :func:`prove_sorries` tried, with what it found."""

    run: str
    prover: str
    mode: Literal["lean", "replay"] = Field(
        description="lean: proofs checked by Lean and written back; replay: recorded steps "
        "replayed without Lean (nothing proved, nothing written)."
    )
    whole_proof: bool
    project_root: str | None = None
    branch: str | None = None
    started: datetime
    seconds: float = 0.0
    rows: list[SorryRow] = Field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(row.outcome for row in self.rows).most_common())

    @property
    def written(self) -> list[SorryRow]:
        return [row for row in self.rows if row.outcome == FillStatus.WRITTEN.value]

    def summary(self) -> str:
        """One line: how many theorems and how they ended."""
        counts = ", ".join(f"{count} {outcome}" for outcome, count in self.counts.items())
        if self.mode == "replay":
            found = sum(row.status is AttemptStatus.REPLAYED for row in self.rows)
            return (
                f"replay of recorded steps, not proving (no Lean checked anything, no file was "
                f"written): the recorded proof was found again for {found} of {len(self.rows)} "
                f"theorems ({counts or 'none tried'})"
            )
        return (
            f"{len(self.written)} of {len(self.rows)} sorries proved by Lean and written "
            f"({counts or 'none tried'})"
        )

    # -- writing -------------------------------------------------------------------------------

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ``report.json``, ``report.md`` and ``report.png`` (when matplotlib is
        installed) to ``out_dir``; returns the paths written."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "report.json", out / "report.md"]
        write_text_atomic(written[0], self.model_dump_json(indent=1) + "\n")
        write_text_atomic(written[1], self.to_markdown())
        try:
            written.append(self.plot(out / "report.png"))
        except ImportError:
            log.warning("no plot of the report: matplotlib is not installed (leanloop[train])")
        return written

    def to_markdown(self) -> str:
        if self.mode == "replay":
            mode = (
                "replay of recorded steps without Lean: a proof found is the recorded one found "
                "again, never proved, and no file is written"
            )
        else:
            mode = "Lean: a proof is written only after Lean accepted the whole file"
        lines = [
            f"# Proving sorries: run `{self.run}`",
            "",
            f"- mode: {mode}",
            f"- prover: `{self.prover}`" + (" (whole-proof mode)" if self.whole_proof else ""),
        ]
        if self.project_root:
            lines.append(f"- project: `{self.project_root}`")
        if self.branch:
            lines.append(f"- branch: `{self.branch}`")
        search = sum(row.seconds for row in self.rows)
        checks = sum(row.check_seconds for row in self.rows)
        lines += [
            f"- started: {self.started.isoformat(timespec='seconds')}; {self.seconds:.1f} s in "
            f"all ({search:.1f} s searching, {checks:.1f} s checking files)",
            f"- {self.summary()}",
            "",
            "| theorem | file | outcome | length | search (s) | check (s) | detail |",
            "|---|---|---|---:|---:|---:|---|",
        ]
        for row in self.rows:
            detail = (row.detail or "").splitlines()[0][:160] if row.detail else ""
            cells = [
                f"`{row.full_name}`",
                f"`{row.file_path}`",
                row.outcome,
                str(row.proof_length),
                f"{row.seconds:.2f}",
                f"{row.check_seconds:.2f}",
                detail,
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        proofs = [row for row in self.rows if row.proof]
        if proofs:
            lines += ["", "## Proofs", ""]
            for row in proofs:
                lines += [f"### `{row.full_name}` ({row.outcome})", "", "```lean", row.proof, "```"]
                lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def plot(self, path: str | Path) -> Path:
        """A PNG: theorems by outcome, and each theorem's search and check time."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = Path(path)
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        counts = self.counts
        left.bar(list(counts), list(counts.values()), color="tab:blue")
        left.set_ylabel("theorems")
        left.tick_params(axis="x", rotation=30)
        rows = sorted(self.rows, key=lambda r: r.seconds + r.check_seconds)
        positions = range(len(rows))
        right.bar(positions, [r.seconds for r in rows], label="search")
        right.bar(
            positions,
            [r.check_seconds for r in rows],
            bottom=[r.seconds for r in rows],
            label="file check",
        )
        right.set_xlabel("theorems (by time)")
        right.set_ylabel("seconds")
        if rows:
            right.legend()
        title = f"{self.run}: {len(self.written)} written of {len(self.rows)}"
        if self.mode == "replay":
            title = f"{self.run}: replay of recorded steps (no Lean, nothing written)"
        figure.suptitle(title)
        figure.tight_layout()
        write_figure_atomic(path, figure)
        plt.close(figure)
        return path


def lean_server_factory(project_root: str | Path, config: ProverConfig) -> Callable[[], LeanServer]:
    """A maker of Lean REPL servers in the project, after checking that Lean and the REPL are
    installed (a one-line error says what is not and how to get it)."""
    from leanloop.lean.project import open_project
    from leanloop.lean.repl import ReplServer
    from leanloop.lean.toolchain import require

    project = open_project(project_root)
    report = require(project)

    def start() -> LeanServer:
        return ReplServer.launch(
            project.root, report.repl, lake=report.lake or "lake", timeout=config.tactic_timeout
        )

    return start


def lean_servers(project_root: str | Path, config: ProverConfig) -> ServerPool[LeanServer]:
    """A pool of one warm Lean REPL in the project, reused for ``config.server_uses`` theorems
    (see :func:`lean_server_factory`)."""
    factory = lean_server_factory(project_root, config)
    return ServerPool.single(factory, max_uses=config.server_uses)


def prove_sorries(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    project_root: str | Path | None,
    *,
    servers: Servers | None = None,
    database: DynamicDatabase | None = None,
    branch: str | BranchCommitter | None = None,
    whole_proof: bool = False,
    run: str = "prove-sorries",
    progress: Callable[[int, int], None] | None = None,
) -> SorryReport:
    """Try to prove each theorem and report.

    Each theorem is searched for (``prover.search``, or ``prover.prove_whole`` with
    ``whole_proof``) on a server leased from ``servers``: a ``ServerPool`` (kept open), a
    factory of servers (pooled here, one server reused for ``prover.config.server_uses``
    theorems), or None for Lean REPLs in ``project_root`` (see :func:`lean_servers`).

    With ``project_root`` (the Lean project the theorems' files are in), a proof Lean accepted
    is put into its file with ``SorryFiller``: written only if Lean accepts the whole file,
    atomically, the original kept under ``.leanloop-backups/<time>/``, the theorem marked
    ``sorry_proved`` in ``database`` and, with ``branch`` (a branch name or a
    ``BranchCommitter``), committed on that branch, never on the current one. Without it (a
    replay of recorded steps) nothing is written.

    Each attempt is stored in ``database`` under ``run``; theorems the run already finished
    (without an error) are skipped and reported as ``skipped``. ``progress(done, total)`` is
    called as theorems end.
    """
    theorems = list(theorems)
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    root = Path(project_root).expanduser().resolve() if project_root is not None else None
    if root is not None and prover.project_root != root:
        prover = copy.copy(prover)  # shares the loaded model
        prover.project_root = root
    committer = _committer(branch, root)
    report = SorryReport(
        run=run,
        prover=prover.name,
        mode="lean" if root is not None else "replay",
        whole_proof=whole_proof,
        project_root=str(root) if root is not None else None,
        branch=committer.branch if committer is not None else None,
        started=started_at,
    )
    if servers is None and root is None:
        raise LeanloopError("prove_sorries needs servers (a pool or a factory) or a project_root")
    own_pool = not isinstance(servers, ServerPool)  # made here, so closed here
    if servers is None:
        pool = lean_servers(root, prover.config)
    elif isinstance(servers, ServerPool):
        pool = servers
    else:
        pool = ServerPool.single(servers, max_uses=prover.config.server_uses)
    stored: dict = {}
    if database is not None:  # finished: any first attempt but an error (errors are retried)
        stored = {
            (a.key, a.commit): a
            for a in database.get_attempts(run)
            if a.attempt == 0 and a.status is not AttemptStatus.ERROR
        }
    backup_dir = root / BACKUP_DIR / started_at.strftime("%Y%m%dT%H%M%SZ") if root else None
    total = len(theorems)
    if progress is not None:
        progress(0, total)
    try:
        for done, theorem in enumerate(theorems, start=1):
            earlier = stored.get((theorem.key, theorem.commit))
            if earlier is not None:
                report.rows.append(_skipped_row(theorem, earlier, whole_proof))
            else:
                row, attempt = _prove_one(
                    theorem, prover, pool, root, database, committer, backup_dir, whole_proof, run
                )
                if database is not None:
                    database.record_attempt(attempt)
                report.rows.append(row)
                log.info("%s: %s", theorem.full_name, row.outcome)
            if progress is not None:
                progress(done, total)
    finally:
        if own_pool:
            pool.close()
    report.seconds = time.perf_counter() - started
    return report


def _committer(branch: str | BranchCommitter | None, root: Path | None) -> BranchCommitter | None:
    if branch is None or isinstance(branch, BranchCommitter):
        return branch
    if root is None:
        raise LeanloopError(
            f"--branch {branch}: there is no project to commit in (a replay writes nothing)"
        )
    return BranchCommitter(root, branch)


def _prove_one(
    theorem: Theorem,
    prover: BaseProver,
    pool: ServerPool[LeanServer],
    root: Path | None,
    database: DynamicDatabase | None,
    committer: BranchCommitter | None,
    backup_dir: Path | None,
    whole_proof: bool,
    run: str,
) -> tuple[SorryRow, ProofAttempt]:
    fill: FillResult | None = None
    failure: str | None = None
    try:
        with pool.lease(None) as server:
            if whole_proof:
                result = prover.prove_whole(server, theorem=theorem)
            else:
                result = prover.search(server, theorem=theorem)
            if result.status is AttemptStatus.PROVED and root is not None:
                filler = SorryFiller(
                    root, server, database=database, branch=committer, backup_dir=backup_dir
                )
                try:
                    fill = filler.fill(theorem, list(result.proof or ()))
                except (OSError, LeanloopError) as exc:
                    failure = f"Lean accepted the proof but the file was not written: {exc}"
    except Exception as exc:  # a failing server or model ends this theorem only
        result = SearchResult(
            target=theorem.full_name, status=AttemptStatus.ERROR, error=describe_exception(exc)
        )
    attempt = result.to_attempt(theorem, run=run, prover=prover.name)
    proof = result.proof_text
    outcome = result.status.value
    detail = result.error
    if failure is not None:
        outcome, detail = WRITE_FAILED, failure
        attempt = attempt.model_copy(
            update={"status": AttemptStatus.ERROR, "proof": None, "error": failure}
        )
    elif fill is not None:
        outcome, detail = fill.status.value, fill.reason or None
        proof = fill.proof or proof
        status = _ATTEMPT_STATUS[fill.status]
        if status is not AttemptStatus.PROVED:
            attempt = attempt.model_copy(
                update={"status": status, "proof": None, "error": fill.reason}
            )
    row = SorryRow(
        full_name=theorem.full_name,
        file_path=theorem.file_path,
        url=theorem.url,
        commit=theorem.commit,
        outcome=outcome,
        status=attempt.status,
        proof=proof,
        proof_length=_length(result.proof, whole_proof),
        seconds=result.seconds,
        check_seconds=fill.check_seconds if fill is not None else 0.0,
        lean_seconds=result.lean_seconds,
        model_seconds=result.model_seconds,
        expansions=result.expansions,
        detail=detail,
        git_commit=fill.commit if fill is not None else None,
        backup=str(fill.backup) if fill is not None and fill.backup is not None else None,
    )
    return row, attempt


def _skipped_row(theorem: Theorem, attempt: ProofAttempt, whole_proof: bool) -> SorryRow:
    proof = "\n".join(attempt.proof) if attempt.proof else None
    return SorryRow(
        full_name=theorem.full_name,
        file_path=theorem.file_path,
        url=theorem.url,
        commit=theorem.commit,
        outcome=SKIPPED,
        status=attempt.status,
        proof=proof,
        proof_length=_length(attempt.proof, whole_proof),
        detail=f"finished by an earlier call of run {attempt.run!r} ({attempt.status.value})",
    )


def _length(proof: tuple[str, ...] | None, whole_proof: bool) -> int:
    if not proof:
        return 0
    if whole_proof:
        return sum(1 for line in "\n".join(proof).splitlines() if line.strip())
    return len(proof)
