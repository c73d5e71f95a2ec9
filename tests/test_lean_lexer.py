"""The Lean lexer against Lean 4's own reading (``Lean.Parser.Basic``, ``isIdFirst``/``isIdRest``):
one row per rule (source, the tokens Lean reads), and adversarial candidates in which a command
hides behind a construct a simpler reading gets wrong; the screen must see every one."""

from __future__ import annotations

import pytest

from leanloop.lean.lexer import (
    Flaw,
    Kind,
    escape_name,
    hash_word,
    interpolation_holes,
    is_unterminated,
    normalize_name,
    split_name,
    tokenize,
)
from leanloop.lean.screen import RefusalCode, forbidden_in, forbidden_in_proof, screen_candidate

ID, N, S, C, L, Y = Kind.IDENT, Kind.NUMBER, Kind.STRING, Kind.CHAR, Kind.NAME, Kind.SYMBOL
CM, DOC, MOD = Kind.COMMENT, Kind.DOC, Kind.MODDOC


def read(source: str) -> list[tuple]:
    """Each token as (kind, text), with its flaw when it has one."""
    return [(t.kind, t.text, *((t.flaw,) if t.flaw else ())) for t in tokenize(source)]


ROWS = [
    # identifiers: isIdRest takes ! ? ' digits subscripts and letter-like characters
    ("X! h? get! f' x₁ ℕ.succ αβ café", [(ID, "X!"), (ID, "h?"), (ID, "get!"), (ID, "f'"),
                                          (ID, "x₁"), (ID, "ℕ.succ"), (ID, "αβ"), (ID, "café")]),
    ("λx Πy", [(Y, "λ"), (ID, "x"), (Y, "Π"), (ID, "y")]),  # λ, Π, Σ are not letter-like
    ("h.1.2 Foo.«weird name \"».bar", [(ID, "h.1.2"), (ID, 'Foo.«weird name "».bar')]),
    ("«a\nb» c", [(ID, "«a\nb»"), (ID, "c")]),  # «...» spans lines
    ("«never closed", [(ID, "«never closed", Flaw.UNTERMINATED)]),
    # a keyword token needs no space after it; a longer identifier is no keyword
    ('panic!"x" s!x pans!"y"', [(ID, "panic!"), (S, '"x"'), (ID, "s!x"), (ID, "pans!"),
                                (S, '"y"')]),
    ('f"x" X!"y" h?"z"', [(ID, "f"), (S, '"x"'), (ID, "X!"), (S, '"y"'), (ID, "h?"), (S, '"z"')]),
    # interpolated strings: holes nest, hold braces, strings, comments, escapes
    ('s!"a{f s!"b{x}"}c" d', [(ID, "s!"), (S, '"a{f s!"b{x}"}c"'), (ID, "d")]),
    ('s!"{ {x := 1} }" y', [(ID, "s!"), (S, '"{ {x := 1} }"'), (ID, "y")]),
    ('s!"{"}"}" y', [(ID, "s!"), (S, '"{"}"}"'), (ID, "y")]),
    ('s!"{x /- " -/}" y', [(ID, "s!"), (S, '"{x /- " -/}"'), (ID, "y")]),
    ('s!"{x -- }"\n}" y', [(ID, "s!"), (S, '"{x -- }"\n}"'), (ID, "y")]),
    ('s!"\\{x}" y', [(ID, "s!"), (S, '"\\{x}"'), (ID, "y")]),
    ('m!"{"a"}" f!"{"b"}" println! "{"c"}"', [(ID, "m!"), (S, '"{"a"}"'), (ID, "f!"),
                                               (S, '"{"b"}"'), (ID, "println!"), (S, '"{"c"}"')]),
    ('throwError "{"a"}" dbg_trace "{"b"}"', [(ID, "throwError"), (S, '"{"a"}"'),
                                              (ID, "dbg_trace"), (S, '"{"b"}"')]),
    ('throwErrorAt stx "{"a"}" x', [(ID, "throwErrorAt"), (ID, "stx"), (S, '"{"a"}"'), (ID, "x")]),
    ('trace[Meta.debug] "{"a"}" x', [(ID, "trace"), (Y, "["), (ID, "Meta.debug"), (Y, "]"),
                                     (S, '"{"a"}"'), (ID, "x")]),
    # a plain string that ends elsewhere when read as interpolated: Lean's reading is unknown
    ('"{"}"}"', [(S, '"{"', Flaw.TWO_READINGS), (Y, "}"), (S, '"}"')]),
    ('"{x}" "a{b}c"', [(S, '"{x}"'), (S, '"a{b}c"')]),  # both readings end there
    # escapes
    ('"a\\"b" "\\\\" c', [(S, '"a\\"b"'), (S, '"\\\\"'), (ID, "c")]),
    ('"\\x41\\u0041\\t\\n\\r\\\'" c', [(S, '"\\x41\\u0041\\t\\n\\r\\\'"'), (ID, "c")]),
    # an invalid escape: Lean fails there and reads on from it as code
    ('"\\q" c', [(S, '"\\', Flaw.INVALID_ESCAPE), (ID, "q"), (S, '" c', Flaw.UNTERMINATED)]),
    ('"\\x4g"', [(S, '"\\x4', Flaw.INVALID_ESCAPE), (ID, "g"), (S, '"', Flaw.UNTERMINATED)]),
    ('"\\{" z', [(S, '"\\', Flaw.INVALID_ESCAPE), (Y, "{"), (S, '" z', Flaw.UNTERMINATED)]),
    # string gaps: \ and one line break continue the string
    ('"a\\\n    b" c', [(S, '"a\\\n    b"'), (ID, "c")]),
    ('"a\\\r\n  b" c', [(S, '"a\\\r\n  b"'), (ID, "c")]),
    ('"a\\\n\nb" c', [(S, '"a\\\n', Flaw.STRING_GAP), (ID, "b"), (S, '" c', Flaw.UNTERMINATED)]),
    ('"a\\ \nb"', [(S, '"a\\', Flaw.INVALID_ESCAPE), (ID, "b"), (S, '"', Flaw.UNTERMINATED)]),
    ('"line\nbreak" x', [(S, '"line\nbreak"'), (ID, "x")]),
    ('"open', [(S, '"open', Flaw.UNTERMINATED)]),
    # raw strings: no escapes, closed by the quote and as many #
    ('r"a\\" b', [(S, 'r"a\\"'), (ID, "b")]),
    ('r#"a"b"# c', [(S, 'r#"a"b"#'), (ID, "c")]),
    ('r##"a"#"## c', [(S, 'r##"a"#"##'), (ID, "c")]),
    ('r#"a"', [(S, 'r#"a"', Flaw.UNTERMINATED)]),
    ("r#x", [(ID, "r"), (Y, "#"), (ID, "x")]),
    # char literals: one character or escape, then '
    ("'\"' '\\'' '\\\\' '\\x41' '\\u0041' 'a' '\n'", [(C, "'\"'"), (C, "'\\''"), (C, "'\\\\'"),
                                                   (C, "'\\x41'"), (C, "'\\u0041'"), (C, "'a'"),
                                                   (C, "'\n'")]),
    ("'\\u{41}'", [(C, "'\\u", Flaw.INVALID_ESCAPE), (Y, "{"), (N, "41"), (Y, "}"),
                   (C, "'", Flaw.UNTERMINATED)]),
    ("'ab", [(C, "'ab", Flaw.CHAR_NOT_CLOSED)]),
    ("'\"\nx", [(C, "'\"\n", Flaw.CHAR_NOT_CLOSED), (ID, "x")]),
    ("f '' s ∑' i g ⁻¹' t x''", [(ID, "f"), (Y, "''"), (ID, "s"), (Y, "∑'"), (ID, "i"), (ID, "g"),
                                 (Y, "⁻¹'"), (ID, "t"), (ID, "x''")]),
    # comments: block comments nest; '/-' skips the character after it; docs are tokens
    ("/- /- -/ -/ a", [(CM, "/- /- -/ -/"), (ID, "a")]),
    ("/-/- -/ a -/", [(CM, "/-/- -/"), (ID, "a"), (Y, "-"), (Y, "/")]),
    ("/-- doc -/ a /-! mod -/ b", [(DOC, "/-- doc -/"), (ID, "a"), (MOD, "/-! mod -/"), (ID, "b")]),
    ("/--/ x -/ a", [(DOC, "/--/ x -/"), (ID, "a")]),
    ('-- x "y\nz "--"', [(CM, '-- x "y'), (ID, "z"), (S, '"--"')]),
    ("/- a /- b -/", [(CM, "/- a /- b -/", Flaw.UNTERMINATED)]),
    # name literals
    ("`foo `Foo.bar ``baz `«a b».c", [(L, "`foo"), (L, "`Foo.bar"), (L, "``baz"),
                                      (L, "`«a b».c")]),
    ("`(tactic| simp)", [(Y, "`"), (Y, "("), (ID, "tactic"), (Y, "|"), (ID, "simp"), (Y, ")")]),
    ("`«open", [(L, "`«open", Flaw.UNTERMINATED)]),
    # numbers
    ("0x1F 0b101 0o17 1_000 2.5 1e-3", [(N, "0x1F"), (N, "0b101"), (N, "0o17"), (N, "1_000"),
                                         (N, "2.5"), (N, "1e-3")]),
]  # fmt: skip


@pytest.mark.parametrize(("source", "tokens"), ROWS)
def test_tokens_are_read_as_lean_reads_them(source, tokens):
    assert read(source) == tokens


def test_a_string_after_a_syntax_that_takes_an_interpolated_one_is_read_so():
    flags = {t.text: t.interpolated for t in tokenize('s!"{x}" "{y}" throwError "{z}"')}
    assert flags == {"s!": False, '"{x}"': True, '"{y}"': False, "throwError": False,
                     '"{z}"': True}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "holes"),
    [
        ('"a{f s!"b{x}"}c"', ['f s!"b{x}"']),
        ('s!"{x} and { {y} }"', ["x", " {y} "]),
        ('"\\{x}{y}"', ["y"]),
        ('"{x -- }"\n}"', ['x -- }"\n']),
        ('"no holes"', []),
    ],
)
def test_interpolation_holes(text, holes):
    assert interpolation_holes(text) == holes


def test_positions_lines_and_first_tokens():
    tokens = tokenize('theorem t :\n  /- a\n b -/ x = "s\nt" ∧ y\n  z')
    where = {t.text: (t.line, t.column, t.line_start) for t in tokens}
    assert where["theorem"] == (1, 0, True)
    assert where["/- a\n b -/"] == (2, 2, True)
    assert where["x"] == (3, 6, False)  # after a comment that ends on its line
    assert where["∧"] == (4, 3, False)  # after a string that ends on its line
    assert where["z"] == (5, 2, True)


def test_the_public_helpers_keep_working():
    assert is_unterminated(tokenize('"open')[0]) and not is_unterminated(tokenize('"x"')[0])
    assert is_unterminated(tokenize("/- open")[0])
    tokens = tokenize("#check x # eval")
    assert hash_word(tokens, 0) == "check" and hash_word(tokens, 2) is None
    assert split_name("Foo.«a.b».c") == ["Foo", "«a.b»", "c"]
    assert escape_name("Foo.my thm") == "Foo.«my thm»" and escape_name("X!.h?") == "X!.h?"
    assert normalize_name("«foo».«a b».«café»") == "foo.«a b».café"


# -- adversarial candidates -----------------------------------------------------------------

MACRO = "macro_rules | `(#print axioms $x) => `(#check $x)"
#: Proof bodies in which a command hides behind a construct a simpler reading gets wrong (the
#: comment says what Lean reads), with the command the screen must name.
HIDDEN = [
    # X!, h? and f are identifiers: the string after them is plain, so the command is code
    ('have X! := 1\nexact X!"{"\n' + MACRO + ' -- "}"', "macro_rules"),
    ('have h? := 1\nexact h?"{"\n' + MACRO + ' -- "}"', "macro_rules"),
    ('exact f"{"\n#eval IO.println "x" -- "}"', "#eval"),
    # no term takes a string glued to an identifier: refused, what it holds named
    ('have X! := 1\nexact X!"\n' + MACRO + '\n-- "', "macro_rules"),
    # a string gap holds one line break: at a second one Lean fails and reads on
    ('exact "a\\\n\n' + MACRO + '\n-- "', "macro_rules"),
    # an invalid escape: Lean fails at it and reads on
    ('exact "\\q\n' + MACRO + ' -- "', "macro_rules"),
    # a raw string has no escapes: r#"\"# ends at "#
    ('have h : r#"\\"#.length = 1 := rfl\n' + MACRO + ' -- "', "macro_rules"),
    # a char literal holds a quote; one not closed makes Lean read on after two characters
    ("exact '\"'\n" + MACRO + ' -- "', "macro_rules"),
    ("exact '\"\n" + MACRO + ' -- "', "macro_rules"),
    # '/-' skips the character after it: '/-/-' opens one comment, not two
    ("norm_num /-/- -/\n" + MACRO + " -- -/", "macro_rules"),
    # '--' in a string is no comment
    ('exact ("--"); #eval 1', "#eval"),
    # interpolated strings: comments in holes; nested; a keyword with a glued string
    ('exact s!"{x /- " -/}"\n' + MACRO + ' -- "', "macro_rules"),
    ('exact s!"{s!"{x /- " -/}"}"\n' + MACRO + ' -- "', "macro_rules"),
    ('exact panic!"{"\n' + MACRO + ' -- "}"', "macro_rules"),
    # a syntax unknown here may take an interpolated string: that reading is screened too
    ('exact sql!"{x /- " -/}"\n' + MACRO + ' -- "', "macro_rules"),
    # holes are code: after a known syntax, and after any other
    ('exact throwError "{(by run_tac (pure ()); exact 0 : Nat)}"', "run_tac"),
    ('exact sql!"{(by run_tac (pure ()); exact 0 : Nat)}"', "run_tac"),
    # «...» quotes a name, quotes included
    ('have «weird name "» : True := trivial\n' + MACRO + ' -- "', "macro_rules"),
]


@pytest.mark.parametrize(("body", "command"), HIDDEN)
def test_a_command_hidden_behind_a_misreadable_construct_is_seen(body, command):
    refusal = forbidden_in_proof(body)
    assert refusal is not None and command in refusal.reason, refusal
    assert refusal.code is RefusalCode.METAPROGRAM and "\n" not in refusal.reason
    candidate = "theorem t : 1 + 1 = 2 := by\n" + "".join(
        f"  {line}\n" if not line.startswith(("macro_rules", "#eval")) else f"{line}\n"
        for line in body.splitlines()
    )
    screened = screen_candidate(candidate, "theorem t : 1 + 1 = 2")
    assert screened.refusal is not None and command in screened.refusal.reason, screened
    assert screened.refusal.line == next(
        number for number, line in enumerate(candidate.splitlines(), 1) if command in line
    )


@pytest.mark.parametrize(
    "body",
    [
        'exact X!"x"',  # glued: no argument, a parse error in Lean
        'exact "\\q"',
        'exact "{"',  # ends elsewhere read as interpolated
        "exact 'ab'",
        'exact "a\\\n\nb"',
    ],
)
def test_what_cannot_be_read_safely_is_refused(body):
    refusal = forbidden_in(body)
    assert refusal is not None and refusal.code is RefusalCode.UNREADABLE, refusal
    assert refusal.reason.startswith("line ") and "\n" not in refusal.reason


@pytest.mark.parametrize(
    "body",
    [
        'exact "a\\\n    b"',
        'exact ⟨\'"\', "a\\"b", r#"c"#, \'\\\'\'⟩',
        'exact (s!"{x /- " -/} and {y}" : String)',
        'simp [show (m!"{e}" : MessageData) = m!"{e}" from rfl]',
        "rw [show f '' s = t from h, Set.preimage]\nexact tsum_eq_zero (∑' n, g n)",
        "/- a /- nested -/ comment -/\nnorm_num [Nat.succ_le] -- done",
        'exact (panic! "x" : Nat) = 0',
    ],
)
def test_ordinary_uses_of_these_constructs_pass(body):
    assert forbidden_in_proof(body) is None, body
