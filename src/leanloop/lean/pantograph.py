"""The Pantograph backend: ``PantographServer``, the ``LeanServer`` over Pantograph's REPL
(goal states addressed by id, goals addressed individually, files elaborated by its frontend).

What it gives and what it does not, against the Lean REPL:

- **Imports.** A Pantograph process imports its modules when it starts (``MODULE...``); code
  whose imports it holds is sent without them (``readHeader`` false: elaborated in the
  process's environment) and its positions moved back to the code as given; other code is sent
  whole with ``readHeader``, Pantograph then elaborates its imports for that request.
- **Lean's account of the commands.** ``frontend.process`` answers one compilation unit per
  top-level command with its ``boundary``: the byte range ``[begin, end)`` (UTF-8, as
  Pantograph's ``Repl.lean`` takes ``String.Pos.byteIdx`` of the command's source and its
  tests count ``utf8ByteSize``; PyPantograph documents "byte boundaries [begin, end[") from
  where Lean's parser started the command to where it started the next. ``check`` turns them
  into Lean's account of the commands (``lean.account.commands_from_boundaries``): where
  each command starts and ends, so a command hidden in a declaration's text or a missing audit
  command is seen. The units name no syntax kind or elaborator, so an audit command that a
  macro rewrote is not seen as such (the REPL's infotree shows it).
- **No tactic trace, no infotree.** Tracing needs each tactic's position and ``/verify`` may ask
  for an infotree; Pantograph's frontend gives neither, and such requests are refused with
  ``Unsupported`` (``features``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.lean.account import commands_from_boundaries
from leanloop.lean.errors import LeanRequestError, ProtocolError
from leanloop.lean.protocol import pantograph as proto
from leanloop.lean.repl import imported_modules, split_header
from leanloop.lean.sandbox import prepare_sandbox, unsandboxed_environment
from leanloop.lean.server import (
    CheckResult,
    LeanMessage,
    LeanServer,
    ProofFinished,
    ProofState,
    TacticFailed,
    TacticResult,
    TheoremSource,
)
from leanloop.lean.transport import (
    PantographFraming,
    ProcessTransport,
    Transport,
    lowered_timeout,
)

if TYPE_CHECKING:
    from leanloop.lean.backends import Launcher, LeanOptions

#: The modules a process imports when neither the options nor the code say.
DEFAULT_MODULES = ("Init",)


def _message(message: proto.PantographMessage | str, line_offset: int = 0) -> LeanMessage:
    if isinstance(message, str):
        return LeanMessage("error", message)
    pos = message.pos if isinstance(message.pos, dict) else {}
    end = message.end_pos if isinstance(message.end_pos, dict) else {}

    def moved(line: Any) -> Any:
        return line + line_offset if isinstance(line, int) and line > 0 else line

    return LeanMessage(
        severity="info" if message.severity == "information" else message.severity,
        text=message.data,
        line=moved(pos.get("line")),
        column=pos.get("column"),
        end_line=moved(end.get("line")),
        end_column=end.get("column"),
    )


class PantographServer(LeanServer):
    """``LeanServer`` over Pantograph (``pantograph-repl``), started with the modules to import.

    Pantograph addresses each goal of a state (``goal=`` of ``run_tactic``) and deletes states on
    ``release``; whole files are checked with its frontend (see the module for what its answers
    hold).

    Args:
        transport: How requests reach the process (``launch`` makes one that starts
            ``pantograph-repl`` in a project).
        options: Pantograph options (its ``options.set`` command), set again after every
            restart.
        modules: The modules the process imports when it starts.
    """

    backend = "pantograph"
    features = frozenset({"account"})

    def __init__(
        self,
        transport: Transport,
        *,
        options: dict | None = None,
        modules: Sequence[str] = DEFAULT_MODULES,
    ) -> None:
        super().__init__()
        self.transport = transport
        self.options = options or {}
        self.modules = tuple(modules)
        self._configured_generation = -1

    @classmethod
    def launch(
        cls,
        project_root: str | Path,
        executable: str | Path,
        *,
        lake: str | Path = "lake",
        options: LeanOptions | None = None,
        env: dict[str, str] | None = None,
        **settings: Any,
    ) -> PantographServer:
        """A Pantograph server whose process starts on the first request, as
        ``<executable> MODULE...`` in the sandbox (see ``leanloop.lean.sandbox``) with the
        environment of ``lake env`` in the project, or as ``lake env <executable> MODULE...``
        where the sandbox was turned off.

        Args:
            project_root: The Lake project (built) whose environment is loaded.
            executable: The ``pantograph-repl`` executable.
            lake: The ``lake`` executable.
            options: The limits, the sandbox (None: the settings' defaults, on unless
                ``LEANLOOP_SANDBOX=off``), the modules to import (default ``Init``) and
                Pantograph's options (``leanloop.lean.backends.LeanOptions``).
            env: Extra environment variables for the process.
            **settings (Any): Fields of ``options`` given one by one (``timeout=30``,
                ``modules=("Mathlib",)``...), over ``options``.

        Returns:
            The server (no process started yet).

        Raises:
            SandboxUnavailable: The sandbox is on and cannot be set up here.
        """
        from leanloop.lean.backends import LeanOptions

        chosen = LeanOptions.model_validate({**(options or LeanOptions()).model_dump(), **settings})
        box = prepare_sandbox(
            chosen.sandbox,
            root=project_root,
            lake=lake,
            env=env,
            start_timeout=chosen.start_timeout,
            name="Pantograph",
        )
        modules = chosen.modules or DEFAULT_MODULES
        program = [str(executable), *modules]
        transport = ProcessTransport(
            program if box is not None else [str(lake), "env", *program],
            PantographFraming(),
            cwd=project_root,
            env=unsandboxed_environment(env) if box is None else None,
            timeout=chosen.timeout,
            start_timeout=chosen.start_timeout,
            memory_limit_mb=chosen.memory_limit_mb,
            name="Pantograph",
            sandbox=box,
        )
        return cls(transport, options=dict(chosen.pantograph_options), modules=modules)

    @classmethod
    def start(cls, launcher: Launcher, key: Hashable = None) -> PantographServer:
        """A Pantograph server as ``launcher`` (from ``leanloop.lean.backends.open_servers``)
        says, importing the options' modules, else those of ``key`` when it is a header (a
        pool keyed by the code's imports), else ``Init``.

        Args:
            launcher: The project, the executable, ``lake`` and the options.
            key: The pool's key.

        Returns:
            The server (no process started yet).
        """
        assert launcher.executable is not None
        options = launcher.options
        if not options.modules and isinstance(key, str) and imported_modules(key):
            options = options.model_copy(update={"modules": imported_modules(key)})
        return cls.launch(launcher.root, launcher.executable, lake=launcher.lake, options=options)

    @property
    def generation(self) -> int:
        return self.transport.generation

    def close(self) -> None:
        self.transport.close()

    @contextlib.contextmanager
    def time_limit(self, seconds: float) -> Iterator[None]:
        """Bound each request to ``seconds`` (at most the process's own limit) inside the
        block."""
        with lowered_timeout(self.transport, seconds):
            yield

    def _call(self, payload: proto._Payload):
        if self.options and self._configured_generation != self.generation:
            self._configured_generation = self.generation
            self._send(proto.OptionsSet.model_validate(self.options))
            self._configured_generation = self.generation
        return self._send(payload)

    def _send(self, payload: proto._Payload):
        self.stats.requests += 1
        raw = self.transport.exchange((payload.command, payload.to_json()))
        result = proto.parse_result(payload, raw)
        if isinstance(result, proto.InteractionError):
            self.stats.failures += 1
            raise LeanRequestError(
                f"Pantograph refused {payload.command} ({result.error}): {result.desc}"
            )
        return result

    def _state(
        self, state_id: int, goals: Sequence[proto.PantographGoal], messages=()
    ) -> ProofState:
        return ProofState(
            state_id,
            tuple(goal.pretty() for goal in goals),
            self.generation,
            id(self),
            tuple(messages),
        )

    # -- LeanServer ----------------------------------------------------------------------------

    def start_proof(self, goal: str) -> ProofState:
        started = self._call(proto.GoalStart(expr=goal))
        # Lean's own rendering of the goal comes with the first (empty) step.
        first = self._call(proto.GoalTactic(state_id=started.state_id, tactic="skip"))
        if first.errors() or first.next_state_id is None:
            raise LeanRequestError(f"cannot start a proof of {goal!r}: {first.errors()}")
        self.release_ids([started.state_id])
        return self._state(first.next_state_id, first.goals or [])

    def _frontend(
        self, code: str, *, sorrys: bool = False
    ) -> tuple[proto.FrontendProcessResult, str, int]:
        """Pantograph's frontend on ``code``: its answer, the text it was sent and how many lines
        of ``code`` precede that text (the imports the process holds, left out)."""
        header, body, offset = split_header(code)
        modules = imported_modules(header)
        if header.strip() and set(modules) <= set(self.modules):
            sent, read_header = body, None
        else:
            sent, offset, read_header = code, 0, bool(modules) or None
        request = proto.FrontendProcess(file=sent, sorrys=sorrys or None, read_header=read_header)
        return self._call(request), sent, offset

    def _units_messages(self, result: proto.FrontendProcessResult, offset: int) -> list:
        return [_message(m, offset) for unit in result.units for m in unit.messages]

    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        code = f"{theorem.prefix.rstrip()}\n\n{theorem.example()}\n"
        result, _, offset = self._frontend(code, sorrys=True)
        for unit in reversed(result.units):
            if unit.goal_state_id is not None and unit.goals:
                return self._state(unit.goal_state_id, unit.goals)
        errors = [m for m in self._units_messages(result, offset) if m.severity == "error"]
        problem = str(errors[0]) if errors else "no proof state was produced"
        raise LeanRequestError(
            f"cannot start a proof of {theorem.full_name} ({theorem.file_path}): {problem}"
        )

    def open_sorries(self, code: str) -> list[ProofState]:
        result, _, offset = self._frontend(code, sorrys=True)
        errors = [m for m in self._units_messages(result, offset) if m.severity == "error"]
        if errors:
            raise LeanRequestError(f"the code does not elaborate: {errors[0]}")
        states = [
            self._state(u.goal_state_id, u.goals)
            for u in result.units
            if u.goal_state_id is not None and u.goals
        ]
        if not states:
            raise LeanRequestError("the code has no sorry to start a proof from")
        return states

    def run_tactic(
        self, state: ProofState, tactic: str, *, goal: int | None = None
    ) -> TacticResult:
        self._own(state)
        result = self._call(proto.GoalTactic(state_id=state.id, goal_id=goal, tactic=tactic))
        messages = tuple(_message(m) for m in result.messages or [])
        errors = result.errors()
        if errors:
            self.stats.failures += 1
            return TacticFailed(errors[0], messages)
        if result.has_sorry:
            self.stats.failures += 1
            return TacticFailed("the tactic leaves a sorry", messages)
        assert result.next_state_id is not None and result.goals is not None
        if not result.goals:
            return ProofFinished(result.next_state_id, messages)
        return self._state(result.next_state_id, result.goals, messages)

    def elaborate(
        self,
        code: str,
        *,
        all_tactics: bool = False,
        account: bool = False,
        infotree: str | None = None,
    ) -> CheckResult:
        """Lean's messages on ``code`` from Pantograph's frontend and, with ``account``, its
        account of the commands made of the compilation units' ranges (see the module); every
        tactic and an infotree are refused with ``Unsupported``."""
        self.require(*(["tactics"] if all_tactics else []), *(["infotree"] if infotree else []))
        result, sent, offset = self._frontend(code)
        commands = None
        if account:
            boundaries = [u.boundary for u in result.units if u.boundary is not None]
            if len(boundaries) < len(result.units):
                raise ProtocolError("Pantograph answered a compilation unit without its boundary")
            try:
                commands = commands_from_boundaries(boundaries, sent, offset)
            except ValueError as exc:
                raise ProtocolError(
                    f"Pantograph's compilation units cannot be placed: {exc}"
                ) from None
        return CheckResult(tuple(self._units_messages(result, offset)), commands=commands)

    def check(self, code: str) -> CheckResult:
        """Lean's answer on ``code``, with the account of its compilation units."""
        return self.elaborate(code, account=True)

    def release(self, *states: ProofState) -> None:
        live = [s.id for s in states if s.owner == id(self) and s.generation == self.generation]
        self.release_ids(live)

    def release_ids(self, ids: Sequence[int]) -> None:
        """Delete Pantograph's states by number.

        Args:
            ids: The state numbers (of the current process).
        """
        if ids:
            self._call(proto.GoalDelete(state_ids=list(ids)))

    def inspect(self, name: str) -> proto.EnvInspectResult:
        """Type, module and source position of a constant of the environment.

        Args:
            name: The constant's full name.

        Returns:
            Pantograph's answer.

        Raises:
            LeanRequestError: Pantograph refused (e.g. an unknown name).
        """
        return self._call(proto.EnvInspect(name=name, source=True))
