"""``KiminaVerifier``: checking Lean code on a running Kimina Lean Server (``POST /verify``; also
spoken by ``leanloop serve``), in batches, as a ``Verifier``; the positions of its answers are
read in the server's convention (``leanloop.lean.kimina_positions``) and given in the code sent."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import tenacity

from leanloop.errors import LeanloopError
from leanloop.lean.kimina_positions import Convention, ServerConvention, infotree_lines
from leanloop.lean.verification import KiminaResult, Source, Verification
from leanloop.settings import Settings

#: Seconds a request may take beyond the checks themselves (network, queueing, the answer).
MARGIN = 30.0


class _Transient(Exception):
    """An answer worth asking again for (HTTP 5xx or 429)."""


class KiminaVerifier:
    """Checks code on the Kimina Lean Server at ``url``: at most ``batch_size`` codes a request.

    A request waits the per-check timeout × the codes in it + ``MARGIN`` seconds, and never more
    than ``timeout`` seconds. A connection error, a timed-out request or an HTTP 5xx/429 answer
    is retried ``retries`` times, ``backoff`` × 1, 2, 4… seconds apart; when the attempts are
    spent, or on another 4xx or a malformed answer, each code of that batch gets a failed
    ``Verification`` saying why (the other batches are unaffected). The API key, if any, is read
    from the variable ``api_key_env`` for each request and sent as a bearer token, never
    stored or shown. ``client`` is used as given (and left open by ``close``).

    Servers count the lines of their answers from different lines of the code (before October
    2025 from the line after the imports, since then from the first line; no endpoint says
    which): each answer is read in the convention its own messages show, and an answer that
    shows none in the convention this server's earlier answers showed (``convention.learned``),
    before any in ``convention`` (by default the current server's, ``WHOLE``). The lines of the
    ``CheckResult`` are always those of the code sent."""

    live = True
    source: Source = "lean"

    def __init__(
        self,
        url: str,
        *,
        batch_size: int = 8,
        timeout: float = 300,
        retries: int = 3,
        backoff: float = 1.0,
        api_key_env: str | None = None,
        client: httpx.Client | None = None,
        convention: Convention = Convention.WHOLE,
    ) -> None:
        if batch_size < 1 or timeout <= 0 or retries < 0 or backoff < 0:
            raise LeanloopError(
                "KiminaVerifier: batch_size must be at least 1, timeout positive, retries and "
                "backoff not negative"
            )
        if api_key_env is not None and Settings.variable(api_key_env) is None:
            raise LeanloopError(
                f"KiminaVerifier: the API key variable ${api_key_env} is not set",
                hint=f"export {api_key_env}=..., or pass api_key_env=None for a server that "
                "needs no key",
            )
        if not url.startswith(("http://", "https://")):
            raise LeanloopError(
                f"KiminaVerifier: {url!r} is not an http(s) URL",
                hint="give the server's base URL, e.g. http://127.0.0.1:12332",
            )
        self.url = url.rstrip("/")
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.api_key_env = api_key_env
        self._owns_client = client is None
        self.client = client if client is not None else httpx.Client()
        self.convention = ServerConvention(convention)

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        verifications: list[Verification] = []
        for start in range(0, len(codes), self.batch_size):
            batch = codes[start : start + self.batch_size]
            verifications += self._check(start, batch, timeout)
        return verifications

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def _check(self, start: int, batch: Sequence[str], timeout: float) -> list[Verification]:
        ids = [str(start + offset) for offset in range(len(batch))]
        body = {
            "codes": [{"custom_id": i, "proof": code} for i, code in zip(ids, batch, strict=True)],
            "timeout": timeout,
            "disable_cache": False,
            # Lean's account of the commands it elaborated: without it no check counts
            "infotree_type": "full",
        }
        wait = min(self.timeout, timeout * len(batch) + MARGIN)
        started = time.monotonic()

        def failed(reason: str) -> Verification:
            seconds = (time.monotonic() - started) / len(batch)
            message = " ".join(f"the Kimina Lean Server at {self.url}: {reason}".split())
            return Verification.failed(message, seconds, "lean")

        try:
            answer = self._post(body, wait).json()
        except httpx.TimeoutException:
            return [failed(f"no answer within {wait:g} s{self._attempts()}")] * len(batch)
        except httpx.HTTPStatusError as exc:
            return [failed(_status(exc.response))] * len(batch)
        except (httpx.TransportError, _Transient) as exc:
            return [failed(f"{_reason(exc)}{self._attempts()}")] * len(batch)
        except httpx.HTTPError as exc:
            return [failed(_reason(exc))] * len(batch)
        except ValueError:
            return [failed("the answer is not JSON")] * len(batch)
        results = answer.get("results") if isinstance(answer, Mapping) else None
        if not isinstance(results, list):
            return [failed("the answer has no 'results' list")] * len(batch)
        by_id = {
            str(item["custom_id"]): item
            for item in results
            if isinstance(item, Mapping) and str(item.get("custom_id")) in ids
        }
        stray = len(results) - len(by_id)
        default = (time.monotonic() - started) / len(batch)
        read: list[KiminaResult | str | None] = []
        for i in ids:
            item = by_id.get(i)
            if item is None:
                unknown = f" ({stray} result(s) had no known custom_id)" if stray else ""
                read.append(f"the answer has no result for code {i}{unknown}")
                continue
            try:
                read.append(KiminaResult.read(item))
            except (TypeError, ValueError) as exc:
                read.append(f"the result for code {i} is malformed: {exc}")
        readings = self.convention.read(
            [
                (code, r.result if isinstance(r, KiminaResult) else None)
                for code, r in zip(batch, read, strict=True)
            ]
        )
        verifications = []
        for code, r, reading in zip(batch, read, readings, strict=True):
            if not isinstance(r, KiminaResult):
                verifications.append(failed(str(r)))
                continue
            shift = infotree_lines(code, reading)
            seconds = r.seconds if r.seconds is not None else default
            verifications.append(r.verification(seconds, "lean", reading, shift))
        return verifications

    def _post(self, body: dict[str, Any], wait: float) -> httpx.Response:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=tenacity.wait_exponential(multiplier=self.backoff, min=0, max=60),
            retry=tenacity.retry_if_exception_type((httpx.TransportError, _Transient)),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                response = self.client.post(
                    f"{self.url}/verify", json=body, headers=self._headers(), timeout=wait
                )
                if response.status_code >= 500 or response.status_code == 429:
                    raise _Transient(_status(response))
                response.raise_for_status()
                return response
        raise AssertionError("unreachable: tenacity reraises the last error")

    def _headers(self) -> dict[str, str]:
        key = Settings.variable(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _attempts(self) -> str:
        return f" after {self.retries + 1} attempts" if self.retries else ""


def _status(response: httpx.Response) -> str:
    """An HTTP error answer, in one line (with the start of its body)."""
    text = " ".join(response.text.split())[:200]
    return f"answered HTTP {response.status_code} {response.reason_phrase}" + (
        f": {text}" if text else ""
    )


def _reason(exc: Exception) -> str:
    """What went wrong with a request, in one line."""
    if isinstance(exc, _Transient):
        return str(exc)
    return f"cannot reach it ({' '.join(str(exc).split()) or type(exc).__name__})"
