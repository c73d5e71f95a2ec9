"""The sampling executor's verification on Ray: generation stays in the driver (where the model
is, typically on its GPU), and each batch of candidates the verification threads take from the
bounded queue is checked by a Ray actor (a ``VerificationWorker``) that owns a verifier made
where it runs, by a picklable maker (``leanloop.prover.assemble.verifier_maker``: the job's Lean
backend, a Kimina Lean Server or recorded verdicts).

``RayVerifiers`` is a ``Verifier`` to the sampling executor: its ``check_batch`` lends the batch
to an idle actor that has started and waits for its answer, so the pipeline is the in-process
one — the queue stays bounded (``workers`` threads, one batch each), the driver records every
sample, ``stop_at_first`` ends a solved problem's samples. An actor that dies is replaced, and
the batch it held fails: its samples are ``error`` attempts, which the next run makes again."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from leanloop.errors import LeanloopError
from leanloop.lean.verification import Source, Verification, Verifier
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.ray_executor import WORKER_START_TIMEOUT, ray_reason, using_ray

if TYPE_CHECKING:
    from leanloop.prover.engine import JobInputs
    from leanloop.prover.job import ProofJob
    from leanloop.prover.sampling import BenchmarkRun

log = logging.getLogger(__name__)

#: Seconds the actors are given to close their verifiers (their Lean servers) at the end.
CLOSE_TIMEOUT = 30.0


class VerificationWorker:
    """A Ray actor that checks batches of code with its own verifier, made here by ``maker``."""

    def __init__(self, maker: Callable[[], Verifier]) -> None:
        self.verifier = maker()

    def describe(self) -> tuple[str, bool, Source]:
        """The verifier's class name, whether it is live, and where its answers come from."""
        verifier = self.verifier
        return type(verifier).__name__, verifier.live, verifier.source

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        """The verifier's answers on ``codes``, in order."""
        return self.verifier.check_batch(codes, timeout)

    def close(self) -> None:
        """Close the verifier (its Lean servers)."""
        self.verifier.close()


class RayVerifiers:
    """A ``Verifier`` whose checks run on ``workers`` Ray actors, each with the verifier
    ``maker`` makes where it runs (see the module's text). Made while Ray runs
    (``leanloop.prover.ray_executor.using_ray``); ``close`` kills every actor made.

    Attributes:
        name: The class name of the actors' verifier.
        live: Whether the actors' verifier runs Lean on each code now.
        source: Where its answers come from (``lean`` or ``recorded``).
    """

    name: str
    live: bool
    source: Source

    def __init__(self, ray: Any, maker: Callable[[], Verifier], workers: int) -> None:
        if workers < 1:
            raise LeanloopError(f"workers={workers}: use at least one verification worker")
        self.ray = ray
        self.maker = maker
        self.remote = ray.remote(num_cpus=1)(VerificationWorker)
        self.idle: queue.Queue[Any] = queue.Queue()  # started actors free to check (None: broken)
        self.actors: list[Any] = []  # every actor alive or starting (killed at the end)
        self.broken: str | None = None  # why an actor could not start (none can)
        self.closed = False
        self.busy = 0  # actors leased, checking
        self._lock = threading.Lock()
        for _ in range(workers):
            self._make()
        try:
            first = self._lease()
            self.name, self.live, self.source = ray.get(first.describe.remote())
        except ray.exceptions.RayError as exc:
            self.close()
            raise LeanloopError(
                f"a Ray verification worker failed: {describe_exception(exc)}"
            ) from exc
        except LeanloopError:  # no worker could start
            self.close()
            raise
        self._release(first)

    def _make(self) -> None:
        actor = self.remote.remote(self.maker)
        with self._lock:
            self.actors.append(actor)
        name = f"ray-verifier-start-{len(self.actors)}"
        threading.Thread(target=self._await_start, args=(actor,), name=name, daemon=True).start()

    def _await_start(self, actor: Any) -> None:
        """Lend ``actor`` once it has started; one that cannot start breaks the verifier, one
        whose node went away before it started is replaced."""
        try:
            self.ray.get(actor.__ray_ready__.remote())
        except self.ray.exceptions.RayError as exc:
            self._drop(actor)
            if self.closed:
                return
            if isinstance(exc, self.ray.exceptions.RayActorError) and exc.actor_init_failed:
                self.broken = f"a Ray verification worker could not start: {ray_reason(exc)}"
                self.idle.put(None)  # wakes whoever waits for a worker
                return
            self._make()
            return
        self.idle.put(actor)

    def _lease(self) -> Any:
        """The next idle actor that has started; while none checks anything, one must start
        within ``WORKER_START_TIMEOUT``."""
        while True:
            try:
                actor = self.idle.get(timeout=WORKER_START_TIMEOUT)
                break
            except queue.Empty:
                if self.busy:  # the others' checks may take long: wait for one to end
                    continue
                self.close()
                raise LeanloopError(
                    f"no Ray verification worker started in {WORKER_START_TIMEOUT:.0f} s "
                    "and none is checking",
                    hint="check that the cluster has a free CPU for a worker",
                ) from None
        if actor is None:
            self.idle.put(None)  # for the next one who waits
            raise LeanloopError(self.broken or "the Ray verification workers are closed")
        with self._lock:
            self.busy += 1
        return actor

    def _release(self, actor: Any | None) -> None:
        """The check of a leased actor ended: it is idle again (None: it died)."""
        with self._lock:
            self.busy -= 1
        if actor is not None:
            self.idle.put(actor)

    def _drop(self, actor: Any) -> None:
        with self._lock:
            if any(a is actor for a in self.actors):
                self.actors.remove(actor)
        with contextlib.suppress(Exception):
            self.ray.kill(actor, no_restart=True)

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        """The answers on ``codes`` of the next idle actor (waiting for one).

        Raises:
            LeanloopError: The actor died (it is replaced; the batch is not checked again), or
                no actor can start.
            Exception: What the actor's verifier raised.
        """
        actor = self._lease()
        try:
            verdicts = self.ray.get(actor.check_batch.remote(list(codes), timeout))
        except self.ray.exceptions.RayTaskError as exc:  # the verifier raised: the actor lives
            self._release(actor)
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except self.ray.exceptions.RayError as exc:  # the actor died (killed, out of memory)
            self._release(None)
            self._drop(actor)
            if not self.closed:
                log.warning("a Ray verification worker stopped; another takes its place")
                self._make()
            raise LeanloopError(
                f"the Ray worker verifying it stopped: {describe_exception(exc)}"
            ) from exc
        self._release(actor)
        return verdicts

    def close(self) -> None:
        """Close the verifiers of the idle actors, then kill every actor made."""
        if self.closed:
            return
        self.closed = True
        idle: list[Any] = []
        with contextlib.suppress(queue.Empty):
            while True:
                actor = self.idle.get_nowait()
                if actor is not None:
                    idle.append(actor)
        with contextlib.suppress(Exception):
            self.ray.get([a.close.remote() for a in idle], timeout=CLOSE_TIMEOUT)
        self.idle.put(None)  # a check that still waits for a worker ends
        with self._lock:
            actors, self.actors = self.actors, []
        for actor in actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)


def verify_on_ray(
    job: ProofJob, inputs: JobInputs, execute: Callable[[Verifier], BenchmarkRun]
) -> BenchmarkRun:
    """``execute`` the sampling job's run with its checks on Ray: ``workers`` actors (the
    job's verification workers) on the Ray at ``job.address`` (``local``: one started here),
    each with the verifier of ``inputs.extra["verifier_maker"]`` (a picklable maker) or of the
    job's Lean backend spec (a pool of one Lean server per actor).

    Args:
        job: The sampling job.
        inputs: What the caller gives (``extra``: ``verifier_maker``).
        execute: Runs the sampling executor over a verifier.

    Returns:
        The run.

    Raises:
        LeanloopError: A verifier object is given instead of a maker, or no worker starts.
    """
    import leanloop.prover.assemble as assemble

    if "verifier" in inputs.extra and "verifier_maker" not in inputs.extra:
        raise LeanloopError(
            "checking samples on Ray needs a maker of verifiers, not a verifier",
            hint="give extra['verifier_maker'], a picklable maker (each Ray worker makes its own)",
        )
    maker = inputs.extra.get("verifier_maker") or assemble.verifier_maker(job, max_servers=1)
    workers = job.sampling_config().workers
    with using_ray(job.address, workers) as ray:
        verifiers = RayVerifiers(ray, maker, workers)
        try:
            return execute(verifiers)
        finally:
            verifiers.close()
