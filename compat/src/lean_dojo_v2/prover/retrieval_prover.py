"""``lean_dojo_v2.prover.retrieval_prover``: ``RetrievalProver(ret_ckpt_path, gen_ckpt_path,
indexed_corpus_path)``, leanloop's (``leanloop.prover.retrieval.RetrievalProver``) with
LeanDojo-v2's ``search``. ``indexed_corpus_path`` is a ``corpus.jsonl`` or the export holding
it; ``gen_ckpt_path`` a causal tactic generator (a trained ``SFTTrainer`` output, a checkpoint
or a model name), where LeanDojo-v2 took a ByT5 Lightning checkpoint."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.prover.base_prover import LeanDojoV2Search
from leanloop.prover.retrieval import RetrievalProver as _LeanloopRetrievalProver


# search returns LeanDojo-v2's (result, used_tactics), not leanloop's result
class RetrievalProver(LeanDojoV2Search, _LeanloopRetrievalProver):  # type: ignore[misc]
    """leanloop's ``RetrievalProver``; ``search`` returns ``(result, used_tactics)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        note_differences()
        super().__init__(*args, **kwargs)


__all__ = ["RetrievalProver"]
