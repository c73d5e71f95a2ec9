"""Read a pretty-printed proof state (hypotheses, then ``⊢ target``) back into Lean source that
recreates it, e.g. ``example (x : ℕ) (h : 0 < x) : x ≠ 0 := by sorry``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_INACCESSIBLE = re.compile(r"✝[⁰¹²³⁴⁵⁶⁷⁸⁹]*")
_NAMES = re.compile(r"^[^\s:()\[\]{}⟨⟩,]+(?: [^\s:()\[\]{}⟨⟩,]+)*$")


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


def first_goal(state: str) -> str:
    """The main goal of a state whose goals are separated by blank lines."""
    return state.strip().split("\n\n")[0]


def parse_goal(text: str) -> Goal:
    """Split one goal into its case tag, hypotheses and target; a line that does not start a
    hypothesis continues the previous one (long types wrap onto indented lines)."""
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
        head, sep, _ = line.partition(" : ")
        if sep and not line[:1].isspace() and _NAMES.match(head):
            entries.append([line])
        elif entries:
            entries[-1].append(line.strip())
    if target is None:
        raise ValueError("not a proof state: no line starts with ⊢")
    hypotheses = []
    for entry in entries:
        joined = " ".join(part for part in entry if part)
        head, _, rest = joined.partition(" : ")
        typ, assign, value = rest.partition(" := ")
        hypotheses.append(
            Hypothesis(tuple(head.split()), typ.strip(), value.strip() if assign else None)
        )
    return Goal(case, tuple(hypotheses), " ".join(part for part in target if part))


def goal_binders(goal: Goal, *, implicit: bool = False) -> tuple[list[str], str]:
    """Binders recreating the hypotheses, and the target; inaccessible names (``n✝``) get fresh
    names, and anonymous instances (``inst✝ : Foo α``) become ``[Foo α]``."""
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

    binders = []
    open_, close = ("{", "}") if implicit else ("(", ")")
    for hypothesis in goal.hypotheses:
        typ = rename(hypothesis.type)
        if all(n.startswith("inst✝") for n in hypothesis.names):
            binders.extend(f"[{typ}]" for _ in hypothesis.names)
            continue
        names = []
        for name in hypothesis.names:
            if "✝" in name:
                renames[name] = fresh(name)
                name = renames[name]
            names.append(name)
        binders.append(f"{open_}{' '.join(names)} : {typ}{close}")
    return binders, rename(goal.target)


def goal_to_source(
    state: str,
    *,
    declaration: str = "example",
    implicit: bool = False,
    proof: str = "by sorry",
) -> str:
    """Lean source stating the main goal of ``state``, e.g. for a proof to start from."""
    binders, target = goal_binders(parse_goal(state), implicit=implicit)
    head = " ".join([declaration, *binders])
    return f"{head} : {target} := {proof}"
