/-!
# Natural numbers

Small facts about `Nat` proved with Lean's core library only (no Mathlib). Some are left as
`sorry` for leanloop to prove.
-/

namespace LeanloopExample

theorem add_zero' (n : Nat) : n + 0 = n := by
  rfl

theorem zero_add' (n : Nat) : 0 + n = n := by
  induction n with
  | zero => rfl
  | succ k ih => omega

theorem add_comm' (a b : Nat) : a + b = b + a := by
  omega

theorem add_assoc' (a b c : Nat) : a + b + c = a + (b + c) := by
  omega

theorem succ_ne_zero' (n : Nat) : n + 1 ≠ 0 := by
  omega

theorem mul_one' (n : Nat) : n * 1 = n := by
  simp

theorem two_mul' (n : Nat) : 2 * n = n + n := by
  omega

theorem le_add_right' (a b : Nat) : a ≤ a + b := by
  omega

theorem lt_succ' (n : Nat) : n < n + 1 := by
  omega

theorem double_even (n : Nat) : (n + n) % 2 = 0 := by
  omega

theorem mul_zero' (n : Nat) : n * 0 = 0 := by
  sorry

theorem add_right_cancel' (a b c : Nat) (h : a + c = b + c) : a = b := by
  sorry

theorem max_self' (n : Nat) : max n n = n := by
  sorry

end LeanloopExample
