"""Replies sent while they are generated: how much of a growing text is safe to send (not the
start of a stop sequence, not half a character), the sink that takes a local model's tokens on
its thread as ``transformers`` generates them, and the text each streamed reply has sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("leanloop.serve")


def settled(text: str, markers: Sequence[str]) -> tuple[str, bool]:
    """The part of a growing ``text`` that later text cannot change: cut before the first
    marker (then ``True``: the reply ends there), else without a tail that may still become a
    marker, an unfinished character (``U+FFFD``, half of a multi-byte one) or trailing
    whitespace (a tokenizer may still join it to what follows)."""
    cuts = [text.index(marker) for marker in markers if marker and marker in text]
    if cuts:
        return text[: min(cuts)], True
    end = len(text)
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:size]):
                end = min(end, len(text) - size)
                break
    return text[:end].rstrip("\ufffd").rstrip(), False


class Abandoned(Exception):
    """The client of a streamed reply went away: generation stops at its next token."""


class TokenSink:
    """A ``transformers`` streamer (``put`` the prompts, then one token per reply and step;
    ``end``) for replies generated on a model's thread: each reply's new text, as far as it is
    settled (before the end of its turn), goes to ``deliver(index, text)``. Once ``abandon``
    is called, the next token stops generation (``put`` raises ``Abandoned``)."""

    def __init__(
        self,
        tokenizer: Any,
        end_ids: Sequence[int],
        deliver: Callable[[int, str], None],
        markers: Sequence[str] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.end_ids = set(end_ids)
        self.deliver = deliver
        self.markers = list(markers)
        self.tokens: list[list[int]] | None = None
        self.sent: list[str] = []
        self.ended: list[bool] = []
        self._abandoned = threading.Event()

    def abandon(self) -> None:
        """Stop generation at the next token (from any thread)."""
        self._abandoned.set()

    def put(self, value: Any) -> None:
        if self._abandoned.is_set():
            raise Abandoned("the client went away")
        if self.tokens is None:  # the prompts (one row per reply): nothing to send
            rows = int(value.shape[0]) if getattr(value, "ndim", 1) > 1 else 1
            self.tokens = [[] for _ in range(rows)]
            self.sent = [""] * rows
            self.ended = [False] * rows
            return
        for index, token in enumerate(value.reshape(-1).tolist()):
            if index >= len(self.tokens) or self.ended[index]:
                continue
            if token in self.end_ids:
                self.ended[index] = True
                continue
            self.tokens[index].append(token)
            self._send(index)

    def _send(self, index: int) -> None:
        assert self.tokens is not None
        text = self.tokenizer.decode(self.tokens[index], skip_special_tokens=True)
        safe, ended = settled(text, self.markers)
        if ended:
            self.ended[index] = True
        if safe.startswith(self.sent[index]) and len(safe) > len(self.sent[index]):
            new = safe[len(self.sent[index]) :]
            self.sent[index] = safe
            self.deliver(index, new)

    def end(self) -> None:
        """Generation ended (the final replies say the rest)."""


class SentText:
    """What one streamed reply has sent: ``grow`` takes the text received so far and gives
    what may be sent now (nothing after a stop sequence), ``finish`` the rest of the final
    text."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = list(stops)
        self.received = ""
        self.sent = ""
        self.stopped = False

    def grow(self, piece: str) -> str:
        self.received += piece
        if self.stopped:
            return ""
        safe, self.stopped = settled(self.received, self.stops)
        if not safe.startswith(self.sent) or len(safe) == len(self.sent):
            return ""
        new, self.sent = safe[len(self.sent) :], safe
        return new

    def finish(self, final: str) -> str:
        """The part of ``final`` (the whole reply, cut at its stop sequence) not sent yet."""
        if not final.startswith(self.sent):
            log.warning("a streamed reply was sent as %r but ends as %r", self.sent, final)
            return ""
        rest, self.sent = final[len(self.sent) :], final
        return rest
