/-
Lean Copilot's `suggest_tactics` with a model served by leanloop.

1. Start the server: `leanloop serve --config models.yaml` (it listens on localhost:23337,
   the port Lean Copilot uses by default). See docs/serving.md.
2. Add Lean Copilot to your project (its README: `require LeanCopilot from git ...` at the
   version matching your `lean-toolchain`, then `lake update LeanCopilot` and `lake build`).
3. Put this file in your project, set `name` below to a generator of your models.yaml and open
   the file in your editor: the suggestions come from that model, through `POST /generate`.

This file is not compiled in leanloop's repository (no Lean toolchain there).
-/
import LeanCopilot

open LeanCopilot

/-- A generator of the leanloop server; `name` is the model's name in models.yaml. -/
def leanloopGenerator : ExternalGenerator := {
  name := "sft"
  host := "localhost"
  port := 23337
}

/- Registers the generator under the key `leanloop` for this file. In a module that other
   files import, write `initialize registerGenerator "leanloop" (.external leanloopGenerator)`
   instead, so that every importing file has it. -/
#eval registerGenerator "leanloop" (.external leanloopGenerator)

/- `suggest_tactics` (and `search_proof`) now ask the leanloop model; without `in`, the option
   applies to the rest of the file. -/
set_option LeanCopilot.suggest_tactics.model "leanloop" in
example (a b c : Nat) : a + b + c = a + c + b := by
  suggest_tactics
  sorry
