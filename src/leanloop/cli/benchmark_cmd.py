"""``leanloop prove --benchmark``: pass@k on a statement-only benchmark (miniF2F, ProofNet, a
JSONL or ``.lean`` file) — whole proofs sampled from a model and checked by a verifier (leanloop's
REPL pool, a Kimina Lean Server, or recorded verdicts), or tactic search from each statement; a
``ProofJob`` run by the proving engine, stored as it goes, resumable, reported as a paper reports
it."""

from __future__ import annotations

import time

import orjson
import typer

import leanloop.prover.assemble as assemble
from leanloop.cli.common import console, err_console, on_interrupt, open_database, progress_bar
from leanloop.errors import LeanloopError
from leanloop.prover.engine import Callbacks, JobInputs, ProofRun, run_job
from leanloop.prover.job import SAMPLING, BenchmarkTargets, ProofJob
from leanloop.words import plural


def prove_benchmark(job: ProofJob, request) -> None:
    """Run a benchmark job (``request``: a ``ProveRequest``): sampling, or tactic search from
    each statement."""
    if not request.generator_given:
        raise LeanloopError(
            "choose what writes the proofs with --generator",
            hint="hf:PATH (a checkpoint), external:MODEL (an OpenAI-compatible endpoint), "
            "recorded (the file's formal_proof) or samples:FILE (answers recorded earlier)",
        )
    assert isinstance(job.targets, BenchmarkTargets)
    bench = assemble.benchmark_file(job.targets.spec)
    problems = bench.problems(job.targets.split)[: job.targets.limit]
    leases = job.mode != SAMPLING  # search (or whole proofs) on leased servers
    if leases or job.lean_kind not in assemble.CHECKERS:  # a pool of Lean servers here
        # Lean is needed: said before a model is loaded or anything is stored
        instead = None if leases else assemble.KIMINA
        assemble.lean_launcher(None, limits=assemble.LeanLimits(instead=instead))
    if leases:
        _search(job, request, bench, open_database(request.db))
        return
    sampler = assemble.sampler(job)
    verifier = assemble.verifier(job)  # Lean here
    database = open_database(request.db)
    _run_whole(job, request, bench, problems, sampler, verifier, database)


def _run_whole(job, request, bench, problems, sampler, verifier, database) -> None:
    from leanloop.cli.prove_cmd import proving_stopped
    from leanloop.prover.benchmark_report import BenchmarkReport, write_files
    from leanloop.prover.run_report import slug
    from leanloop.prover.sampling import run_sampling_job

    config = job.sampling_config()
    run_name = job.run_name(job.generator)

    total = len(problems) * config.samples
    done = verified = problems_done = 0
    errors: dict[str, list] = {}  # a problem's samples that ended in an error (retried later)
    missing = getattr(sampler, "missing", None)  # why a recorded sampler has no sample

    def on_start(count: int) -> None:
        nonlocal total
        total = count  # the samples an earlier call of the run made are not made again

    recorded = getattr(verifier, "source", "lean") == "recorded"
    accepted = "accepted by recorded verdicts" if recorded else "verified"
    started = time.perf_counter()
    out = err_console if request.json_lines else console
    with (
        on_interrupt(proving_stopped(database, run_name)),
        progress_bar(f"{bench.name}: {len(problems)} problems × {config.samples}") as update,
    ):

        def note() -> str:
            rate = done / max(time.perf_counter() - started, 1e-9)
            return (
                f"({problems_done}/{len(problems)} problems, {verified} samples {accepted}, "
                f"{rate:.1f} samples/s)"
            )

        def on_sample(attempt) -> None:
            nonlocal done, verified
            done += 1
            verified += attempt.status.found_proof
            if attempt.status.value == "error":
                errors.setdefault(attempt.full_name, []).append(attempt)
            update(done, total, note())

        def on_problem(result) -> None:
            nonlocal problems_done
            problems_done += 1
            update(done, total, note())
            if request.json_lines:
                line = _problem_line(result, errors.get(result.problem.id, []), missing)
                typer.echo(orjson.dumps({**line, "verdict": verifier.source}).decode())

        try:
            extra = {"sampler": sampler, "verifier": verifier}
            extra.update(on_problem=on_problem, on_start=on_start)
            inputs = JobInputs(database, callbacks=Callbacks(on_result=on_sample), extra=extra)
            run = run_sampling_job(job, inputs)
        finally:
            verifier.close()
    report = BenchmarkReport.of(run, bench.name, why_unsampled=missing)
    out.print(f"run {run_name}: {report.verdicts}", highlight=False)
    out.print(report.summary(), highlight=False)
    for remark in report.notes:
        out.print(f"note: {remark}", highlight=False)
    directory = request.out / slug(run_name)
    written = write_files(run, report, directory)
    if written[0].name != "report.json":
        err_console.print(
            f"{directory}/report.md holds a report of other settings: kept, this run's is "
            f"{written[1].name}",
            highlight=False,
        )
    names = ", ".join(path.name for path in written[2:])
    err_console.print(f"report: {written[1]} ({written[0].name}, {names})", highlight=False)


def _problem_line(result, errors: list, missing=None) -> dict:
    """A problem's line of ``--json``: its status (``verified``, ``failed``, ``error``,
    ``unsampled``) and why, its samples and its first verified proof."""
    from leanloop.prover.run_report import theorem_row

    first = result.first_verified
    why = missing(result.problem) if missing is not None else None
    row = theorem_row(
        result.problem.name,
        [*result.attempts, *errors],
        count_errors=False,
        unsampled=why or "the generator gave no sample for it",
    )
    status = result.status if result.attempts or not errors else "error"
    return {
        "name": result.problem.name,
        "id": result.problem.id,
        "split": result.problem.split,
        "status": status,
        "reason": row.reason,
        "samples": result.samples,
        "verified": result.verified,
        "proof": first.proof[0] if first is not None and first.proof else None,
    }


def _search(job, request, bench, database) -> None:
    """Tactic search (or whole proofs on leased servers) from each statement, through the
    proving engine (needs Lean)."""
    from leanloop.cli.prove_cmd import _json_printer, _summary, _write_report, proving_stopped

    if job.project is None:
        assemble.lean_launcher(None, job.prover_config(), assemble.LeanLimits(instead=None))
        raise LeanloopError(
            "tactic search on a benchmark needs --project DIR",
            hint="a Lean project with the benchmark's imports (Mathlib) built",
        )
    servers = assemble.servers(job, instead=None)
    prover = assemble.prover(job)
    run_name = job.run_name(assemble.identity(prover))
    show = _json_printer(request.json_lines)
    count = len(bench.problems(job.targets.split)[: job.targets.limit])
    with (
        on_interrupt(proving_stopped(database, run_name)),
        progress_bar(f"searching {plural(count, 'statement')} ({run_name})") as update,
    ):
        callbacks = Callbacks(progress=update, on_result=show)
        inputs = JobInputs(database, callbacks=callbacks, prover=prover, servers=servers)
        outcome = run_job(job, inputs)
    assert isinstance(outcome, ProofRun)
    report = outcome.report()
    _summary(report, len(outcome.skipped), err_console if request.json_lines else console)
    _write_report(report, request.out, run_name)
