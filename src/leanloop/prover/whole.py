"""Whole-proof mode: a model writes complete proofs (the body of the theorem's ``by`` block), each
is checked (with ``LeanServer.check`` on a Lean server, replayed tactic by tactic on a replay
server) and the first one accepted is the result; an unchecked proof is never reported."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence

from leanloop.data.prompt import PromptFormat
from leanloop.data.records import AttemptStatus
from leanloop.lean.audit import check_declaration
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.errors import LeanError
from leanloop.lean.screen import forbidden_in_proof, screen_candidate
from leanloop.lean.server import LeanServer, ProofFinished, ProofState, TacticFailed
from leanloop.prover.result import SearchResult
from leanloop.prover.target import Target

WHOLE_PROOF_SYSTEM_PROMPT = (
    "You are an expert in the Lean 4 theorem prover. You are given a theorem whose statement "
    "ends with ':= by'. Reply with the complete tactic proof that follows 'by': one tactic per "
    "line, with Lean's indentation, without the statement. Do not use sorry or admit. Reply "
    "with the proof only."
)


class WholeProofFormat(PromptFormat):
    """The prompt format of whole-proof mode: the statement in, the proof's body out (a reply
    that restates the statement before its proof loses that line)."""

    system: str = WHOLE_PROOF_SYSTEM_PROMPT

    def parse(self, generated: str) -> str | None:
        proof = super().parse(generated)
        if proof is None:
            return None
        lines = proof.splitlines()
        if lines and lines[0].rstrip().endswith(":= by"):
            proof = textwrap.dedent("\n".join(lines[1:])).strip()
        return proof or None


def split_tactics(proof: str) -> list[str]:
    """The tactics of a proof body, in order: a line at the body's indentation starts a tactic,
    a line indented further continues the one before (its block, or a wrapped term)."""
    lines = [line.rstrip() for line in textwrap.dedent(proof).splitlines()]
    tactics: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        if line[0].isspace() and tactics:
            tactics[-1] += "\n" + line
        else:
            tactics.append(line)
    return tactics


def check_whole_proofs(
    server: LeanServer,
    target: Target,
    candidates: Sequence[str],
    *,
    timeout: float,
    policy: AxiomPolicy | None = None,
) -> SearchResult:
    """The first candidate accepted: ``proved`` when Lean accepted the theorem with it and its
    axioms passed ``policy`` (default: the standard allow-list), or, on a replay server,
    ``replayed`` (its tactics replayed to the end). Each candidate is screened first (a
    declared axiom, a changed statement, ... is refused without asking Lean). ``refused`` when
    none was accepted and at least one was refused; ``failed`` when none was accepted
    otherwise; ``timeout`` when ``timeout`` seconds pass first; ``error`` when the server fails
    or the code around the theorem does not elaborate."""
    policy = policy or AxiomPolicy()
    started = time.perf_counter()
    lean_seconds = 0.0
    checked = 0
    status, error, axioms = AttemptStatus.FAILED, None, None
    proof: tuple[str, ...] | None = None
    rejected: list[str] = []
    refused: list[str] = []
    statement = target.statement().removesuffix(":= by").rstrip()
    for candidate in candidates:
        if time.perf_counter() - started >= timeout:
            status, error = AttemptStatus.TIMEOUT, f"no proof accepted within {timeout:g} s"
            break
        checked += 1
        screened = screen_candidate(candidate, statement)
        refusal = screened.refusal
        if refusal is None and screened.body is not None:
            refusal = forbidden_in_proof(screened.body)  # the proof may not leave its block
        if refusal is not None or screened.body is None:
            refused.append(refusal.reason if refusal is not None else "empty")
            continue
        body = screened.body
        before = time.perf_counter()
        try:
            if server.checks_with_lean:
                audited = target.audited(body)
                if audited is None:
                    status = AttemptStatus.ERROR
                    error = f"{target.label}: its source is unknown, so no proof can be checked"
                    break
                judgement, _ = check_declaration(server, audited, policy)
                judged = AttemptStatus.judged(judgement)
                if judged is AttemptStatus.ERROR:
                    status, error = judged, judgement.reason
                    break
                if judged is AttemptStatus.PROVED:
                    status, proof, axioms = judged, (body,), judgement.axioms
                    break
                (refused if judged is AttemptStatus.REFUSED else rejected).append(judgement.reason)
            else:
                tactics = split_tactics(body)
                problem = _replay(server, target, tactics)
                if problem is None:
                    status, proof = AttemptStatus.REPLAYED, tuple(tactics)
                    break
                rejected.append(problem)
        except LeanError as exc:
            status, error = AttemptStatus.ERROR, f"the Lean server failed: {exc}"
            break
        finally:
            lean_seconds += time.perf_counter() - before
    if status is AttemptStatus.FAILED:
        if refused:
            status = AttemptStatus.REFUSED
        error = _none_accepted(checked, refused, rejected)
    return SearchResult(
        target=target.label,
        status=status,
        proof=proof,
        error=error,
        expansions=checked,
        seconds=time.perf_counter() - started,
        lean_seconds=lean_seconds,
        axioms=axioms,
    )


def _none_accepted(checked: int, refused: list[str], rejected: list[str]) -> str:
    parts = []
    if refused:
        parts.append(f"{len(refused)} refused (the first: {refused[0]})")
    if rejected:
        parts.append(f"{len(rejected)} rejected (the first: {rejected[0]})")
    detail = f": {'; '.join(parts)}" if parts else ""
    return f"none of {checked} candidate proofs was accepted{detail}"


def _replay(server: LeanServer, target: Target, tactics: list[str]) -> str | None:
    """None when ``tactics`` finish the proof from its first state, else the problem."""
    if not tactics:
        return "the proof is empty"
    state = target.start(server)
    try:
        for index, tactic in enumerate(tactics, 1):
            result = server.run_tactic(state, tactic)
            if isinstance(result, TacticFailed):
                return f"step {index} ({tactic!r}) failed: {result.error}"
            if isinstance(result, ProofFinished):
                return None if index == len(tactics) else f"step {index} ends the proof early"
            server.release(state)
            state = result
        assert isinstance(state, ProofState)
        left = len(state.goals)
        return f"{left} goal{'' if left == 1 else 's'} left after the last step"
    finally:
        server.release(state)
