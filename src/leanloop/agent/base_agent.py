"""``BaseAgent``: the loop over repositories every agent shares — set repositories up in the
lifelong database, train the agent's trainer on them in curriculum order, evaluate the result,
and prove the open ``sorry`` theorems (written back only where Lean accepted them) — with the
two hooks a subclass fills in: ``_get_build_deps`` and ``_setup_prover``."""

from __future__ import annotations

import functools
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.agent.repositories import AgentRepository, setup_dataset, setup_project
from leanloop.data.records import Repository, Theorem
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.prover.job import ProofJob, SorryTargets
from leanloop.words import plural

if TYPE_CHECKING:
    from leanloop.agent.evaluation import Evaluation
    from leanloop.agent.proving import SorryReport
    from leanloop.prover.base import BaseProver

log = logging.getLogger(__name__)

#: Where an agent without a trainer keeps its exports and reports.
DEFAULT_WORK_DIR = Path("leanloop-agent")


class BaseAgent(ABC):
    """An agent over a lifelong database of repositories.

    ``database_path`` is a SQLite file, a ``postgresql://`` URL, an open ``DynamicDatabase``, or
    None for leanloop's default database (``$LEANLOOP_DB``, else a file in the user's data
    directory). Opening it changes nothing: what earlier runs stored stays, and every run adds
    to it. ``prover_config`` (a ``ProverConfig``, a mapping of its fields or a YAML/JSON file)
    sets the search budgets of ``prove()``. ``data_path`` is where the merged LeanDojo-format
    export the trainer reads is written (default ``<work_dir>/data``); ``work_dir`` is the
    trainer's ``output_dir``, or ``leanloop-agent`` for an agent without a trainer, and also
    holds the reports of ``prove()``.

    A subclass sets ``self.trainer`` (None for an agent that does not train) and implements
    ``_get_build_deps()`` (whether tracing also scans the dependencies' sources for premises)
    and ``_setup_prover()`` (builds the prover, sets ``self.prover`` and returns it).

    Args:
        database_path: A SQLite file, a ``postgresql://`` URL, an open ``DynamicDatabase``,
            or None for the default database.
        prover_config: The search budgets of ``prove()``: a ``ProverConfig``, a mapping of
            its fields or a YAML/JSON file.
        data_path: Where the trainer's merged export is written (default
            ``<work_dir>/data``).
    """

    trainer: Any = None

    def __init__(
        self,
        database_path: str | os.PathLike | DynamicDatabase | None = None,
        *,
        prover_config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        data_path: str | os.PathLike | None = None,
    ) -> None:
        self.prover_config = (
            ProverConfig() if prover_config is None else ProverConfig.load(prover_config)
        )
        if isinstance(database_path, DynamicDatabase):
            self.database = database_path
        else:
            self.database = DynamicDatabase(database_path)
        self._data_path = Path(data_path).expanduser() if data_path is not None else None
        #: the repositories set up by this agent, in the order they were set up
        self.repos: list[AgentRepository] = []
        self.prover: BaseProver | None = None

    # -- what subclasses choose --------------------------------------------------------------

    @abstractmethod
    def _get_build_deps(self) -> bool:
        """Whether tracing a repository also scans its dependencies for premises."""

    @abstractmethod
    def _setup_prover(self) -> BaseProver:
        """Build the prover of ``prove()``, set ``self.prover`` to it and return it."""

    # -- where things go ---------------------------------------------------------------------

    @property
    def work_dir(self) -> Path:
        """The trainer's ``output_dir``, or ``leanloop-agent`` for an agent without one."""
        output_dir = getattr(self.trainer, "output_dir", None)
        return Path(output_dir) if output_dir is not None else DEFAULT_WORK_DIR

    @property
    def data_path(self) -> Path:
        """The merged export the trainer reads (LeanDojo-v2's attribute name)."""
        return self._data_path or self.work_dir / "data"

    # -- setting repositories up -------------------------------------------------------------

    def setup_github_repository(self, url: str, commit: str) -> Repository:
        """Trace a repository into the database (unless it is stored at that commit already)
        and work on it. Tracing needs Lean.

        Args:
            url: The repository's git URL.
            commit: The commit to trace.

        Returns:
            The repository record.

        Raises:
            LeanloopError: The Lean toolchain is missing (saying what to install), or the
                repository cannot be cloned, built or traced.
        """
        entry = setup_project(self.database, url, commit, build_deps=self._get_build_deps())
        return self._add(entry)

    def setup_local_repository(self, path: str | os.PathLike) -> Repository:
        """Trace a Lean project directory into the database, at its current commit (or
        contents), and work on it. Tracing needs Lean.

        Args:
            path: The project's directory.

        Returns:
            The repository record.

        Raises:
            LeanloopError: The Lean toolchain is missing, or the project cannot be built or
                traced.
        """
        entry = setup_project(self.database, path, build_deps=self._get_build_deps())
        return self._add(entry)

    def setup_dataset(self, path: str | os.PathLike) -> list[Repository]:
        """Import a LeanDojo-format dataset (a directory or a split file) and work on the
        repositories its theorems belong to; needs no Lean. ``prove()`` on them replays the
        recorded steps instead of proving.

        Args:
            path: The dataset: a directory or a split file.

        Returns:
            The repositories of its theorems.

        Raises:
            DataFormatError: The dataset is malformed (naming the file, line and field).
        """
        return [self._add(entry) for entry in setup_dataset(self.database, path)]

    def _add(self, entry: AgentRepository) -> Repository:
        if all(e.repository != entry.repository for e in self.repos):
            self.repos.append(entry)
        log.info("set up %s", entry)
        return entry.repository

    # -- training ------------------------------------------------------------------------------

    def curriculum(self, repositories: Sequence[Repository] | None = None) -> list[Repository]:
        """The repositories to train on, easiest first (``sort_repositories_by_difficulty``):
        every repository of the database, as LeanDojo-v2 trains (lifelong learning keeps
        training on what earlier runs stored), or only ``repositories``.

        Args:
            repositories: Only these (None: every repository of the database).

        Returns:
            The repositories, easiest first.

        Raises:
            LeanloopError: There is no repository to train on.
        """
        ordered = self.database.sort_repositories_by_difficulty()
        if repositories is not None:
            wanted = {(r.identity, r.commit) for r in repositories}
            ordered = [r for r in ordered if (r.identity, r.commit) in wanted]
        if not ordered:
            raise LeanloopError(
                "no repository to train on",
                hint="call setup_github_repository(), setup_local_repository() or "
                "setup_dataset() first",
            )
        return ordered

    def _require_trainer(self) -> Any:
        if self.trainer is None:
            raise LeanloopError(
                f"{type(self).__name__} has no trainer: it proves with a model as it is",
                hint="use HFAgent(trainer=...) or LeanAgent() to train",
            )
        return self.trainer

    def train(self, repositories: Sequence[Repository] | None = None) -> list[Path]:
        """Train the trainer on the repositories of ``curriculum(repositories)`` in order; each
        leaves a checkpoint under the trainer's ``output_dir`` (returned). A ``ProgressTrainer``
        is trained once on the progress rows of all of them, written to
        ``<data_path>/progress.jsonl``.

        Args:
            repositories: Only these (None: every repository of the database).

        Returns:
            The checkpoint of each repository, in order (a progress model's one directory).

        Raises:
            LeanloopError: The agent has no trainer, or there is nothing to train on.
        """
        trainer = self._require_trainer()
        repos = self.curriculum(repositories)
        from leanloop.trainer.progress import ProgressTrainer

        if isinstance(trainer, ProgressTrainer):
            return [self._train_progress(trainer, repos)]
        return trainer.train(repos, self.database, self.data_path)

    def _train_progress(self, trainer: Any, repos: list[Repository]) -> Path:
        from leanloop.ml import distributed
        from leanloop.trainer.progress_data import build_progress_dataset

        rows = self.data_path / "progress.jsonl"
        processes = distributed.current()
        if processes.is_main:  # the others read the rows it wrote
            build_progress_dataset(self.database, rows, repos)
        processes.barrier()
        if not rows.is_file() or not rows.read_text().strip():
            raise LeanloopError(
                "the repositories hold no traced proof to learn progress from",
                hint="set up repositories with traced tactics",
            )
        trainer.config.data_path = rows
        trainer.train()
        return Path(trainer.output_dir)

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(
        self,
        split: str = "test",
        *,
        repositories: Sequence[Repository] | None = None,
        k: int = 8,
        max_steps: int | None = None,
    ) -> Evaluation:
        """Evaluate the trained model on ``split`` (``test``, or ``SCHEME/SPLIT``) of the
        merged export of the curriculum's repositories (exported again first; splits never
        change): tactic accuracy (top-1, top-``k``) of an SFT or GRPO generator, R@1/R@10/MRR of
        the retriever, MAE/MSE of a progress model. ``max_steps`` caps the steps (rows)
        evaluated.

        Args:
            split: ``test``, ``val``, ``train``, or ``SCHEME/SPLIT`` (e.g.
                ``novel_premises/test``).
            repositories: Only these (None: every repository of the database).
            k: The k of top-k tactic accuracy.
            max_steps: Evaluate at most this many steps (rows).

        Returns:
            Evaluation: What was evaluated, on what, and its figures (``figures()``).

        Raises:
            LeanloopError: The agent has no trainer, or its model is not trained yet.
        """
        import leanloop.agent.evaluation as evaluation
        from leanloop.trainer.hf_common import HFCurriculumTrainer
        from leanloop.trainer.progress import ProgressTrainer
        from leanloop.trainer.retrieval import RetrievalTrainer

        trainer = self._require_trainer()
        self.database.export_merged_data(self.curriculum(repositories), self.data_path)
        if isinstance(trainer, HFCurriculumTrainer):
            return evaluation.evaluate_generator(
                trainer.output_dir, self.data_path, split=split, k=k, max_steps=max_steps
            )
        if isinstance(trainer, RetrievalTrainer):
            return evaluation.evaluate_retrieval(
                trainer.output_dir,
                self.data_path,
                split=split,
                k=trainer.config.num_retrieved,
                batch_size=trainer.config.eval_batch_size,
            )
        if isinstance(trainer, ProgressTrainer):
            return evaluation.evaluate_progress(
                trainer.output_dir, self.data_path, split=split, max_rows=max_steps
            )
        raise LeanloopError(f"cannot evaluate a {type(trainer).__name__}")

    # -- proving -------------------------------------------------------------------------------

    def prove(
        self,
        whole_proof: bool = False,
        *,
        mode: ProofMode | str | None = None,
        branch: str | None = None,
        run: str | None = None,
        out_dir: str | os.PathLike | None = None,
    ) -> list[SorryReport]:
        """Prove the open ``sorry`` theorems of the repositories set up by this agent, one
        report per repository (also written to ``out_dir/<repository>``, by default
        ``<work_dir>/prove``).

        ``mode`` is ``search`` (tactic by tactic) or ``whole`` (whole proofs);
        ``whole_proof=True`` (LeanDojo-v2's argument) is ``mode="whole"``. For a Lean project,
        each theorem goes through the proving engine on warm Lean REPLs, and a proof is written
        into its file only after Lean accepted the filled declaration there and its axioms
        passed the audit (a backup kept; with ``branch``, checked and committed in that new
        branch's own worktree); this needs Lean, and says what is missing when it is not
        installed. A repository set up from a dataset has no Lean project: its recorded steps
        are replayed instead (its sorry theorems that have recorded steps, else its test
        theorems), which proves nothing and writes nothing.

        Attempts are stored in the database under ``run`` (default: from the prover); a second
        ``prove()`` of the same run skips the theorems it finished.

        Args:
            whole_proof: Prove in whole-proof mode (as ``mode="whole"``).
            mode: ``search`` (default) or ``whole``.
            branch: Write the proofs in this new git branch (its own worktree) instead of
                the checked-out files.
            run: The run's name in the database.
            out_dir: Where each repository's report is written.

        Returns:
            One report per repository: every theorem tried, how it ended, and whether its
            proof was written.

        Raises:
            LeanloopError: No repository is set up, or Lean is needed and missing.
        """
        from leanloop.agent.proving import SorryInputs, prove_sorry_job
        from leanloop.agent.repositories import require_lean
        from leanloop.prover.replay import ReplayServer

        if not self.repos:
            raise LeanloopError(
                "no repository set up to prove",
                hint="call setup_github_repository(), setup_local_repository() or "
                "setup_dataset() first",
            )
        chosen = ProofMode(mode) if mode is not None else ProofMode.SEARCH
        if whole_proof:
            chosen = ProofMode.WHOLE
        if any(e.has_project for e in self.repos):
            require_lean()  # before a repository is cloned again
        jobs = {
            entry.repository: self.proof_job(entry, chosen, branch, run) for entry in self.repos
        }
        launchers = {  # Lean is needed: say so before any model loads
            repository: self._launcher(job) for repository, job in jobs.items()
        }
        prover = self._setup_prover()
        reports = []
        for entry in self.repos:
            theorems = self._theorems(entry)
            servers = launchers[entry.repository] or functools.partial(ReplayServer, theorems)
            inputs = SorryInputs(theorems=theorems, servers=servers, database=self.database)
            report = prove_sorry_job(jobs[entry.repository], prover, inputs)
            report.write(Path(out_dir or self.work_dir / "prove") / entry.slug)
            log.warning("%s: %s", entry.repository, report.summary())
            reports.append(report)
        return reports

    def proof_job(
        self,
        entry: AgentRepository,
        mode: ProofMode = ProofMode.SEARCH,
        branch: str | None = None,
        run: str | None = None,
    ) -> ProofJob:
        """The job ``prove()`` runs on a repository: its open sorries (in its Lean project, or
        replayed without Lean for a repository set up from a dataset), by this agent's prover
        under its configuration, named by the job's rule (so that ``leanloop prove --project``
        and the main job resume it) unless ``run`` is given.

        Args:
            entry: A repository this agent set up.
            mode: ``search`` or ``whole``.
            branch: The branch the proofs are committed on.
            run: The run's name (None: the job's rule).

        Returns:
            The job.
        """
        config = self.prover_config
        project = str(entry.open_project().root) if entry.has_project else None
        return ProofJob(
            targets=SorryTargets(project=project, branch=branch if project else None),
            mode=mode.value,
            lean=config.lean_backend if project is not None else "replay",
            search=config,
            allowed_axioms=config.allowed_axioms,
            allow_native=config.allow_native,
            run=run if run is None or project is not None else f"{run}:replay",
        )

    def _launcher(self, job: ProofJob):
        from leanloop.prover.assemble import LeanLimits, lean_launcher

        assert isinstance(job.targets, SorryTargets)
        if job.targets.project is None:
            return None
        return lean_launcher(job.targets.project, job.prover_config(), LeanLimits(instead=None))

    def _theorems(self, entry: AgentRepository) -> list[Theorem]:
        if entry.has_project:
            return self.database.get_sorry_theorems(entry.repository)
        theorems = self.replay_theorems(entry)
        log.warning(
            "%s was set up from a dataset, without a Lean project: replaying the recorded steps "
            "of %s (a replay, not proving; nothing is written)",
            entry.repository,
            plural(len(theorems), "theorem"),
        )
        return theorems

    def replay_theorems(self, entry: AgentRepository) -> list[Theorem]:
        """What ``prove()`` replays for a repository set up from a dataset: its open sorry
        theorems that have recorded steps other than ``sorry``, else the theorems with traced
        tactics in the test split of its export.

        Args:
            entry: A repository this agent set up from a dataset.

        Returns:
            The theorems to replay.
        """
        from leanloop.data import open_dataset

        sorries = [
            t
            for t in self.database.get_sorry_theorems(entry.repository)
            if any(not step.is_sorry for step in t.traced_tactics)
        ]
        if sorries:
            return sorries
        export = self.work_dir / "replay" / entry.slug
        self.database.export_merged_data([entry.repository], export)
        test = export / "random" / "test.json"
        return [t for t in open_dataset(test).iter_theorems() if t.traced_tactics]
