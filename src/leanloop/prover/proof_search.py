"""Proof search over proof states: each expansion asks the generator for k ranked tactics, runs
them with ``LeanServer.run_tactic`` and adds each new state as a child (a state reached again by
a shorter path takes that path and is expanded again), in the order of a strategy (best-first on
the path's log-probability, optionally guided by predicted steps remaining, or depth-first),
within the time, expansion and depth budgets of ``ProverConfig``. A proof found ends the search
once it is confirmed (replayed, checked whole by Lean); one that is not is a failed tactic, and
the search goes on. Every proof state the search obtains is released, however it ends."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from leanloop.data.prompt import collapse_whitespace
from leanloop.data.records import AttemptStatus
from leanloop.lean.audit import check_declaration
from leanloop.lean.errors import LeanError, ServerError
from leanloop.lean.screen import forbidden_in_proof
from leanloop.lean.server import LeanServer, ProofFinished, ProofState, TacticFailed
from leanloop.ml.protocols import Generator
from leanloop.prover.config import ProverConfig
from leanloop.prover.result import SearchResult
from leanloop.prover.strategy import STRATEGIES, Failure, Frontier, Node
from leanloop.prover.target import Target
from leanloop.words import plural

log = logging.getLogger(__name__)


class ProgressModel(Protocol):
    """Predicts the steps remaining after a tactic (``ProgressScorer``)."""

    def predict_batch(self, items: Sequence[tuple[str, str | None, str]]) -> list[float]: ...


def accepts_feedback(generator: Generator) -> bool:
    """Whether a generator takes ``feedback=``: for each state, the tactics that failed on it
    and Lean's errors (a list of ``Failure``)."""
    return bool(getattr(generator, "accepts_feedback", False))


def search(
    server: LeanServer,
    target: Target,
    generator: Generator,
    config: ProverConfig | None = None,
    *,
    progress: ProgressModel | None = None,
    frontier: Frontier | None = None,
    options: Mapping[str, Any] | None = None,
) -> SearchResult:
    """Search for a proof of ``target`` on ``server``; never raises for a failure of the
    server or the generator (the result is then ``error``, with the reason).

    ``options`` go to every ``generator.generate_batch`` call; ``frontier`` replaces the
    strategy ``config.strategy`` names; ``progress`` is used when ``config.progress_weight`` >
    0. A proof found is replayed from a fresh start (``config.recheck``) and, on a Lean server,
    judged by Lean as a declaration of its own with its axioms audited (the one soundness
    policy, ``leanloop.lean.audit``) before it is reported: ``proved`` on a server that checks
    with Lean, ``replayed`` otherwise. A
    proof that is not accepted is recorded as a failed tactic, with the reason, and the search
    goes on; if it then ends without a proof, ``error`` also names the last proof found and
    why it was not accepted, and the status is ``refused`` if a proof was refused (unless a
    failure ended the search: that stays ``error``).

    The status is ``failed`` when every open state was expanded, ``budget`` or ``timeout``
    only when that budget stopped a search that still had open states.

    Args:
        server: The Lean server the tactics run on.
        target: What to prove (``Target.of(goal, theorem, project_root)``).
        generator: Proposes tactics: anything with ``generate_batch(states, k, **options)``.
        config: Budgets and strategy (default ``ProverConfig()``).
        progress: The progress model, needed when ``config.progress_weight`` > 0.
        frontier: The order open states are expanded in (default: ``config.strategy``'s).
        options: Keyword arguments of every ``generate_batch`` call.

    Returns:
        How the search ended, with the proof, counts and times.

    Raises:
        ValueError: ``config.progress_weight`` > 0 but no progress model is given.
    """
    config = config or ProverConfig()
    if config.progress_weight > 0 and progress is None:
        raise ValueError("config.progress_weight > 0 needs a progress model")
    frontier = frontier if frontier is not None else STRATEGIES[config.strategy]()
    return _Search(server, target, generator, config, progress, frontier, options or {}).run()


class _Stop(Exception):
    """Ends the search loop with an outcome; also the verdict on a proof found (with
    ``proof`` set then)."""

    def __init__(
        self, status: AttemptStatus, error: str | None = None, proof=None, axioms=None
    ) -> None:
        super().__init__(status.value)
        self.status = status
        self.error = error
        self.proof = proof
        self.axioms = axioms


#: How searches end that no failure stopped: a proof refused on the way overrides them.
_SEARCH_ENDS = (AttemptStatus.FAILED, AttemptStatus.BUDGET, AttemptStatus.TIMEOUT)


class _Search:
    def __init__(self, server, target, generator, config, progress, frontier, options) -> None:
        self.server = server
        self.target = target
        self.generator = generator
        self.config = config
        self.progress = progress if config.progress_weight > 0 else None
        self.frontier = frontier
        self.options = dict(options)
        self.feedback = accepts_feedback(generator)
        self.nodes: dict[str, Node] = {}
        self.expansions = 0
        self.deadline = math.inf
        self.lean_seconds = 0.0
        self.model_seconds = 0.0
        # the ledger: every proof state obtained and not released, and those to release next
        self.live: dict[tuple[int, int, int], ProofState] = {}
        self.retired: list[ProofState] = []
        self.server_failed = False
        self.waiting: set[Node] = set()  # nodes of the current batch not expanded yet
        self.passed_over: _Stop | None = None  # the last proof found and not accepted
        self.refused: _Stop | None = None  # the last proof found and refused

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> SearchResult:
        started = time.perf_counter()
        self.deadline = started + self.config.timeout
        try:
            try:
                root_state = self._obtained(self._lean(self.target.start, self.server))
            except LeanError as exc:
                raise _Stop(AttemptStatus.ERROR, f"cannot start the proof: {exc}") from None
            root = Node(root_state, root_state.pretty, None, None, 0.0, 0, 0.0, 0.0)
            self.nodes[root.key] = root
            self.frontier.push(root)
            self._loop()
        except _Stop as stop:
            outcome = stop
        except LeanError as exc:
            outcome = _Stop(AttemptStatus.ERROR, f"the Lean server failed: {exc}")
        finally:
            self._release_all()
        outcome = self._final(outcome)
        return SearchResult(
            target=self.target.label,
            status=outcome.status,
            proof=tuple(outcome.proof) if outcome.status.found_proof else None,
            error=outcome.error,
            expansions=self.expansions,
            tree_size=len(self.nodes),
            seconds=time.perf_counter() - started,
            lean_seconds=self.lean_seconds,
            model_seconds=self.model_seconds,
            axioms=outcome.axioms,  # set by an accepted proof only
        )

    def _loop(self) -> None:
        config = self.config
        while True:
            if len(self.frontier) == 0:
                raise _Stop(AttemptStatus.FAILED, "the search space is exhausted")
            if time.perf_counter() >= self.deadline:
                raise _Stop(AttemptStatus.TIMEOUT, f"no proof within {config.timeout:g} s")
            room = config.batch_size
            if config.max_expansions is not None:
                room = min(room, config.max_expansions - self.expansions)
                if room <= 0:
                    raise _Stop(
                        AttemptStatus.BUDGET,
                        f"no proof within {config.max_expansions} expansions",
                    )
            batch = self.frontier.pop_many(room)
            if not batch:
                raise _Stop(AttemptStatus.FAILED, "the search space is exhausted")
            self.waiting = set(batch)
            suggestions = self._generate(batch)
            for node, candidates in zip(batch, suggestions, strict=True):
                self.waiting.discard(node)
                self.expansions += 1
                node.expansions += 1
                self._expand(node, candidates)
            self._release_retired()
            if config.debug:
                self._check_invariants()

    def _generate(self, batch: list[Node]) -> Sequence[Sequence]:
        options = self.options
        if self.feedback:
            options = {**options, "feedback": [list(node.failures or ()) for node in batch]}
        started = time.perf_counter()
        try:
            suggestions = self.generator.generate_batch(
                [node.key for node in batch], self.config.num_sampled_tactics, **options
            )
        except Exception as exc:  # any failure of a model ends this theorem only
            problem = f"the tactic generator failed: {describe_exception(exc)}"
            raise _Stop(AttemptStatus.ERROR, problem) from None
        finally:
            self.model_seconds += time.perf_counter() - started
        if not isinstance(suggestions, list | tuple) or len(suggestions) != len(batch):
            got = len(suggestions) if isinstance(suggestions, list | tuple) else suggestions
            raise _Stop(
                AttemptStatus.ERROR,
                f"the tactic generator returned {excerpt(got)} for {plural(len(batch), 'state')} "
                "(expected a list of ranked tactics for each)",
            )
        return suggestions

    def _expand(self, node: Node, candidates: Sequence) -> None:
        config = self.config
        children: list[Node] = []  # states new to the tree
        reopened: list[Node] = []  # expanded states reached again by a shorter path
        # children at the depth limit are not kept: a proof may still end there, but none goes
        # deeper, and a shorter path found later to the same state must not count as a repeat
        at_limit = config.max_depth is not None and node.depth + 1 >= config.max_depth
        if node.tried is None or node.failures is None:  # both None until the first expansion
            node.tried, node.failures = set(), []
        for tactic, score in _checked(candidates):
            key = collapse_whitespace(tactic)
            if key in node.tried:
                continue
            node.tried.add(key)
            if time.perf_counter() >= self.deadline:
                raise _Stop(AttemptStatus.TIMEOUT, f"no proof within {config.timeout:g} s")
            refusal = forbidden_in_proof(tactic) if self.server.checks_with_lean else None
            if refusal is not None:  # never sent to Lean (run_tac, a declared axiom, ...)
                node.failures.append(Failure(tactic, f"refused: {refusal.reason}"))
                continue
            result = self._lean(self.server.run_tactic, node.state, tactic)
            if isinstance(result, TacticFailed):
                node.failures.append(Failure(tactic, result.error))
            elif isinstance(result, ProofFinished):
                self._finished(node, tactic)
            elif at_limit:  # too deep
                self._retire(self._obtained(result))
            else:
                self._obtained(result)
                existing = self.nodes.get(result.pretty)
                if existing is None:
                    children.append(self._add(node, tactic, score, result))
                elif node.depth + 1 < existing.depth:
                    if self._reopen(existing, node, tactic, score, result):
                        reopened.append(existing)
                else:  # reached already by a path as short
                    self._retire(result)
        if self.progress is not None and children:
            self._guide(node, children)
        opened = children + reopened
        if config.debug:
            log.info(
                "expansion %d (depth %d, priority %.3f): %d new states, %d opened again, "
                "%d tactics failed",
                self.expansions,
                node.depth,
                node.priority,
                len(children),
                len(reopened),
                len(node.failures),
            )
        if opened:
            opened.sort(key=lambda c: -c.priority)
            self.frontier.push_children(opened)
        if (
            not opened
            and node.failures
            and self.feedback
            and node.expansions <= config.feedback_retries
        ):
            self.frontier.push(node)  # asked again, with Lean's errors
        else:
            self._retire(node.state)

    def _add(self, parent: Node, tactic: str, score: float, state: ProofState) -> Node:
        """A new node for ``state``, reached from ``parent`` by ``tactic``."""
        logprob = parent.logprob + score
        child = Node(state, state.pretty, parent, tactic, score, parent.depth + 1, logprob, logprob)
        self.nodes[child.key] = child
        return child

    def _reopen(
        self, node: Node, parent: Node, tactic: str, score: float, state: ProofState
    ) -> bool:
        """Move ``node`` onto the shorter path through ``parent`` (reached again as ``state``)
        and open it again; True when it was expanded already and is to be pushed again, with
        ``state`` as its state."""
        logprob = parent.logprob + score
        node.priority += logprob - node.logprob
        node.parent, node.tactic, node.score = parent, tactic, score
        node.depth, node.logprob = parent.depth + 1, logprob
        node.tried = node.failures = None  # its tactics are run again at the smaller depth
        node.expansions = 0
        if self._is_live(node.state):  # still open: in the frontier or in this batch
            self._retire(state)
            if node not in self.waiting:
                self.frontier.update(node)
            return False
        node.state = state
        return True

    def _guide(self, parent: Node, children: list[Node]) -> None:
        """LeanProgress: priority = log-probability − weight × predicted steps remaining."""
        prefix = "\n".join(parent.path()) or None
        assert self.progress is not None  # called only with a progress model
        started = time.perf_counter()
        try:
            remaining = self.progress.predict_batch(
                [(parent.key, prefix, child.tactic) for child in children]
            )
        except Exception as exc:
            problem = f"the progress model failed: {describe_exception(exc)}"
            raise _Stop(AttemptStatus.ERROR, problem) from None
        finally:
            self.model_seconds += time.perf_counter() - started
        for child, steps in zip(children, remaining, strict=True):
            child.priority = child.logprob - self.config.progress_weight * float(steps)

    def _finished(self, node: Node, tactic: str) -> None:
        """``tactic`` finished the proof from ``node``: the search ends if the proof is
        confirmed (or the server fails), else the tactic counts as failed, with the reason."""
        if time.perf_counter() > self.deadline:  # found too late: not within the budget
            raise _Stop(AttemptStatus.TIMEOUT, f"no proof within {self.config.timeout:g} s")
        started = time.perf_counter()
        verdict = self._confirm([*node.path(), tactic])
        self.deadline += time.perf_counter() - started  # confirming comes on top of the budget
        if verdict.status.found_proof or verdict.status is AttemptStatus.ERROR:
            raise verdict
        assert node.failures is not None  # the node is being expanded
        node.failures.append(Failure(tactic, verdict.error or verdict.status.value))
        self.passed_over = verdict
        if verdict.status is AttemptStatus.REFUSED:
            self.refused = verdict

    # -- confirming a proof found ------------------------------------------------------------

    def _confirm(self, proof: list[str]) -> _Stop:
        """The verdict on a proof found: replayed from a fresh start (``config.recheck``), then,
        on a server that checks with Lean, judged by Lean as a declaration of its own with its
        axioms audited (``leanloop.lean.audit``). ``proved`` (``replayed`` on a server that
        does not check with Lean) when accepted; ``error`` when the server failed or the code
        around the theorem does not elaborate, which ends the search; else why it is not
        accepted (``failed``: it does not replay, or Lean rejected it; ``refused``: the audit
        refused it), and the search goes on."""
        if self.config.recheck:
            try:
                problem = self._replay(proof)
            except LeanError as exc:
                return _Stop(AttemptStatus.ERROR, f"the Lean server failed on the re-check: {exc}")
            if problem is not None:
                return _Stop(
                    AttemptStatus.FAILED, f"the proof found does not replay: {problem}", proof
                )
        if not self.server.checks_with_lean:
            return _Stop(AttemptStatus.REPLAYED, proof=proof)
        audited = self.target.audited_tactics(proof)
        if audited is None:
            return _Stop(
                AttemptStatus.ERROR,
                f"{self.target.label}: its source is unknown, so Lean cannot check the proof",
            )
        policy = self.config.axiom_policy
        try:
            judgement, _ = self._lean(check_declaration, self.server, audited, policy)
        except LeanError as exc:
            return _Stop(AttemptStatus.ERROR, f"the Lean server failed on the check: {exc}")
        status = AttemptStatus.judged(judgement)
        if status is AttemptStatus.PROVED:
            return _Stop(status, proof=proof, axioms=judgement.axioms)
        if status is AttemptStatus.ERROR:
            return _Stop(status, judgement.reason)
        return _Stop(status, f"the proof found, checked by Lean: {judgement.reason}", proof)

    def _replay(self, proof: list[str]) -> str | None:
        """None when ``proof`` finishes from a fresh start of the target, else the problem (a
        failure of the server is raised)."""
        state = self._obtained(self._lean(self.target.start, self.server))
        try:
            for index, tactic in enumerate(proof, 1):
                result = self._lean(self.server.run_tactic, state, tactic)
                if isinstance(result, ProofState):
                    self._retire(state)
                    state = self._obtained(result)
                if isinstance(result, TacticFailed):
                    return f"step {index} ({tactic!r}) failed: {result.error}"
                if isinstance(result, ProofFinished) != (index == len(proof)):
                    return f"step {index} ({tactic!r}) did not end where the search did"
            return None
        finally:
            self._retire(state)

    def _final(self, stop: _Stop) -> _Stop:
        """How the search ended, with the last proof found and not accepted, if any."""
        if stop.status.found_proof or self.passed_over is None:
            return stop
        if self.refused is not None and stop.status in _SEARCH_ENDS:
            refused = self.refused
            return _Stop(
                AttemptStatus.REFUSED,
                f"{refused.error} (the proof: {_shown(refused.proof)}); then {stop.error}",
            )
        last = self.passed_over
        return _Stop(
            stop.status,
            f"{stop.error}; the last proof found ({_shown(last.proof)}) was not accepted: "
            f"{last.error}",
        )

    # -- the ledger of proof states ----------------------------------------------------------

    def _obtained(self, state: ProofState) -> ProofState:
        """``state``, entered in the ledger of states to release."""
        self.live[_handle(state)] = state
        return state

    def _is_live(self, state: ProofState) -> bool:
        return _handle(state) in self.live

    def _retire(self, state: ProofState) -> None:
        """No longer needs ``state``: it is released with the next release (once)."""
        if self.live.pop(_handle(state), None) is not None:
            self.retired.append(state)

    def _release_retired(self) -> None:
        if self.retired:
            states, self.retired = self.retired, []
            self._lean(self.server.release, *states)

    def _release_all(self) -> None:
        """Release every state still in the ledger (none on a server whose process is gone)."""
        states = [*self.retired, *self.live.values()]
        self.retired, self.live = [], {}
        if self.server_failed or not states:  # nothing to tell a server that failed
            return
        try:
            self._lean(self.server.release, *states)
        except LeanError as exc:
            log.warning("could not release %d proof states: %s", len(states), exc)

    # -- helpers -----------------------------------------------------------------------------

    def _lean(self, call, *args):
        started = time.perf_counter()
        try:
            return call(*args)
        except ServerError:  # the process is gone: nothing more to tell it
            self.server_failed = True
            raise
        finally:
            self.lean_seconds += time.perf_counter() - started

    def _check_invariants(self) -> None:
        """The tree's invariants (see ``Node``), and the ledger's: between batches, the open
        nodes' states are exactly the live ones."""
        for key, node in self.nodes.items():
            assert node.key == key == node.state.pretty, key
            parent = node.parent
            if parent is None:
                assert node.depth == 0 and node.logprob == 0.0
                continue
            assert self.nodes.get(parent.key) is parent, "parent outside the tree"
            assert node.depth >= parent.depth + 1, key
            assert len(node.path()) <= node.depth, key
            if node.depth == parent.depth + 1:  # on the path it was last reached by
                assert math.isclose(node.logprob, parent.logprob + node.score, abs_tol=1e-9)
                assert parent.tried is not None
                assert collapse_whitespace(node.tactic or "") in parent.tried
        assert not self.retired and len(self.live) == len(self.frontier)
        states = {_handle(node.state) for node in self.nodes.values()}
        assert set(self.live) <= states, "a live state outside the tree"


def _handle(state: ProofState) -> tuple[int, int, int]:
    """What tells one proof state of a server from another."""
    return (state.owner, state.generation, state.id)


def _shown(proof: Sequence[str]) -> str:
    """A proof on one line, its tactics separated by semicolons."""
    return excerpt("; ".join(collapse_whitespace(t) for t in proof))


def _checked(candidates: Sequence) -> list[tuple[str, float]]:
    """The candidates as (tactic, finite score) pairs; anything else ends the search."""
    if not isinstance(candidates, list | tuple):
        raise _Stop(
            AttemptStatus.ERROR,
            f"the tactic generator returned {excerpt(repr(candidates))} for a state "
            "(expected a list of (tactic, score))",
        )
    checked = []
    for candidate in candidates:
        try:
            tactic, score = candidate
            score = float(score)
            valid = isinstance(tactic, str) and not math.isnan(score)
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise _Stop(
                AttemptStatus.ERROR,
                f"the tactic generator returned {excerpt(repr(candidate))} "
                "(expected (tactic, score))",
            )
        if tactic.strip():
            checked.append((tactic, score))
    return checked


def describe_exception(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {excerpt(text)}" if text else type(exc).__name__


def excerpt(value: object, limit: int = 200) -> str:
    """``value`` (its repr unless a string) cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
