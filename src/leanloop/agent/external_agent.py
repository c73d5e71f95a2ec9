"""``ExternalAgent``: proves with a model behind an OpenAI-compatible endpoint (``ExternalProver``);
it trains nothing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from leanloop.agent.base_agent import BaseAgent
from leanloop.database import DynamicDatabase
from leanloop.prover.config import ProverConfig
from leanloop.prover.external import ExternalProver


class ExternalAgent(BaseAgent):
    """``ExternalAgent(model_name=..., base_url=...)``: ``prove()`` asks the model at
    ``base_url`` (None: Hugging Face's router for a hub name such as
    ``deepseek-ai/DeepSeek-Prover-V2-671B:novita``, else OpenAI's endpoint) for tactics, or
    whole proofs with ``prove(whole_proof=True)``; the API key is read from the environment
    variable ``api_key_env`` (``auto``: ``HF_TOKEN`` for Hugging Face's router, else
    ``OPENAI_API_KEY``; None: send none, for a local server). ``train()`` and ``evaluate()``
    say that there is nothing to train. See ``BaseAgent`` for the other arguments.

    Args:
        model_name: The model's name at the endpoint.
        base_url: The OpenAI-compatible endpoint; None for Hugging Face's router (a hub model
            name) or OpenAI's.
        api_key_env: The environment variable holding the API key (``auto``: from the
            endpoint); None sends none.
        database_path: A SQLite file, a ``postgresql://`` URL, an open ``DynamicDatabase``,
            or None for the default database.
        prover_config: The search budgets of ``prove()``.
        data_path: Where a merged export is written.
    """

    def __init__(
        self,
        model_name: str = "gpt-4o-mini",
        base_url: str | None = None,
        api_key_env: str | None = "auto",
        database_path: str | os.PathLike | DynamicDatabase | None = None,
        *,
        prover_config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        data_path: str | os.PathLike | None = None,
    ) -> None:
        super().__init__(database_path, prover_config=prover_config, data_path=data_path)
        self.model_name = model_name
        self.base_url = base_url
        self.api_key_env = api_key_env

    def _get_build_deps(self) -> bool:
        return False

    def _setup_prover(self) -> ExternalProver:
        self.prover = ExternalProver(
            self.model_name, self.base_url, self.api_key_env, config=self.prover_config
        )
        return self.prover
