/-!
# Lists

Small facts about `List` proved with Lean's core library only (no Mathlib). Some are left as
`sorry` for leanloop to prove.
-/

namespace LeanloopExample

theorem length_nil' : ([] : List Nat).length = 0 := by
  rfl

theorem length_cons' (x : Nat) (xs : List Nat) : (x :: xs).length = xs.length + 1 := by
  rfl

theorem length_append' (xs ys : List Nat) : (xs ++ ys).length = xs.length + ys.length := by
  simp

theorem append_nil' (xs : List Nat) : xs ++ [] = xs := by
  simp

theorem nil_append' (xs : List Nat) : [] ++ xs = xs := by
  rfl

theorem reverse_reverse' (xs : List Nat) : xs.reverse.reverse = xs := by
  simp

theorem map_id'' (xs : List Nat) : xs.map (fun x => x) = xs := by
  simp

theorem length_map' (f : Nat → Nat) (xs : List Nat) : (xs.map f).length = xs.length := by
  simp

theorem length_reverse' (xs : List Nat) : xs.reverse.length = xs.length := by
  sorry

theorem mem_singleton' (x : Nat) : x ∈ [x] := by
  sorry

theorem append_assoc' (xs ys zs : List Nat) : xs ++ ys ++ zs = xs ++ (ys ++ zs) := by
  sorry

end LeanloopExample
