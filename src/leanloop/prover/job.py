"""A proving job as one typed object (``ProofJob``): what is proved (one of four kinds of
targets), by what (a generator or sampler spec), how (search, whole proofs or sampling), on
which Lean backend and with which limits, how often and where (attempts, workers, a Ray
cluster), under the one soundness policy, with the budgets of search and the settings of
sampling — and the one rule that names its run, so that every way of starting the same job
(``leanloop prove``, an agent's ``prove()``, the main job, a library call) resumes the same
stored run.

A job is loadable from YAML or JSON like every configuration::

    targets: {kind: dataset, path: data/sample, split: test}
    generator: hf:outputs/generator
    mode: search
    lean: repl
    search: {timeout: 60, num_sampled_tactics: 8}

``leanloop.prover.assemble`` turns its specs into components and ``leanloop.prover.engine``
runs it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.configfile import CONFIG, field_names, read_config_file
from leanloop.errors import LeanloopError
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.config import ProofMode, ProverConfig, SoundnessPolicy

#: How a job proves: a ``ProofMode`` of the prover (``search``: tactic search through a Lean
#: server, ``whole``: whole proofs written by a model and checked on a server, or any mode
#: added there), or ``sampling``: whole proofs through the bounded sample → verify pipeline
#: (pass@k on a benchmark).
SAMPLING = "sampling"


class _Targets(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int | None = Field(
        default=None, ge=1, description="Prove only the first N targets (None: all)."
    )


class DatasetTargets(_Targets):
    """The theorems of a split of a LeanDojo-format dataset."""

    kind: Literal["dataset"] = "dataset"
    path: Path = Field(description="The dataset's directory.")
    split: str = Field(default="test", description="test, val, train or SCHEME/SPLIT.")

    @property
    def label(self) -> str:
        """The targets in a run's name."""
        return f"{self.path.name}/{self.split}"


class SorryTargets(_Targets):
    """The open ``sorry`` theorems of a Lean project (its proofs written back)."""

    kind: Literal["sorries"] = "sorries"
    project: str | None = Field(
        default=None,
        description="The Lean project: a directory or a git URL (None: theorems given by the "
        "caller, replayed without Lean).",
    )
    commit: str | None = Field(default=None, description="The commit of a URL (None: HEAD).")
    branch: str | None = Field(
        default=None, description="Check and commit the proofs on this branch (a worktree)."
    )

    @property
    def label(self) -> str:
        """The targets in a run's name (a theorem's key names its project: one name for the
        sorries of every project, as an agent proves several)."""
        return "sorries"


class BenchmarkTargets(_Targets):
    """The statements of a statement-only benchmark (a JSONL or ``.lean`` file, or minif2f /
    proofnet found in ``LEANLOOP_BENCHMARKS``)."""

    kind: Literal["benchmark"] = "benchmark"
    spec: str = Field(description="FILE, minif2f or proofnet.")
    split: Literal["test", "valid", "all"] = Field(default="test", description="The split.")

    @property
    def label(self) -> str:
        """The targets in a run's name."""
        return f"{Path(self.spec).stem}/{self.split}"


class TheoremTargets(_Targets):
    """Theorem records a library caller gives when it runs the job."""

    kind: Literal["theorems"] = "theorems"
    name: str = Field(default="theorems", description="What the run's name calls them.")

    @property
    def label(self) -> str:
        """The targets in a run's name."""
        return self.name


#: What a job proves: one of the four kinds, told apart by ``kind``.
Targets = Annotated[
    DatasetTargets | SorryTargets | BenchmarkTargets | TheoremTargets,
    Field(discriminator="kind"),
]


def lean_kind(spec: str) -> str:
    """The kind of a Lean backend spec (``kimina:URL`` → ``kimina``), checked: a backend of
    ``leanloop.lean.backends`` (``repl``, ``pantograph``, ``replay``: leased servers), or a
    checker of whole files that ``leanloop.prover.assemble`` makes (``kimina:URL``,
    ``recorded:FILE``).

    Args:
        spec: ``repl``, ``pantograph``, ``kimina:URL``, ``recorded:FILE``, ``replay``, ...

    Returns:
        Its kind.

    Raises:
        ValueError: The spec names no backend, or lacks (or has an unexpected) argument.
    """
    from leanloop.lean.backends import BACKENDS
    from leanloop.prover.assemble import CHECKERS

    kind, colon, argument = spec.partition(":")
    known = kind in BACKENDS and not colon
    if not known and not (kind in CHECKERS and argument):
        names = [*BACKENDS, *(f"{name}:{what}" for name, what in CHECKERS.items())]
        raise ValueError(f"expected {', '.join(names)}; got {spec!r}")
    return kind


def _modes() -> list[str]:
    return [*(m.value for m in ProofMode), SAMPLING]


@dataclass(config=CONFIG)
class ProofJob(SoundnessPolicy):
    """One proving job. The soundness policy (``allowed_axioms``, ``allow_native``) is the
    job's, declared once: ``prover_config()`` and ``sampling_config()`` hand it to the search
    and the sampler, and ``run_name()`` is the one rule that names the job's run."""

    targets: Targets = Field(
        default_factory=lambda: TheoremTargets(),
        description="What is proved: {kind: dataset, path, split}, {kind: sorries, project}, "
        "{kind: benchmark, spec, split} or {kind: theorems} (given by a library caller).",
    )
    generator: str = Field(
        default="recorded",
        description="What proposes tactics or writes proofs: recorded, hf:PATH, "
        "external:MODEL, samples:FILE (sampling: answers recorded earlier).",
    )
    base_url: str | None = Field(default=None, description="The endpoint of external:MODEL.")
    api_key_env: str | None = Field(
        default="auto",
        description="The variable holding the endpoint's API key ('auto': HF_TOKEN for "
        "Hugging Face's router, where a hub name goes without base_url, else OPENAI_API_KEY; "
        "None: send no key).",
    )
    mode: str = Field(
        default="search",
        description="search, whole (whole proofs) or sampling (pass@k); any ProofMode.",
    )
    lean: str = Field(
        default="repl",
        description="The Lean backend: repl, pantograph, kimina:URL, recorded:FILE or replay.",
    )
    project: Path | None = Field(
        default=None,
        description="The Lean project whose servers prove and check (a dataset's traced "
        "project; a benchmark's project with its imports built).",
    )
    memory_limit_mb: float | None = Field(
        default=None, gt=0, description="Memory a Lean process may use (restarted past it)."
    )
    attempts: int | None = Field(
        default=None,
        ge=1,
        description="Attempts per target (None: search.num_attempts, or sampling.samples).",
    )
    stop_at_first: bool = Field(
        default=False, description="Stop a target's attempts at its first proof."
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Targets proved at once, one Ray worker each when more than one (None: "
        "search.num_workers); sampling: verification workers (None: sampling.workers), "
        "threads of this process, or Ray workers with an address.",
    )
    address: str | None = Field(
        default=None,
        description="A Ray cluster's address, or local (a Ray started on this machine): the "
        "workers run on Ray (sampling: the checks; generation stays in this process).",
    )
    search: ProverConfig = Field(
        default_factory=ProverConfig,
        description="The budgets of search and whole-proof mode (its policy is the job's).",
    )
    sampling: BenchmarkConfig = Field(
        default_factory=BenchmarkConfig,
        description="The settings of sampling (its policy is the job's).",
    )
    run: str | None = Field(
        default=None, description="The run's name (None: the rule of run_name())."
    )

    @property
    def lean_kind(self) -> str:
        """The kind of the Lean backend (``repl``, ``pantograph``, ``kimina``, ...)."""
        return lean_kind(self.lean)

    @property
    def proof_mode(self) -> ProofMode:
        """The prover's mode of a job that leases servers (``search`` for sampling)."""
        return ProofMode.SEARCH if self.mode == SAMPLING else ProofMode(self.mode)

    @property
    def count(self) -> int:
        """Attempts (samples) per target."""
        if self.attempts is not None:
            return self.attempts
        return self.sampling.samples if self.mode == SAMPLING else self.search.num_attempts

    def prover_config(self) -> ProverConfig:
        """The search's configuration under the job's policy, backend and workers."""
        from leanloop.lean.backends import BACKENDS

        config = self.search.with_policy(self)
        entry = BACKENDS.get(self.lean_kind)
        backend = self.lean_kind if entry is not None and entry.executable else None
        changes: dict = {"num_attempts": self.count}
        if backend is not None:
            changes["lean_backend"] = backend
        if self.workers is not None:
            changes["num_workers"] = self.workers
        return ProverConfig.load(config, **changes)

    def sampling_config(self) -> BenchmarkConfig:
        """The sampling's configuration under the job's policy, attempts and workers."""
        changes: dict = {"samples": self.count, "stop_at_first": self.stop_at_first}
        if self.workers is not None:
            changes["workers"] = self.workers
        if self.memory_limit_mb is not None:
            changes["memory_limit_mb"] = self.memory_limit_mb
        return BenchmarkConfig.load(self.sampling.with_policy(self), **changes)

    def run_name(self, generator: str) -> str:
        """The run's name: ``run`` when given, else the one rule — the generator, the targets,
        the mode, the policy (other than the standard one) and a replay, joined by ``:`` —
        that every way of starting this job uses, so that each resumes the others' run.

        Args:
            generator: What the assembled generator calls itself, with the version of its
                weights (``name@version``), so that a model trained further makes a new run.

        Returns:
            The run's name, e.g. ``hf:out@3f2a:sample/test`` or
            ``hf:out:minif2f/test:n8:first:kimina``.
        """
        if self.run:
            return self.run
        parts = [generator, self.targets.label]
        if self.mode not in (ProofMode.SEARCH, SAMPLING):
            parts.append(self.mode)
        elif self.mode == SAMPLING:
            parts.append(f"n{self.count}")
            parts += ["first"] if self.stop_at_first else []
            parts.append(self.lean_kind)
        if self.policy_tag and self.lean_kind != "replay":
            parts.append(self.policy_tag)
        if self.lean_kind == "replay":
            parts.append("replay")
        return ":".join(parts)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ProofJob:
        from leanloop.prover.assemble import CHECKERS

        if self.mode not in _modes():
            raise self.invalid(info, f"mode: expected {', '.join(_modes())}; got {self.mode!r}")
        try:
            kind = lean_kind(self.lean)
        except ValueError as exc:
            raise self.invalid(info, f"lean: {exc}") from None
        if self.mode == SAMPLING and kind == "replay":
            raise self.invalid(
                info,
                "lean: replay cannot check sampled whole proofs (it checks no code)",
                hint="use a pool of a Lean backend (repl, pantograph), kimina:URL or recorded:FILE",
            )
        if self.mode != SAMPLING and kind in CHECKERS:
            raise self.invalid(
                info,
                f"lean: {self.lean} checks whole files only: it goes with mode: sampling",
                hint="search and whole-proof mode lease a server: repl, pantograph or replay",
            )
        if self.mode == SAMPLING and self.targets.kind != "benchmark":
            raise self.invalid(info, "mode: sampling proves a benchmark's statements")
        for part, name in ((self.search, "search"), (self.sampling, "sampling")):
            default = set(SoundnessPolicy().allowed_axioms)
            given = (set(part.allowed_axioms), part.allow_native)
            if given not in ((default, False), (set(self.allowed_axioms), self.allow_native)):
                raise self.invalid(
                    info,
                    f"{name}: the soundness policy is the job's",
                    hint="set allowed_axioms and allow_native at the top of the job",
                )
        return self


def load_job(path: Path | None, overrides: dict[str, Any]) -> ProofJob:
    """A job from a YAML/JSON file (None: the defaults) with ``overrides`` on top (a mapping
    under ``search`` or ``sampling`` is merged into the file's). A file of ``ProverConfig``
    fields alone is read as the job's ``search``, one of ``BenchmarkConfig`` fields alone as
    its ``sampling`` (the files of earlier releases); their policy becomes the job's.

    Args:
        path: The file.
        overrides: Field values that replace the file's (e.g. the command line's options).

    Returns:
        The job.

    Raises:
        LeanloopError: The file or a field is wrong (naming the file and the field).
    """
    data: dict[str, Any] = {}
    if path is not None:
        read = read_config_file(path)
        if read is not None and not isinstance(read, Mapping):
            raise LeanloopError(f"{path}: expected a mapping of field names to values")
        data = dict(read or {})
    keys = set(data)
    if keys - set(field_names(ProofJob)):  # a field the job lacks: an earlier release's file
        search, sampling = set(field_names(ProverConfig)), set(field_names(BenchmarkConfig))
        earlier = ProverConfig if len(keys & search) >= len(keys & sampling) else BenchmarkConfig
        if path is not None:  # its problems said as that file's, each with its line
            earlier.from_dict(dict(data), str(path))
        lifted = ("allowed_axioms", "allow_native", "stop_at_first")
        top = {k: data.pop(k) for k in lifted if k in data}
        data = {"search" if earlier is ProverConfig else "sampling": data, **top}
    for key, value in overrides.items():
        if key in ("search", "sampling") and isinstance(data.get(key), Mapping):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return ProofJob.from_dict(data, str(path) if path is not None else "the options")
