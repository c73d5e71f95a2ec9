"""The Lean server protocols, typed once: request and response models of the Lean REPL and of
Pantograph."""
