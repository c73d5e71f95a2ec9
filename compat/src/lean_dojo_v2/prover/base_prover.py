"""``lean_dojo_v2.prover.base_prover``: LeanDojo-v2's ``search`` on leanloop's provers.

LeanDojo-v2's ``prover.search(server=..., goal=..., theorem=..., verbose=False)`` returned
``(result, used_tactics)``: Pantograph's search result (``n_goals_root``, ``duration``,
``success``, ``steps``) and the tactics of the proof, or None. The provers of this package do the
same over leanloop's search (``leanloop.prover.base.BaseProver.search``), whose own result is
kept as ``result.outcome``. ``success`` means Lean accepted the proof: in leanloop's replay
environment (recorded steps, no Lean) a proof found again is ``replayed``, not a success, and
its tactics are still returned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lean_dojo_v2._notice import note_differences
from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from leanloop.lean.server import LeanServer
from leanloop.prover.base import BaseProver as _LeanloopProver
from leanloop.prover.result import SearchResult as _LeanloopResult


@dataclass(frozen=True)
class SearchResult:
    """What LeanDojo-v2's ``search`` returned first (Pantograph's ``SearchResult``), with
    leanloop's result beside it.

    Attributes:
        n_goals_root: Goals at the start: leanloop starts every search from one goal (a
            proposition, or a theorem's statement).
        duration: Seconds the search took.
        success: Whether Lean accepted the proof found (``proved``).
        steps: Nodes the search expanded.
        outcome: leanloop's result: status (``proved``, ``replayed``, ``failed``, ``timeout``,
            ``budget``, ``error``, ``refused``), proof, counts and times.
    """

    n_goals_root: int
    duration: float
    success: bool
    steps: int
    outcome: _LeanloopResult

    @property
    def status(self) -> str:
        """leanloop's outcome (``proved``, ``replayed``, ``failed``, ...)."""
        return self.outcome.status.value

    def __str__(self) -> str:
        return str(self.outcome)


class LeanDojoV2Search:
    """LeanDojo-v2's ``search`` for a leanloop prover (a mixin, first in the bases)."""

    def search(
        self,
        server: LeanServer,
        goal: str | None = None,
        theorem: Any = None,
        verbose: bool = False,
        *,
        attempt: int = 0,
        project_root: str | os.PathLike | None = None,
    ) -> tuple[SearchResult, list[str] | None]:
        """Search for a proof of ``goal`` or ``theorem`` on ``server``, as LeanDojo-v2 did.

        Args:
            server: A leanloop Lean server (``ReplServer``, ``PantographServer``, or
                ``ReplayServer`` without Lean); Pantograph's own ``Server`` is not one.
            goal: A proposition to prove.
            theorem: A theorem to prove (a ``Theorem`` record or a ``TheoremSource``).
            verbose: Accepted for LeanDojo-v2's calls; leanloop logs the search through the
                ``leanloop`` logger instead of printing it.
            attempt: Which attempt on the theorem (0 for the first).
            project_root: The Lean project a ``Theorem`` record's file is read from.

        Returns:
            ``(result, used_tactics)``: the result (``success`` when Lean accepted the proof)
            and the proof's tactics (None when no proof was found).

        Raises:
            LeanloopError: ``server`` is not a leanloop Lean server, or neither or both of
                ``goal`` and ``theorem`` are given.
        """
        if not isinstance(server, LeanServer):
            raise LeanloopError(
                f"search needs a leanloop Lean server, not a {type(server).__name__}",
                hint="use leanloop.lean.repl.ReplServer or leanloop.lean.pantograph."
                "PantographServer (or leanloop.prover.replay.ReplayServer without Lean)",
            )
        outcome = _LeanloopProver.search(
            self,  # type: ignore[arg-type]
            server,
            goal,
            theorem,
            attempt=attempt,
            project_root=project_root,
        )
        result = SearchResult(
            n_goals_root=1,
            duration=outcome.seconds,
            success=outcome.status is AttemptStatus.PROVED,
            steps=outcome.expansions,
            outcome=outcome,
        )
        return result, list(outcome.proof) if outcome.proof is not None else None


# search returns LeanDojo-v2's (result, used_tactics), not leanloop's result
class BaseProver(LeanDojoV2Search, _LeanloopProver):  # type: ignore[misc]
    """LeanDojo-v2's ``BaseProver``: leanloop's ``BaseProver`` with LeanDojo-v2's ``search``.
    A subclass defines ``name`` and ``load_generator`` (leanloop's hooks) instead of
    LeanDojo-v2's ``next_tactic``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        note_differences()
        super().__init__(*args, **kwargs)
