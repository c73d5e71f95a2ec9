"""``leanloop prove --benchmark``: pass@k on a statement-only benchmark (miniF2F, ProofNet, a
JSONL or ``.lean`` file) — whole proofs sampled from a model and checked by a verifier (leanloop's
REPL pool, a Kimina Lean Server, or recorded verdicts), or tactic search from each statement;
stored as it goes, resumable, reported as a paper reports it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import typer

from leanloop.cli.common import (
    console,
    err_console,
    on_interrupt,
    open_database,
    progress_bar,
    user_path,
)
from leanloop.errors import LeanloopError
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.config import ProofMode
from leanloop.prover.run_report import slug
from leanloop.settings import Settings
from leanloop.words import plural

#: What checks whole proofs without a Lean toolchain here.
KIMINA = "--verifier kimina:URL checks on a Kimina Lean Server, recorded:FILE offline"


@dataclass(frozen=True)
class BenchmarkRequest:
    """What ``leanloop prove --benchmark`` was asked, besides the common options."""

    spec: str
    split: str
    samples: int | None
    stop_at_first: bool
    verifier: str
    prompt: str | None
    config: Path | None
    project: str | None


def benchmark_file(spec: str):
    """The benchmark ``spec`` names (a file, or minif2f / proofnet found or downloaded)."""
    from leanloop.data.benchmark import BenchmarkFile, resolve_benchmark

    settings = Settings.from_env()
    directories = [d for d in (settings.benchmarks,) if d is not None]
    if settings.fixtures is not None:
        directories.append(settings.fixtures / "minif2f")
    path = resolve_benchmark(
        spec, directories=directories, cache_dir=settings.cache_dir / "benchmarks"
    )
    return BenchmarkFile(path)


def prove_benchmark(request, asked: BenchmarkRequest) -> None:
    """Run ``request`` (a ``ProveRequest``) on the benchmark ``asked`` names."""
    if asked.split not in ("test", "valid", "all"):
        raise LeanloopError(f"--split {asked.split}: a benchmark's splits are test, valid or all")
    if request.generator is None:
        raise LeanloopError(
            "choose what writes the proofs with --generator",
            hint="hf:PATH (a checkpoint), external:MODEL (an OpenAI-compatible endpoint), "
            "recorded (the file's formal_proof) or samples:FILE (answers recorded earlier)",
        )
    overrides: dict = {}
    if asked.samples is not None:
        overrides["samples"] = asked.samples
    if asked.stop_at_first:
        overrides["stop_at_first"] = True
    if request.workers is not None:
        overrides["workers"] = request.workers
    if asked.prompt is not None:
        overrides["prompt"] = asked.prompt
    config = BenchmarkConfig.load(asked.config if asked.config else {}, **overrides)
    bench = benchmark_file(asked.spec)
    problems = bench.problems(asked.split)[: request.limit]
    if request.mode is ProofMode.SEARCH or asked.verifier == "pool":
        from leanloop.cli.prove_cmd import lean_launcher

        # Lean is needed: said before a model is loaded or anything is stored
        lean_launcher(None, instead=None if request.mode is ProofMode.SEARCH else KIMINA)
    if request.mode is ProofMode.SEARCH:
        database = open_database(request.db)
        database.add_repository(bench.repository(), bench.iter_theorems())
        _search(request, asked, bench, problems, config, database)
        return
    sampler = _sampler(request, config)
    verifier = _verifier(asked.verifier, asked.project, config, request.settings)  # Lean here
    database = open_database(request.db)
    database.add_repository(bench.repository(), bench.iter_theorems())
    kind = asked.verifier.partition(":")[0]
    tag = f":{config.axiom_policy.tag}" if config.axiom_policy.tag else ""
    run_name = request.run or (
        f"{request.generator}:{bench.name}/{asked.split}:n{config.samples}"
        + (":first" if config.stop_at_first else "")
        + f":{kind}{tag}"
    )
    _run_whole(
        request, bench, problems, config, sampler, verifier, asked.verifier, database, run_name
    )


def _run_whole(
    request, bench, problems, config, sampler, verifier, verifier_name, database, run_name
) -> None:
    from leanloop.cli.prove_cmd import proving_stopped
    from leanloop.prover.benchmark_report import BenchmarkReport, write_files
    from leanloop.prover.sampling import run_benchmark

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
            run = run_benchmark(
                bench,
                problems,
                sampler,
                verifier,
                config=config,
                database=database,
                run=run_name,
                verifier_name=verifier_name,
                on_sample=on_sample,
                on_problem=on_problem,
                on_start=on_start,
            )
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


def _sampler(request, config: BenchmarkConfig):
    from leanloop.prover import samplers

    kind, _, argument = request.generator.partition(":")
    if kind == "recorded" and not argument:
        return samplers.RecordedProofs()
    if kind == "samples" and argument:
        return samplers.RecordedSamples(user_path(argument))
    if kind == "hf" and argument:
        return samplers.ModelSampler(
            user_path(argument),
            config.prompt,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
        )
    if kind == "external" and argument:
        key = None if request.api_key_env.lower() == "none" else request.api_key_env
        return samplers.EndpointSampler(
            argument,
            config.prompt,
            base_url=request.base_url,
            api_key_env=key,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
        )
    raise LeanloopError(
        f"--generator {request.generator}: expected hf:PATH, external:MODEL, recorded or "
        "samples:FILE"
    )


def _verifier(spec: str, project: str | None, config: BenchmarkConfig, settings=None):
    kind, _, argument = spec.partition(":")
    if kind == "recorded" and argument:
        from leanloop.lean.verification import RecordedVerifier

        return RecordedVerifier(user_path(argument))
    if kind == "kimina" and argument:
        from leanloop.lean.kimina import KiminaVerifier

        return KiminaVerifier(argument, batch_size=config.verify_batch, timeout=config.timeout)
    if kind == "pool" and not argument:
        from leanloop.cli.prove_cmd import lean_launcher
        from leanloop.lean.verification import PoolVerifier

        if project is None:
            lean_launcher(None, instead=KIMINA)  # says first when Lean itself is missing
            raise LeanloopError(
                "--verifier pool checks on leanloop's REPLs: it needs --project DIR",
                hint="a Lean project with the benchmark's imports (Mathlib) built, or "
                "--verifier kimina:URL / recorded:FILE",
            )
        launcher = lean_launcher(
            user_path(project),
            settings,
            timeout=config.timeout,
            memory_limit_mb=config.memory_limit_mb,
            instead=KIMINA,
        )
        return PoolVerifier(launcher, max_servers=config.workers)
    raise LeanloopError(f"--verifier {spec}: expected pool, kimina:URL or recorded:FILE")


def _search(request, asked, bench, problems, config, database) -> None:
    """Tactic search from each statement, through the proving engine (needs Lean)."""
    from leanloop.cli.prove_cmd import (
        _json_printer,
        _summary,
        _write_report,
        lean_launcher,
        proving_stopped,
    )
    from leanloop.prover.run import run_proofs

    if asked.project is None:
        lean_launcher(None, request.settings, instead=None)
        raise LeanloopError(
            "tactic search on a benchmark needs --project DIR",
            hint="a Lean project with the benchmark's imports (Mathlib) built",
        )
    servers = lean_launcher(user_path(asked.project), request.settings, instead=None)
    theorems = [bench.theorem(p) for p in problems]
    sources = {
        (t.key, t.commit): p.theorem_source() for t, p in zip(theorems, problems, strict=True)
    }
    run_name = request.run or f"{request.generator}:{bench.name}/{asked.split}:search"
    show = _json_printer(request.json_lines)
    with (
        on_interrupt(proving_stopped(database, run_name)),
        progress_bar(f"searching {plural(len(theorems), 'statement')} ({run_name})") as update,
    ):
        outcome = run_proofs(
            theorems,
            request.prover(None),
            servers,
            mode=ProofMode.SEARCH,
            database=database,
            run=run_name,
            attempts=config.samples,
            stop_at_first=config.stop_at_first,
            num_workers=request.workers,
            address=request.address,
            progress=update,
            on_result=show,
            sources=sources,
        )
    report = outcome.report()
    _summary(report, len(outcome.skipped), err_console if request.json_lines else console)
    _write_report(report, request.out, run_name)
