/-
Lean Copilot's `suggest_tactics` with a model served by leanloop.

Setup, following Lean Copilot's own README (github.com/lean-dojo/LeanCopilot):

0. Lean Copilot's requirements: Linux, macOS or Windows WSL; Git LFS (`git lfs install`); a
   project on Lean `v4.3.0-rc2` or newer.
1. In the project's `lakefile.lean`, give the package the link arguments of Lean Copilot's
   CTranslate2 library:
     package «my-package» where
       moreLinkArgs := #["-L./.lake/packages/LeanCopilot/.lake/build/lib", "-lctranslate2"]
   (in a `lakefile.toml`, the same `moreLinkArgs = [...]` among the package's top-level keys).
2. Require Lean Copilot at the version that matches the project's `lean-toolchain`:
     require LeanCopilot from git "https://github.com/lean-dojo/LeanCopilot.git" @ "LEAN_COPILOT_VERSION"
3. `lake update LeanCopilot`
4. `lake exe LeanCopilot/download` (Lean Copilot's built-in models, into ~/.cache/lean_copilot/;
   its other tactics use them, the leanloop generator below does not)
5. `lake build`
6. Start the server: `leanloop serve --config models.yaml` (it listens on localhost:23337, the
   port Lean Copilot uses by default). See docs/serving.md.
7. Put this file in your project, set `name` below to a generator of your models.yaml and open
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
