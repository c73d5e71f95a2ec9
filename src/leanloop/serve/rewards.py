"""LeanProgress rewards for /generate: the progress model (``progress_model`` of the configuration,
else ``$LEANPROGRESS_MODEL``) predicts the steps remaining after each candidate tactic, loaded
once on its own thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from leanloop.errors import LeanloopError
from leanloop.serve.errors import BadRequest, Unavailable

log = logging.getLogger(__name__)


class ProgressService:
    """``await progress.steps_remaining(state, tactics)`` with the ``ProgressScorer`` at
    ``path`` (loaded on first use)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.scorer: Any = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="progress")
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> bool:
        return self.path is not None

    @property
    def loaded(self) -> bool:
        return self.scorer is not None

    def _load_scorer(self) -> Any:
        from leanloop.ml.progress import ProgressScorer

        return ProgressScorer(self.path)

    def require(self) -> None:
        """Fail with 400 when no progress model is configured."""
        if not self.configured:
            raise BadRequest(
                "use_reward needs a progress model, and none is configured",
                hint="set LEANPROGRESS_MODEL, or progress_model in the server configuration, to "
                "a model trained with ProgressTrainer",
            )

    async def _ready(self) -> Any:
        self.require()
        async with self._lock:
            if self.scorer is None:
                loop = asyncio.get_running_loop()
                try:
                    self.scorer = await loop.run_in_executor(self._executor, self._load_scorer)
                except LeanloopError as exc:
                    raise Unavailable(f"the progress model could not be loaded: {exc}") from None
                except Exception as exc:
                    log.exception("the progress model could not be loaded")
                    raise Unavailable(
                        f"the progress model could not be loaded ({type(exc).__name__}; the "
                        "server log has the details)"
                    ) from None
        return self.scorer

    async def steps_remaining(self, state: str, tactics: Sequence[str]) -> list[float]:
        """The predicted steps left after each tactic on ``state`` (inf when the model's
        output is not a number)."""
        scorer = await self._ready()
        items = [(state, None, tactic) for tactic in tactics]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, scorer.predict_batch, items)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.scorer = None
