"""The words of Lean 4's syntax that tell where a declaration, its proof and a command start or
end, as Lean 4's parser reads them (``src/Lean/Parser/Command.lean``, ``Term.lean``) and the
commands Lean's core, Batteries, Aesop and Mathlib declare.

A command word is a keyword token in Lean: once declared (in core, or by an imported library) it
is never read as an identifier, no tactic or term starts with it, and Lean's parser ends the
tactic block or term it meets it in and starts a new command there, whatever its column.
"""

from __future__ import annotations

DECLARATION_KEYWORDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "instance",
        "structure",
        "class",
        "inductive",
        "axiom",
        "opaque",
        "example",
        "irreducible_def",
    }
)
MODIFIERS = frozenset(
    {
        "private",
        "protected",
        "public",
        "meta",
        "noncomputable",
        "partial",
        "unsafe",
        "nonrec",
        "scoped",
        "local",
    }
)
#: Commands that open or close a scope: a command wherever they start a line.
SCOPE_COMMANDS = frozenset({"namespace", "section", "end"})
#: Commands (other than declarations) that end the previous declaration when they start a line
#: at column 0; those of ``COMMAND_WORDS`` end a proof at any column, mid-line too.
OTHER_COMMANDS = frozenset(
    {
        # Lean core
        "namespace", "section", "end", "open", "variable", "universe", "import", "set_option",
        "attribute", "mutual", "macro", "macro_rules", "syntax", "elab", "elab_rules",
        "notation", "infix", "infixl", "infixr", "prefix", "postfix", "initialize",
        "builtin_initialize", "deriving", "export", "omit", "include", "run_cmd", "run_elab",
        "run_meta", "binder_predicate", "add_decl_doc", "assert_not_exists",
        "assert_not_imported", "declare_syntax_cat", "register_simp_attr", "register_option",
        "register_builtin_option", "register_label_attr", "register_tactic_tag",
        "tactic_extension", "recommended_spelling", "register_error_explanation",
        "with_weak_namespace", "coinductive", "seal", "unseal", "init_quot", "docs_to_verso",
        "declare_simp_like_tactic", "simproc", "dsimproc", "simproc_decl", "dsimproc_decl",
        "builtin_simproc", "builtin_dsimproc", "builtin_simproc_decl", "builtin_dsimproc_decl",
        "grind_pattern", "declare_config_elab", "declare_command_config_elab", "prelude",
        "module",
        # Batteries, Aesop
        "alias", "library_note", "proof_wanted", "theorem_wanted", "def_wanted",
        "instance_wanted", "add_aesop_rules", "erase_aesop_rules", "declare_aesop_rule_sets",
        # Mathlib
        "notation3", "compile_inductive", "suppress_compilation", "unsuppress_compilation",
        "initialize_simps_projections", "mk_iff_of_inductive_prop", "add_tactic_doc",
        "variable?", "recall", "whatsnew", "count_heartbeats", "deprecate",
    }
)  # fmt: skip
#: Commands that are also a tactic and a term when ``in`` follows (``open Nat in simp``).
IN_COMMANDS = frozenset({"open", "set_option"})
#: Words that start a command wherever they stand, at any column and mid-line: a declaration,
#: a scope, and every other command word but ``open``/``set_option`` (tactics and terms too),
#: ``deriving`` (a clause of a declaration too) and the words of a file's header.
COMMAND_WORDS = (DECLARATION_KEYWORDS | SCOPE_COMMANDS | OTHER_COMMANDS) - (
    IN_COMMANDS | {"deriving", "import", "module", "prelude"}
)
#: Keywords that start a command wherever they stand: no term or tactic holds them, so one met
#: after ``:=`` (even mid-line) is past the proof.
NEVER_IN_PROOFS = DECLARATION_KEYWORDS | SCOPE_COMMANDS | {"mutual"}
#: Clauses of a declaration that follow its body (they end the proof, and belong to the
#: declaration: a new proof never replaces them).
BODY_CLAUSES = frozenset(
    {"where", "termination_by", "termination_by?", "decreasing_by", "deriving"}
)
#: ``#`` words that are tactics (and terms) as well as commands: in a proof they are its own.
HASH_TACTICS = frozenset({"adaptation_note"})
#: ``#`` words of commands (``#s`` is Mathlib's notation for a finset's card, ``#[...]`` an
#: array: not every ``#`` starts a command).
HASH_COMMANDS = frozenset(
    {
        # Lean core
        "check", "check_failure", "eval", "eval!", "print", "reduce", "exit", "guard",
        "guard_msgs", "guard_expr", "synth", "where", "version", "import_path",
        "check_assertions", "check_assertions!", "with_exporting", "dump_async_env_state",
        "check_tactic", "check_tactic_failure", "check_simp", "discr_tree_key",
        "discr_tree_simp_key", "time",
        # Batteries, Aesop, ProofWidgets, Plausible, LeanSearchClient
        "help", "lint", "list_linters", "instances", "show_unused", "aesop_rules", "aesop_stats",
        "html", "widget", "sample", "test", "leansearch", "moogle", "loogle",
        # Mathlib (and Mathlib's port)
        "align", "align_import", "noalign", "find", "find_home", "find_syntax", "simp",
        "norm_num", "conv", "whnf", "whnfR", "count_heartbeats", "min_imports",
        "redundant_imports", "explode", "long_names", "long_instances", "exact?", "unfold?",
        "tactic_doc",
    }
)  # fmt: skip
#: ``#`` words of commands that a library declares as tactics too (Mathlib's ``#check`` and
#: ``#find``, LeanSearchClient's searches): in a proof they are tactics only where it is imported.
HASH_BOTH = frozenset({"check", "find", "leansearch", "moogle", "loogle"})
#: Term-level binders, each bringing a `:=` of its own inside a statement or a type.
TERM_BINDERS = frozenset({"let", "have", "letI", "haveI", "let_fun"})
THEOREM_KINDS = frozenset({"theorem", "lemma"})

#: Tokens after which a tactic is expected (the next one may be ``open … in``, a ``#`` tactic).
TACTIC_OPENERS = frozenset(
    {
        "by", "all_goals", "any_goals", "try", "repeat", "repeat'", "focus", "first", "iterate",
        "classical", "then", "else", "do", "in", "with_reducible", "with_reducible_and_instances",
        "with_unfolding_all", ";", "<;>", "·", "=>", "|",
    }
)  # fmt: skip
#: Tokens after which a term is expected: an operator, or a word that takes a term.
TERM_OPENERS = frozenset(
    {
        "exact", "refine", "refine'", "apply", "show", "from", "calc", "fun", "λ", "use",
        "exists", "return", "then", "else", "if", "using", "in", "do", "with",
        ":=", ",", "=>", "|", "<|", "$", "|>", "←", "→", "↔", "∘", "=", "≠", "<", ">", "≤",
        "≥", "+", "-", "*", "/", "∧", "∨", "¬", ":", "▸", "∈", "∉", "⊆", "⊂", "∣", "^", "::",
        "&", "%", "•", "∩", "∪", "×", "≃", "≅", "≡", "↑", "⇑",
    }
)  # fmt: skip
#: Words that continue the tactic or term before them (``simp [h]`` … ``at h``), checked by no
#: column: one left of a tactic block's column may still belong to its last tactic.
CONTINUING_WORDS = frozenset(
    {"at", "with", "using", "generalizing", "then", "else", "from", "in", "says", "only", "do"}
)
