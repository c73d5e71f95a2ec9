"""Read a pretty-printed proof state (hypotheses, then ``⊢ target``) back into Lean source that
recreates it, e.g. ``example (x : ℕ) (h : 0 < x) : x ≠ 0 := by sorry``.

Let-bound hypotheses (``x : ℕ := 5``) cannot be binders of a declaration, so they keep their
value by moving into the statement: from the first let-bound hypothesis on, every hypothesis
becomes part of a telescope in front of the target, and the proof starts by introducing it
again. For ``x : ℕ := 5`` then ``h : 0 < x`` and ``⊢ x = 5``::

    example : let x : ℕ := (5); ∀ (h : 0 < x), x = 5 := by intro x h; sorry

After the ``intro`` the context has ``x : ℕ := 5`` (a let-bound local, so ``rfl`` still sees
through ``x``) and ``h : 0 < x``, and the goal is ``x = 5``: the original state. Hypotheses
before the first let-bound one stay binders of the declaration, as in a state without lets."""

from __future__ import annotations

import re
from dataclasses import dataclass

from leanloop.lean.scanner import TERM_BINDERS

_INACCESSIBLE = re.compile(r"✝[⁰¹²³⁴⁵⁶⁷⁸⁹]*")
_NAMES = re.compile(r"^[^\s:()\[\]{}⟨⟩⦃⦄,]+(?: [^\s:()\[\]{}⟨⟩⦃⦄,]+)*$")
_OPEN = "([{⟨⦃"
_CLOSE = ")]}⟩⦄"
# term-level binders whose ``:=`` belongs to them, not to a let-bound hypothesis
_LET_KEYWORD = re.compile(
    r"(?<![\w.'])(?:" + "|".join(sorted(TERM_BINDERS, key=len, reverse=True)) + r")(?![\w.'!?])"
)


@dataclass(frozen=True)
class Hypothesis:
    names: tuple[str, ...]
    type: str
    value: str | None = None


@dataclass(frozen=True)
class Goal:
    case: str | None
    hypotheses: tuple[Hypothesis, ...]
    target: str


@dataclass(frozen=True)
class Statement:
    """A goal as a declaration: ``binders`` go before the colon, ``target`` after it (with the
    telescope of let-bound and later hypotheses in front), and the proof must first
    ``intro`` the names in ``intros`` (``_`` for an anonymous instance) to reach the goal."""

    binders: tuple[str, ...]
    target: str
    intros: tuple[str, ...] = ()


def first_goal(state: str) -> str:
    """The main goal of a state whose goals are separated by blank lines."""
    return state.strip().split("\n\n")[0]


def split_value(text: str) -> tuple[str, str | None]:
    """Split ``type := value`` at its first ``:=`` outside any bracket (``()[]{}⟨⟩⦃⦄``) that
    does not belong to a ``let``/``have`` inside the type; ``(text, None)`` when there is none."""
    depth = 0
    pending = 0  # let/have at depth 0 still waiting for their ``:=``
    index = 0
    while index < len(text):
        char = text[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0:
            if text.startswith(" := ", index):
                if not pending:
                    return text[:index].strip(), text[index + len(" := ") :].strip()
                pending -= 1
            elif keyword := _LET_KEYWORD.match(text, index):
                pending += 1
                index = keyword.end()
                continue
        index += 1
    return text.strip(), None


def _starts_hypothesis(line: str) -> bool:
    """``names : type`` (or ``names :`` with the type wrapped onto the next lines)."""
    if not line or line[:1].isspace():
        return False
    head, sep, _ = line.partition(" : ")
    if sep:
        return bool(_NAMES.match(head))
    stripped = line.rstrip()
    return stripped.endswith(" :") and bool(_NAMES.match(stripped[:-2]))


def parse_goal(text: str) -> Goal:
    """Split one goal into its case tag, hypotheses and target; a line that does not start a
    hypothesis continues the previous one (long types wrap onto indented lines, and a long
    hypothesis may put its whole type there, after a line ``name :``)."""
    lines = first_goal(text).split("\n")
    case = None
    if lines and lines[0].startswith("case "):
        case = lines[0][len("case ") :].strip()
        lines = lines[1:]
    entries: list[list[str]] = []
    target: list[str] | None = None
    for line in lines:
        if line.startswith("⊢"):
            target = [line[1:].strip()]
            continue
        if target is not None:
            target.append(line.strip())
            continue
        if _starts_hypothesis(line):
            entries.append([line.strip()])
        elif entries:
            entries[-1].append(line.strip())
    if target is None:
        raise ValueError("not a proof state: no line starts with ⊢")
    hypotheses = []
    for entry in entries:
        joined = " ".join(part for part in entry if part)
        head, _, rest = joined.partition(" :")
        typ, value = split_value(rest)
        hypotheses.append(Hypothesis(tuple(head.split()), typ, value))
    return Goal(case, tuple(hypotheses), " ".join(part for part in target if part))


def goal_statement(goal: Goal, *, implicit: bool = False) -> Statement:
    """The declaration recreating ``goal``: inaccessible names (``n✝``) get fresh names,
    anonymous instances (``inst✝ : Foo α``) become ``[Foo α]``, and let-bound hypotheses keep
    their values through a ``let`` telescope that the proof introduces (see the module doc).
    ``implicit`` makes the declaration's binders ``{x : T}``; the telescope's ``∀`` binders stay
    explicit, which makes no difference once they are introduced."""
    renames: dict[str, str] = {}
    taken = {n for h in goal.hypotheses for n in h.names if "✝" not in n}

    def fresh(name: str) -> str:
        base = _INACCESSIBLE.sub("", name) or "x"
        index = 1
        while f"{base}_{index}" in taken:
            index += 1
        taken.add(f"{base}_{index}")
        return f"{base}_{index}"

    def rename(text: str) -> str:
        for old, new in renames.items():
            text = re.sub(rf"(?<![\w.']){re.escape(old)}(?![\w'⁰¹²³⁴⁵⁶⁷⁸⁹])", new, text)
        return text

    def accessible(names: tuple[str, ...]) -> list[str]:
        result = []
        for name in names:
            if "✝" in name:
                renames[name] = fresh(name)
                name = renames[name]
            result.append(name)
        return result

    first_let = next((i for i, h in enumerate(goal.hypotheses) if h.value is not None), None)
    split = len(goal.hypotheses) if first_let is None else first_let
    binders: list[str] = []
    open_, close = ("{", "}") if implicit else ("(", ")")
    for hypothesis in goal.hypotheses[:split]:
        typ = rename(hypothesis.type)
        if all(n.startswith("inst✝") for n in hypothesis.names):
            binders.extend(f"[{typ}]" for _ in hypothesis.names)
            continue
        binders.append(f"{open_}{' '.join(accessible(hypothesis.names))} : {typ}{close}")

    telescope: list[str] = []  # ``let x : T := (v);`` and ``∀ (a : A) [B],`` pieces
    foralls: list[str] = []
    intros: list[str] = []

    def close_foralls() -> None:
        if foralls:
            telescope.append(f"∀ {' '.join(foralls)},")
            foralls.clear()

    for hypothesis in goal.hypotheses[split:]:
        typ = rename(hypothesis.type)
        if hypothesis.value is not None:
            close_foralls()
            value = rename(hypothesis.value)
            for name in accessible(hypothesis.names):
                telescope.append(f"let {name} : {typ} := ({value});")
                intros.append(name)
        elif all(n.startswith("inst✝") for n in hypothesis.names):
            foralls.extend(f"[{typ}]" for _ in hypothesis.names)
            intros.extend("_" for _ in hypothesis.names)
        else:
            names = accessible(hypothesis.names)
            foralls.append(f"({' '.join(names)} : {typ})")
            intros.extend(names)
    close_foralls()
    target = " ".join([*telescope, rename(goal.target)])
    return Statement(tuple(binders), target, tuple(intros))


def goal_binders(goal: Goal, *, implicit: bool = False) -> tuple[list[str], str]:
    """Binders recreating the hypotheses, and the target (with the telescope of let-bound
    hypotheses in front: see ``goal_statement`` for what the proof must introduce)."""
    statement = goal_statement(goal, implicit=implicit)
    return list(statement.binders), statement.target


def with_intros(proof: str, intros: tuple[str, ...] | list[str]) -> str:
    """``proof`` preceded by ``intro`` of ``intros``: spliced into a one-line ``by`` block
    (``by intro x h; sorry``), otherwise run by ``exact (proof)`` after the ``intro``."""
    if not intros:
        return proof
    intro = f"intro {' '.join(intros)}"
    body = proof.strip()
    if body.startswith("by") and body[2:3].isspace() and "\n" not in body:
        return f"by {intro}; {body[2:].strip()}"
    return f"by {intro}; exact ({body})"


def goal_to_source(
    state: str,
    *,
    declaration: str = "example",
    implicit: bool = False,
    proof: str = "by sorry",
) -> str:
    """Lean source stating the main goal of ``state``, e.g. for a proof to start from; the
    proof's first goal is that main goal (after introducing any let-bound hypotheses)."""
    statement = goal_statement(parse_goal(state), implicit=implicit)
    head = " ".join([declaration, *statement.binders])
    return f"{head} : {statement.target} := {with_intros(proof, statement.intros)}"
