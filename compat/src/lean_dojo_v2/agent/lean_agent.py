"""``lean_dojo_v2.agent.lean_agent``: ``LeanAgent(database_path="dynamic_database.json",
training_config=None, prover_config=None)``, leanloop's (``leanloop.agent.LeanAgent``)."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.database.dynamic_database import DEFAULT_JSON_PATH, database_for
from leanloop.agent.lean_agent import LeanAgent as _LeanloopLeanAgent


class LeanAgent(_LeanloopLeanAgent):
    """leanloop's ``LeanAgent`` with LeanDojo-v2's defaults: ``train()`` trains the retriever
    with EWC repository by repository (recording the lifelong R@10 matrix); ``prove()`` uses
    ``RetrievalProver`` with the tactic generator ``generator`` — LeanDojo-v2 took one from a
    fixed file; here it is an argument, and ``prove()`` without it says in one line what to
    pass.

    Args:
        database_path: LeanDojo-v2's database file (imported into leanloop's default
            database), or a leanloop database.
        training_config: A ``TrainingConfig``, a mapping of its fields or a YAML/JSON file
            (LeanDojo-v2's file of both configurations too).
        prover_config: A ``ProverConfig``, a mapping or a file.
        **kwargs: leanloop's keyword arguments (``generator``, ``data_path``).
    """

    def __init__(
        self,
        database_path: Any = DEFAULT_JSON_PATH,
        training_config: Any = None,
        prover_config: Any = None,
        **kwargs: Any,
    ) -> None:
        note_differences()
        super().__init__(database_for(database_path), training_config, prover_config, **kwargs)


def main() -> int:
    """``python -m lean_dojo_v2.lean_agent``: leanloop's ``python -m leanloop.agent.lean_agent``
    (``--config lean_agent.yaml``: the repositories, training and prover settings, database and
    generator; LeanDojo-v2's took no arguments and traced one fixed repository)."""
    from leanloop.agent.lean_agent import main as leanloop_main

    return leanloop_main()


__all__ = ["LeanAgent", "main"]
