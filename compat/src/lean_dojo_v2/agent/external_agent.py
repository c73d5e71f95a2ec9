"""``lean_dojo_v2.agent.external_agent``: ``ExternalAgent(model_name=...)``, leanloop's
(``leanloop.agent.ExternalAgent``) with LeanDojo-v2's default model at Hugging Face's router
(``HF_TOKEN``)."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.database.dynamic_database import DEFAULT_JSON_PATH, database_for
from lean_dojo_v2.prover.external_prover import DEFAULT_MODEL
from leanloop.agent.external_agent import ExternalAgent as _LeanloopExternalAgent


class ExternalAgent(_LeanloopExternalAgent):
    """leanloop's ``ExternalAgent``: ``prove()`` (``prove(whole_proof=True)`` for whole proofs)
    asks ``model_name``; a hub name is asked at Hugging Face's router with ``HF_TOKEN``.

    Args:
        model_name: The model (default: LeanDojo-v2's).
        database_path: LeanDojo-v2's database file, or a leanloop database.
        **kwargs: leanloop's other arguments (``base_url``, ``api_key_env``,
            ``prover_config``, ``data_path``).
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        database_path: Any = DEFAULT_JSON_PATH,
        **kwargs: Any,
    ) -> None:
        note_differences()
        super().__init__(model_name, database_path=database_for(database_path), **kwargs)


__all__ = ["ExternalAgent"]
