"""Typed records for what leanloop knows about a Lean project: repositories, files, premises,
theorems and the tactics of their proofs."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from leanloop.lean.audit import Judgement

#: The proof state LeanDojo records after a tactic that closed every goal.
NO_GOALS = "no goals"

_PREMISE_MARK = re.compile(r"</?a>")
_SORRY = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")


#: The largest line or column a database column of positions holds (a 32-bit integer).
MAX_POSITION = 2**31 - 1
_Coordinate = Annotated[int, Field(ge=0, le=MAX_POSITION)]


class Pos(NamedTuple):
    """A position in a Lean source file: 1-based line, column as Lean reports it (each checked
    to lie in 0..2**31-1 when a record is validated)."""

    line: _Coordinate
    column: _Coordinate

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PremiseRef(_Record):
    """A premise used by a tactic: where it is defined.

    Attributes:
        full_name: The premise's full Lean name.
        def_path: The file that defines it.
        def_pos: Where its definition starts.
        def_end_pos: Where its definition ends.
    """

    full_name: str
    def_path: str
    def_pos: Pos
    def_end_pos: Pos


class AnnotatedTactic(_Record):
    """A tactic's text with ``<a>name</a>`` marks around premise uses, and the premises marked.

    LeanDojo stores it as the pair ``[text, [premise, ...]]``; that form is accepted too.

    Attributes:
        text: The tactic with ``<a>name</a>`` around each premise it uses.
        premises: The premises marked, in order.
    """

    text: str
    premises: tuple[PremiseRef, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _from_pair(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            if len(value) != 2:
                raise ValueError("expected a pair [annotated text, [premise, ...]]")
            return {"text": value[0], "premises": value[1]}
        return value

    @property
    def plain_text(self) -> str:
        """The text with the premise marks removed."""
        return strip_premise_marks(self.text)


class TracedTactic(_Record):
    """One step of a traced proof: the tactic, the premises it used and the states around it.

    Attributes:
        tactic: The tactic as written.
        annotated_tactic: The tactic with its premises marked (default: ``tactic``, no
            premises).
        state_before: The pretty-printed proof state before the tactic.
        state_after: The state after it (``no goals`` when it closed the last goal).
    """

    tactic: str
    annotated_tactic: AnnotatedTactic
    state_before: str
    state_after: str

    @model_validator(mode="before")
    @classmethod
    def _default_annotation(cls, value: Any) -> Any:
        if isinstance(value, dict) and "annotated_tactic" not in value and "tactic" in value:
            value = {**value, "annotated_tactic": {"text": value["tactic"], "premises": ()}}
        return value

    @property
    def premises(self) -> tuple[PremiseRef, ...]:
        """The premises the tactic uses."""
        return self.annotated_tactic.premises

    @property
    def closes_goal(self) -> bool:
        """Whether no goals are left after the tactic."""
        return self.state_after == NO_GOALS

    @property
    def is_sorry(self) -> bool:
        """Whether the tactic leaves a hole (``sorry`` or ``admit``)."""
        return is_sorry_tactic(self.tactic)


class TheoremStatus(StrEnum):
    """Whether a proof is complete, still has a ``sorry``, or had one that is now proved."""

    PROVEN = "proven"
    SORRY = "sorry"
    SORRY_PROVED = "sorry_proved"


class Theorem(_Record):
    """A theorem of a repository at a commit, with its traced proof when it has one.

    Attributes:
        url: The repository's git URL (or local path).
        commit: The commit.
        file_path: The file that declares it, relative to the repository.
        full_name: Its full Lean name.
        start: Where its declaration starts.
        end: Where it ends.
        statement: Its statement as written, when known.
        traced_tactics: The steps of its traced proof (empty for a term proof or an
            untraced theorem).
        status: Whether the proof is complete, has a ``sorry``, or had one that is now
            proved.
    """

    url: str
    commit: str
    file_path: str
    full_name: str
    start: Pos
    end: Pos
    statement: str | None = None
    traced_tactics: tuple[TracedTactic, ...] = ()
    status: TheoremStatus = TheoremStatus.PROVEN
    proof: str | None = Field(default=None, description="A verified proof found for a sorry.")

    @field_validator("url", "commit", "full_name", "file_path")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @cached_property
    def premise_names(self) -> tuple[str, ...]:
        """Full names of the premises the proof uses, each once, in order of first use."""
        seen: dict[str, None] = {}
        for tactic in self.traced_tactics:
            for premise in tactic.premises:
                seen.setdefault(premise.full_name, None)
        return tuple(seen)

    @property
    def num_steps(self) -> int:
        """The number of traced proof steps (the curriculum's measure of difficulty)."""
        return len(self.traced_tactics)

    @property
    def key(self) -> TheoremKey:
        """What identifies the theorem across commits of its repository."""
        return TheoremKey(repository_identity(self.url), self.file_path, self.full_name)


class TheoremKey(NamedTuple):
    """What identifies a theorem across commits of its repository."""

    repository: str
    file_path: str
    full_name: str

    def __str__(self) -> str:
        return f"{self.repository}::{self.file_path}::{self.full_name}"


class Premise(_Record):
    """A declaration that proofs can use: where it is and its source code.

    Attributes:
        full_name: Its full Lean name.
        file_path: The file that defines it.
        start: Where its declaration starts.
        end: Where it ends.
        code: Its source code.
        kind: The kind of declaration (``theorem``, ``def``, ...), when known.
    """

    full_name: str
    file_path: str
    start: Pos
    end: Pos
    code: str = ""
    kind: str = ""


class SourceFile(_Record):
    """A Lean source file of a project: its path, the files it imports and its declarations.

    Attributes:
        path: The file's path, relative to the project.
        imports: The paths of the files it imports.
        premises: The declarations it makes.
    """

    path: str
    imports: tuple[str, ...] = ()
    premises: tuple[Premise, ...] = ()


class Repository(_Record):
    """A Lean project at a commit: a git URL (or a local path) and the Lean version it pins.

    Attributes:
        url: The git URL, or a local path.
        commit: The commit.
        lean_version: The Lean version the project pins, when known.
        name: A short name (default: ``owner/repo`` of the URL, or the folder's name).
    """

    url: str
    commit: str
    lean_version: str | None = None
    name: str = ""

    @field_validator("url", "commit")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _default_name(self) -> Repository:
        if not self.name:
            object.__setattr__(self, "name", repository_name(self.url))
        return self

    @property
    def identity(self) -> str:
        """The URL in a canonical form: how commits of one repository are recognised."""
        return repository_identity(self.url)

    def __str__(self) -> str:
        return f"{self.name}@{self.commit[:12]}"


def strip_premise_marks(text: str) -> str:
    """Remove LeanDojo's ``<a>``/``</a>`` premise marks from an annotated tactic."""
    return _PREMISE_MARK.sub("", text)


def is_sorry_tactic(tactic: str) -> bool:
    """Whether a tactic leaves a hole: it uses ``sorry`` or ``admit``."""
    return _SORRY.search(tactic) is not None


@lru_cache(maxsize=1024)
def repository_identity(url: str) -> str:
    """A canonical form of a repository URL: no trailing slash or ``.git``, host in lower case."""
    url = url.strip().rstrip("/")
    if url.endswith(".git"):
        url = url[: -len(".git")]
    if "://" in url:
        scheme, rest = url.split("://", 1)
        host, _, path = rest.partition("/")
        url = f"{scheme.lower()}://{host.lower()}/{path}" if path else f"{scheme}://{host.lower()}"
    return url


def repository_name(url: str) -> str:
    """A short name for a repository: ``owner/repo`` for a URL, the folder name for a path."""
    parts = [p for p in repository_identity(url).replace("\\", "/").split("/") if p]
    if "://" in url and len(parts) >= 3:
        return "/".join(parts[-2:])
    return parts[-1] if parts else url


class AttemptStatus(StrEnum):
    """How an attempt to prove a theorem ended.

    ``proved``: Lean accepted the proof. ``replayed``: the recorded proof was found again in a
    replay of traced data, which no Lean checked (never called proved). ``recorded``: a verdict
    Lean gave earlier on exactly this code accepted it, but its axioms could not be audited
    (never called proved either). ``failed``: the search
    space was exhausted. ``refused``: a proof was found (or offered) but leanloop's soundness
    policy refused it (an axiom outside the allow-list, ``sorryAx``, a screened construct such as
    a declared ``axiom`` or a changed statement), with the reason; nothing else was accepted.
    ``changed``: a benchmark's candidate proof restated the theorem with another statement
    (models do this); refused without asking Lean. ``timeout``, ``budget``: the time or the
    expansion budget ran out. ``error``: the attempt could not go on (a server or generator
    failure), with the reason.
    """

    PROVED = "proved"
    REPLAYED = "replayed"
    RECORDED = "recorded"
    FAILED = "failed"
    REFUSED = "refused"
    CHANGED = "changed"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    ERROR = "error"

    @property
    def found_proof(self) -> bool:
        """Whether the attempt found a proof (``proved``, ``replayed`` or ``recorded``)."""
        return self in (AttemptStatus.PROVED, AttemptStatus.REPLAYED, AttemptStatus.RECORDED)

    @classmethod
    def judged(cls, judgement: Judgement) -> AttemptStatus:
        """How an attempt ends on Lean's judgement of its declaration — the one reading of a
        judgement as an attempt's status, for search, whole proofs, sampling and sorry filling
        alike: accepted and audited is ``proved``; accepted by a verdict whose axioms could not
        be audited is ``recorded``; refused by the soundness policy is ``refused``; code around
        the declaration that does not elaborate is an ``error`` (tried again); rejected (an
        error or a ``sorry`` in the declaration) is ``failed``.

        Args:
            judgement: ``lean.audit.judge``'s judgement.

        Returns:
            The attempt's status.
        """
        from leanloop.lean.audit import Outcome

        if judgement.outcome is Outcome.ACCEPTED:
            return cls.PROVED if judgement.audited else cls.RECORDED
        return {Outcome.REFUSED: cls.REFUSED, Outcome.BROKEN: cls.ERROR}.get(
            judgement.outcome, cls.FAILED
        )


class AttemptOutcome(_Record):
    """How one attempt ended: its status, proof, counts, times, reason and the axioms Lean's
    audit reported — the fields a search's result (``prover.result.SearchResult``) and the
    stored attempt (``ProofAttempt``) share, declared once.

    Attributes:
        status: How the attempt ended.
        proof: The tactics from the first state to the finished proof, or one whole proof.
        expansions: Search nodes expanded.
        tree_size: Distinct proof states in the search tree.
        seconds: Wall-clock seconds the attempt took.
        lean_seconds: Seconds of it spent waiting for Lean.
        model_seconds: Seconds of it spent in the model.
        error: Why it ended so (an ``error``'s or a refusal's reason), or what was found.
        axioms: The axioms Lean's audit reported (None: no audit ran, as in a replay).
    """

    status: AttemptStatus
    proof: tuple[str, ...] | None = Field(
        default=None, description="The tactics, or a whole proof."
    )
    expansions: int = Field(
        default=0, ge=0, description="Nodes expanded (generator calls per node)."
    )
    tree_size: int = Field(default=0, ge=0, description="Distinct proof states in the search tree.")
    seconds: float = Field(default=0.0, ge=0, description="Wall-clock time of the whole attempt.")
    lean_seconds: float = Field(default=0.0, ge=0, description="Time spent waiting for the server.")
    model_seconds: float = Field(default=0.0, ge=0, description="Time spent in the generator.")
    error: str | None = None
    axioms: tuple[str, ...] | None = Field(
        default=None,
        description="The axioms Lean's audit reported the proof depends on (None: no audit "
        "ran, as in a replay).",
    )

    @property
    def found_proof(self) -> bool:
        """Whether a proof was found (proved, replayed or recorded)."""
        return self.status.found_proof


class ProofAttempt(AttemptOutcome):
    """One attempt of a prover on a theorem, as a run records it: where it was (the theorem,
    the run, which attempt) and how it ended (``AttemptOutcome``'s fields).

    Attributes:
        url: The theorem's repository.
        commit: Its commit.
        file_path: Its file.
        full_name: Its full name.
        prover: The prover's name.
    """

    run: str = Field(description="The evaluation run (a rerun of it skips finished theorems).")
    url: str
    commit: str
    file_path: str
    full_name: str
    attempt: int = Field(default=0, ge=0, description="Which attempt on this theorem (for pass@k).")
    prover: str = ""
    environment: Literal["lean", "replay", "recorded"] | None = Field(
        default=None,
        description="Where it ran: 'lean' (a Lean server checked it now), 'replay' (recorded "
        "steps, no Lean) or 'recorded' (a verdict Lean gave earlier on the same code); None for "
        "attempts stored before leanloop recorded it.",
    )
    tokens: int | None = Field(
        default=None, ge=0, description="Tokens the model generated for it (when the model says)."
    )
    worker: str | None = Field(
        default=None,
        description="Where it ran: the host, and the Ray node when it ran on a Ray worker.",
    )

    @property
    def key(self) -> TheoremKey:
        """What identifies the theorem across commits of its repository."""
        return TheoremKey(repository_identity(self.url), self.file_path, self.full_name)
