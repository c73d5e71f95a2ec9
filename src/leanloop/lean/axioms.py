"""Lean's answer to ``#print axioms NAME`` read into an ``AxiomReport``, and the axiom audit
(``AxiomPolicy.judge``) that decides whether a proof resting on those axioms counts."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from leanloop.lean.server import LeanMessage

#: The axioms of Lean's logic that Mathlib itself uses: the default allow-list.
STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
#: The axiom every ``sorry`` (written, or left by an error) stands for: never allowed.
SORRY_AXIOM = "sorryAx"
#: Lean's own axioms that make compiled code part of what is trusted: ``Lean.ofReduceBool`` and
#: ``Lean.ofReduceNat`` (the kernel evaluates ``Lean.reduceBool`` / ``Lean.reduceNat`` with
#: compiled code) and ``Lean.trustCompiler`` (added to the proofs of ``native_decide`` from
#: about Lean 4.22).
NATIVE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.ofReduceNat", "Lean.trustCompiler"})
#: The tactic names Lean's ``Lean.Meta.nativeEqTrue`` is called with: ``native_decide``,
#: ``decide`` (``decide +native``) and ``bv_decide`` (all of its variants).
NATIVE_TACTICS = frozenset({"native_decide", "decide", "bv_decide"})

# One part of a name as Lean prints it: «escaped» or a run of characters that holds no blank,
# dot, comma, bracket or guillemet (identifiers, numeric parts of private names, primes).
_PART = r"(?:«[^»]*»|[^\s.,\[\]«»]+)"
_NAME = rf"{_PART}(?:\.{_PART})*"
_DEPENDS = re.compile(rf"'({_NAME})' depends on axioms: \[({_NAME}(?:,\s+{_NAME})*)\]")
_NO_AXIOMS = re.compile(rf"'({_NAME})' does not depend on any axioms")
_LISTED = re.compile(_NAME)
# The last part of a per-use native axiom: `ax` and the generator's indices, each from 1.
_NATIVE_INDEX = re.compile(r"ax(?:_[1-9][0-9]*)+")
_NAME_PARTS = re.compile(r"«[^»]*»|[^.«»]+")


@dataclass(frozen=True)
class AxiomReport:
    """What Lean printed for ``#print axioms NAME``: the declaration's name as Lean wrote it and
    the axioms it depends on (a set: Lean's order changed between versions)."""

    name: str
    axioms: frozenset[str]


def parse_axioms(text: str) -> AxiomReport | None:
    """The report in one message Lean printed for ``#print axioms``, or None when ``text`` is
    not one: ``'NAME' depends on axioms: [a, b, ...]`` (the list may wrap after a comma) or
    ``'NAME' does not depend on any axioms``; the whole text must be that sentence."""
    text = text.strip()
    match = _DEPENDS.fullmatch(text)
    if match is not None:
        return AxiomReport(match[1], frozenset(_LISTED.findall(match[2])))
    match = _NO_AXIOMS.fullmatch(text)
    if match is not None:
        return AxiomReport(match[1], frozenset())
    return None


def name_parts(name: str) -> tuple[str, ...]:
    """The parts of a dotted name, ``«»`` taken off and a leading ``_root_`` dropped, so that
    ``Foo.«bar»`` and ``_root_.Foo.bar`` both compare equal to ``Foo.bar``."""
    parts = tuple(part.removeprefix("«").removesuffix("»") for part in _NAME_PARTS.findall(name))
    return parts[1:] if parts[:1] == ("_root_",) else parts


def plain_parts(name: str) -> tuple[str, ...]:
    """``name_parts`` of a name, with the prefix Lean gives private names
    (``_private.<module>.<n>.``) taken off."""
    raw = _NAME_PARTS.findall(name)  # «2024» (a module part) is not the private number
    parts = name_parts(name)
    if parts[:1] == ("_private",) and len(raw) == len(parts):
        for index in range(1, len(raw)):
            if raw[index].isdigit():
                return parts[index + 1 :]
    return parts


def same_name(printed: str, full_name: str) -> bool:
    """Whether the name Lean printed is the declaration ``full_name`` (a private declaration
    prints with its private prefix)."""
    return plain_parts(printed) == plain_parts(full_name)


def find_axiom_report(
    messages: Iterable[LeanMessage], name: str | None = None, line: int | None = None
) -> AxiomReport | None:
    """The axiom report among Lean's ``messages`` (``LeanMessage``s; only ``info`` ones count)
    for the declaration ``name`` (compared as full names, a private prefix aside) and/or
    printed at ``line``: the only one there is, None when there is none or more than one (a
    second report where one is expected can only come from the code under audit)."""
    wanted = plain_parts(name) if name is not None else None
    found: list[AxiomReport] = []
    for message in messages:
        if message.severity not in ("info", "information"):
            continue
        if line is not None and message.line != line:
            continue
        report = parse_axioms(message.text)
        if report is None:
            continue
        if wanted is not None and plain_parts(report.name) != wanted:
            continue
        found.append(report)
    return found[0] if len(found) == 1 else None


def is_native_axiom(name: str) -> bool:
    """Whether axiom ``name`` stands for code run natively rather than checked by the kernel.

    Exactly two shapes count:

    - Lean's own ``Lean.ofReduceBool``, ``Lean.ofReduceNat`` and ``Lean.trustCompiler``
      (written in full: a shortened ``ofReduceBool`` printed under ``open Lean`` does not count);
    - the axiom Lean (from about 4.29) adds for each use of a native tactic, named by
      ``mkAuxDeclName (`_native ++ TACTIC ++ `ax)`` under the declaration using it:
      ``DECL._native.TACTIC.ax_N`` or ``..._N_M``, where ``DECL`` is a non-empty name (it may
      be private, ``_private.Mod.0.DECL``), ``TACTIC`` is one of ``native_decide``,
      ``decide`` (what ``decide +native`` passes) and ``bv_decide``, and the last part is
      ``ax`` followed by one or more ``_<index>`` (indices from 1). Any other name with
      ``_native`` in it is not native.

    The name alone cannot show that Lean made the axiom: a file can declare
    ``axiom foo._native.native_decide.ax_1 : False``. Candidates that declare axioms are refused
    before Lean sees them (``leanloop.lean.screen``), and ``allow_native`` is off by default.
    """
    if name in NATIVE_AXIOMS:
        return True
    parts = name_parts(name)
    return (
        len(parts) >= 4
        and parts[-3] == "_native"
        and parts[-2] in NATIVE_TACTICS
        and _NATIVE_INDEX.fullmatch(parts[-1]) is not None
    )


@dataclass(frozen=True)
class AxiomAudit:
    """The audit's decision on one declaration: whether it passed, the axioms it depends on and
    those refused (both sorted), and a one-line reason when it did not pass (else empty)."""

    passed: bool
    axioms: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    reason: str = ""

    @classmethod
    def missing(cls, name: str) -> AxiomAudit:
        """The audit when Lean printed no axiom report for ``name``: not passed."""
        return cls(False, reason=f"Lean printed no axiom report for {name}")


class AxiomPolicy(BaseModel):
    """Which axioms a proof may depend on: the names on ``allowed`` (as Lean prints them at top
    level; a native axiom named there passes too) and, when ``allow_native`` is on, every axiom
    ``is_native_axiom`` recognises. ``sorryAx`` is refused whatever ``allowed`` says."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: frozenset[str] = Field(
        default=STANDARD_AXIOMS,
        description="Axioms a proof may depend on, compared with the full names Lean prints "
        "(choice printed under 'open Classical' is not Classical.choice).",
    )
    allow_native: bool = Field(
        default=False,
        description="Also accept the axioms of native code (native_decide, decide +native, "
        "bv_decide): the compiler is then trusted.",
    )

    @property
    def tag(self) -> str:
        """The policy in a default run name ('' for the standard one), so that a rerun under
        another policy does not skip what the first one refused."""
        parts = []
        if self.allow_native:
            parts.append("native")
        if self.allowed != STANDARD_AXIOMS:
            parts.append("+".join(sorted(self.allowed)) or "none")
        return f"axioms={','.join(parts)}" if parts else ""

    def judge(self, report: AxiomReport) -> AxiomAudit:
        """The audit of ``report``: passed when every axiom is allowed."""
        axioms = tuple(sorted(report.axioms))
        sorry = [a for a in axioms if a == SORRY_AXIOM]
        allowed = self.allowed - {SORRY_AXIOM}
        native = [
            a for a in axioms if a not in allowed and not self.allow_native and is_native_axiom(a)
        ]
        foreign = [
            a for a in axioms if a != SORRY_AXIOM and a not in allowed and not is_native_axiom(a)
        ]
        reasons = []
        if sorry:
            reasons.append(f"uses {SORRY_AXIOM} (a sorry)")
        if native:
            reasons.append(
                f"uses {', '.join(native)} (native code, trusted compiler; allow_native is off)"
            )
        if foreign:
            short = [a for a in foreign if any(b.endswith(f".{a}") for b in allowed)]
            hint = f"; {', '.join(short)} printed shortened? ask at top level" if short else ""
            reasons.append(f"uses {', '.join(foreign)} (not on the allow-list{hint})")
        refused = tuple(sorted({*sorry, *native, *foreign}))
        return AxiomAudit(not refused, axioms, refused, "; ".join(reasons))
