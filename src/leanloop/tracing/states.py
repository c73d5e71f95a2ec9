"""The state after each tactic step, derived from the tactic blocks of the source: Lean's REPL
reports only the state before each step.

A step followed by the next step of the same block leads into that step's state before; the
last step of a block that must close its goal (a ``by`` block, a ``·`` block, a ``case ... =>``)
leaves ``no goals``, as LeanDojo records it, although the proof may go on outside the block.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

from leanloop.data.records import NO_GOALS
from leanloop.lean.elaboration import TacticStep
from leanloop.lean.lexer import Kind, Token, tokenize

#: Tokens that open a block which must close its goals: a ``by`` block, a ``·`` (or ``.``)
#: focusing block, the ``=>`` of ``case``, ``next``, ``induction ... with`` alternatives, ``match``,
#: the branches of the ``if ... then ... else`` tactic (``by`` blocks once expanded).
_CLOSING_OPENERS = frozenset({"by", "·", ".", "=>", "then", "else"})
#: Tactics whose ``=>`` block may leave goals (they stay goals of the enclosing block).
_OPEN_ARROW_TACTICS = frozenset({"case'", "on_goal"})
#: What may stand between two tactics of one sequence besides whitespace and comments.
_SEQUENCE_SEPARATORS = frozenset({";", "<;>"})
_CDOTS = frozenset({"·", "."})


@lru_cache(maxsize=4)
def _source_tokens(source: str) -> tuple[tuple[Token, ...], tuple[int, ...], tuple[int, ...]]:
    """The tokens of ``source`` without comments, their start offsets, and the line offsets."""
    tokens = tuple(
        t for t in tokenize(source) if t.kind not in (Kind.COMMENT, Kind.DOC, Kind.MODDOC)
    )
    lines = [0]
    lines.extend(i + 1 for i, char in enumerate(source) if char == "\n")
    return tokens, tuple(t.start for t in tokens), tuple(lines)


@dataclass(frozen=True)
class _Item:
    """A tactic step, or a ``·`` block (which Lean's REPL does not report), in the source."""

    start: int  # offsets in the source
    end: int
    column: int
    step: int | None  # the index of the step; None for a `·` block
    head: int | None = None  # the first step of a `·` block


def _closes_its_goals(opener: str, enclosing: TacticStep | None) -> bool:
    """Whether the block a token opens must close its goals (as Lean checks)."""
    if opener == "=>" and enclosing is not None:
        head = enclosing.tactic.split(maxsplit=1)
        return not head or head[0] not in _OPEN_ARROW_TACTICS
    return opener in _CLOSING_OPENERS


def _block_items(steps: list[TacticStep], source: str) -> list[_Item]:
    """The steps and the ``·`` blocks around them, outer ones first at one position. A ``·``
    block runs to the last step before the next line starting at or left of its ``·``, within
    the step around it."""
    tokens, starts, lines = _source_tokens(source)

    def offset(line: int, column: int) -> int:
        return lines[line - 1] + column if 0 < line <= len(lines) else len(source)

    items = [
        _Item(offset(s.line, s.column), offset(s.end_line, s.end_column), s.column, i)
        for i, s in enumerate(steps)
    ]
    heads: dict[int, int | None] = {}
    for item in sorted(items, key=lambda i: (i.start, -i.end), reverse=True):
        heads[item.start] = item.step  # the outermost step starting there
    if not items:
        return items
    first = bisect.bisect_left(starts, min(i.start for i in items))
    last = bisect.bisect_left(starts, max(i.end for i in items))
    cdots = []
    for index in range(max(first - 1, 0), min(last, len(tokens) - 1)):
        token, following = tokens[index], tokens[index + 1]
        if token.text not in _CDOTS or following.start not in heads:
            continue
        around = [i.end for i in items if i.start < token.start < i.end]
        limit = min(around, default=len(source))
        end = index + 1
        while end < len(tokens) and tokens[end].start < limit:
            if tokens[end].line_start and tokens[end].column <= token.column:
                break
            end += 1
        stop = tokens[end].start if end < len(tokens) else len(source)
        inside = [i.end for i in items if token.start < i.start < stop]
        if inside:
            cdots.append(
                _Item(token.start, max(inside), token.column, None, heads[following.start])
            )
    return sorted(items + cdots, key=lambda i: (i.start, -i.end))


def states_after(steps: list[TacticStep], source: str) -> list[str]:
    """The state after each step (``steps`` in source order, as
    :func:`~leanloop.tracing.records.steps_of` gives them; positions refer to ``source``), as
    LeanDojo records it: Lean's goals after the tactic within its tactic block.

    Inside a block the state after a step is the state before the next item of the same block:
    the next step (or ``·`` block) that starts after it ends, if it lies in the same enclosing
    step (or ``·`` block) and nothing but whitespace, comments, ``;`` or ``<;>`` stands between
    them, on the block's column when it starts a new line. Before ``·`` blocks that state is
    the goals the blocks start from, then the goals left for the step after them.

    Otherwise the step is the last of its block. A block opened by ``by``, ``·``, or the ``=>``
    of ``case``/``next``/an alternative must close its goal, so its last step leaves
    ``no goals`` (LeanDojo's data records exactly that, e.g. for the last tactic of a
    ``have ... := by`` block, or of a ``·`` block while other goals remain outside); the last
    step of any other block (``try``, ``classical``, ``first``, ...) leaves what its enclosing
    step leaves, and the last step of the proof ``no goals``.
    """
    tokens, starts, _ = _source_tokens(source)
    items = _block_items(steps, source)
    count = len(items)

    def encloses(outer: _Item, inner: _Item) -> bool:
        return (
            outer.start <= inner.start
            and inner.end <= outer.end
            and (outer.start, outer.end) != (inner.start, inner.end)
        )

    enclosing: list[int | None] = [
        next((j for j in range(i - 1, -1, -1) if encloses(items[j], items[i])), None)
        for i in range(count)
    ]
    following: list[int | None] = [
        next((k for k in range(i + 1, count) if items[k].start >= items[i].end), None)
        for i in range(count)
    ]
    first = list(range(count))  # the first item of each item's block
    continues = [False] * count
    for i, item in enumerate(items):
        k = following[i]
        if k is None or enclosing[k] != enclosing[i]:
            continue
        gap = tokens[
            bisect.bisect_left(starts, item.end) : bisect.bisect_left(starts, items[k].start)
        ]
        if any(t.text not in _SEQUENCE_SEPARATORS for t in gap):
            continue  # e.g. the `by` of the next calc step, a `case ... =>`
        new_line = "\n" in source[item.end : items[k].start]
        if not gap and new_line and items[k].column != items[first[i]].column:
            continue  # a line at another column: the block ended
        continues[i] = True
        first[k] = first[i]

    def steps_before(k: int | None) -> str:
        """The goals before item ``k``: before ``·`` blocks, the goal each starts from and then
        the goals left for the step after them."""
        goals = []
        while k is not None and items[k].step is None:
            head = items[k].head
            assert head is not None  # a `·` block knows its first step
            goals.append(steps[head].goals_before)
            k = following[k] if continues[k] else None
        step = None if k is None else items[k].step  # None only when k is
        if step is not None and (not goals or steps[step].goals_before != NO_GOALS):
            goals.append(steps[step].goals_before)
        return "\n\n".join(goals)

    after: dict[int, str] = {}

    def state_after(i: int) -> str:
        if i in after:
            return after[i]
        k = following[i]
        if continues[i] and k is not None:
            state = steps_before(k)
        else:
            opener = bisect.bisect_left(starts, items[first[i]].start)
            token = tokens[opener - 1].text if opener else ""
            outer = enclosing[i]
            outer_step = None if outer is None else items[outer].step
            if _closes_its_goals(token, None if outer_step is None else steps[outer_step]):
                state = NO_GOALS
            elif outer is None:  # a block Lean does not report, e.g. `(...)`, or the proof's end
                state = NO_GOALS if k is None else steps_before(k)
            elif outer_step is None:
                state = NO_GOALS  # the last step within a `·` block
            else:
                state = state_after(outer)
        after[i] = state
        return state

    by_step = {item.step: i for i, item in enumerate(items) if item.step is not None}
    return [state_after(by_step[i]) for i in range(len(steps))]
