"""Prove open ``sorry`` theorems and write back what Lean accepts: the proving engine
(``leanloop.prover.engine``) proves each theorem (search or whole proofs, checked by Lean and
audited), and its hook (``SorryWriter``) puts each proof into its file with ``SorryFiller`` —
written only when Lean accepted the filled declaration there, or committed on a branch of its
own — and a ``SorryReport`` (JSON, Markdown, plot) lists every theorem tried. Without a project
(a replay of recorded steps) nothing is written and nothing is called proved."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from leanloop.agent.git_branch import BranchWorkspace
from leanloop.agent.sorry_filling import BACKUP_DIR, FillResult, SorryFiller
from leanloop.agent.sorry_report import SKIPPED, SorryReport, SorryRow
from leanloop.data.records import ProofAttempt, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.prover.engine import Callbacks, JobInputs, ProofRun, run_job
from leanloop.prover.job import ProofJob, SorryTargets
from leanloop.prover.worker import Servers

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
            "status": fill.attempt_status,
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


class SorryOptions(TypedDict, total=False):
    """The options of ``prove_sorries`` (each as its text says)."""

    servers: Servers | None
    database: DynamicDatabase | None
    branch: str | BranchWorkspace | None
    mode: ProofMode | str
    run: str
    num_workers: int | None
    address: str | None
    worktree_servers: WorktreeServers | None
    progress: Callable[[int, int], None] | None


def prove_sorries(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    project_root: str | Path | None,
    **options: Unpack[SorryOptions],
) -> SorryReport:
    """Try to prove each theorem and report (a thin wrapper over :func:`prove_sorry_job`, the
    job's run named by ``run``, default ``prove-sorries``).

    The theorems go through the proving engine with servers from ``servers`` — a
    ``ServerPool`` (kept open), a maker of servers, or None for Lean servers in
    ``project_root`` (a ``Launcher``) — by search or, with ``mode="whole"``, whole proofs;
    each theorem's attempts (``prover.config.num_attempts``) stop at the first proof.

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
    config = prover.config
    branch = options.get("branch")
    job = ProofJob(
        targets=SorryTargets(
            project=str(project_root) if project_root is not None else None,
            branch=branch if isinstance(branch, str) else None,
        ),
        mode=ProofMode(options.get("mode", ProofMode.SEARCH)).value,
        lean=config.lean_backend if project_root is not None else "replay",
        workers=options.get("num_workers"),
        address=options.get("address"),
        search=config,
        allowed_axioms=config.allowed_axioms,
        allow_native=config.allow_native,
        run=options.get("run", "prove-sorries"),
    )
    inputs = SorryInputs(
        theorems=list(theorems),
        servers=options.get("servers"),
        database=options.get("database"),
        workspace=branch if isinstance(branch, BranchWorkspace) else None,
        worktree_servers=options.get("worktree_servers"),
        progress=options.get("progress"),
    )
    return prove_sorry_job(job, prover, inputs)


@dataclass
class SorryInputs:
    """What a sorry job is run with besides its config: the theorems, the servers (None: the
    job's Lean servers in its project), the database, a branch's workspace made already, the
    maker of a worktree's servers, and the progress callback."""

    theorems: list[Theorem]
    servers: Servers | None = None
    database: DynamicDatabase | None = None
    workspace: BranchWorkspace | None = None
    worktree_servers: WorktreeServers | None = None
    progress: Callable[[int, int], None] | None = None


def prove_sorry_job(job: ProofJob, prover: BaseProver, inputs: SorryInputs) -> SorryReport:
    """Run a sorry job through the engine (its theorems' attempts stop at the first proof) with
    the write-back as its hook, and report every theorem tried (see ``prove_sorries``).

    Args:
        job: The job (``targets`` of kind ``sorries``: its project and branch).
        prover: The prover.
        inputs: The theorems, servers, database and progress callback.

    Returns:
        The report: every theorem tried, how it ended, and whether its proof was written.

    Raises:
        LeanloopError: No servers and no project, or a branch without a project.
    """
    assert isinstance(job.targets, SorryTargets)
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    project = job.targets.project
    root = Path(project).expanduser().resolve() if project is not None else None
    servers = inputs.servers
    if servers is None:
        if root is None:
            raise LeanloopError(
                "prove_sorries needs servers (a pool or a factory) or a project_root"
            )
        servers = _launcher(root, job.prover_config())
    workspace = inputs.workspace or _workspace(job.targets.branch, root)
    writer = _writer(job, root, servers, workspace, inputs, started_at)
    job = ProofJob.load(job, stop_at_first=True)
    try:
        if workspace is not None:
            workspace.open()  # before anything is proved: a branch that cannot be used says so
        engine_inputs = JobInputs(
            database=inputs.database,
            theorems=inputs.theorems,
            callbacks=Callbacks(hook=writer, progress=inputs.progress),
            prover=prover,
            servers=servers,
            project_root=root,
        )
        outcome = run_job(job, engine_inputs)
    finally:
        if writer is not None:
            writer.close()
        elif workspace is not None:
            workspace.close()
    assert isinstance(outcome, ProofRun)
    report = SorryReport(
        run=outcome.run,
        prover=prover.name,
        environment="lean" if root is not None else "replay",
        mode=job.proof_mode,
        project_root=str(root) if root is not None else None,
        branch=workspace.branch if workspace is not None else None,
        started=started_at,
    )
    fills = writer.results if writer is not None else {}
    report.rows = _rows(inputs.theorems, outcome, fills, job.proof_mode)
    report.seconds = time.perf_counter() - started
    return report


def _writer(
    job: ProofJob,
    root: Path | None,
    servers: Servers,
    workspace: BranchWorkspace | None,
    inputs: SorryInputs,
    started_at: datetime,
) -> SorryWriter | None:
    """The write-back hook of a job with a project (None: a replay writes nothing)."""
    if root is None:
        return None
    worktree_servers = inputs.worktree_servers
    if workspace is not None and worktree_servers is None:
        worktree_servers = _worktree_servers(servers, root)
    stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
    return SorryWriter(
        root,
        database=inputs.database,
        branch=workspace,
        backup_dir=root / BACKUP_DIR / stamp,
        config=job.prover_config(),
        worktree_servers=worktree_servers,
    )


def _rows(
    theorems: list[Theorem], outcome: ProofRun, fills: dict[tuple, FillResult], mode: ProofMode
) -> list[SorryRow]:
    """A row per theorem tried: skipped (an earlier call finished it) or its latest attempt
    with the write-back of that very attempt."""
    skipped = {(a.key, a.commit) for a in outcome.skipped}
    latest: dict[tuple, ProofAttempt] = {}
    for made in [*outcome.skipped, *outcome.new]:
        latest[(made.key, made.commit)] = made
    made_now = {(a.key, a.commit) for a in outcome.new}
    rows = []
    for theorem in theorems:
        key = (theorem.key, theorem.commit)
        attempt = latest.get(key)
        if attempt is None:
            continue
        if key in skipped and key not in made_now:
            rows.append(_skipped_row(theorem, attempt, mode))
        else:
            fill = fills.get((*key, attempt.attempt))
            rows.append(_row(theorem, attempt, fill, mode))
    return rows


def _launcher(root: Path, config: ProverConfig) -> Launcher:
    from leanloop.prover.assemble import LeanLimits, lean_launcher

    launcher: Launcher = lean_launcher(root, config, LeanLimits(instead=None))
    return launcher


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
