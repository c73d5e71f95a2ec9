"""The failures a request can meet, each with its HTTP status and a short message for the client
(never a traceback): unknown model, bad request, missing key, overload, unavailable, upstream
timeout and upstream failure."""

from __future__ import annotations

from leanloop.errors import LeanloopError


class ServeError(LeanloopError):
    """A failure answered with ``status`` and the one-line ``message`` (and ``Retry-After`` when
    ``retry_after`` says when trying again makes sense)."""

    status: int = 400

    def __init__(
        self, message: str, *, hint: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class BadRequest(ServeError):
    status = 400


class ModelNotFound(ServeError):
    status = 404


class Overloaded(ServeError):
    """Too many requests are waiting for a model; the client should retry later."""

    status = 429

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message, retry_after=retry_after)


class UpstreamFailure(ServeError):
    """The provider behind a model failed or answered something unusable."""

    status = 502


class Unavailable(ServeError):
    """The server cannot do this now: a model that does not load, Lean that is not installed, a
    queue wait that ran out, a server that is shutting down."""

    status = 503


class UpstreamTimeout(ServeError):
    """The provider behind a model did not answer in time."""

    status = 504
