"""Whole-proof sampling over a benchmark, the way prover papers measure pass@k: ``samples`` answers
per statement from a ``Sampler``, each read into a proof of the statement as given (a changed
statement is refused), screened, and checked by a ``Verifier`` under leanloop's soundness policy.
Generation and verification overlap: the sampler fills a bounded queue (it waits when the queue
is full) that ``workers`` verification threads empty. Every sample is stored as an attempt of the
run as it finishes, by the driver alone; a rerun makes only the samples the run lacks. A job
given a Ray address checks on Ray actors instead (``leanloop.prover.ray_sampling``)."""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, Unpack

from leanloop.data.benchmark import BenchmarkFile, BenchmarkProblem
from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.lean.audit import AuditedCode, judge
from leanloop.lean.native import native_code_use
from leanloop.lean.scanner import scan
from leanloop.lean.screen import RefusalCode
from leanloop.lean.statement import continuation
from leanloop.lean.verification import Verification, Verifier
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.engine import Callbacks, Shell
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.samplers import Sample, Sampler

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase
    from leanloop.prover.engine import JobInputs
    from leanloop.prover.job import ProofJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Candidate:
    problem: BenchmarkProblem
    index: int
    sample: Sample | None  # None: the sampler failed (``error`` says why)
    error: str | None = None


@dataclass
class ProblemResult:
    """A problem's samples in this run: how many were made, how many Lean accepted, and the
    first accepted (lowest sample index)."""

    problem: BenchmarkProblem
    attempts: list[ProofAttempt] = field(default_factory=list)

    @property
    def samples(self) -> int:
        return len(self.attempts)

    @property
    def verified(self) -> int:
        """Samples Lean accepted: proved (audited), or accepted by a recorded verdict (the run's
        ``source`` says which kind a run counts)."""
        return sum(a.status.found_proof for a in self.attempts)

    @property
    def first_verified(self) -> ProofAttempt | None:
        proved = [a for a in self.attempts if a.status.found_proof]
        return min(proved, key=lambda a: a.attempt) if proved else None

    @property
    def status(self) -> str:
        """``verified``, ``failed`` (samples, none accepted) or ``unsampled`` (no sample)."""
        if self.verified:
            return "verified"
        return "failed" if self.attempts else "unsampled"


@dataclass
class BenchmarkRun:
    """What ``run_benchmark`` ends with: each problem's result (stored samples of earlier
    calls and new ones), the samples made now, and the figures of the run."""

    run: str
    config: BenchmarkConfig
    sampler: str
    verifier: str
    source: str  # "lean" (verified now) or "recorded" (recorded verdicts)
    audited: bool  # whether the axioms of accepted proofs were audited
    problems: list[ProblemResult]
    new: list[ProofAttempt] = field(default_factory=list)
    wall_seconds: float = 0.0


def prepare(
    problem: BenchmarkProblem, answer: str, config: BenchmarkConfig, live: bool
) -> tuple[AuditedCode | None, ProofAttempt | None, str | None]:
    """The code to check for a model's ``answer`` (with leanloop's audit when the verifier is
    ``live``), or the attempt that ends it without Lean (refused, changed statement, no proof);
    and the proof text."""
    candidate = config.prompt.candidate(answer)
    if candidate is None or not candidate.strip():
        return None, _ended(AttemptStatus.FAILED, "the answer holds no Lean proof"), None
    read = continuation(candidate, problem.formal_statement, problem.name)
    if read.refusal is not None:
        if read.refusal.code is RefusalCode.CHANGED_STATEMENT:
            return None, _ended(AttemptStatus.CHANGED, read.refusal.reason, candidate), None
        if read.refusal.code is RefusalCode.EMPTY:
            return None, _ended(AttemptStatus.FAILED, read.refusal.reason, candidate), None
        return None, _ended(AttemptStatus.REFUSED, read.refusal.reason, candidate), None
    proof = read.proof or ""
    if not live and not config.allow_native:
        # a recorded verdict cannot be audited: native code is refused by its words
        word = native_code_use(proof)
        if word is not None:
            reason = (
                f"uses {word} (native code), whose axioms a recorded verdict cannot audit; "
                "allow native code to accept it"
            )
            return None, _ended(AttemptStatus.REFUSED, reason, proof), None
    code = problem.code(proof)
    start = len(problem.prefix)
    scopes = _open_scopes(problem.prefix)
    if live:
        audited = AuditedCode.around(code, start, len(code), problem.name, scopes)
    else:
        audited = AuditedCode.unaudited(code, start, len(code), problem.name)
    return audited, None, proof


@functools.lru_cache(maxsize=256)
def _open_scopes(prefix: str) -> tuple[tuple[str, str], ...]:
    """The namespaces and sections open at the end of a problem's prefix (scanned once)."""
    return scan(prefix).open_scopes


def _ended(status: AttemptStatus, reason: str, proof: str | None = None) -> ProofAttempt:
    """An attempt ended before Lean (only its status, reason and proof are meaningful)."""
    return ProofAttempt(
        run="",
        url="",
        commit="",
        file_path="",
        full_name="",
        status=status,
        error=reason,
        proof=(proof,) if proof is not None else None,
    )


def verdict_attempt(
    audited: AuditedCode, proof: str, verification: Verification, config: BenchmarkConfig
) -> ProofAttempt:
    """The attempt Lean's answer on ``audited`` makes of a sample, under the soundness policy."""
    if verification.result is None:
        status = AttemptStatus.TIMEOUT if verification.timed_out else AttemptStatus.ERROR
        return _ended(status, verification.error or "the check failed", proof)
    judgement = judge(verification.result, audited, config.axiom_policy)
    status = AttemptStatus.judged(judgement)
    if status is AttemptStatus.PROVED:
        attempt = _ended(status, "", proof)
        return attempt.model_copy(update={"error": None, "axioms": judgement.axioms})
    if status is AttemptStatus.RECORDED:  # a recorded verdict: accepted, not audited
        return _ended(status, "axioms not audited (recorded verdict)", proof)
    return _ended(status, judgement.reason, proof).model_copy(
        update={"axioms": judgement.axioms or None}
    )


class BenchmarkOptions(TypedDict, total=False):
    """The options of ``run_benchmark`` (each as its Args say)."""

    config: BenchmarkConfig | None
    database: DynamicDatabase | None
    run: str
    verifier_name: str
    on_sample: Callable[[ProofAttempt], None] | None
    on_problem: Callable[[ProblemResult], None] | None
    on_start: Callable[[int], None] | None


def run_benchmark(
    benchmark: BenchmarkFile,
    problems: Sequence[BenchmarkProblem],
    sampler: Sampler,
    verifier: Verifier,
    **options: Unpack[BenchmarkOptions],
) -> BenchmarkRun:
    """Sample and verify ``config.samples`` proofs of every problem (see the module's text):
    the engine's shell over its sampling executor.

    Samples the run stored before (in ``database``, under ``run``) are not made again, except
    those that ended in an error; with ``stop_at_first`` a problem verified before is not
    sampled again, and its remaining samples are not made once one is verified.
    ``on_sample(attempt)`` is called for each sample as it is stored and ``on_problem(result)``
    when a problem has all its samples; ``on_start(count)`` first, with the number of samples
    this call makes at most.

    Generation and verification overlap: the sampler fills a bounded queue (it waits when the
    queue is full) that ``config.workers`` verification threads empty. Each answer is read
    into a proof of the statement as given (a changed statement is refused), screened, and
    checked by ``verifier`` under the soundness policy. Every sample is stored by this thread
    alone, as it finishes.

    Args:
        benchmark: The benchmark file (its problems are stored as one repository).
        problems: The problems to sample (e.g. one split).
        sampler: Where the answers come from (a model, an endpoint, or recorded ones).
        verifier: What checks the candidates (a pool of REPLs, a Kimina Lean Server, or
            recorded verdicts).
        **options: ``config`` (samples, batches, workers, prompt and axiom policy; default
            ``BenchmarkConfig()``), ``database`` (where each sample is stored; a rerun of
            ``run`` makes only what it lacks), ``run`` (default ``benchmark``),
            ``verifier_name`` (how the report names the verifier), ``on_sample``,
            ``on_problem`` and ``on_start`` (see ``BenchmarkOptions``).

    Returns:
        Each problem's result, the samples made now, and the run's figures
        (``BenchmarkReport.of`` turns it into the report).
    """
    config = options.get("config") or BenchmarkConfig()
    run = options.get("run", "benchmark")
    callbacks = Callbacks(on_result=options.get("on_sample"))
    shell = Shell(run, options.get("database"), callbacks, stop_at_first=config.stop_at_first)
    executor = SamplingExecutor(
        benchmark,
        list(problems),
        sampler,
        verifier,
        config,
        shell,
        SamplingHooks(options.get("on_problem"), options.get("on_start")),
    )
    return executor.run(options.get("verifier_name", ""))


def run_sampling_job(job: ProofJob, inputs: JobInputs) -> BenchmarkRun:
    """A sampling job: its benchmark's problems (stored as a repository of the database),
    sampler and verifier assembled from its specs (unless given in ``inputs.extra`` as
    ``sampler`` and ``verifier``), run under the name of ``job.run_name`` (of the generator
    spec); the verifier assembled here is closed here.

    With ``job.address`` (``local``: a Ray started on this machine), the samples are checked
    on Ray: the job's verification workers are Ray actors, each with its own verifier made
    where it runs (``inputs.extra["verifier_maker"]``, a picklable maker, or the job's);
    generation and recording stay here (``leanloop.prover.ray_sampling``). Either way the run
    is the same, and each resumes the other's.

    Args:
        job: The job (``mode: sampling`` on a benchmark).
        inputs: The database and callbacks (``extra``: ``on_problem``, ``on_start``).

    Returns:
        The benchmark run.
    """
    import leanloop.prover.assemble as assemble
    from leanloop.prover.job import BenchmarkTargets

    assert isinstance(job.targets, BenchmarkTargets)  # the job's validator says so
    bench = assemble.benchmark_file(job.targets.spec)
    problems = bench.problems(job.targets.split)[: job.targets.limit]
    config = job.sampling_config()
    sampler = inputs.extra.get("sampler") or assemble.sampler(job)

    def execute(verifier: Verifier) -> BenchmarkRun:
        if inputs.database is not None:
            inputs.database.add_repository(bench.repository(), bench.iter_theorems())
        run = job.run_name(job.generator)  # the spec names the sampler (its file, its model)
        shell = Shell(run, inputs.database, inputs.callbacks, stop_at_first=config.stop_at_first)
        hooks = SamplingHooks(inputs.extra.get("on_problem"), inputs.extra.get("on_start"))
        executor = SamplingExecutor(bench, problems, sampler, verifier, config, shell, hooks)
        return executor.run(job.lean)

    if job.address is not None:
        from leanloop.prover.ray_sampling import verify_on_ray

        return verify_on_ray(job, inputs, execute)
    given = inputs.extra.get("verifier")
    verifier = given or assemble.verifier(job)
    try:
        return execute(verifier)
    finally:
        if given is None:
            verifier.close()


@dataclass
class SamplingHooks:
    """What the sampling executor calls besides the shell's callbacks: ``on_problem(result)``
    when a problem has all its samples, ``on_start(count)`` first."""

    on_problem: Callable[[ProblemResult], None] | None = None
    on_start: Callable[[int], None] | None = None


class SamplingExecutor:
    """The bounded sample → verify pipeline of one run: a sampler thread fills a bounded queue
    of candidates that ``config.workers`` verification threads empty; the driver (the calling
    thread) records each sample through the shell as it finishes."""

    def __init__(
        self,
        benchmark: BenchmarkFile,
        problems: list[BenchmarkProblem],
        sampler: Sampler,
        verifier: Verifier,
        config: BenchmarkConfig,
        shell: Shell,
        hooks: SamplingHooks | None = None,
    ) -> None:
        self.benchmark = benchmark
        self.problems = problems
        self.sampler = sampler
        self.verifier = verifier
        self.config = config
        self.shell = shell
        self.hooks = hooks or SamplingHooks()
        self.theorems = {p.id: benchmark.theorem(p) for p in problems}
        self.todo: dict[str, list[int]] = {}
        self.candidates: queue.Queue[_Candidate | None] = queue.Queue(maxsize=config.queue_size)
        self.finished: queue.Queue[tuple[str, ProofAttempt | None, int]] = queue.Queue()
        self.stop = threading.Event()

    def run(self, verifier_name: str = "") -> BenchmarkRun:
        """Plan from the stored samples, make the missing ones, and return the run."""
        started = time.perf_counter()
        pending = self.shell.plan(list(self.theorems.values()), self.config.samples)
        problem_of = {(t.key, t.commit): pid for pid, t in self.theorems.items()}
        for task in pending:
            problem_id = problem_of[(task.theorem.key, task.theorem.commit)]
            self.todo.setdefault(problem_id, []).append(task.attempt)
        results = {p.id: ProblemResult(p) for p in self.problems}
        for earlier in self.shell.stored:
            if earlier.status is not AttemptStatus.ERROR:
                results[problem_of[(earlier.key, earlier.commit)]].attempts.append(earlier)
        outcome = BenchmarkRun(
            run=self.shell.run,
            config=self.config,
            sampler=self.sampler.name,
            verifier=verifier_name or type(self.verifier).__name__,
            source=self.verifier.source,
            audited=self.verifier.live,
            problems=list(results.values()),
        )
        self._drive(results)
        outcome.new = self.shell.result.new
        for result in results.values():
            result.attempts.sort(key=lambda a: a.attempt)
        outcome.wall_seconds = time.perf_counter() - started
        return outcome

    def _drive(self, results: dict[str, ProblemResult]) -> None:
        """Start the threads and record what they finish, here."""
        left = {problem_id: len(indices) for problem_id, indices in self.todo.items()}
        if self.hooks.on_start is not None:
            self.hooks.on_start(sum(left.values()))
        on_problem = self.hooks.on_problem
        for problem in self.problems:
            if problem.id not in left and on_problem is not None:
                on_problem(results[problem.id])
        threads = [threading.Thread(target=self._generate, name="benchmark-sampler", daemon=True)]
        threads += [
            threading.Thread(target=self._verify, name=f"benchmark-verifier-{i}", daemon=True)
            for i in range(self.config.workers)
        ]
        for thread in threads:
            thread.start()
        workers_left = self.config.workers
        try:
            while workers_left:
                problem_id, attempt, count = self.finished.get()
                if count < 0:
                    workers_left -= 1
                    continue
                if attempt is not None:
                    self.shell.record(attempt)  # the driver alone writes
                    if attempt.status is not AttemptStatus.ERROR:
                        results[problem_id].attempts.append(attempt)
                left[problem_id] -= count
                if left[problem_id] <= 0 and on_problem is not None:
                    on_problem(results[problem_id])
        finally:
            self.stop.set()
            _drain(self.candidates)  # samples in flight are lost (a rerun makes them)
            for _ in range(self.config.workers):
                _offer(self.candidates, None)
            deadline = time.monotonic() + 5
            for thread in threads:
                thread.join(timeout=max(deadline - time.monotonic(), 0.01))

    def _is_solved(self, problem_id: str) -> bool:
        return self.shell.is_solved(self.theorems[problem_id])

    def _chunks(self, problem_id: str) -> list[list[int]]:
        indices, size = self.todo[problem_id], self.config.batch_size
        return [indices[at : at + size] for at in range(0, len(indices), size)]

    def _batches(self) -> Iterator[tuple[BenchmarkProblem, int, list[int]]]:
        """(problem, position, sample indices) to make, a problem's batches one after the other;
        with ``stop_at_first``, one batch of every problem per round, so that a problem's
        earlier batches are verified before its next one is made."""
        chunks = {p.id: self._chunks(p.id) for p in self.problems if p.id in self.todo}
        if not self.config.stop_at_first:
            for problem in self.problems:
                for position, chunk in enumerate(chunks.get(problem.id, [])):
                    yield problem, position, chunk
            return
        rounds = max((len(c) for c in chunks.values()), default=0)
        for position in range(rounds):
            for problem in self.problems:
                if position < len(chunks.get(problem.id, [])):
                    yield problem, position, chunks[problem.id][position]

    def _generate(self) -> None:
        ended: set[str] = set()  # problems whose remaining samples are not made
        try:
            for problem, position, batch in self._batches():
                if self.stop.is_set():
                    return
                if problem.id in ended:
                    continue
                rest = sum(len(c) for c in self._chunks(problem.id)[position:])
                if self.config.stop_at_first and self._is_solved(problem.id):
                    self.finished.put((problem.id, None, rest))
                    ended.add(problem.id)
                    continue
                try:
                    samples = self.sampler.sample(problem, len(batch), batch[0])
                except Exception as exc:  # this batch fails, the run goes on
                    error = f"the proof generator failed: {describe_exception(exc)}"
                    for index in batch:
                        self._put(_Candidate(problem, index, None, error))
                    continue
                for index, sample in zip(batch, samples, strict=False):
                    self._put(_Candidate(problem, index, sample))
                if len(samples) < len(batch):  # the sampler has no more for it
                    self.finished.put((problem.id, None, rest - len(samples)))
                    ended.add(problem.id)
        finally:
            for _ in range(self.config.workers):
                self._put(None, force=True)

    def _put(self, item: _Candidate | None, force: bool = False) -> None:
        while True:  # wait for room (back-pressure), unless the run is stopping
            if self.stop.is_set():
                if force:
                    _offer(self.candidates, item)
                return
            try:
                self.candidates.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _verify(self) -> None:
        while True:
            item = self.candidates.get()
            if item is None:
                self.finished.put(("", None, -1))
                return
            batch = [item]
            while len(batch) < self.config.verify_batch:
                try:
                    more = self.candidates.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self.candidates.put(None)  # leave the end mark for this worker's next turn
                    break
                batch.append(more)
            for candidate, attempt in zip(batch, self._check(batch), strict=True):
                self.finished.put((candidate.problem.id, attempt, 1))

    def _check(self, batch: list[_Candidate]) -> list[ProofAttempt | None]:
        out: list[ProofAttempt | None] = [None] * len(batch)
        to_check: list[tuple[int, AuditedCode, str]] = []
        for position, candidate in enumerate(batch):
            if self.config.stop_at_first and self._is_solved(candidate.problem.id):
                continue  # not made: the problem has a verified proof
            if candidate.sample is None:
                failed = _ended(AttemptStatus.ERROR, candidate.error or "no sample")
                out[position] = self._finish(candidate, failed)
                continue
            try:
                audited, ended, proof = prepare(
                    candidate.problem, candidate.sample.text, self.config, self.verifier.live
                )
            except Exception as exc:
                ended = _ended(AttemptStatus.ERROR, f"reading the answer failed: {exc}")
                audited, proof = None, None
            if ended is not None:
                out[position] = self._finish(candidate, ended)
            else:
                assert audited is not None and proof is not None
                to_check.append((position, audited, proof))
        if to_check:
            for position, attempt, seconds in self._verdicts(to_check):
                out[position] = self._finish(batch[position], attempt, lean_seconds=seconds)
        return out

    def _verdicts(
        self, to_check: list[tuple[int, AuditedCode, str]]
    ) -> Iterator[tuple[int, ProofAttempt, float]]:
        try:
            codes = [a.code for _, a, _ in to_check]
            verdicts = self.verifier.check_batch(codes, self.config.timeout)
        except Exception as exc:  # the verifier failed: these samples are tried again
            error = f"the verifier failed: {describe_exception(exc)}"
            verdicts = [Verification.failed(error, 0.0, self.verifier.source)] * len(to_check)
        for (position, audited, proof), verdict in zip(to_check, verdicts, strict=True):
            yield position, verdict_attempt(audited, proof, verdict, self.config), verdict.seconds

    def _finish(
        self, candidate: _Candidate, attempt: ProofAttempt, lean_seconds: float = 0.0
    ) -> ProofAttempt:
        theorem = self.theorems[candidate.problem.id]
        sample = candidate.sample
        model_seconds = sample.seconds if sample is not None else 0.0
        return attempt.model_copy(
            update={
                "run": self.shell.run,
                "url": theorem.url,
                "commit": theorem.commit,
                "file_path": theorem.file_path,
                "full_name": theorem.full_name,
                "attempt": candidate.index,
                "prover": self.sampler.name,
                "model_seconds": model_seconds,
                "lean_seconds": lean_seconds,
                "seconds": model_seconds + lean_seconds,
                "tokens": sample.tokens if sample is not None else None,
                "environment": "lean" if self.verifier.source == "lean" else "recorded",
            }
        )


def _offer(into: queue.Queue, item: object) -> None:
    """Put ``item`` if there is room (a run that is stopping waits for nobody)."""
    with contextlib.suppress(queue.Full):
        into.put_nowait(item)


def _drain(source: queue.Queue) -> None:
    with contextlib.suppress(queue.Empty):
        while True:
            source.get_nowait()
