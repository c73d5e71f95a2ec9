"""Where a declaration's proof (the body after its ``:=``) ends, read from its tokens as Lean 4's
parser reads them, and whether that reading is sure.

Lean's rules (``src/Lean/Parser/Command.lean``, ``Term.lean``, ``Basic.lean``):

- A body ``:= by …`` is the ``by`` block alone (``declBody`` parses it at argument precedence).
  The block's tactics are a ``sepByIndent`` sequence whose position is its first tactic's: a
  next tactic starts a new line at exactly that column (``checkColEq``), and an argument on a
  later line stands right of it (``checkColGt``). A line starting left of that column ends the
  block, hence the proof, unless its first token can continue the last tactic's term (an
  operator, ``at``, ``with``, ...: those check no column).
- After the body come its clauses (``termination_by``, ``decreasing_by``, ``where``,
  ``deriving``), then the next command.
- A command word (a declaration keyword, ``end``, ``run_meta``, ``#eval``, ...) is a keyword
  token that no tactic or term starts with or holds: it ends the block or term it meets, at any
  column and mid-line (``:= sorry #check foo`` is two commands).
- ``open … in`` and ``set_option … in`` are commands, tactics and terms: a tactic or term where
  one may start (at the block's column, after ``by``, ``;``, ``:=``, an operator, ...), else a
  command applied to the command after ``in``.
- A term body continues at any column (top-level commands have no position), but by the usual
  layout a line at or left of the declaration's own column ends it here: ending a span early
  keeps the user's text, which is what the reading is for.

Where the tokens allow both readings (``#check`` is a tactic only where Mathlib is imported;
``open Nat in`` at the block's column before a declaration; a ``#word`` after a finished term)
the proof is taken to end there and the reason is given: a fill refuses such a span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from leanloop.lean.keywords import (
    BODY_CLAUSES,
    COMMAND_WORDS,
    CONTINUING_WORDS,
    DECLARATION_KEYWORDS,
    HASH_BOTH,
    HASH_COMMANDS,
    HASH_TACTICS,
    IN_COMMANDS,
    MODIFIERS,
    TACTIC_OPENERS,
    TERM_OPENERS,
)
from leanloop.lean.lexer import Kind, Token, hash_word

#: What follows a modifier run when it modifies a command (``noncomputable section``, ...).
_MODIFIED = DECLARATION_KEYWORDS | {
    "section",
    "@[",
    "notation",
    "attribute",
    "import",
    "syntax",
    "macro",
    "elab",
    "macro_rules",
    "elab_rules",
    "infix",
    "infixl",
    "infixr",
    "prefix",
    "postfix",
    "notation3",
    "simproc",
    "dsimproc",
    "initialize",
    "builtin_initialize",
}
#: Opening brackets: an argument starts with one (and needs its column right of the block's).
_OPENING = frozenset({"(", "[", "{", "⟨", "⦃", "⟦", "‹", "@", "!", "?"})
#: Tokens after which a term or a tactic must follow, at any column.
_EXPECTING = (TERM_OPENERS | TACTIC_OPENERS) - {"by"}


def modifies_declaration(tokens: Sequence[Token], index: int) -> bool:
    """Whether the modifier run at ``tokens[index]`` is followed by a declaration keyword or
    another command it modifies (``noncomputable section``, ``local notation``)."""
    j = index
    while j < len(tokens) and tokens[j].text in MODIFIERS:
        j += 1
    if j < len(tokens) and tokens[j].text == "[" and tokens[j - 1].text == "scoped":
        return True  # scoped[NS] notation ...
    return j < len(tokens) and tokens[j].text in _MODIFIED


class TokenRole(Enum):
    """What a token of a declaration's body is to its proof."""

    PROOF = "proof"  # part of the proof
    CLAUSE = "clause"  # a clause of the declaration: the proof ends, the declaration goes on
    LAYOUT = "layout"  # the layout ends the proof here; the declaration may go on
    COMMAND = "command"  # a command starts here: the proof and the declaration end
    DOUBT = "doubt"  # part of the proof, or the start of a command: not sure


@dataclass(frozen=True)
class ProofEnd:
    """Where a proof ends: the index of the first token after it, whether a command starts
    there (so the declaration ends there too), and why that is not sure ('' when it is)."""

    index: int
    command: bool
    doubt: str = ""


def find_proof_end(
    tokens: Sequence[Token], depth: Sequence[int], assign: int, stop: int, column: int
) -> ProofEnd:
    """Where the proof after the ``:=`` at ``tokens[assign]`` ends: at the first token (at the
    proof's bracket depth) that starts a clause or a command or that its layout puts past the
    proof, and at ``stop`` at the latest (where the scanner saw the next command start).
    ``depth`` is the bracket depth before each token, ``column`` the declaration's own."""
    return _Reader(tokens, depth, assign, column).end(stop)


def find_clauses_end(
    tokens: Sequence[Token], depth: Sequence[int], clause: int, stop: int, column: int
) -> int:
    """Where a declaration whose proof ended at the clause ``tokens[clause]`` (``where``,
    ``termination_by``, ...) ends: at the first command (or token that may be one) after its
    clauses, and at ``stop`` at the latest. Its clauses' own layout (a ``where`` helper left of
    the declaration's column) does not end it."""
    while clause < stop:
        ended = _Reader(tokens, depth, clause, column, clauses=True).end(stop)
        if ended.index >= stop or tokens[ended.index].text not in BODY_CLAUSES:
            return ended.index
        clause = ended.index
    return stop


class _Reader:
    def __init__(
        self,
        tokens: Sequence[Token],
        depth: Sequence[int],
        assign: int,
        column: int,
        clauses: bool = False,
    ) -> None:
        self.tokens, self.depth, self.assign, self.column = tokens, depth, assign, column
        self.clauses = clauses  # reading a clause (a layout does not end it)
        self.base = depth[assign]
        first = assign + 1
        # the tactic block's column, when the body is `by` (its first tactic's column)
        self.block: int | None = None
        if first + 1 < len(tokens) and tokens[first].text == "by" and tokens[first + 1].text != "{":
            self.block = tokens[first + 1].column
        elif first < len(tokens) and tokens[assign].text == "decreasing_by":
            self.block = tokens[first].column
        self.columns: set[int] = set()  # where nested sequences stand

    def end(self, stop: int) -> ProofEnd:
        tokens = self.tokens
        j = self.assign + 1
        last = min(stop, len(tokens) - 1)
        while j <= last:
            if self.depth[j] > self.base:
                j += 1
                continue
            if self.depth[j] < self.base:
                return ProofEnd(j, False)
            role, why = self.classify(j)
            if role is TokenRole.LAYOUT and (j == self.assign + 1 or self.clauses):
                role = TokenRole.PROOF  # the proof holds at least the token after ':='
            if j == stop and role in (TokenRole.PROOF, TokenRole.DOUBT):
                token = tokens[j]
                why = why or (
                    f"line {token.line}: {_spelt(tokens, j)!r} may belong to the proof or "
                    "start the next command"
                )
                return ProofEnd(j, True, why)
            if role is TokenRole.DOUBT:
                return ProofEnd(j, False, why)
            if role is not TokenRole.PROOF:
                return ProofEnd(j, role is TokenRole.COMMAND)
            self._saw(j)
            j += 2 if hash_word(tokens, j) is not None else 1  # `#word` is one word
        return ProofEnd(stop, True)

    # -- one token ---------------------------------------------------------------------------

    def classify(self, j: int) -> tuple[TokenRole, str]:
        """What token ``j`` (at the proof's depth) is to the proof, and why when unsure."""
        token = self.tokens[j]
        text = token.text
        if token.kind is Kind.IDENT and text in BODY_CLAUSES:
            return TokenRole.CLAUSE, ""
        if token.kind in (Kind.DOC, Kind.MODDOC):  # but the note of `#adaptation_note`
            noted = j >= 2 and hash_word(self.tokens, j - 2) in HASH_TACTICS
            return (TokenRole.PROOF, "") if noted else (TokenRole.COMMAND, "")
        if text == "@[":
            return TokenRole.COMMAND, ""
        if token.kind is Kind.IDENT:
            if text in COMMAND_WORDS:
                return TokenRole.COMMAND, ""
            if text in MODIFIERS and (token.line_start or modifies_declaration(self.tokens, j)):
                return TokenRole.COMMAND, ""
            if text in IN_COMMANDS:
                return self._in_command(j)
        word = hash_word(self.tokens, j)
        if word is not None:
            return self._hash(j, word)
        if not token.line_start:
            return TokenRole.PROOF, ""
        if self.block is not None and token.column < self.block:
            return self._left_of_block(j)
        if token.column <= self.column:
            return TokenRole.LAYOUT, ""
        return TokenRole.PROOF, ""

    def _left_of_block(self, j: int) -> tuple[TokenRole, str]:
        """A line left of the tactic block's column: the block is over, unless the token begins
        the term or tactic its previous token expects, or may continue the last tactic's term
        (an operator, ``at``, ``with``, ...): those check no column."""
        token, previous = self.tokens[j], self._previous(j)
        line = f"line {token.line}: {token.text!r} starts a line left of the proof's tactics"
        if previous is not None and previous.text == "by":  # a nested block must be right of it
            return TokenRole.DOUBT, f"{line} after a nested 'by'"
        if previous is not None and previous.text in _EXPECTING:
            return (TokenRole.PROOF, "") if token.column > self.column else (TokenRole.LAYOUT, "")
        if token.column in self.columns and token.column > self.column:
            return TokenRole.PROOF, ""  # the next item of a sequence the proof set at this column
        continues = (
            token.text in CONTINUING_WORDS
            if token.kind is Kind.IDENT
            else token.kind is Kind.SYMBOL and token.text not in _OPENING and token.text != "·"
        )
        if not continues:
            return TokenRole.COMMAND, ""
        if token.column <= self.column:
            return TokenRole.LAYOUT, ""
        return TokenRole.DOUBT, f"{line} and may continue its last tactic"

    def _outside(self, token: Token) -> bool:
        """Whether a line-start token stands where no part of the proof can (at or left of
        the declaration's column, or left of its tactic block)."""
        return token.line_start and (
            token.column <= self.column or (self.block is not None and token.column < self.block)
        )

    def _in_command(self, j: int) -> tuple[TokenRole, str]:
        """``open …``/``set_option …``: a command, or with ``in`` a tactic or term where one
        may start."""
        token = self.tokens[j]
        target = self._in_target(j)
        if target is None or self._outside(token):
            return TokenRole.COMMAND, ""  # without `in` only a command
        command = self._starts_command(target)
        inside = self._tactic_position(j) or self._term_position(j)
        if not inside:
            if command is not False:  # a command applied to the one after `in`
                return TokenRole.COMMAND, ""
            why = "follows a finished tactic or term but is followed by no command"
        elif command is False:
            return TokenRole.PROOF, ""
        elif command:
            why = "stands where a tactic may but is followed by a command"
        else:
            why = f"is followed by {_spelt(self.tokens, target)!r}, a tactic or a command"
        return TokenRole.DOUBT, f"line {token.line}: '{token.text} … in' {why}"

    def _hash(self, j: int, word: str) -> tuple[TokenRole, str]:
        """``#word``: a command, a tactic, or (``#s``) a term."""
        token = self.tokens[j]
        line = f"line {token.line}: '#{word}'"
        if self._outside(token):
            return (TokenRole.COMMAND if word in HASH_COMMANDS else TokenRole.LAYOUT), ""
        if word in HASH_TACTICS:
            return TokenRole.PROOF, ""
        tactic = self._tactic_position(j)
        if word in HASH_COMMANDS:
            if word in HASH_BOTH and tactic:
                why = "is a tactic where the library declaring it is imported, else a command"
                return TokenRole.DOUBT, f"{line} {why}"
            return TokenRole.COMMAND, ""
        if self._term_position(j):
            return TokenRole.PROOF, ""  # Mathlib's `#s` (a finset's card) and the like
        where = "where a tactic may start" if tactic else "after a finished term"
        return TokenRole.DOUBT, f"{line} {where} may be a command leanloop does not know"

    # -- positions ---------------------------------------------------------------------------

    def _previous(self, j: int) -> Token | None:
        return self.tokens[j - 1] if j > 0 else None

    def _tactic_position(self, j: int) -> bool:
        """Whether a tactic may start at token ``j``: after ``by``, ``;``, ``<;>``, ``·``, a
        combinator, or first on a line at the block's column (or a nested block's)."""
        token, previous = self.tokens[j], self._previous(j)
        if previous is not None and previous.text in TACTIC_OPENERS:
            return True
        if not token.line_start or self.block is None:
            return False
        return token.column == self.block or (
            token.column > self.block and token.column in self.columns
        )

    def _term_position(self, j: int) -> bool:
        """Whether a term is expected at token ``j`` (after an operator, ``:=``, ``exact``)."""
        previous = self._previous(j)
        return previous is not None and previous.text in TERM_OPENERS

    def _saw(self, j: int) -> None:
        """Note where nested sequences stand (each sets its own column, which Lean checks its
        later items against): at the first token after a block opener (``· simp``, ``all_goals``
        and a new line, ``case h =>``), and at a line's first token after any token that
        expects more (a ``calc``'s steps, a ``with``'s alternatives)."""
        token, previous = self.tokens[j], self._previous(j)
        if previous is None:
            return
        if previous.text in TACTIC_OPENERS or (
            token.line_start and previous.text in _EXPECTING | {"by"}
        ):
            self.columns.add(token.column)

    def _in_target(self, j: int) -> int | None:
        """The index of what follows the ``in`` of ``open … in`` at ``j`` (past a chain of
        them), or None when no ``in`` ends its line; the number of tokens at the end."""
        target = self._after_in(j)
        while target is not None and target < len(self.tokens):
            if self.tokens[target].text not in IN_COMMANDS:
                break
            chained = self._after_in(target)
            if chained is None:
                break
            target = chained
        return target

    def _after_in(self, j: int) -> int | None:
        for k in range(j + 1, len(self.tokens)):
            if self.tokens[k].line_start:
                return None
            if self.tokens[k].text == "in" and self.depth[k] == self.depth[j]:
                return k + 1
        return None

    def _starts_command(self, k: int) -> bool | None:
        """Whether token ``k`` can only start a command (or stands where the proof cannot):
        True, False, or None for a ``#`` word that may be a tactic too."""
        tokens = self.tokens
        if k >= len(tokens):
            return True
        token = tokens[k]
        if self._outside(token) or token.kind in (Kind.DOC, Kind.MODDOC) or token.text == "@[":
            return True
        if token.kind is Kind.IDENT and (
            token.text in COMMAND_WORDS
            or (token.text in MODIFIERS and modifies_declaration(tokens, k))
        ):
            return True
        word = hash_word(tokens, k)
        if word is None or word in HASH_TACTICS:
            return False
        return True if word in HASH_COMMANDS and word not in HASH_BOTH else None


def _spelt(tokens: Sequence[Token], j: int) -> str:
    word = hash_word(tokens, j)
    return f"#{word}" if word is not None else tokens[j].text
