"""``BaseProver``: what every prover offers — proof search from a goal or a theorem, the next
tactic for a state, whole-proof mode — around a tactic generator it loads on first use (a prover
is cheap to build and to ship to another process)."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from leanloop.data.records import AttemptStatus, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.server import LeanServer, ProofState, TheoremSource
from leanloop.ml.protocols import Generator
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.prover.proof_search import ProgressModel, describe_exception, search
from leanloop.prover.result import SearchResult
from leanloop.prover.target import Target
from leanloop.prover.whole import check_whole_proofs

TheoremLike = Theorem | TheoremSource


class BaseProver(ABC):
    """A prover: ``search(server, goal=..., theorem=...)`` finds a proof by search (see
    [search][leanloop.prover.proof_search.search]), ``prove_whole`` by whole-proof mode;
    ``prove_target`` does either for a ``Target`` (what ``leanloop.prover.run`` calls).

    ``config`` is a ``ProverConfig``, a mapping of its fields or a YAML/JSON file. Models load
    on first use, in the process that uses them; a prover that has loaded them pickles without
    them. A prover holds no run: the Lean project a theorem record is read from is given with
    each call (``project_root``).

    A subclass defines ``name`` and ``load_generator`` (and ``load_whole_proof_generator``
    for whole-proof mode).

    Args:
        config: A [ProverConfig][leanloop.prover.config.ProverConfig], a mapping of its
            fields, or a YAML/JSON file of them (default ``ProverConfig()``).

    Raises:
        LeanloopError: The configuration has a value a field cannot take (the message names
            the field).
    """

    def __init__(
        self, config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None
    ) -> None:
        self.config = ProverConfig() if config is None else ProverConfig.load(config)
        #: LeanDojo-v2's attribute: the theorem ``next_tactic`` proposes tactics for (its
        #: context, e.g. the premises accessible from it), None for a bare state
        self.theorem: TheoremLike | None = None
        self._generator: Generator | None = None
        self._whole_generator: Generator | None = None
        self._progress: ProgressModel | None = None

    # -- what a prover defines ---------------------------------------------------------------

    @property
    @abstractmethod
    def name(self) -> str:
        """How results name this prover (e.g. ``hf:outputs``)."""

    @property
    def version(self) -> str:
        """Which weights the prover's models hold now ("" when they cannot change)."""
        return ""

    @property
    def identity(self) -> str:
        """``name``, ``version`` and a policy other than the standard one: what default run
        names are made of, so that a model trained further (or judged by another axiom policy)
        makes a new run instead of skipping what the older one tried."""
        identity = f"{self.name}@{self.version}" if self.version else self.name
        tag = self.config.policy_tag
        return f"{identity}:{tag}" if tag else identity

    @abstractmethod
    def load_generator(self) -> Generator:
        """Build the tactic generator (called once, where it is used).

        Returns:
            The generator (anything with ``generate_batch(states, k, **options)``).
        """

    def load_whole_proof_generator(self) -> Generator:
        """Build the generator of whole proofs (its 'tactics' are whole proof bodies).

        Returns:
            The generator.

        Raises:
            LeanloopError: The prover has no whole-proof mode.
        """
        raise LeanloopError(f"{self.name} has no whole-proof mode")

    def generator_options(self, attempt: int) -> dict[str, Any]:
        """Options for every ``generate_batch`` call of one attempt.

        Args:
            attempt: Which attempt on the theorem (0 for the first).

        Returns:
            Keyword arguments of ``generate_batch`` (e.g. a seed per attempt, so that pass@k
            samples differ).
        """
        return {}

    def generator_for(self, target: Target) -> Generator:
        """The generator used for a target (a prover may add the theorem's context).

        Args:
            target: What is being proved.

        Returns:
            The generator.
        """
        return self.generator

    # -- lazily loaded parts -----------------------------------------------------------------

    @property
    def generator(self) -> Generator:
        """The tactic generator, loaded on first use."""
        if self._generator is None:
            self._generator = self.load_generator()
        return self._generator

    @property
    def whole_proof_generator(self) -> Generator:
        """The generator of whole proofs, loaded on first use."""
        if self._whole_generator is None:
            self._whole_generator = self.load_whole_proof_generator()
        return self._whole_generator

    @property
    def progress(self) -> ProgressModel | None:
        """The progress model guiding the search (when ``config.progress_weight`` > 0)."""
        if self.config.progress_weight <= 0:
            return None
        if self._progress is None:
            from leanloop.ml.progress import ProgressScorer

            self._progress = ProgressScorer(self.config.progress_model)
        return self._progress

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_generator=None, _whole_generator=None, _progress=None)
        return state

    # -- search ------------------------------------------------------------------------------

    def search(
        self,
        server: LeanServer,
        goal: str | None = None,
        theorem: TheoremLike | None = None,
        *,
        attempt: int = 0,
        project_root: str | os.PathLike | None = None,
    ) -> SearchResult:
        """Search for a proof of ``goal`` (a proposition) or ``theorem`` (a ``Theorem``
        record — read from its file under ``project_root`` on a Lean server — or a
        ``TheoremSource``) on ``server``. A failure of the server or of the generator ends the
        search as ``error``; bad arguments raise ``LeanloopError``.

        Args:
            server: The Lean server the tactics run on.
            goal: A proposition to prove (give ``goal`` or ``theorem``).
            theorem: A theorem to prove.
            attempt: Which attempt on the theorem (0 for the first).
            project_root: The Lean project a ``Theorem`` record's file is read from.

        Returns:
            How the search ended (``proved`` only when Lean accepted the declaration and its
            axioms passed the audit), with the proof, counts and times.

        Raises:
            LeanloopError: Neither or both of ``goal`` and ``theorem`` are given.
        """
        target = Target.of(goal, theorem, project_root)
        return self.prove_target(server, target, ProofMode.SEARCH, attempt=attempt)

    def prove_target(
        self, server: LeanServer, target: Target, mode: ProofMode, *, attempt: int = 0
    ) -> SearchResult:
        """One attempt at a target, by search or in whole-proof mode.

        Args:
            server: The Lean server.
            target: What to prove (``Target.of(goal, theorem, project_root)``).
            mode: ``search`` or ``whole``.
            attempt: Which attempt on the theorem.

        Returns:
            How the attempt ended.
        """
        if ProofMode(mode) is ProofMode.WHOLE:
            return self._prove_whole(server, target, None, attempt)
        return search(
            server,
            target,
            self.generator_for(target),
            self.config,
            progress=self.progress,
            options=self.generator_options(attempt),
        )

    def next_tactic(self, state: ProofState | str, goal_id: int | None = None) -> str | None:
        """The generator's best tactic for a state (LeanDojo-v2's method).

        Args:
            state: A proof state, or its text.
            goal_id: Only this goal of the state.

        Returns:
            The best tactic; None if the generator proposes none.
        """
        if isinstance(state, ProofState):
            text = state.pretty if goal_id is None else state.goals[goal_id]
        else:
            text = state
        target = Target.of(goal=text) if self.theorem is None else Target.of(None, self.theorem)
        (ranked,) = self.generator_for(target).generate_batch(
            [text], 1, **self.generator_options(0)
        )
        return ranked[0].tactic if ranked else None

    # -- whole-proof mode --------------------------------------------------------------------

    def generate_whole_proofs(
        self,
        theorem: str | TheoremLike,
        n: int | None = None,
        *,
        attempt: int = 0,
        project_root: str | os.PathLike | None = None,
    ) -> list[str]:
        """Candidate whole proofs, NOT checked.

        Args:
            theorem: A statement (text ending with ``:= by``), a ``Theorem`` record or a
                ``TheoremSource``.
            n: How many (default ``config.num_whole_proofs``).
            attempt: Which attempt on the theorem.
            project_root: The Lean project a ``Theorem`` record's file is read from.

        Returns:
            Up to ``n`` distinct bodies of the theorem's ``by`` block, best first.

        Raises:
            LeanloopError: The prover has no whole-proof mode.
        """
        if isinstance(theorem, str):
            statement = theorem
        else:
            statement = Target.of(None, theorem, project_root).statement()
        return self._whole_proofs(statement, n, attempt)

    def _whole_proofs(self, statement: str, n: int | None, attempt: int) -> list[str]:
        (ranked,) = self.whole_proof_generator.generate_batch(
            [statement], n or self.config.num_whole_proofs, **self.generator_options(attempt)
        )
        return [candidate.tactic for candidate in ranked]

    def generate_whole_proof(self, theorem: str | TheoremLike) -> str | None:
        """The best candidate proof (unchecked: use ``prove_whole`` for a checked proof).

        Args:
            theorem: A statement, a ``Theorem`` record or a ``TheoremSource``.

        Returns:
            The body of its ``by`` block; None when the model gave none.
        """
        candidates = self.generate_whole_proofs(theorem, 1)
        return candidates[0] if candidates else None

    def prove_whole(
        self,
        server: LeanServer,
        goal: str | None = None,
        theorem: TheoremLike | None = None,
        *,
        n: int | None = None,
        attempt: int = 0,
        project_root: str | os.PathLike | None = None,
    ) -> SearchResult:
        """Whole-proof mode: ``n`` candidate proofs, each screened and checked on ``server``;
        the first accepted is the result (see ``leanloop.prover.whole.check_whole_proofs``).
        A failure of the model or the server ends it as ``error``.

        Args:
            server: The Lean server that checks the candidates.
            goal: A proposition to prove (give ``goal`` or ``theorem``).
            theorem: A theorem to prove.
            n: Candidates to try (default ``config.num_whole_proofs``).
            attempt: Which attempt on the theorem.
            project_root: The Lean project a ``Theorem`` record's file is read from.

        Returns:
            How it ended: ``proved`` with the first candidate Lean accepted (axioms audited),
            else why not.
        """
        return self._prove_whole(server, Target.of(goal, theorem, project_root), n, attempt)

    def _prove_whole(
        self, server: LeanServer, target: Target, n: int | None, attempt: int
    ) -> SearchResult:
        started = time.perf_counter()
        try:
            candidates = self._whole_proofs(target.statement(), n, attempt)
        except LeanloopError:
            raise
        except Exception as exc:  # a failing model ends this theorem only
            elapsed = time.perf_counter() - started
            return SearchResult(
                target=target.label,
                status=AttemptStatus.ERROR,
                error=f"the proof generator failed: {describe_exception(exc)}",
                seconds=elapsed,
                model_seconds=elapsed,
            )
        model_seconds = time.perf_counter() - started
        remaining = max(self.config.timeout - model_seconds, 0.0)
        result = check_whole_proofs(
            server, target, candidates, timeout=remaining, policy=self.config.axiom_policy
        )
        return result.model_copy(
            update={"model_seconds": model_seconds, "seconds": time.perf_counter() - started}
        )
