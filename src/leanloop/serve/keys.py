"""API keys: read from the environment variables a configuration names, compared in constant
time, and kept out of log records and error messages."""

from __future__ import annotations

import hmac
import logging

from leanloop.errors import LeanloopError
from leanloop.settings import Settings

MASK = "[redacted]"


class Secrets:
    """The keys in use; every key read through :meth:`key` is masked by :meth:`redact`."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def key(self, variable: str, what: str) -> str:
        """The value of ``variable``; an error naming ``what`` needs it when it is unset."""
        value = Settings.variable(variable)
        if value is None:
            raise LeanloopError(
                f"the environment variable {variable} ({what}) is not set",
                hint=f"export {variable}=... before starting the server",
            )
        self._values.add(value)
        return value

    def redact(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        return text

    def log_filter(self) -> logging.Filter:
        """A filter that masks the keys in every record it sees (message and arguments)."""
        secrets = self

        class _Redact(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                if secrets._values:
                    message = record.getMessage()
                    masked = secrets.redact(message)
                    if masked != message:
                        record.msg, record.args = masked, None
                return True

        return _Redact()


def same_key(given: str, expected: str) -> bool:
    """Whether ``given`` is the key, in time that does not depend on where they differ."""
    return hmac.compare_digest(given.encode(), expected.encode())
