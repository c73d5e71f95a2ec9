"""A ``ProofJob``'s components, assembled in one place: the only reader of generator, sampler
and Lean backend specs. The command line, the agents and the main job build a ``ProofJob``;
what proves (``prover``), samples (``sampler``), leases servers (``servers``) or checks
(``verifier``), and what is proved (``dataset_theorems``, ``benchmark_file``) come from here.

A new generator kind is one branch of ``prover`` (or ``sampler``); a new Lean backend that
leanloop starts is an entry of ``leanloop.lean.backends`` (nothing here), one that checks whole
files a branch of ``verifier``."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.errors import LeanloopError
from leanloop.prover.config import ProverConfig
from leanloop.prover.job import DatasetTargets, ProofJob
from leanloop.settings import Settings

if TYPE_CHECKING:
    from leanloop.data.benchmark import BenchmarkFile
    from leanloop.data.records import Theorem
    from leanloop.lean.server import LeanServer
    from leanloop.lean.verification import Verifier
    from leanloop.prover.base import BaseProver
    from leanloop.prover.samplers import Sampler

log = logging.getLogger(__name__)

#: What to do instead when Lean is missing, for a replayable dataset.
REPLAY_INSTEAD = "--replay replays the recorded proofs without Lean"
#: The checkers of whole files a sampling job may name besides a pool of the ``repl`` backend:
#: ``kind:ARGUMENT`` and what the argument is (``verifier`` makes each).
CHECKERS = {"kimina": "URL", "recorded": "FILE"}
#: What checks whole proofs without a Lean toolchain here.
KIMINA = "--verifier kimina:URL checks on a Kimina Lean Server, recorded:FILE offline"


def _key_variable(job: ProofJob) -> str | None:
    name = job.api_key_env
    return None if name is None or name.lower() == "none" else name


def identity(component: Any) -> str:
    """What a generator or sampler calls itself in a run's name: its name, and the version of
    its weights when they can change (``name@version``)."""
    version = getattr(component, "version", "")
    return f"{component.name}@{version}" if version else str(component.name)


def prover(job: ProofJob, dataset_dir: Path | None = None) -> BaseProver:
    """The prover of a search or whole-proof job's ``generator`` spec.

    Args:
        job: The job (its search budgets under its policy).
        dataset_dir: The dataset whose recorded steps ``recorded`` proposes (default: the
            job's dataset).

    Returns:
        ``RecordedProver`` (``recorded``), ``HFProver`` (``hf:PATH``) or ``ExternalProver``
        (``external:MODEL``).

    Raises:
        LeanloopError: The spec names no generator (or ``recorded`` has no dataset).
    """
    kind, _, argument = job.generator.partition(":")
    settings = job.prover_config()
    if dataset_dir is None and isinstance(job.targets, DatasetTargets):
        dataset_dir = job.targets.path
    if kind == "recorded" and not argument and dataset_dir is not None:
        from leanloop.prover.recorded import RecordedProver

        return RecordedProver(dataset_dir, config=settings)
    if kind == "hf" and argument:
        from leanloop.prover.hf import HFProver

        return HFProver(Path(argument).expanduser(), config=settings)
    if kind == "external" and argument:
        from leanloop.prover.external import ExternalProver

        return ExternalProver(argument, job.base_url, _key_variable(job), config=settings)
    raise LeanloopError(
        f"--generator {job.generator}: expected recorded, hf:PATH or external:MODEL"
    )


def sampler(job: ProofJob) -> Sampler:
    """The sampler of a sampling job's ``generator`` spec.

    Args:
        job: The job (its sampling settings).

    Returns:
        ``RecordedProofs`` (``recorded``), ``RecordedSamples`` (``samples:FILE``),
        ``ModelSampler`` (``hf:PATH``) or ``EndpointSampler`` (``external:MODEL``).

    Raises:
        LeanloopError: The spec names no sampler.
    """
    import leanloop.prover.samplers as samplers

    config = job.sampling_config()
    kind, _, argument = job.generator.partition(":")
    if kind == "recorded" and not argument:
        return samplers.RecordedProofs()
    if kind == "samples" and argument:
        return samplers.RecordedSamples(Path(argument).expanduser())
    tokens, temperature = config.max_tokens, config.temperature
    if kind == "hf" and argument:
        return samplers.ModelSampler(
            Path(argument).expanduser(),
            config.prompt,
            max_tokens=tokens,
            temperature=temperature,
        )
    if kind == "external" and argument:
        return samplers.EndpointSampler(
            argument,
            config.prompt,
            base_url=job.base_url,
            api_key_env=_key_variable(job),
            max_tokens=tokens,
            temperature=temperature,
        )
    raise LeanloopError(
        f"--generator {job.generator}: expected hf:PATH, external:MODEL, recorded or samples:FILE"
    )


@dataclass(frozen=True)
class LeanLimits:
    """The limits of the Lean servers a job starts, and what to do instead when Lean is
    missing (a line of the error's hint)."""

    timeout: float | None = None
    memory_limit_mb: float | None = None
    instead: str | None = REPLAY_INSTEAD
    needs: tuple[str, ...] = field(default=())


def lean_launcher(
    root: str | Path | None,
    settings: ProverConfig | None = None,
    limits: LeanLimits | None = None,
) -> Any:
    """The Lean servers of a project, of the backend ``settings`` names (each request bounded
    by the limits' timeout, else the tactic timeout of ``settings``), after checking that Lean
    is there (a machine without Lean hears that first, in one line: what is missing, how to
    install it, and what to do instead); with no project, only the check of elan, lake and
    lean (the backend is looked for in the project).

    Args:
        root: The Lean project (None: check the toolchain only).
        settings: The backend, timeout and sandbox (default ``ProverConfig()``).
        limits: Timeout and memory of each server, and what to do instead.

    Returns:
        A ``Launcher`` (or, with no project, the toolchain's check).

    Raises:
        LeanloopError: Lean or the backend is not installed.
    """
    from leanloop.lean.backends import LeanOptions, open_servers
    from leanloop.lean.errors import ServerNotFound, ToolchainNotFound
    from leanloop.lean.toolchain import require_tools

    limits = limits or LeanLimits()
    try:
        if root is None:
            return require_tools()
        config = settings or ProverConfig()
        options = LeanOptions(
            timeout=config.tactic_timeout if limits.timeout is None else limits.timeout,
            memory_limit_mb=limits.memory_limit_mb,
            sandbox=config.sandbox,
        )
        return open_servers(config.lean_backend, root, options, needs=limits.needs)
    except (ToolchainNotFound, ServerNotFound) as exc:
        instead = limits.instead
        hint = "; ".join(h for h in (exc.hint, f"or: {instead}" if instead else None) if h)
        raise LeanloopError(
            f"proving needs Lean, which is not installed here ({exc.message})", hint=hint
        ) from None


def servers(
    job: ProofJob, project: Path | None = None, instead: str | None = REPLAY_INSTEAD
) -> Callable[[], LeanServer]:
    """Where a search or whole-proof job leases its servers: the replay of its dataset's
    recorded steps (``replay``), or the Lean servers of its backend in ``project`` (default:
    the job's), Lean checked first.

    Args:
        job: The job.
        project: The Lean project (default ``job.project``).
        instead: What to do instead when Lean is missing.

    Returns:
        A picklable maker of servers (a ``Launcher``, or a replay's maker).

    Raises:
        LeanloopError: No project is given for Lean, or Lean is missing.
    """
    if job.lean_kind == "replay":
        from leanloop.prover.replay import ReplayServer

        if not isinstance(job.targets, DatasetTargets):
            raise LeanloopError("lean: replay replays a dataset's recorded steps: it needs one")
        replay: Callable[[], LeanServer] = functools.partial(
            ReplayServer.from_dataset, job.targets.path
        )
        return replay
    root = project if project is not None else job.project
    settings = job.prover_config()
    if root is None:
        lean_launcher(None, settings, LeanLimits(instead=instead))  # Lean itself first
        raise LeanloopError(
            "proving with Lean needs --project DIR",
            hint="the Lean project the dataset was traced from, at its commit, built",
        )
    limits = LeanLimits(memory_limit_mb=job.memory_limit_mb, instead=instead)
    launcher: Callable[[], LeanServer] = lean_launcher(Path(root).expanduser(), settings, limits)
    return launcher


def verifier(job: ProofJob) -> Verifier:
    """What checks a sampling job's candidates: a pool of the job's Lean servers in its
    project (``repl``, ``pantograph``), a Kimina Lean Server (``kimina:URL``) or recorded
    verdicts (``recorded:FILE``).

    Args:
        job: The job.

    Returns:
        The verifier (the caller closes it).

    Raises:
        LeanloopError: A pool has no project, or Lean is missing.
    """
    return verifier_maker(job)()


def verifier_maker(job: ProofJob, max_servers: int | None = None) -> Callable[[], Verifier]:
    """A picklable maker of the verifier of a sampling job (see ``verifier``): what each Ray
    worker of a sampling job on Ray calls where it runs. Lean is looked for here first.

    Args:
        job: The job.
        max_servers: The Lean servers of a pool (default: the job's verification workers).

    Returns:
        The maker (each call makes a verifier its caller closes).

    Raises:
        LeanloopError: A pool has no project, or Lean is missing.
    """
    config = job.sampling_config()
    kind, _, argument = job.lean.partition(":")
    if kind == "recorded":
        from leanloop.lean.verification import RecordedVerifier

        return functools.partial(RecordedVerifier, Path(argument).expanduser())
    if kind == "kimina":
        from leanloop.lean.kimina import KiminaVerifier

        return functools.partial(
            KiminaVerifier, argument, batch_size=config.verify_batch, timeout=config.timeout
        )
    from leanloop.lean.verification import PoolVerifier

    settings = job.prover_config()
    if job.project is None:
        lean_launcher(None, settings, LeanLimits(instead=KIMINA))  # Lean itself first
        raise LeanloopError(
            "--verifier pool checks on leanloop's REPLs: it needs --project DIR",
            hint="a Lean project with the benchmark's imports (Mathlib) built, or "
            "--verifier kimina:URL / recorded:FILE",
        )
    limits = LeanLimits(config.timeout, config.memory_limit_mb, instead=KIMINA)
    launcher = lean_launcher(job.project.expanduser(), settings, limits)
    return functools.partial(PoolVerifier, launcher, max_servers=max_servers or config.workers)


def benchmark_file(spec: str) -> BenchmarkFile:
    """The benchmark ``spec`` names (a file, or minif2f / proofnet found or downloaded).

    Args:
        spec: A JSONL or ``.lean`` file, ``minif2f`` or ``proofnet``.

    Returns:
        The benchmark file.
    """
    from leanloop.data.benchmark import BenchmarkFile, resolve_benchmark

    settings = Settings.from_env()
    directories = [d for d in (settings.benchmarks,) if d is not None]
    if settings.fixtures is not None:
        directories.append(settings.fixtures / "minif2f")
    path = resolve_benchmark(
        spec, directories=directories, cache_dir=settings.cache_dir / "benchmarks"
    )
    return BenchmarkFile(path)


@dataclass
class DatasetTheorems:
    """A split's theorems (each once), how many were left out as term-mode proofs (a replay
    has no recorded step of them), and the scheme chosen when the split names none."""

    theorems: list[Theorem]
    term_mode: int = 0
    chosen: str | None = None


def dataset_theorems(targets: DatasetTargets, *, replay: bool) -> DatasetTheorems:
    """The theorems of a dataset split.

    Args:
        targets: The dataset, its split and a limit.
        replay: Leave out theorems without traced tactics (term-mode proofs).

    Returns:
        The theorems, the count left out and the note on a chosen scheme.

    Raises:
        LeanloopError: The dataset has no such split.
    """
    from leanloop.data.leandojo import LeanDojoDataset

    data = LeanDojoDataset(targets.path)
    scheme, _, name = targets.split.rpartition("/")
    files = [f for f in data.split_files if f.split == name and (not scheme or f.scheme == scheme)]
    if not files:
        found = ", ".join(data.describe().split(", ")) or "nothing"
        raise LeanloopError(
            f"{targets.path}: no split {targets.split!r} (found: {found})",
            hint="--split test, val, train or SCHEME/SPLIT such as random/test",
        )
    out = DatasetTheorems([])
    schemes = sorted({f.scheme for f in files if f.scheme is not None})
    if not scheme and len(schemes) > 1:  # one scheme's split, not several mixed together
        chosen = "random" if "random" in schemes else schemes[0]
        files = [f for f in files if f.scheme == chosen]
        others = ", ".join(f"{s}/{name}" for s in schemes if s != chosen)
        out.chosen = f"proving {chosen}/{name} (--split {others} for the other split scheme)"
    seen: set = set()
    for item in data.iter_theorem_items(files):
        theorem = item.parse()
        if theorem.key in seen:
            continue
        seen.add(theorem.key)
        if replay and not theorem.traced_tactics:
            out.term_mode += 1
            continue
        out.theorems.append(theorem)
        if targets.limit is not None and len(out.theorems) >= targets.limit:
            break
    return out
