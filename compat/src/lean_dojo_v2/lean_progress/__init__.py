"""``lean_dojo_v2.lean_progress``: LeanProgress's scripts, on leanloop's progress model.

- ``python -m lean_dojo_v2.lean_progress.create_sample_dataset --output FILE`` writes a small
  JSONL file of ``goal``/``prefix``/``tactic``/``steps_remaining`` rows;
- ``python -m lean_dojo_v2.lean_progress.train_steps_model --dataset FILE --output-dir DIR
  --model-name NAME`` trains leanloop's ``ProgressTrainer`` on such a file; ``LEANPROGRESS_MODEL``
  set to ``DIR`` lets leanloop's server and provers score tactics with it.

``leanloop train progress`` builds the rows from a database's traced proofs instead.
"""
