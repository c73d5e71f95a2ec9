"""``lean_dojo_v2.prover.hf_prover``: ``HFProver(ckpt_path, use_lora=False, device="auto")``,
leanloop's (``leanloop.prover.hf.HFProver``) with LeanDojo-v2's ``search``."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.prover.base_prover import LeanDojoV2Search
from leanloop.prover.hf import HFProver as _LeanloopHFProver


# search returns LeanDojo-v2's (result, used_tactics), not leanloop's result
class HFProver(LeanDojoV2Search, _LeanloopHFProver):  # type: ignore[misc]
    """leanloop's ``HFProver`` (a trainer's ``output_dir``, a checkpoint or a LoRA adapter);
    ``search`` returns ``(result, used_tactics)`` as in LeanDojo-v2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        note_differences()
        super().__init__(*args, **kwargs)


__all__ = ["HFProver"]
