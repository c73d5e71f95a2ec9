"""A transport that answers from a transcript of a Lean server's exchanges and checks that each
request equals the one in the transcript (to test clients against real Lean output that was
recorded). Not the ``replay`` backend (``leanloop.lean.backends``), which follows recorded proof
transitions without Lean."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from leanloop.lean.transport import Transport


class TranscriptMismatch(AssertionError):
    """A transcript's transport received a request other than the transcript's."""


class TranscriptTransport(Transport):
    """Answers each request with the recorded answer; fails if a request differs from the
    recording (so a test checks what a client sends as well as how it reads the answers).

    With ``ordered=False`` requests may come in any order (each recorded exchange is used once),
    for clients that work on several recordings concurrently. Request fields named in
    ``ignore`` are not compared (e.g. ``infotree``, for a recording made without it: its answer
    then carries none, as a REPL that gives none would answer).
    """

    def __init__(
        self,
        exchanges: Sequence[tuple[Any, Any]],
        *,
        name: str = "recording",
        ordered: bool = True,
        ignore: Sequence[str] = (),
    ) -> None:
        self.ignore = frozenset(ignore)
        self.exchanges = list(exchanges)
        self.position = 0
        self.name = name
        self.generation = 1
        self.ordered = ordered
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def exchange(self, request: Any) -> Any:
        if not self.ordered:
            return self._exchange_unordered(request)
        if self.position >= len(self.exchanges):
            raise TranscriptMismatch(f"{self.name}: unexpected extra request {request!r}")
        expected, answer = self.exchanges[self.position]
        if self._normalise(request) != self._normalise(expected):
            raise TranscriptMismatch(
                f"{self.name}: request #{self.position} differs from the recording:\n"
                f"  sent:     {request!r}\n  recorded: {expected!r}"
            )
        self.position += 1
        return answer

    def _exchange_unordered(self, request: Any) -> Any:
        with self._lock:
            for index, (expected, answer) in enumerate(self.exchanges):
                if index not in self._used and self._normalise(expected) == self._normalise(
                    request
                ):
                    self._used.add(index)
                    self.position += 1
                    return answer
        raise TranscriptMismatch(f"{self.name}: no recorded exchange for request {request!r}")

    @property
    def finished(self) -> bool:
        return self.position == len(self.exchanges)

    def _normalise(self, value: Any) -> Any:
        if isinstance(value, tuple):
            return list(value)
        if isinstance(value, dict) and self.ignore:
            return {k: v for k, v in value.items() if k not in self.ignore}
        return value
