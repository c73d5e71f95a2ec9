"""The Pantograph backend: ``PantographServer``, the ``LeanServer`` over Pantograph's REPL
(goal states addressed by id, goals addressed individually, files elaborated by its frontend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from leanloop.lean.errors import LeanRequestError
from leanloop.lean.protocol import pantograph as proto
from leanloop.lean.sandbox import SandboxConfig, prepare_sandbox, unsandboxed_environment
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
from leanloop.lean.transport import PantographFraming, ProcessTransport, Transport


def _message(message: proto.PantographMessage | str) -> LeanMessage:
    if isinstance(message, str):
        return LeanMessage("error", message)
    pos = message.pos if isinstance(message.pos, dict) else {}
    end = message.end_pos if isinstance(message.end_pos, dict) else {}
    return LeanMessage(
        severity=message.severity,
        text=message.data,
        line=pos.get("line"),
        column=pos.get("column"),
        end_line=end.get("line"),
        end_column=end.get("column"),
    )


class PantographServer(LeanServer):
    """``LeanServer`` over Pantograph (``pantograph-repl``), started with the modules to import.

    Pantograph addresses each goal of a state (``goal=`` of ``run_tactic``) and deletes states on
    ``release``; whole files are checked with its frontend.

    Args:
        transport: How requests reach the process (``launch`` makes one that starts
            ``pantograph-repl`` in a project).
        options: Pantograph options (its ``options.set`` command), set again after every
            restart.
    """

    backend = "pantograph"

    def __init__(self, transport: Transport, *, options: dict | None = None) -> None:
        super().__init__()
        self.transport = transport
        self.options = options or {}
        self._configured_generation = -1

    @classmethod
    def launch(
        cls,
        project_root: str | Path,
        executable: str | Path,
        modules: Sequence[str] = ("Init",),
        *,
        lake: str | Path = "lake",
        timeout: float = 60.0,
        start_timeout: float = 300.0,
        memory_limit_mb: float | None = None,
        options: dict | None = None,
        env: dict[str, str] | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> PantographServer:
        """A Pantograph server whose process starts on the first request, as
        ``<executable> MODULE...`` in the sandbox (see ``leanloop.lean.sandbox``) with the
        environment of ``lake env`` in the project, or as ``lake env <executable> MODULE...``
        where the sandbox was turned off.

        Args:
            project_root: The Lake project (built) whose environment is loaded.
            executable: The ``pantograph-repl`` executable.
            modules: The modules to import.
            lake: The ``lake`` executable.
            timeout: Seconds a request may take before the process is stopped.
            start_timeout: Seconds the process may take to start (importing Mathlib takes a
                while).
            memory_limit_mb: Stop the process when it uses more memory than this.
            options: Pantograph options.
            env: Extra environment variables for the process.
            sandbox: The sandbox's configuration (None: the settings' defaults, on unless
                ``LEANLOOP_SANDBOX=off``).

        Returns:
            The server (no process started yet).

        Raises:
            SandboxUnavailable: The sandbox is on and cannot be set up here.
        """
        box = prepare_sandbox(
            sandbox,
            root=project_root,
            lake=lake,
            env=env,
            start_timeout=start_timeout,
            name="Pantograph",
        )
        program = [str(executable), *modules]
        transport = ProcessTransport(
            program if box is not None else [str(lake), "env", *program],
            PantographFraming(),
            cwd=project_root,
            env=unsandboxed_environment(env) if box is None else None,
            timeout=timeout,
            start_timeout=start_timeout,
            memory_limit_mb=memory_limit_mb,
            name="Pantograph",
            sandbox=box,
        )
        return cls(transport, options=options)

    @property
    def generation(self) -> int:
        return self.transport.generation

    def close(self) -> None:
        self.transport.close()

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

    def _state(self, state_id: int, goals: Sequence[proto.Goal], messages=()) -> ProofState:
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

    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        code = f"{theorem.prefix.rstrip()}\n\n{theorem.example()}\n"
        result = self._call(proto.FrontendProcess(file=code, sorrys=True))
        for unit in reversed(result.units):
            if unit.goal_state_id is not None and unit.goals:
                return self._state(unit.goal_state_id, unit.goals)
        errors = [
            m for u in result.units for m in map(_message, u.messages) if m.severity == "error"
        ]
        problem = str(errors[0]) if errors else "no proof state was produced"
        raise LeanRequestError(
            f"cannot start a proof of {theorem.full_name} ({theorem.file_path}): {problem}"
        )

    def open_sorries(self, code: str) -> list[ProofState]:
        result = self._call(proto.FrontendProcess(file=code, sorrys=True))
        errors = [
            m for u in result.units for m in map(_message, u.messages) if m.severity == "error"
        ]
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

    def check(self, code: str) -> CheckResult:
        result = self._call(proto.FrontendProcess(file=code))
        messages = [_message(m) for unit in result.units for m in unit.messages]
        return CheckResult.from_messages(messages)

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
