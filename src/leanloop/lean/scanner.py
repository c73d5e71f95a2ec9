"""A pure-Python scanner of Lean 4 source files: the declarations (with namespace, section, open
and variable context, modifiers, attributes and doc comments), each one's statement and code and
position, the imports, and where ``sorry`` stands. No Lean needed.

Positions are Lean's: 1-based lines, 0-based columns counted in characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from leanloop.lean.keywords import (
    BODY_CLAUSES,
    COMMAND_WORDS,
    DECLARATION_KEYWORDS,
    HASH_BOTH,
    HASH_COMMANDS,
    HASH_TACTICS,
    IN_COMMANDS,
    MODIFIERS,
    NEVER_IN_PROOFS,
    OTHER_COMMANDS,
    SCOPE_COMMANDS,
    TERM_BINDERS,
    THEOREM_KINDS,
)
from leanloop.lean.lexer import Kind, Token, hash_word, normalize_name, split_name, tokenize
from leanloop.lean.proof_end import (
    ProofEnd,
    find_clauses_end,
    find_proof_end,
    modifies_declaration,
)

__all__ = [  # the words are the keywords module's, read here too
    "BODY_CLAUSES",
    "CLOSING_BRACKETS",
    "COMMAND_WORDS",
    "DECLARATION_KEYWORDS",
    "HASH_BOTH",
    "HASH_COMMANDS",
    "HASH_TACTICS",
    "IN_COMMANDS",
    "MODIFIERS",
    "NEVER_IN_PROOFS",
    "OPENING_BRACKETS",
    "OTHER_COMMANDS",
    "SCOPE_COMMANDS",
    "TERM_BINDERS",
    "THEOREM_KINDS",
    "Declaration",
    "Location",
    "SourceScan",
    "scan",
]

#: Words after which a declaration's header (its statement) is over.
_HEADER_ENDS = frozenset({":=", "where", "termination_by", "decreasing_by", "deriving"})
_OPEN = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "⟦": "⟧", "‹": "›", "@[": "]"}
_CLOSE = frozenset(_OPEN.values())
#: The brackets the scanner counts depth with.
OPENING_BRACKETS = frozenset(_OPEN)
CLOSING_BRACKETS = _CLOSE


@dataclass(frozen=True)
class Location:
    """A place in a source file: offset (characters), line (1-based), column (0-based)."""

    offset: int
    line: int
    column: int


@dataclass(frozen=True)
class Declaration:
    """One declaration found in a file."""

    kind: str
    name: str | None  # as written (None for example and unnamed instances)
    full_name: str | None  # with the enclosing namespaces
    modifiers: tuple[str, ...]
    attributes: tuple[str, ...]
    doc: str | None
    namespace: tuple[str, ...]
    opens: tuple[str, ...]
    variables: tuple[str, ...]  # the 'variable' binders in scope, as written
    start: Location  # first modifier or the keyword (attributes and doc comment come before)
    statement_end: Location  # end of the header: before ':=', 'where', a '|' alternative, ...
    end: Location  # end of the whole declaration
    code_start: Location  # doc comment or attribute start, else ``start``
    source: str = field(repr=False, compare=False)
    context_start: Location | None = None  # start of 'set_option ... in' / 'open ... in' before
    name_start: Location | None = None  # the name as written
    name_end: Location | None = None
    sorries: tuple[Location, ...] = ()
    signature_start: int = 0  # offset after the name (and its universe parameters)
    #: where ``:=`` stands, when the body is ``:= ...`` (None for ``where`` structures and
    #: pattern-matching alternatives)
    assign: Location | None = None
    #: where the proof (the body after ``:=``) ends: before a ``where`` / ``termination_by`` /
    #: ``decreasing_by`` / ``deriving`` clause or the next command, trailing comments excluded
    #: (see ``leanloop.lean.proof_end``)
    proof_end: Location | None = None
    #: why it is not sure where the proof ends ('' when it is): the tokens there allow both a
    #: proof and a command (``proof_end`` is then the earlier of the two)
    proof_unclear: str = ""
    #: the indentation of the declaration's first line (an attribute may stand before it)
    indent: int = 0
    #: the namespaces and sections open around the declaration, outermost first, as
    #: ``("namespace", "A.B")`` or ``("section", "name")`` (``""`` for an unnamed section)
    scopes: tuple[tuple[str, str], ...] = ()

    @property
    def statement(self) -> str:
        """The declaration up to its body: modifiers, keyword, name, binders and type."""
        return self.source[self.start.offset : self.statement_end.offset].rstrip()

    @property
    def signature(self) -> str:
        """What follows the name up to the body: binders and type."""
        return self.source[self.signature_start : self.statement_end.offset].strip()

    @property
    def local_context(self) -> str:
        """The ``set_option ... in`` / ``open ... in`` lines that apply to this declaration."""
        start = self.context_start or self.code_start
        return self.source[start.offset : self.code_start.offset]

    @property
    def code(self) -> str:
        """The whole declaration text, doc comment and attributes included."""
        return self.source[self.code_start.offset : self.end.offset].rstrip()

    @property
    def proof_span(self) -> tuple[int, int] | None:
        """Offsets ``(start, end)`` of ``:= <proof>``: what a new proof replaces (None when the
        body is not ``:= ...``). The one place that says where the proof is: its end is read
        from the tokens' layout as Lean's parser reads it; where that reading is unsure
        (``proof_unclear``) it is the earlier end, and a fill refuses it."""
        if self.assign is None or self.proof_end is None:
            return None
        return self.assign.offset, self.proof_end.offset

    @property
    def is_theorem(self) -> bool:
        return self.kind in THEOREM_KINDS

    @property
    def has_sorry(self) -> bool:
        return bool(self.sorries)

    def contains(self, line: int, column: int) -> bool:
        after_start = (line, column) >= (self.start.line, self.start.column)
        return after_start and (line, column) < (self.end.line, self.end.column)


@dataclass
class SourceScan:
    """What the scanner found in one file."""

    source: str = field(repr=False)
    imports: tuple[str, ...]
    declarations: list[Declaration]
    sorries: tuple[Location, ...]
    #: the namespaces and sections still open at the end of the file (as ``Declaration.scopes``)
    open_scopes: tuple[tuple[str, str], ...] = ()

    @cached_property
    def by_name(self) -> dict[str, Declaration]:
        return {d.full_name: d for d in self.declarations if d.full_name}

    def theorems(self) -> list[Declaration]:
        return [d for d in self.declarations if d.is_theorem]

    def enclosing(self, line: int, column: int) -> Declaration | None:
        """The declaration containing a position (the innermost when nested)."""
        found = None
        for declaration in self.declarations:
            if declaration.contains(line, column):
                found = declaration
        return found

    def prefix_before(self, declaration: Declaration) -> str:
        """The file's text before a declaration and its ``... in`` lines (the context to
        elaborate it in)."""
        start = declaration.context_start or declaration.code_start
        return self.source[: start.offset]


@dataclass
class _Scope:
    kind: str  # namespace | section | mutual
    names: tuple[str, ...] = ()
    opens: list[str] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)


def scan(source: str) -> SourceScan:
    """Scan Lean 4 source text."""
    return _Scanner(source).run()


class _Scanner:
    def __init__(self, source: str) -> None:
        self.source = source
        tokens = tokenize(source)
        self.sorries = tuple(
            _loc(t) for t in tokens if t.kind is Kind.IDENT and t.text in ("sorry", "admit")
        )
        # Doc comments stay (they belong to declarations); other comments are dropped, and a
        # token after a comment on its line counts as first on the line.
        self.tokens = _first_on_lines([t for t in tokens if t.kind is not Kind.COMMENT])
        self.depth = self._depths()
        self.scopes: list[_Scope] = [_Scope("file")]
        self.imports: list[str] = []
        self.declarations: list[Declaration] = []
        self._pending_in: Location | None = None
        self._declaration_after_in = -1  # a declaration that follows `... in` on the same line
        self._starts: set[int] = set()  # commands found where a proof ended (mid-line, ...)

    def _depths(self) -> list[int]:
        """Bracket depth before each token."""
        depths, depth = [], 0
        for token in self.tokens:
            depths.append(depth)
            if token.kind is Kind.SYMBOL:
                if token.text in _OPEN:
                    depth += 1
                elif token.text in _CLOSE:
                    depth = max(0, depth - 1)
        return depths

    # -- helpers ---------------------------------------------------------------------------------

    def _is_command_start(self, index: int) -> bool:
        """Whether token ``index`` begins a new command (ending the previous one)."""
        token = self.tokens[index]
        if self.depth[index] != 0 or not token.line_start:
            return False
        if token.kind is Kind.DOC or token.kind is Kind.MODDOC:
            return token.column == 0
        if token.kind is Kind.SYMBOL:  # attributes, and #check-like commands (at any column,
            # but for the one tactic spelt with '#')
            if token.text == "#":
                return token.column == 0 or self._hash_command(index)
            return token.text == "@[" and token.column == 0
        if token.kind is not Kind.IDENT:
            return False
        if token.text in DECLARATION_KEYWORDS:
            return True
        if token.text in MODIFIERS:  # at column 0 always a command (`scoped[NS] notation`)
            return token.column == 0 or modifies_declaration(self.tokens, index)
        if token.text in COMMAND_WORDS:  # keywords nothing else starts a line with
            return True
        return token.column == 0 and token.text in OTHER_COMMANDS

    def _starts_declaration(self, index: int) -> bool:
        """Whether token ``index`` begins a declaration (wherever it stands on its line)."""
        token = self.tokens[index]
        if token.kind is Kind.DOC or token.text == "@[" or token.text in DECLARATION_KEYWORDS:
            return True
        return token.text in MODIFIERS and modifies_declaration(self.tokens, index)

    def _next_command(self, index: int) -> int:
        """Index of the first command start after ``index`` (or the number of tokens)."""
        for j in range(index + 1, len(self.tokens)):
            if self._is_command_start(j):
                return j
        return len(self.tokens)

    def _matching(self, index: int) -> int:
        """Index just after the bracket closing the one opened at ``index``."""
        depth = self.depth[index]
        for j in range(index + 1, len(self.tokens)):
            if self.depth[j] == depth + 1 and self.tokens[j].text in _CLOSE:
                return j + 1
            if self.depth[j] <= depth:
                return j
        return len(self.tokens)

    def _end_location(self, stop: int) -> Location:
        """Where the text before token ``stop`` ends (trailing blanks and doc comments excluded)."""
        last = stop - 1
        while last >= 0 and self.tokens[last].kind is Kind.DOC:
            last -= 1
        if last < 0:
            return Location(0, 1, 0)
        token = self.tokens[last]
        return _loc_end(self.source, token)

    def _namespace(self) -> tuple[str, ...]:
        return tuple(
            name for scope in self.scopes if scope.kind == "namespace" for name in scope.names
        )

    def _opens(self) -> tuple[str, ...]:
        return tuple(name for scope in self.scopes for name in scope.opens)

    # -- the scan --------------------------------------------------------------------------------

    def run(self) -> SourceScan:
        i, n = 0, len(self.tokens)
        while i < n:
            token = self.tokens[i]
            if (
                not self._is_command_start(i)
                and i != self._declaration_after_in
                and i not in self._starts
            ):
                i += 1
                continue
            if (
                token.kind is Kind.DOC
                or token.text == "@["
                or token.text in MODIFIERS
                or (token.text in DECLARATION_KEYWORDS)
            ):
                i = self._declaration(i)
            else:
                i = self._command(i)
        return SourceScan(
            self.source, tuple(self.imports), self.declarations, self.sorries, self._scope_names()
        )

    def _scope_names(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            (scope.kind, ".".join(scope.names))
            for scope in self.scopes
            if scope.kind in ("namespace", "section")
        )

    def _command(self, i: int) -> int:
        token = self.tokens[i]
        stop = self._next_command(i)
        for k in range(i + 1, stop):  # an indented `open ... in` line is a command of its own
            later = self.tokens[k]
            if later.line_start and later.text in IN_COMMANDS and self.depth[k] == 0:
                stop = k
                self._starts.add(k)
                break
        words = [t.text for t in self.tokens[i + 1 : stop]]
        keyword = token.text
        if words and words[-1] == "in":  # applies to the next command only
            if self._pending_in is None:
                self._pending_in = _loc(token)
            return stop
        for k in range(i + 1, stop - 1):  # `open Nat in theorem ...` on one line
            if (
                self.tokens[k].text == "in"
                and self.depth[k] == 0
                and self._starts_declaration(k + 1)
            ):
                if self._pending_in is None:
                    self._pending_in = _loc(token)
                self._declaration_after_in = k + 1
                return k + 1
        self._pending_in = None
        if keyword == "import":
            self.imports.extend(w for w in words if w not in ("runtime",))
        elif keyword == "namespace" and words:
            self.scopes.append(_Scope("namespace", tuple(split_name(normalize_name(words[0])))))
        elif keyword == "section":
            self.scopes.append(_Scope("section", tuple(words[:1])))
        elif keyword == "mutual":
            self.scopes.append(_Scope("mutual"))
        elif keyword == "end":
            if len(self.scopes) > 1:
                self.scopes.pop()
        elif keyword == "variable" and stop > i + 1:
            end = _loc_end(self.source, self.tokens[stop - 1]).offset
            self.scopes[-1].variables.append(self.source[self.tokens[i + 1].start : end])
        elif keyword == "open" and "in" not in words:
            self.scopes[-1].opens.extend(w for w in words if w not in ("scoped", "hiding"))
        return stop

    def _declaration(self, i: int) -> int:
        start_index = i
        doc = None
        attributes: list[str] = []
        modifiers: list[str] = []
        tokens = self.tokens
        while i < len(tokens):
            token = tokens[i]
            if token.kind is Kind.DOC:
                doc = token.text[3:-2].strip() if token.text.endswith("-/") else token.text[3:]
                i += 1
            elif token.text == "@[":
                close = self._matching(i)
                attributes.extend(
                    part.strip()
                    for part in self.source[token.end : tokens[close - 1].start].split(",")
                    if part.strip()
                )
                i = close
            elif token.text in MODIFIERS:
                modifiers.append(token.text)
                i += 1
            else:
                break
        if i >= len(tokens) or tokens[i].text not in DECLARATION_KEYWORDS:
            if i < len(tokens) and tokens[i].text in ("section", "import"):
                return self._command(i)  # noncomputable section, public import
            return max(i, start_index + 1)
        keyword_index = i
        kind = tokens[i].text
        i += 1
        if kind == "class" and i < len(tokens) and tokens[i].text == "inductive":
            kind = "class inductive"
            i += 1
        name, name_index, i = self._name(kind, i)
        name_token = tokens[name_index] if name is not None else None
        signature_start = tokens[i].start if i < len(tokens) else len(self.source)
        stop = self._next_command(keyword_index)
        header_end = self._header_end(i, stop)
        first = tokens[keyword_index - len(modifiers)] if modifiers else tokens[keyword_index]
        namespace = self._namespace()
        full_name = None
        if name is not None:
            if name.startswith("_root_."):
                full_name = name[len("_root_.") :]
            else:
                full_name = ".".join((*namespace, name))
        start = _loc(first)
        indent = _indentation(self.source, first.start)
        assign, proof_end, ended = self._proof(i, stop, indent)
        if ended is not None and ended.index < stop:
            after = ended.index  # a command on the proof's line, or left of its tactics
            if tokens[after].text in BODY_CLAUSES:
                after = find_clauses_end(tokens, self.depth, after, stop, indent)
            elif not ended.command:
                after = stop
            if after < stop:
                stop = after
                self._starts.add(stop)
        end = self._end_location(stop)
        self.declarations.append(
            Declaration(
                kind=kind,
                name=name,
                full_name=full_name,
                modifiers=tuple(modifiers),
                attributes=tuple(attributes),
                doc=doc,
                namespace=namespace,
                opens=self._opens(),
                variables=tuple(v for scope in self.scopes for v in scope.variables),
                start=start,
                statement_end=header_end,
                end=end,
                code_start=_loc(tokens[start_index]),
                source=self.source,
                sorries=tuple(s for s in self.sorries if start.offset <= s.offset < end.offset),
                signature_start=signature_start,
                context_start=self._pending_in,
                name_start=_loc(name_token) if name_token else None,
                name_end=_loc_end(self.source, name_token) if name_token else None,
                assign=assign,
                proof_end=proof_end,
                proof_unclear=ended.doubt if ended is not None else "",
                indent=indent,
                scopes=self._scope_names(),
            )
        )
        self._pending_in = None
        return stop

    def _proof(
        self, i: int, stop: int, column: int
    ) -> tuple[Location | None, Location | None, ProofEnd | None]:
        """Where the declaration's ``:=`` stands, where the proof after it ends and how that
        end was read (all None when the header does not end with ``:=``). ``column`` is the
        declaration's own."""
        assign = self._header_end_index(i, stop)
        if assign is None or self.tokens[assign].text != ":=":
            return None, None, None
        ended = find_proof_end(self.tokens, self.depth, assign, stop, column)
        if ended.index <= assign + 1:
            end = _loc_end(self.source, self.tokens[assign])
        else:
            end = self._end_location(ended.index)
        return _loc(self.tokens[assign]), end, ended

    def _hash_command(self, j: int) -> bool:
        """Whether the ``#`` at token ``j`` spells a command (``#check``, ``#eval``, ...)."""
        return hash_word(self.tokens, j) in HASH_COMMANDS

    def _name(self, kind: str, i: int) -> tuple[str | None, int, int]:
        """The declared name, the index of its token, and the index after it."""
        tokens = self.tokens
        if kind == "example" or i >= len(tokens):
            return None, i, i
        if kind == "instance":
            while i < len(tokens) and tokens[i].text == "(" and "priority" in tokens[i + 1].text:
                i = self._matching(i)
        token = tokens[i]
        if token.kind is not Kind.IDENT or token.text in ("where", "extends"):
            return None, i, i
        name = normalize_name(token.text)  # as Lean prints it: «a.b» stays one part
        name_index = i
        i += 1
        # universe parameters: name.{u, v}
        if (
            i + 1 < len(tokens)
            and tokens[i].text == "."
            and tokens[i].start == token.end
            and tokens[i + 1].text == "{"
        ):
            i = self._matching(i + 1)
        return name, name_index, i

    def _is_alternative(self, j: int, stop: int) -> bool:
        """A '|' starting a line with '=>' later on that line: a pattern-matching alternative
        (not an absolute value ``|x|``)."""
        if self.tokens[j].text != "|" or not self.tokens[j].line_start:
            return False
        for k in range(j + 1, stop):
            if self.tokens[k].line_start:
                return False
            if self.tokens[k].text == "=>" and self.depth[k] == self.depth[j]:
                return True
        return False

    def _header_end_index(self, i: int, stop: int) -> int | None:
        """Index of the token that ends the declaration header: the first ':=', 'where', ...
        at bracket depth 0, or a '|' that starts a line (a pattern-matching alternative)."""
        base = self.depth[i] if i < len(self.tokens) else 0
        binding = 0  # `let`/`have` in the statement whose `:=` is still to come
        for j in range(i, stop):
            token = self.tokens[j]
            if self.depth[j] != base:
                continue
            if token.text in TERM_BINDERS:
                binding += 1
                continue
            if token.text == ":=" and binding:
                binding -= 1
                continue
            if token.text in _HEADER_ENDS or self._is_alternative(j, stop):
                return j
        return None

    def _header_end(self, i: int, stop: int) -> Location:
        """End of the declaration header (see ``_header_end_index``)."""
        j = self._header_end_index(i, stop)
        if j is None:
            return self._end_location(stop)
        if j == 0:
            return _loc(self.tokens[j])
        return _loc_end(self.source, self.tokens[j - 1])


def _loc(token: Token) -> Location:
    return Location(token.start, token.line, token.column)


def _loc_end(source: str, token: Token) -> Location:
    newlines = source.count("\n", token.start, token.end)
    if not newlines:
        return Location(token.end, token.line, token.column + (token.end - token.start))
    last = source.rfind("\n", token.start, token.end)
    return Location(token.end, token.line + newlines, token.end - last - 1)


def _first_on_lines(tokens: list[Token]) -> list[Token]:
    """``tokens`` with ``line_start`` set on the first of them on each line (tokens dropped
    before, such as comments, no longer count, and nor does a module doc comment: in
    ``/-! ... -/ namespace X`` the ``namespace`` is a command)."""
    out: list[Token] = []
    last_line = 0  # the line the previous token (but a module doc) ends on
    for token in tokens:
        first = token.line > last_line
        if first != token.line_start:
            token = replace(token, line_start=first)
        out.append(token)
        if token.kind is not Kind.MODDOC:
            last_line = token.line + token.text.count("\n")
    return out


def _indentation(source: str, offset: int) -> int:
    """The indentation (in characters) of the line holding ``offset``."""
    start = source.rfind("\n", 0, offset) + 1
    line = source[start:offset]
    return len(line) - len(line.lstrip(" \t"))
