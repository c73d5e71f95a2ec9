"""The Lean REPL backend: a typed client of the REPL protocol and ``ReplServer``, the
``LeanServer`` it implements (imports elaborated once per process and reused)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from leanloop.lean.account import commands_from_infotree
from leanloop.lean.elaboration import TacticStep
from leanloop.lean.errors import LeanRequestError, ProtocolError
from leanloop.lean.protocol import repl as proto
from leanloop.lean.sandbox import SandboxConfig, prepare_sandbox, unsandboxed_environment
from leanloop.lean.server import (
    CheckResult,
    LeanServer,
    ProofFinished,
    ProofState,
    TacticFailed,
    TacticResult,
    TheoremSource,
)
from leanloop.lean.transport import ProcessTransport, ReplFraming, Transport, lowered_timeout

if TYPE_CHECKING:
    from leanloop.lean.backends import Launcher

# The header: 'module', 'prelude' and import lines ('public import', 'meta import' included).
_HEADER_LINE = re.compile(r"^\s*(module|prelude|((public|private|meta)\s+)*import\s+\S.*)\s*$")
_LEAN_ERROR_PREFIX = "Lean error:\n"


class ReplClient:
    """Sends typed requests to a Lean REPL and returns typed answers."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def send(
        self, request: proto.ReplRequest
    ) -> proto.CommandResponse | proto.ProofStepResponse | proto.ReplErrorResponse:
        return proto.parse_answer(request, self.transport.exchange(request.to_json()))

    def command(
        self,
        cmd: str,
        *,
        env: int | None = None,
        all_tactics: bool | None = None,
        infotree: str | None = None,
    ):
        return self.send(
            proto.CommandRequest(cmd=cmd, env=env, all_tactics=all_tactics, infotree=infotree)
        )

    def file(self, path: str, *, env: int | None = None, all_tactics: bool | None = None):
        return self.send(proto.FileRequest(path=path, env=env, all_tactics=all_tactics))

    def tactic(self, tactic: str, proof_state: int):
        return self.send(proto.TacticRequest(tactic=tactic, proof_state=proof_state))

    @property
    def generation(self) -> int:
        return self.transport.generation

    def close(self) -> None:
        self.transport.close()


def split_header(code: str) -> tuple[str, str, int]:
    """``(imports, body, lines in the header part)``: the leading ``import`` lines (with blank
    lines and comments between them) and the rest."""
    lines = code.split("\n")
    end = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if _HEADER_LINE.match(line):
            end = i + 1
        elif stripped and not stripped.startswith("--"):
            break
    header = "\n".join(line.strip() for line in lines[:end] if _HEADER_LINE.match(line))
    skip = end
    while skip < len(lines) and not lines[skip].strip():
        skip += 1
    return header, "\n".join(lines[skip:]), skip


def imported_modules(header: str) -> tuple[str, ...]:
    """The modules a header (``split_header``'s first part) imports, in order."""
    modules: list[str] = []
    for line in header.splitlines():
        words = line.split("--", 1)[0].split()
        if "import" in words:
            named = [w for w in words[words.index("import") + 1 :] if w != "all"]
            modules.extend(w for w in named if w not in modules)
    return tuple(modules)


class ReplServer(LeanServer):
    """``LeanServer`` over the Lean REPL (leanprover-community/repl).

    Imports are elaborated once per process and reused as an environment, so checking many
    proofs that import Mathlib pays for the import once. Proof states come from ``sorry``s: a
    goal or theorem statement is elaborated with ``:= by sorry`` and the sorry's proof state is
    where the proof starts.

    Args:
        transport: How requests reach the REPL process (``launch`` makes one that starts it in
            a project).
    """

    backend = "repl"
    features = frozenset({"tactics", "account", "elaborators", "infotree"})

    def __init__(self, transport: Transport) -> None:
        super().__init__()
        self.client = ReplClient(transport)
        self._envs: dict[str, int] = {}
        self._envs_generation = -1

    @classmethod
    def launch(
        cls,
        project_root: str | Path,
        repl: str | Path,
        *,
        lake: str | Path = "lake",
        timeout: float = 60.0,
        start_timeout: float = 300.0,
        memory_limit_mb: float | None = None,
        env: dict[str, str] | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> ReplServer:
        """A REPL server whose process starts on the first request, in the sandbox (see
        ``leanloop.lean.sandbox``) with the environment of ``lake env`` in the project, or as
        ``lake env <repl>`` where the sandbox was turned off.

        Args:
            project_root: The Lake project (built) whose modules the code imports.
            repl: The Lean REPL executable.
            lake: The ``lake`` executable.
            timeout: Seconds a request may take before the process is stopped.
            start_timeout: Seconds the process may take to start.
            memory_limit_mb: Stop the process when it uses more memory than this.
            env: Extra environment variables for the process.
            sandbox: The sandbox's configuration (None: the settings' defaults, on unless
                ``LEANLOOP_SANDBOX=off``).

        Returns:
            The server (no process started yet).

        Raises:
            SandboxUnavailable: The sandbox is on and cannot be set up here.
        """
        name = "Lean REPL"
        box = prepare_sandbox(
            sandbox, root=project_root, lake=lake, env=env, start_timeout=start_timeout, name=name
        )
        transport = ProcessTransport(
            [str(repl)] if box is not None else [str(lake), "env", str(repl)],
            ReplFraming(),
            cwd=project_root,
            env=unsandboxed_environment(env) if box is None else None,
            timeout=timeout,
            start_timeout=start_timeout,
            memory_limit_mb=memory_limit_mb,
            name=name,
            sandbox=box,
        )
        return cls(transport)

    @classmethod
    def start(cls, launcher: Launcher, key: Hashable = None) -> ReplServer:
        """A REPL server as ``launcher`` (from ``leanloop.lean.backends.open_servers``) says.

        Args:
            launcher: The project, the REPL, ``lake`` and the options.
            key: The pool's key (the REPL is the same for every key).

        Returns:
            The server (no process started yet).
        """
        assert launcher.executable is not None
        options = launcher.options
        return cls.launch(
            launcher.root,
            launcher.executable,
            lake=launcher.lake,
            timeout=options.timeout,
            start_timeout=options.start_timeout,
            memory_limit_mb=options.memory_limit_mb,
            sandbox=options.sandbox,
        )

    @property
    def generation(self) -> int:
        return self.client.generation

    @contextlib.contextmanager
    def time_limit(self, seconds: float) -> Iterator[None]:
        """Bound each request to ``seconds`` (at most the process's own limit) inside the
        block."""
        with lowered_timeout(self.client.transport, seconds):
            yield

    def load_imports(self, header: str) -> None:
        """Elaborate ``header`` now (once per process), under the process's own time limit."""
        self.environment(header)

    def close(self) -> None:
        self.client.close()

    # -- environments --------------------------------------------------------------------------

    def _ensure_fresh_cache(self) -> None:
        if self._envs_generation != self.generation:
            self._envs.clear()
            self._envs_generation = self.generation

    def _command(
        self,
        cmd: str,
        env: int | None = None,
        *,
        all_tactics: bool | None = None,
        infotree: str | None = None,
    ):
        self.stats.requests += 1
        answer = self.client.command(cmd, env=env, all_tactics=all_tactics, infotree=infotree)
        if isinstance(answer, proto.ReplErrorResponse):
            self.stats.failures += 1
            raise LeanRequestError(f"the Lean REPL refused the command: {answer.message}")
        return answer

    def environment(self, header: str) -> int | None:
        """The environment after a header, elaborated once per process.

        Args:
            header: The code's imports (and what comes with them).

        Returns:
            The REPL's number for the environment; None for an empty header.

        Raises:
            LeanRequestError: The imports do not elaborate (e.g. the project is not built).
        """
        if not header.strip():
            return None
        self._ensure_fresh_cache()
        if header not in self._envs:
            answer = self._command(header)
            errors = [m for m in answer.messages if m.severity == "error"]
            if errors:
                raise LeanRequestError(
                    f"the imports do not elaborate: {errors[0].data}",
                    hint="check the module names and that the project is built ('lake build')",
                )
            self._ensure_fresh_cache()  # the request may have restarted the process
            self._envs[header] = answer.env
        return self._envs[header]

    def elaborate(
        self,
        code: str,
        *,
        all_tactics: bool = False,
        account: bool = False,
        infotree: str | None = None,
    ) -> CheckResult:
        """Elaborate code, its imports reused from the environment cache.

        Args:
            code: Lean code with its imports.
            all_tactics: Also report every tactic with the goals before it (for tracing).
            account: Also report the commands Lean elaborated (from the REPL's infotree).
            infotree: Ask the REPL for this kind of infotree (``full``, ``tactics``,
                ``original``, ``substantive``), given back as the REPL sent it (with
                ``account``, the REPL is asked for ``full``, and that is given back).

        Returns:
            Lean's messages, the sorries, the tactics and (with ``account``) the commands;
            positions refer to ``code`` as given.

        Raises:
            LeanRequestError: The REPL refused the command, or the imports do not elaborate.
            ProtocolError: The infotree asked for is not one leanloop can read.
        """
        header, body, offset = split_header(code)
        env = self.environment(header)
        if env is None:
            body, offset = code, 0
        asked = "full" if account else infotree
        answer = self._command(body, env, all_tactics=all_tactics or None, infotree=asked)
        commands = None
        if account and answer.infotree is not None:  # None: this REPL gave no infotree
            try:
                commands = commands_from_infotree(answer.infotree, offset)
            except ValueError as exc:
                raise ProtocolError(f"the Lean REPL's infotree cannot be read: {exc}") from None
        return CheckResult(
            messages=tuple(m.lean(offset) for m in answer.messages),
            sorries=tuple(s.site(offset) for s in answer.sorries),
            tactics=tuple(
                TacticStep(
                    tactic=t.tactic,
                    goals_before=t.goals,
                    line=t.pos.line + offset,
                    column=t.pos.column,
                    end_line=t.end_pos.line + offset,
                    end_column=t.end_pos.column,
                    used_constants=tuple(t.used_constants),
                    proof_state=t.proof_state,
                )
                for t in answer.tactics
            ),
            env=answer.env,
            commands=commands,
            infotree=answer.infotree if infotree is not None else None,
        )

    # -- LeanServer ----------------------------------------------------------------------------

    def check(self, code: str) -> CheckResult:
        """Lean's answer on ``code``, with its account of the commands it elaborated."""
        return self.elaborate(code, account=True)

    def open_sorries(self, code: str) -> list[ProofState]:
        """A proof state for each ``sorry`` in ``code`` (which must otherwise elaborate)."""
        result = self.elaborate(code)
        errors = [m for m in result.messages if m.severity == "error"]
        if errors:
            raise LeanRequestError(f"the code does not elaborate: {errors[0]}")
        states = [
            ProofState(s.proof_state, (s.goal,), self.generation, id(self))
            for s in result.sorries
            if s.proof_state is not None
        ]
        if not states:
            raise LeanRequestError("the code has no sorry to start a proof from")
        return states

    def start_proof(self, goal: str, *, header: str = "") -> ProofState:
        code = (
            f"{header.strip()}\n\nexample : {goal} := by sorry"
            if header
            else (f"example : {goal} := by sorry")
        )
        return self.open_sorries(code)[0]

    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        """Elaborate the file up to the theorem, then the theorem's statement with ``sorry``."""
        header, body, _ = split_header(theorem.prefix)
        env = self.environment(header)
        self._ensure_fresh_cache()
        key = f"{header}\0{body}"
        if body.strip():
            if key not in self._envs:
                answer = self._command(body, env)
                self._envs[key] = answer.env
            env = self._envs[key]
        answer = self._command(theorem.example(), env)
        errors = [m for m in answer.messages if m.severity == "error"]
        if errors or not answer.sorries:
            problem = errors[0].data if errors else "no proof state was produced"
            raise LeanRequestError(
                f"cannot start a proof of {theorem.full_name} ({theorem.file_path}): {problem}"
            )
        sorry = answer.sorries[0]
        return ProofState(sorry.proof_state, (sorry.goal,), self.generation, id(self))

    def run_tactic(
        self, state: ProofState, tactic: str, *, goal: int | None = None
    ) -> TacticResult:
        self._own(state)
        if goal is not None and goal > 0:
            tactic = f"on_goal {goal + 1} =>\n  " + tactic.replace("\n", "\n  ")
        self.stats.requests += 1
        answer = self.client.tactic(tactic, state.id)
        if isinstance(answer, proto.ReplErrorResponse):
            text = answer.message
            if text.startswith(_LEAN_ERROR_PREFIX):
                self.stats.failures += 1
                return TacticFailed(text[len(_LEAN_ERROR_PREFIX) :])
            raise LeanRequestError(f"the Lean REPL refused the tactic request: {text}")
        return self._outcome(answer)

    def _outcome(self, answer: proto.ProofStepResponse) -> TacticResult:
        messages = tuple(m.lean() for m in answer.messages)
        errors = [m for m in messages if m.severity == "error"]
        if errors:
            # An error makes the step fail even when Lean reports no goals left (its error
            # recovery closes them with sorry).
            self.stats.failures += 1
            return TacticFailed(errors[0].text, messages)
        if answer.sorries:
            self.stats.failures += 1
            return TacticFailed("the tactic leaves a sorry", messages)
        status = answer.proof_status or ""
        if not answer.goals:
            if status == "Completed" or not status:
                return ProofFinished(answer.proof_state, messages)
            self.stats.failures += 1
            return TacticFailed(
                f"no goals are left but the proof is not complete ({status})", messages
            )
        return ProofState(
            answer.proof_state, tuple(answer.goals), self.generation, id(self), messages
        )

    def release(self, *states: ProofState) -> None:
        """The REPL keeps every state until the process ends; the pool retires processes."""
