"""Tracing: turn a Lean project into typed records (theorems with their tactic steps, premises,
files), elaborating its files through the Lean REPL. It knows nothing of the database."""
