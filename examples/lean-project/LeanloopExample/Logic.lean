/-!
# Propositional logic

Small facts proved by Lean's core tactics. Some are left as `sorry` for leanloop to prove.
-/

namespace LeanloopExample

theorem and_swap' (p q : Prop) (h : p ∧ q) : q ∧ p := by
  exact ⟨h.2, h.1⟩

theorem or_swap' (p q : Prop) (h : p ∨ q) : q ∨ p := by
  cases h with
  | inl hp => exact Or.inr hp
  | inr hq => exact Or.inl hq

theorem imp_self' (p : Prop) : p → p := by
  intro h
  exact h

theorem not_not_intro' (p : Prop) (h : p) : ¬¬p := by
  intro hn
  exact hn h

theorem and_left' (p q : Prop) (h : p ∧ q) : p := by
  sorry

theorem true_and' (p : Prop) (h : p) : True ∧ p := by
  sorry

end LeanloopExample
