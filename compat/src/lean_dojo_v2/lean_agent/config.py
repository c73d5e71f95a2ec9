"""``lean_dojo_v2.lean_agent.config``: ``TrainingConfig`` (leanloop's
``leanloop.trainer.retrieval_config.TrainingConfig``) and ``ProverConfig``
(``leanloop.prover.config.ProverConfig``), whose fields are LeanDojo-v2's (leanloop's own come
on top); ``from_yaml``, ``from_json`` and ``to_yaml`` read and write them, and a file of both
(``training:`` and ``prover:``, as ``save_configs_to_file`` writes it) is read by either."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from leanloop.atomic import write_text_atomic
from leanloop.prover.config import ProverConfig
from leanloop.trainer.retrieval_config import TrainingConfig

__all__ = ["ProverConfig", "TrainingConfig", "save_configs_to_file"]


def save_configs_to_file(
    training_config: TrainingConfig, prover_config: ProverConfig, config_file: str | os.PathLike
) -> None:
    """Write both configurations to one YAML file, under ``training:`` and ``prover:`` (written
    aside and renamed into place); ``TrainingConfig.from_yaml`` and ``ProverConfig.from_yaml``
    each read their part back.

    Args:
        training_config: The retriever's training.
        prover_config: The search budgets.
        config_file: The YAML file.
    """
    both = {"training": training_config.to_dict(), "prover": prover_config.to_dict()}
    write_text_atomic(Path(config_file), yaml.safe_dump(both, sort_keys=True))
