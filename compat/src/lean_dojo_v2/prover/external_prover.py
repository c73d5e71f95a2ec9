"""``lean_dojo_v2.prover.external_prover``: ``ExternalProver(model_name=...)``, leanloop's
(``leanloop.prover.external.ExternalProver``) with LeanDojo-v2's default model and
``search``. A hub model name (LeanDojo-v2's default ``deepseek-ai/DeepSeek-Prover-V2-671B:novita``)
is asked at Hugging Face's router with ``HF_TOKEN``, as LeanDojo-v2 asked it; ``base_url`` and
``api_key_env`` (leanloop's) choose another endpoint."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.prover.base_prover import LeanDojoV2Search
from leanloop.prover.external import ExternalProver as _LeanloopExternalProver

#: LeanDojo-v2's default model (at Hugging Face's router, provider novita).
DEFAULT_MODEL = "deepseek-ai/DeepSeek-Prover-V2-671B:novita"


# search returns LeanDojo-v2's (result, used_tactics), not leanloop's result
class ExternalProver(LeanDojoV2Search, _LeanloopExternalProver):  # type: ignore[misc]
    """leanloop's ``ExternalProver`` defaulting to LeanDojo-v2's model; ``search`` returns
    ``(result, used_tactics)``, ``generate_whole_proof(theorem)`` a proof (unchecked: leanloop's
    ``prove_whole`` checks it with Lean).

    Args:
        model_name: The model (default: LeanDojo-v2's, at Hugging Face's router).
        *args: leanloop's other arguments (``base_url``, ``api_key_env``).
        **kwargs: leanloop's keyword arguments (``timeout``, ``config``, ...).
    """

    def __init__(self, model_name: str = DEFAULT_MODEL, *args: Any, **kwargs: Any) -> None:
        note_differences()
        super().__init__(model_name, *args, **kwargs)


__all__ = ["DEFAULT_MODEL", "ExternalProver"]
