"""``HFAgent``: trains a Hugging Face tactic generator (``SFTTrainer`` or ``GRPOTrainer``)
repository by repository and proves with it (``HFProver`` on the trainer's ``output_dir``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from leanloop.agent.base_agent import BaseAgent
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.prover.config import ProverConfig
from leanloop.prover.hf import HFProver

log = logging.getLogger(__name__)


class HFAgent(BaseAgent):
    """``HFAgent(trainer=SFTTrainer(...) | GRPOTrainer(...))``: ``train()`` fine-tunes the
    trainer's model on the repositories in curriculum order; ``prove()`` searches with the
    newest checkpoint (a LoRA adapter when the trainer trains one). See ``BaseAgent`` for
    the other arguments.

    The arguments are LeanDojo-v2's, in its order: ``HFAgent(trainer, database_path,
    training_config, prover_config)``. ``training_config`` is accepted for that form only: an
    HFAgent trains with its trainer's own settings, so a ``TrainingConfig`` given is kept as
    ``self.config`` (as LeanDojo-v2 kept it) and used by nothing, which a warning says.

    Args:
        trainer: An ``SFTTrainer`` or a ``GRPOTrainer``.
        database_path: A SQLite file, a ``postgresql://`` URL, an open ``DynamicDatabase``,
            or None for the default database.
        training_config: LeanDojo-v2's unused argument (see above).
        prover_config: The search budgets of ``prove()``.
        data_path: Where the trainer's merged export is written.

    Raises:
        LeanloopError: ``trainer`` is not an SFT or GRPO trainer.
    """

    def __init__(
        self,
        trainer: Any,
        database_path: str | os.PathLike | DynamicDatabase | None = None,
        training_config: Any = None,
        prover_config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        *,
        data_path: str | os.PathLike | None = None,
    ) -> None:
        from leanloop.trainer.hf_common import HFCurriculumTrainer

        if not isinstance(trainer, HFCurriculumTrainer):
            raise LeanloopError(
                f"HFAgent trains an SFTTrainer or a GRPOTrainer, not a {type(trainer).__name__}",
                hint="LeanAgent trains the retriever (RetrievalTrainer)",
            )
        super().__init__(database_path, prover_config=prover_config, data_path=data_path)
        self.trainer = trainer
        self.config = training_config
        if training_config is not None:
            log.warning(
                "HFAgent: training_config has no effect (the %s trains with its own settings; "
                "a TrainingConfig configures LeanAgent's retriever)",
                type(trainer).__name__,
            )

    @property
    def output_dir(self):
        """The trainer's ``output_dir``: where its checkpoints are."""
        return self.trainer.output_dir

    @property
    def use_lora(self) -> bool:
        """Whether the trainer trains a LoRA adapter."""
        return self.trainer.use_lora

    def _get_build_deps(self) -> bool:
        return False

    def _setup_prover(self) -> HFProver:
        self.prover = HFProver(self.output_dir, use_lora=self.use_lora, config=self.prover_config)
        return self.prover
