"""PromptFormat: the system / user / assistant examples built from traced steps, and the parsing of
replies, on hand-built LeanDojo-style steps and on the real sample."""

from __future__ import annotations

import pytest

from leanloop.data.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    PromptExample,
    PromptFormat,
    state_with_premises,
    tactic_text,
)
from leanloop.data.records import Theorem, TracedTactic
from tests.helpers import sample_theorems, with_sorry

REF = {
    "full_name": "Nat.add_comm",
    "def_path": ".lake/packages/lean4/src/lean/Init/Data/Nat/Basic.lean",
    "def_pos": [138, 19],
    "def_end_pos": [138, 27],
}
REF2 = {**REF, "full_name": "Nat.succ_le", "def_pos": [40, 9], "def_end_pos": [40, 20]}


def step(tactic: str, annotated: str | None = None, refs=(), state: str = "n : ℕ\n⊢ n = n"):
    """A traced step as LeanDojo writes it: ``annotated_tactic`` is ``[text, [premise, ...]]``."""
    return TracedTactic.model_validate(
        {
            "tactic": tactic,
            "annotated_tactic": [tactic if annotated is None else annotated, list(refs)],
            "state_before": state,
            "state_after": "no goals",
        }
    )


def theorem(*steps: TracedTactic, name: str = "Test.thm") -> Theorem:
    return Theorem(
        url="https://github.com/example/lean-test",
        commit="0123456789abcdef0123456789abcdef01234567",
        file_path="Test/Basic.lean",
        full_name=name,
        start=(1, 1),
        end=(5, 10),
        traced_tactics=steps,
    )


def roles(messages: list[dict[str, str]]) -> list[str]:
    return [m["role"] for m in messages]


def test_system_prompt_is_the_lean4_one_tactic_instruction():
    text = DEFAULT_SYSTEM_PROMPT
    assert "Lean 4" in text
    assert "exactly one Lean 4 tactic" in text and "keeps its line breaks" in text
    assert "Do not use sorry or admit" in text
    assert "tactic only" in text and "⊢" in text  # how to read the state, what to reply
    messages = PromptFormat().prompt("⊢ True")
    assert roles(messages) == ["system", "user"]
    assert messages[0]["content"] == text
    custom = PromptFormat(system="Prove it.")
    assert custom.prompt("⊢ True")[0] == {"role": "system", "content": "Prove it."}
    rows = list(custom.examples([theorem(step("trivial", state="⊢ True"))]))
    assert rows[0].prompt[0]["content"] == "Prove it."
    with pytest.raises(Exception):  # noqa: B017 - frozen: one format shared by all users
        custom.system = "changed"


def test_user_text_is_the_state_without_premise_marks():
    state = "  h : <a>Nat.succ</a> n ≤ m\n⊢ <a>Nat.add</a> n 1 ≤ m  \n"
    messages = PromptFormat().prompt(state)
    assert messages[1] == {"role": "user", "content": "h : Nat.succ n ≤ m\n⊢ Nat.add n 1 ≤ m"}
    rows = list(PromptFormat().examples([theorem(step("simp", state=state))]))
    assert rows[0].prompt == messages
    assert rows[0].state == state  # the recorded state travels along unchanged


def test_assistant_text_has_no_premise_marks():
    annotated = "rw [<a>Nat.add_comm</a>, <a>Nat.succ_le</a>]"
    plain = step("rw [Nat.add_comm, Nat.succ_le]", annotated, [REF, REF2])
    assert [p.full_name for p in plain.premises] == ["Nat.add_comm", "Nat.succ_le"]
    # a step whose recorded tactic still carries the marks (the annotated text as tactic)
    marked = step(annotated, annotated, [REF, REF2])
    fmt = PromptFormat()
    rows = list(fmt.examples([theorem(plain, marked)]))
    assert len(rows) == 2
    for row in rows:
        assert row.completion == [
            {"role": "assistant", "content": "rw [Nat.add_comm, Nat.succ_le]"}
        ]
        assert row.tactic == "rw [Nat.add_comm, Nat.succ_le]"
        assert roles(row.prompt + row.completion) == ["system", "user", "assistant"]
    assert fmt.completion("exact <a>foo</a> <a>bar</a>") == [
        {"role": "assistant", "content": "exact foo bar"}
    ]


def test_multi_line_tactic_is_taught_whole():
    tactic = "have h : n + 1 = 1 + n := by\n  rw [Nat.add_comm]  \n\n  rfl"
    annotated = "have h : n + 1 = 1 + n := by\n    rw [<a>Nat.add_comm</a>]\n    rfl"
    blank_first = "\n  constructor\n  · exact h"
    rows = list(
        PromptFormat().examples([theorem(step(tactic, annotated, [REF]), step(blank_first))])
    )
    whole = ["have h : n + 1 = 1 + n := by\n  rw [Nat.add_comm]\n  rfl", "constructor\n· exact h"]
    assert [r.completion[0]["content"] for r in rows] == whole
    assert [r.tactic for r in rows] == whole
    assert [PromptFormat().parse(text) for text in whole] == whole  # read back as taught
    assert PromptFormat().completion("  simp at <a>h</a>\n    exact h") == [
        {"role": "assistant", "content": "simp at h\n  exact h"}
    ]
    assert tactic_text(" \n\t") == ""


def test_sorry_admit_and_empty_steps_are_skipped():
    kept = ["intro n", "exact sorry_lemma n", "simp [Foo.admit]", "exact h.admitted"]
    skipped = ["sorry", "exact sorry", "admit", "have h : n = n := by\n  sorry", "  \n  "]
    steps = [step(t) for t in (skipped[0], kept[0], skipped[1], kept[1], skipped[2])]
    steps += [step(t) for t in (kept[2], skipped[3], kept[3], skipped[4])]
    rows = list(PromptFormat().examples([theorem(*steps)]))
    assert [r.tactic for r in rows] == kept
    assert all(r.full_name == "Test.thm" for r in rows)


def test_a_real_theorem_with_its_proof_replaced_by_sorry_gives_nothing(sample_dir):
    real = next(t for t in sample_theorems(sample_dir) if t.num_steps >= 2)
    fmt = PromptFormat()
    assert len(list(fmt.examples([real]))) == real.num_steps
    assert list(fmt.examples([with_sorry(real)])) == []


def test_examples_are_frozen_records_whose_fields_are_the_columns():
    import dataclasses

    (example,) = PromptFormat().examples([theorem(step("simp", state="⊢ True"))])
    assert isinstance(example, PromptExample)
    assert PromptExample.columns() == (
        "prompt",
        "completion",
        "state",
        "tactic",
        "full_name",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        example.tactic = "rfl"  # type: ignore[misc]
    assert example.row(exclude={"completion"}) == {
        "prompt": PromptFormat().prompt("⊢ True"),
        "state": "⊢ True",
        "tactic": "simp",
        "full_name": "Test.thm",
    }
    assert list(example.row()) == list(PromptExample.columns())
    with pytest.raises(ValueError, match="no column completions"):
        example.row(exclude={"completions"})


def test_parse_reads_the_tactic_of_a_reply():
    fmt = PromptFormat()
    assert fmt.parse("simp at h") == "simp at h"
    assert fmt.parse("\n  exact h  \n  rfl") == "exact h\nrfl"
    # a tactic of several lines, its indentation kept relative to its first line
    calc = "calc a = b := by simp\n  _ = c := rfl"
    assert fmt.parse("  calc a = b := by simp\n    _ = c := rfl  \n") == calc
    assert fmt.parse(f"Here it is:\n```lean\n{calc}\n```\nThe steps are ...") == calc
    # a blank line ends the tactic: what follows is not part of it
    assert fmt.parse("have h : p := by\n  simp\n\nThis works because ...") == (
        "have h : p := by\n  simp"
    )
    assert fmt.parse("tactic: have h : p := by\n  simp") == "have h : p := by\n  simp"
    assert fmt.parse("```lean4\nnorm_num\n```") == "norm_num"
    assert fmt.parse("```\n\nomega\n```") == "omega"
    assert fmt.parse("``` lean\nsimp\n```") == "simp"  # a space before the language
    assert fmt.parse("tactic: ring") == "ring"
    # a bare label: the tactic is on the next line, never an empty tactic
    assert fmt.parse("tactic:\nlinarith") == "linarith"
    nothing = ("", "  \n", "```lean\n```", "tactic:", "sorry", "tactic: admit", "exact sorry")
    for reply in (*nothing, "have h : p := by\n  sorry"):
        assert fmt.parse(reply) is None, reply
    assert fmt.parse("exact sorry_lemma") == "exact sorry_lemma"


def test_examples_from_the_real_sample(sample_dir):
    theorems = sample_theorems(sample_dir)
    steps = [(t, s) for t in theorems for s in t.traced_tactics]
    assert len(steps) == 435
    fmt = PromptFormat()
    rows = list(fmt.examples(theorems))
    assert len(rows) == 435  # the sample has no sorry step
    multi_line = first_lines_incomplete = 0
    for row, (thm, traced) in zip(rows, steps, strict=True):
        assert row.full_name == thm.full_name and row.state == traced.state_before
        assert row.prompt == [
            {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": traced.state_before.strip()},
        ]
        (assistant,) = row.completion
        text = assistant["content"]
        assert assistant["role"] == "assistant" and text == row.tactic
        assert text == traced.tactic.strip()  # the whole recorded tactic, line breaks kept
        assert "<a>" not in text and "</a>" not in text
        assert "<a>" not in row.prompt[1]["content"]
        assert fmt.parse(text) == text  # what is taught is what the provers read back
        # the annotated text (premise marks, source indentation) is the same tactic, as the
        # README of the sample says to compare: whitespace collapsed
        assert " ".join(text.split()) == " ".join(traced.annotated_tactic.plain_text.split())
        if "\n" in text:
            multi_line += 1
            first = text.splitlines()[0]
            first_lines_incomplete += first.endswith(("by", ":=", "with"))
    assert multi_line == 43
    assert first_lines_incomplete == 12  # their first line alone is not a tactic
    marked = [s for _, s in steps if "<a>" in s.annotated_tactic.text]
    assert len(marked) == 256  # the marks are there to strip
    tail = [r.tactic for r in rows if r.full_name == "Batteries.BinomialHeap.Imp.Heap.WF.tail?"]
    assert (
        "match eq₂ : s.deleteMin le, eq with\n| some (a, tl), rfl => exact hwf.deleteMin eq₂"
        in tail
    )


@pytest.fixture(scope="module")
def chat_tokenizer(sample_dir):
    from transformers import AutoTokenizer

    from tests.tiny_causal import shared_tiny_model

    return AutoTokenizer.from_pretrained(shared_tiny_model(sample_dir))


def rendered(tokenizer, messages) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_a_too_long_prompt_keeps_its_template_and_system_prompt(chat_tokenizer, sample_dir):
    fmt = PromptFormat()
    state = max(
        (s.state_before for t in sample_theorems(sample_dir) for s in t.traced_tactics), key=len
    )
    premises = [f"theorem premise_{i} (n : ℕ) : n + {i} = {i} + n" for i in range(6)]
    whole = fmt.prompt(state, premises)
    size = token_count(chat_tokenizer, rendered(chat_tokenizer, whole))
    head = rendered(chat_tokenizer, fmt.prompt("X")).split("X")[0]  # the template to the state
    assert head.startswith("<|im_start|>system\n" + fmt.system)

    # cutting the rendered tokens from the left, as generation did, loses the system prompt
    ids = chat_tokenizer(rendered(chat_tokenizer, whole), add_special_tokens=False)["input_ids"]
    assert not chat_tokenizer.decode(ids[-(size // 2) :]).startswith("<|im_start|>system")

    # fitted: within the budget, the template and the system prompt whole, the goal kept
    for budget in (size - 5, size // 2, token_count(chat_tokenizer, head) + 20):
        fitted = fmt.fit_prompt(state, premises, tokenizer=chat_tokenizer, max_tokens=budget)
        assert fitted is not None and fitted.cut and fitted.tokens <= budget
        text = rendered(chat_tokenizer, fitted.messages)
        assert token_count(chat_tokenizer, text) == fitted.tokens
        assert text.startswith(head) and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert fitted.messages[0] == whole[0]
        content = fitted.messages[1]["content"]
        assert state.splitlines()[-1].strip().endswith(content.splitlines()[-1][-10:])
    # the least useful premises go first: a budget a little short drops the first listed only
    short = fmt.fit_prompt(state, premises, tokenizer=chat_tokenizer, max_tokens=size - 5)
    assert short is not None
    kept = short.messages[1]["content"]
    assert "premise_0 " in whole[1]["content"]  # the best, listed last
    assert "premise_0 " in kept and "premise_5 " not in kept and state.strip() in kept
    # fitting what fits changes nothing; nothing fits when the template alone is too long
    fits = fmt.fit_prompt(state, premises, tokenizer=chat_tokenizer, max_tokens=size)
    assert fits is not None and fits.messages == whole and not fits.cut and fits.tokens == size
    assert fmt.fit_prompt(state, tokenizer=chat_tokenizer, max_tokens=5) is None


def test_a_fitted_training_example_keeps_its_whole_completion(chat_tokenizer, sample_dir):
    fmt = PromptFormat()
    theorem, step = next(
        (t, s) for t in sample_theorems(sample_dir) for s in t.traced_tactics
        if len(s.state_before) > 400
    )  # fmt: skip
    example = fmt.example(theorem, step)
    assert example is not None
    full = chat_tokenizer.apply_chat_template(example.prompt + example.completion, tokenize=False)
    size = token_count(chat_tokenizer, full)
    fitted = fmt.fit_prompt(
        step.state_before, tokenizer=chat_tokenizer, max_tokens=size - 30,
        completion=example.completion,
    )  # fmt: skip
    assert fitted is not None and fitted.cut and fitted.tokens <= size - 30
    text = chat_tokenizer.apply_chat_template(fitted.messages + example.completion, tokenize=False)
    assert text.endswith(example.tactic + "<|im_end|>\n")
    assert fitted.messages[1]["content"] in step.state_before


def test_prompts_with_premises_are_built_in_one_place():
    fmt = PromptFormat(system="Prove it.")
    premises = ["theorem best : p", "theorem second : q"]
    messages = fmt.prompt("  h : <a>Nat.succ</a> n\n⊢ p  ", premises)
    assert messages[1]["content"] == state_with_premises("h : Nat.succ n\n⊢ p", premises)
    # what RetrievalProver hands its generator becomes the same prompt again
    assert fmt.prompt(fmt.user_content("h : <a>Nat.succ</a> n\n⊢ p", premises)) == messages
    (row,) = fmt.examples([theorem(step("exact h", state="⊢ p"))])
    with_premises = fmt.example(
        theorem(step("exact h", state="⊢ p")), step("exact h", state="⊢ p"), premises
    )
    assert with_premises is not None and with_premises.completion == row.completion
    assert with_premises.prompt == fmt.prompt("⊢ p", premises)
