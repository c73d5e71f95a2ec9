"""``lean_dojo_v2.agent.hf_agent``: ``HFAgent(trainer, database_path="dynamic_database.json",
training_config=None, prover_config=None)``, leanloop's (``leanloop.agent.HFAgent``)."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.database.dynamic_database import DEFAULT_JSON_PATH, database_for
from leanloop.agent.hf_agent import HFAgent as _LeanloopHFAgent


class HFAgent(_LeanloopHFAgent):
    """leanloop's ``HFAgent`` with LeanDojo-v2's defaults: ``train()`` fine-tunes the trainer
    (``SFTTrainer`` or ``GRPOTrainer``) on the database's repositories in curriculum order,
    ``prove()`` proves the sorries of the repositories set up with ``HFProver`` on the trainer's
    ``output_dir`` (a LoRA adapter when ``lora_config`` was given).

    Args:
        trainer: An ``SFTTrainer`` or a ``GRPOTrainer``.
        database_path: LeanDojo-v2's database file (imported into leanloop's default
            database), or a leanloop database.
        training_config: LeanDojo-v2's unused argument.
        prover_config: The search budgets (a ``ProverConfig``, a mapping or a YAML/JSON file).
        **kwargs: leanloop's keyword arguments (``data_path``).
    """

    def __init__(
        self,
        trainer: Any,
        database_path: Any = DEFAULT_JSON_PATH,
        training_config: Any = None,
        prover_config: Any = None,
        **kwargs: Any,
    ) -> None:
        note_differences()
        super().__init__(
            trainer, database_for(database_path), training_config, prover_config, **kwargs
        )


__all__ = ["HFAgent"]
