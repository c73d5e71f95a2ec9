"""How failures reach clients: a JSON body with a one-line ``detail`` (OpenAI's ``error`` object
under ``/v1``), the right status and headers, the request id — never a traceback; unexpected
errors are logged with the request id and answered with 500."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from leanloop.serve.errors import ServeError

log = logging.getLogger("leanloop.serve")

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def retry_after(seconds: float) -> str:
    """The ``Retry-After`` header's value: whole seconds, at least one."""
    return str(max(1, round(seconds)))


def request_id(scope: Any) -> str:
    return (scope.get("state") or {}).get("request_id", "-")


def openai_error(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error object, which its client reads (also as an event of a stream that fails
    after it started)."""
    return {
        "error": {
            "message": message,
            "type": _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "error"),
            "param": None,
            "code": status,
        }
    }


def error_response(
    path: str,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """The answer to a failed request: ``{"detail": message}``, or under ``/v1`` OpenAI's
    ``{"error": {"message", "type", "param", "code"}}`` (which its client reads)."""
    if path.startswith("/v1/"):
        body = openai_error(status, message)
    else:
        body = {"detail": message, **(extra or {})}
    return JSONResponse(body, status_code=status, headers=headers)


#: Names pydantic puts in an error's location for the branch of a union it tried.
_BRANCHES = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _field(loc: tuple[Any, ...]) -> str:
    """``messages.0.content`` for ``("body", "messages", 0, "content", "function-after[...]")``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    parts = [p for p in parts if "[" not in p and p not in _BRANCHES]
    return ".".join(parts) or "body"


async def _serve_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServeError)
    headers = None
    if exc.retry_after is not None:
        headers = {"Retry-After": retry_after(exc.retry_after)}
    if exc.status >= 500:
        log.warning("request %s: %s", request_id(request.scope), exc)
    return error_response(request.url.path, exc.status, str(exc), headers=headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {
            "field": _field(tuple(e.get("loc", ()))),
            "message": e.get("msg", "invalid").removeprefix("Value error, "),
        }
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    message = f"field '{first['field']}': {first['message']}"
    if first["message"].startswith("JSON decode error"):
        message = "the body is not valid JSON"
    return error_response(request.url.path, 422, message, extra={"errors": errors})


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return error_response(request.url.path, exc.status_code, str(exc.detail), headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    rid = request_id(request.scope)
    log.error("request %s failed", rid, exc_info=exc)
    return error_response(
        request.url.path,
        500,
        f"internal error (request {rid}); the server log has the details",
    )


def install_error_handlers(api: FastAPI) -> None:
    api.add_exception_handler(ServeError, _serve_error)
    api.add_exception_handler(RequestValidationError, _invalid)
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(Exception, _unexpected)
