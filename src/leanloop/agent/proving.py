"""Prove open ``sorry`` theorems and write back what Lean accepts: the proving engine
(``leanloop.prover.run``) proves each theorem (search or whole proofs, checked by Lean and
audited), and its hook (``SorryWriter``) puts each proof into its file with ``SorryFiller`` —
written only when Lean accepted the filled declaration there, or committed on a branch of its
own — and a ``SorryReport`` (JSON, Markdown, plot) lists every theorem tried. Without a project
(a replay of recorded steps) nothing is written and nothing is called proved."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from leanloop.agent.git_branch import BranchWorkspace
from leanloop.agent.sorry_filling import BACKUP_DIR, FillResult, SorryFiller
from leanloop.agent.sorry_report import SKIPPED, SorryReport, SorryRow
from leanloop.data.records import ProofAttempt, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.prover.run import Servers, run_proofs

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase
    from leanloop.lean.backends import Launcher

log = logging.getLogger(__name__)

#: Makes the Lean servers of a branch's worktree (the project's root there -> a server maker).
WorktreeServers = Callable[[Path], Callable[[], LeanServer]]


class SorryWriter:
    """The hook of a sorry-proving run: writes each proof Lean accepted into its file with
    ``SorryFiller`` (in the driver, one proof at a time) and returns the attempt as the
    write-back ended; keeps each ``FillResult`` (by theorem and attempt) for the report. On a
    branch, the files are filled and checked in the branch's worktree, on Lean servers made
    there by ``worktree_servers``."""

    def __init__(
        self,
        root: Path,
        *,
        database: DynamicDatabase | None,
        branch: BranchWorkspace | None,
        backup_dir: Path,
        config: ProverConfig,
        worktree_servers: WorktreeServers | None,
    ) -> None:
        self.root = root
        self.database = database
        self.branch = branch
        self.backup_dir = backup_dir
        self.config = config
        self.worktree_servers = worktree_servers
        self.results: dict[tuple, FillResult] = {}
        self._worktree_pool: ServerPool[LeanServer] | None = None

    def _worktree_lease(self) -> AbstractContextManager[LeanServer]:
        if self._worktree_pool is None:
            assert self.branch is not None and self.worktree_servers is not None
            make = self.worktree_servers(self.branch.project_root(self.root))
            self._worktree_pool = ServerPool.single(make, max_uses=self.config.server_uses)
        return self._worktree_pool.lease(None)

    def __call__(self, theorem: Theorem, attempt: ProofAttempt, lease) -> ProofAttempt:
        if self.branch is not None:
            lease = self._worktree_lease
        filler = SorryFiller(
            self.root,
            lease,
            database=self.database,
            branch=self.branch,
            backup_dir=self.backup_dir,
            policy=self.config.axiom_policy,
        )
        fill = filler.fill(theorem, list(attempt.proof or ()))
        self.results[(theorem.key, theorem.commit, attempt.attempt)] = fill
        update: dict = {
            "status": fill.status.attempt_status,
            "axioms": fill.axioms if fill.axioms is not None else attempt.axioms,
        }
        if not fill.written:
            update.update(proof=None, error=fill.reason)
        return attempt.model_copy(update=update)

    def close(self) -> None:
        if self._worktree_pool is not None:
            self._worktree_pool.close()
        if self.branch is not None:
            self.branch.close()


def prove_sorries(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    project_root: str | Path | None,
    *,
    servers: Servers | None = None,
    database: DynamicDatabase | None = None,
    branch: str | BranchWorkspace | None = None,
    mode: ProofMode | str = ProofMode.SEARCH,
    run: str = "prove-sorries",
    num_workers: int | None = None,
    address: str | None = None,
    worktree_servers: WorktreeServers | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SorryReport:
    """Try to prove each theorem and report.

    The theorems go through the proving engine (:func:`leanloop.prover.run.run_proofs`) with
    servers from ``servers`` — a ``ServerPool`` (kept open), a maker of servers, or None for
    Lean servers in ``project_root`` (a ``Launcher``) — by search or, with
    ``mode="whole"``, whole proofs; each theorem's attempts (``prover.config.num_attempts``)
    stop at the first proof.

    With ``project_root`` (the Lean project the theorems' files are in), a proof Lean accepted
    is put into its file with ``SorryFiller``: written only if Lean accepts the filled
    declaration in its file and its axioms pass the audit, atomically, the original kept under
    ``.leanloop-backups/<time>/``, the theorem marked ``sorry_proved`` in ``database``. With
    ``branch`` (a branch name or a ``BranchWorkspace``), each proof is checked and committed in
    the branch's own worktree (HEAD plus the proofs, nothing else), on servers made there by
    ``worktree_servers`` (default: REPLs started in the worktree after building it), and your
    file gets it too only if it still matches the branch's. Without ``project_root`` (a replay
    of recorded steps) nothing is written.

    Each attempt is stored in ``database`` under ``run``; theorems the run already finished
    (without an error) are skipped and reported as ``skipped``. ``progress(done, total)`` is
    called as attempts end.
    """
    theorems = list(theorems)
    mode = ProofMode(mode)
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    root = Path(project_root).expanduser().resolve() if project_root is not None else None
    if servers is None:
        if root is None:
            raise LeanloopError(
                "prove_sorries needs servers (a pool or a factory) or a project_root"
            )
        servers = _launcher(root, prover.config)
    workspace = _workspace(branch, root)
    writer = None
    if root is not None:
        if workspace is not None and worktree_servers is None:
            worktree_servers = _worktree_servers(servers, root)
        stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
        writer = SorryWriter(
            root,
            database=database,
            branch=workspace,
            backup_dir=root / BACKUP_DIR / stamp,
            config=prover.config,
            worktree_servers=worktree_servers,
        )
    try:
        if workspace is not None:
            workspace.open()  # before anything is proved: a branch that cannot be used says so
        outcome = run_proofs(
            theorems,
            prover,
            servers,
            mode=mode,
            project_root=root,
            database=database,
            run=run,
            stop_at_first=True,
            num_workers=num_workers,
            address=address,
            hook=writer,
            progress=progress,
        )
    finally:
        if writer is not None:
            writer.close()
        elif workspace is not None:
            workspace.close()
    report = SorryReport(
        run=run,
        prover=prover.name,
        environment="lean" if root is not None else "replay",
        mode=mode,
        project_root=str(root) if root is not None else None,
        branch=workspace.branch if workspace is not None else None,
        started=started_at,
    )
    skipped = {(a.key, a.commit) for a in outcome.skipped}
    latest: dict[tuple, ProofAttempt] = {}
    for made in [*outcome.skipped, *outcome.new]:
        latest[(made.key, made.commit)] = made
    fills = writer.results if writer is not None else {}
    made_now = {(a.key, a.commit) for a in outcome.new}
    for theorem in theorems:
        key = (theorem.key, theorem.commit)
        attempt = latest.get(key)
        if attempt is None:
            continue
        if key in skipped and key not in made_now:
            report.rows.append(_skipped_row(theorem, attempt, mode))
        else:
            fill = fills.get((*key, attempt.attempt))  # the write-back of this very attempt
            report.rows.append(_row(theorem, attempt, fill, mode))
    report.seconds = time.perf_counter() - started
    return report


def _launcher(root: Path, config: ProverConfig) -> Launcher:
    from leanloop.lean.backends import LeanOptions, open_servers

    options = LeanOptions(timeout=config.tactic_timeout, sandbox=config.sandbox)
    return open_servers(config.lean_backend, root, options)


def _worktree_servers(servers: Servers, root: Path) -> WorktreeServers:
    """REPLs started in a branch's worktree, after giving it the project's build and building
    what differs there (the default when ``servers`` is a ``Launcher``)."""
    from leanloop.lean.backends import Launcher

    if not isinstance(servers, Launcher):
        raise LeanloopError(
            "--branch: proofs are checked in the branch's own worktree, and leanloop cannot "
            "start the given Lean servers there",
            hint="give worktree_servers= (a maker of servers for a project root), or leave "
            "servers= out to use Lean REPLs",
        )

    def make(worktree_root: Path) -> Callable[[], LeanServer]:
        from leanloop.lean.build import build, share_build
        from leanloop.lean.project import open_project

        share_build(root, worktree_root)
        build(open_project(worktree_root), servers.lake)
        return servers.with_root(worktree_root)

    return make


def _workspace(branch: str | BranchWorkspace | None, root: Path | None) -> BranchWorkspace | None:
    if branch is None or isinstance(branch, BranchWorkspace):
        return branch
    if root is None:
        raise LeanloopError(
            f"--branch {branch}: there is no project to commit in (a replay writes nothing)"
        )
    return BranchWorkspace(root, branch)


def _row(
    theorem: Theorem, attempt: ProofAttempt, fill: FillResult | None, mode: ProofMode
) -> SorryRow:
    outcome = fill.status.value if fill is not None else attempt.status.value
    proof = (
        fill.proof if fill is not None else ("\n".join(attempt.proof) if attempt.proof else None)
    )
    return SorryRow(
        full_name=theorem.full_name,
        file_path=theorem.file_path,
        url=theorem.url,
        commit=theorem.commit,
        outcome=outcome,
        status=attempt.status,
        proof=proof,
        proof_length=_length(fill_tactics(fill, attempt), mode),
        seconds=attempt.seconds,
        check_seconds=fill.check_seconds if fill is not None else 0.0,
        lean_seconds=attempt.lean_seconds,
        model_seconds=attempt.model_seconds,
        expansions=attempt.expansions,
        detail=attempt.error,
        git_commit=fill.commit if fill is not None else None,
        working_tree=fill.working_tree if fill is not None else None,
        backup=str(fill.backup) if fill is not None and fill.backup is not None else None,
        axioms=list(attempt.axioms) if attempt.axioms is not None else None,
    )


def fill_tactics(fill: FillResult | None, attempt: ProofAttempt) -> tuple[str, ...] | None:
    """The proof whose length a row shows: the attempt's, or, when the write-back dropped it
    from the attempt, the one offered to the file."""
    if attempt.proof:
        return attempt.proof
    if fill is not None and fill.proof:
        return tuple(fill.proof.removeprefix("by").strip("\n").splitlines())
    return None


def _skipped_row(theorem: Theorem, attempt: ProofAttempt, mode: ProofMode) -> SorryRow:
    proof = "\n".join(attempt.proof) if attempt.proof else None
    return SorryRow(
        full_name=theorem.full_name,
        file_path=theorem.file_path,
        url=theorem.url,
        commit=theorem.commit,
        outcome=SKIPPED,
        status=attempt.status,
        proof=proof,
        proof_length=_length(attempt.proof, mode),
        detail=f"finished by an earlier call of run {attempt.run!r} ({attempt.status.value})",
        axioms=list(attempt.axioms) if attempt.axioms is not None else None,
    )


def _length(proof: tuple[str, ...] | None, mode: ProofMode) -> int:
    if not proof:
        return 0
    if mode is ProofMode.WHOLE:
        return sum(1 for line in "\n".join(proof).splitlines() if line.strip())
    return len(proof)
