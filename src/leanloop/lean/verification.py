"""Checking whole pieces of Lean code at scale, behind one interface (``Verifier``): leanloop's
pool of REPLs (``PoolVerifier``, imports elaborated once per REPL), a Kimina Lean Server
(``leanloop.lean.kimina.KiminaVerifier``), or verdicts Lean gave earlier (``RecordedVerifier``,
which answers only code it has a recorded verdict for). Each answer says where it comes from:
Lean now, or a recorded verdict."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from leanloop.errors import DataFormatError, LeanloopError
from leanloop.lean.account import commands_from_infotree
from leanloop.lean.errors import LeanRequestError, RequestTimeout, ServerError
from leanloop.lean.kimina_positions import Convention, PositionReading, ServerConvention
from leanloop.lean.pool import ServerPool
from leanloop.lean.protocol import repl as proto
from leanloop.lean.repl import split_header
from leanloop.lean.server import CheckResult, LeanServer

#: Where a verdict comes from: Lean checked the code now, or Lean's verdict was recorded earlier.
Source = Literal["lean", "recorded"]


@dataclass(frozen=True)
class Verification:
    """Lean's answer on one piece of code (``result``), or why there is none (``error``: a
    timeout, a crash, imports that do not elaborate, no recorded verdict), the seconds the check
    took, and where the answer comes from (``source``); for a Kimina Lean Server's answer, how
    its positions were read (``positions``: the lines of ``result`` are those of the code sent)."""

    result: CheckResult | None
    error: str | None
    seconds: float
    source: Source
    timed_out: bool = False  # the check ran out of time (the code's fault, not the verifier's)
    positions: PositionReading | None = None

    @classmethod
    def failed(
        cls, error: str, seconds: float, source: Source, *, timed_out: bool = False
    ) -> Verification:
        return cls(None, error, seconds, source, timed_out)


@runtime_checkable
class Verifier(Protocol):
    """Checks whole pieces of Lean code. ``live`` says whether Lean runs on each code now (so
    code leanloop adds, such as its axiom audit, is checked too); a recorded verifier is not
    live."""

    live: bool
    source: Source

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        """Lean's answer on each code, in order; ``timeout`` bounds each check in seconds."""
        ...

    def close(self) -> None: ...


class PoolVerifier:
    """Checks code on a pool of up to ``max_servers`` Lean servers made by ``factory`` (e.g. a
    ``Launcher`` from ``leanloop.lean.backends.open_servers``), keyed by the code's imports: a
    REPL elaborates ``import Mathlib`` once and is reused for every code with the same imports.
    Each answer carries Lean's account of the commands where the backend gives one, unless
    ``account`` is False (``/verify``, which is not an audit). Thread-safe: several threads may
    check at once (one server each)."""

    live = True
    source: Source = "lean"

    def __init__(
        self,
        factory: Any,
        *,
        max_servers: int = 2,
        max_uses: int = 1000,
        account: bool = True,
    ) -> None:
        self.account = account
        self.pool: ServerPool[LeanServer] = ServerPool(
            factory, max_uses=max_uses, max_servers=max_servers
        )

    def check(self, code: str, timeout: float, infotree: str | None = None) -> Verification:
        """Lean's answer on ``code`` (with its account of the commands, unless the verifier was
        made without, and the infotree of that kind when one is asked for), its imports
        elaborated first under the server's own time limit and the code under ``timeout``
        seconds.

        Args:
            code: Lean code with its imports.
            timeout: Seconds the check may take (the imports aside).
            infotree: Also give Lean's infotree of this kind.

        Returns:
            The answer, or why there is none.
        """
        started = time.monotonic()
        header, _, _ = split_header(code)
        try:
            with self.pool.lease(header) as server:
                # the imports under the server's own limit (timing them out would lose them)
                server.load_imports(header)
                with server.time_limit(timeout):
                    result = server.elaborate(code, account=self.account, infotree=infotree)
        except (LeanRequestError, ServerError) as exc:
            timed_out = isinstance(exc, RequestTimeout)
            return Verification.failed(
                exc.message, time.monotonic() - started, "lean", timed_out=timed_out
            )
        return Verification(result, None, time.monotonic() - started, "lean")

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        return [self.check(code, timeout) for code in codes]

    def close(self) -> None:
        self.pool.close()


# -- Kimina Lean Server's answer shape (also the recorded verdicts' format) ----------------------


def check_result_of(
    response: Mapping[str, Any], lines: int = 0, infotree_lines: int = 0
) -> CheckResult:
    """A ``CheckResult`` of the REPL response in a Kimina Lean Server answer (its ``messages``
    and ``sorries`` read with the REPL protocol's models, ``leanloop.lean.protocol.repl``),
    ``lines`` added to each line (1 or more) it gives (see ``leanloop.lean.kimina_positions``),
    and, where the answer carries the REPL's ``infotree``, Lean's account of the commands it
    elaborated (its lines moved by ``infotree_lines``); ``ValueError`` when it has another
    shape."""
    if not isinstance(response, Mapping):
        raise ValueError("the response is not an object")
    read: dict[str, list[Any]] = {"messages": [], "sorries": []}
    for key, model in (("messages", proto.Message), ("sorries", proto.Sorry)):
        for index, item in enumerate(response.get(key) or ()):
            try:
                read[key].append(model.model_validate(item))
            except ValidationError as exc:
                error = exc.errors()[0]
                where = ".".join(str(part) for part in error["loc"])
                place = f"{key}[{index}]" + (f".{where}" if where else "")
                raise ValueError(f"{place}: {error['msg']}") from None
    infotree = response.get("infotree")
    commands = commands_from_infotree(infotree) if infotree is not None else None
    result = CheckResult(
        tuple(m.lean() for m in read["messages"]),
        tuple(s.site() for s in read["sorries"]),
        commands,
    )
    return result.moved(lines, infotree_lines)


@dataclass(frozen=True)
class KiminaResult:
    """One item of a Kimina answer's ``results``, read: Lean's answer on the code, its lines as
    the server gave them (``result``), or why the check failed (``error``), and the seconds the
    server measured, when it says."""

    result: CheckResult | None
    error: str | None
    seconds: float | None = None

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> KiminaResult:
        """The item read; ``ValueError`` when it has another shape.

        Args:
            item: ``{"error": ...}`` or ``{"response": ...}`` (with Kimina's ``custom_id``).

        Returns:
            The item, read.

        Raises:
            ValueError: It is neither.
        """
        if not isinstance(item, Mapping):
            raise ValueError("the result is not an object")
        error = item.get("error")
        if error:
            return cls(None, str(error))
        response = item.get("response")
        if response is None:
            raise ValueError("the result has neither 'error' nor 'response'")
        time = response.get("time") if isinstance(response, Mapping) else None
        seconds = float(time) if isinstance(time, int | float) else None
        return cls(check_result_of(response), None, seconds)

    def verification(
        self,
        seconds: float,
        source: Source,
        positions: PositionReading | None = None,
        infotree_lines: int = 0,
    ) -> Verification:
        """The ``Verification`` it gives: its positions read as ``positions`` says (as they
        are without it), its infotree's lines moved by ``infotree_lines``."""
        if self.result is None:  # Kimina says "Lean process timed out" when time ran out
            error = self.error or "no answer"
            timed_out = "timed out" in error.lower()
            return Verification.failed(error, seconds, source, timed_out=timed_out)
        lines = positions.lines if positions is not None else 0
        moved = self.result.moved(lines, infotree_lines)
        return Verification(moved, None, seconds, source, positions=positions)


def verification_of(
    result: Mapping[str, Any],
    seconds: float,
    source: Source,
    positions: PositionReading | None = None,
    infotree_lines: int = 0,
) -> Verification:
    """A ``Verification`` of one item of a Kimina answer's ``results`` (``error`` set when the
    check itself failed, else ``response``), its positions read as ``positions`` says (as they
    are without it) and its infotree's lines moved by ``infotree_lines``; ``ValueError`` when it
    has another shape."""
    return KiminaResult.read(result).verification(seconds, source, positions, infotree_lines)


class RecordedVerifier:
    """Lean's verdicts recorded earlier, one JSON object a line (``code``, the whole code that
    was checked, and ``result``, the Kimina Lean Server's answer on it): answers only code whose
    exact text has a recorded verdict and refuses anything else. Its answers are recorded
    verdicts, never checks made now (``live`` is False: nothing leanloop adds is checked).

    The positions of each answer are read in the convention of the server that recorded it
    (``leanloop.lean.kimina_positions``): shown by the answer itself, else by the other answers
    of the file (``convention.learned``), else ``default``."""

    live = False
    source: Source = "recorded"

    def __init__(self, path: str | Path, default: Convention = Convention.WHOLE) -> None:
        self.path = Path(path)
        self.convention = ServerConvention(default)
        rows = []
        for number, code, item in self._rows():
            try:
                rows.append((code, KiminaResult.read(item)))
            except (TypeError, ValueError) as exc:
                raise self._bad(number, exc) from None
        readings = self.convention.read([(code, read.result) for code, read in rows])
        self._verdicts: dict[str, Verification] = {
            code: read.verification(read.seconds or 0.0, "recorded", reading)
            for (code, read), reading in zip(rows, readings, strict=True)
        }

    def _rows(self) -> list[tuple[int, str, Mapping[str, Any]]]:
        """Each recorded ``(line number, code, result)``."""
        import orjson

        try:
            lines = self.path.read_bytes().splitlines()
        except OSError as exc:
            raise LeanloopError(f"{self.path}: cannot read the recorded verdicts ({exc})") from None
        rows = []
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataFormatError(self.path, f"not JSON ({exc})", line=number) from None
            if not isinstance(row, dict) or not isinstance(row.get("code"), str):
                raise DataFormatError(
                    self.path, "expected an object with the checked 'code'", line=number
                )
            try:
                (item,) = row["result"]["results"]
            except (KeyError, TypeError, ValueError) as exc:
                raise self._bad(number, exc) from None
            if not isinstance(item, Mapping):
                raise self._bad(number, "the result is not an object")
            rows.append((number, row["code"], item))
        return rows

    def _bad(self, number: int, reason: object) -> DataFormatError:
        return DataFormatError(
            self.path,
            f"expected 'result' to hold one result with Lean's response ({reason})",
            line=number,
            field="result",
        )

    def __len__(self) -> int:
        return len(self._verdicts)

    def check(self, code: str, timeout: float = 0.0) -> Verification:
        verdict = self._verdicts.get(code)
        if verdict is None:
            return Verification.failed(
                f"no verdict is recorded for this code in {self.path.name} (a recorded "
                "verifier answers only the exact code Lean checked)",
                0.0,
                "recorded",
            )
        return verdict

    def check_batch(self, codes: Sequence[str], timeout: float = 0.0) -> list[Verification]:
        return [self.check(code, timeout) for code in codes]

    def close(self) -> None:
        pass
