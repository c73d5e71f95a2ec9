"""The words of native code, read where no axiom report exists (a recorded verdict): every spelling
of the tactics and of Lean's axioms that trust compiled code, and words that only look alike."""

from __future__ import annotations

import pytest

from leanloop.lean.native import native_code_use


@pytest.mark.parametrize(
    ("proof", "word"),
    [
        ("native_decide", "native_decide"),
        ("norm_num\nall_goals native_decide", "native_decide"),
        ("bv_decide", "bv_decide"),
        ("bv_decide?", "bv_decide?"),
        ('bv_check "proof.lrat"', "bv_check"),
        ("decide +native", "decide +native"),
        ("decide (config := { native := true })", "native := true"),
        ("exact Lean.ofReduceBool _ _ rfl", "Lean.ofReduceBool"),
        ("exact _root_.Lean.ofReduceBool _ _ rfl", "_root_.Lean.ofReduceBool"),
        ("exact @Lean.ofReduceNat a b h", "Lean.ofReduceNat"),
        ("open Lean in exact ofReduceBool _ _ rfl", "ofReduceBool"),
        ("exact Lean.«ofReduceBool» _ _ rfl", "Lean.«ofReduceBool»"),
        ("have := Lean.trustCompiler", "Lean.trustCompiler"),
        ("exact (rfl : Lean.reduceBool c = true)", "Lean.reduceBool"),
        ("exact (rfl : _root_.Lean.reduceNat n = 3)", "_root_.Lean.reduceNat"),
        ("run_tac pure (mkConst `Lean.ofReduceBool)", "`Lean.ofReduceBool"),
        ('have := s!"{by native_decide}"', "native_decide"),
    ],
)
def test_every_spelling_of_native_code_is_found(proof, word):
    assert native_code_use(proof) == word


@pytest.mark.parametrize(
    "proof",
    [
        "decide",
        "decide +kernel",
        "decide (config := { native := false })",
        "bv_omega",  # simp and omega: checked by the kernel
        "bv_normalize",
        "simp [my_native_decide_lemma, Nat.reduceBool_spec]",
        "exact Nat.reduceBool",  # not Lean's
        "-- native_decide would be faster\nnorm_num",
        '/- bv_decide -/ exact "Lean.ofReduceBool"',
    ],
)
def test_what_only_looks_like_native_code_is_not(proof):
    assert native_code_use(proof) is None
