"""``lean_dojo_v2.external_api.python.leanprogress``: ``LeanProgressScorer(model_name,
device=None, template=None)``, leanloop's progress scorer (``leanloop.ml.progress``): it reads
models trained by LeanDojo-v2 (with LeanDojo-v2's text, unscaled) and by leanloop, and
``predict(goal, tactic, prefix=None)`` takes LeanDojo-v2's order."""

from __future__ import annotations

from leanloop.ml.progress import LeanProgressScorer

__all__ = ["LeanProgressScorer"]
