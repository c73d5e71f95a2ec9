"""Whether whole-proof sampling over a benchmark overlaps generation and verification as it
should: ``run_benchmark`` (the real one: sampler thread, bounded queue, verification workers,
the driver recording every attempt, ``prepare``/``judge`` on every sample) with a stand-in
generator and a stand-in verifier of fixed latencies.

The generator sleeps ``--gen-ms`` per sample it is asked for (5 ms × n per call, n = the
config's batch size, 4) and answers a continuation of the statement (the default completion
prompt format): ``  linarith`` for even sample indices, ``  simp`` for odd ones. The verifier
sleeps ``--check-ms`` per code (20 ms) and answers as a *live* verifier (``live=True``,
``source="lean"``), so the samples go through leanloop's axiom audit as they do with a pool of
REPLs: its answer is a ``CheckResult`` made of leanloop's own ``LeanMessage`` objects (a stand-in,
not Lean output) holding the two ``#print axioms`` replies at the audit's lines (found in the
code leanloop sent), and for a ``simp`` proof an error located on the proof's line. So even
samples are judged accepted (PROVED, axioms audited) and odd ones rejected (FAILED); the run
checks that it ends that way.

Default: 200 problems (miniF2F-shaped JSON Lines in a temporary directory) × 8 samples, 4
verification workers. The bound measured against: with perfect pipelining the run takes
max(total generation, total verification / workers), from the configured latencies (and also
from the seconds the attempts record, ``model_seconds`` and ``lean_seconds``). The baseline, in
the same run: the sequential figure with no overlap, total generation + total verification
(as computed from the same latencies and from the recorded seconds). Target: wall / bound ≤ 1.15.
A small run warms up first. Measured on the 2-core development machine: wall 8.49 s against a
bound of 8.00 s (ratio 1.06, target met; 1.03 against the recorded seconds, the sleeps overrun),
sequential 40 s (4.7x). Last line:
``RESULT: wall_s=... bound_s=... ratio=... measured_bound_s=... sequential_s=... speedup=...``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import orjson

from leanloop.data.benchmark import BenchmarkFile, BenchmarkProblem
from leanloop.data.records import AttemptStatus
from leanloop.lean.server import CheckResult, LeanMessage
from leanloop.lean.verification import Source, Verification
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.samplers import Sample
from leanloop.prover.sampling import run_benchmark

TARGET = 1.15
HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)
ACCEPTED_PROOF = "  linarith\n"
REJECTED_PROOF = "  simp\n"
AXIOMS = "[propext, Classical.choice, Quot.sound]"


def write_benchmark(directory: Path, count: int) -> Path:
    """``count`` miniF2F-shaped problems as a JSON Lines benchmark file."""
    path = directory / f"standin_{count}.jsonl"
    rows = []
    for i in range(count):
        rows.append(
            {
                "name": f"mathd_algebra_{i}",
                "split": "test" if i % 2 else "valid",
                "header": HEADER,
                "informal_prefix": f"/-- If $x + {i} = {i + 2}$, show that $x = 2$. -/\n",
                "formal_statement": (
                    f"theorem mathd_algebra_{i} (x : ℝ) (h₀ : x + {i} = {i + 2}) :\n"
                    "    x = 2 := by\n"
                ),
                "goal": f"x : ℝ\nh₀ : x + {i} = {i + 2}\n⊢ x = 2",
            }
        )
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows) + b"\n")
    return path


class FixedSampler:
    """A stand-in generator: sleeps ``seconds`` per sample asked for; a sample's answer is
    ``ACCEPTED_PROOF`` for an even index and ``REJECTED_PROOF`` for an odd one."""

    name = "standin-generator"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0
        self.inside = 0.0

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        started = time.perf_counter()
        time.sleep(self.seconds * n)
        elapsed = time.perf_counter() - started
        self.calls += 1  # one sampler thread: no lock needed
        self.inside += elapsed
        return [
            Sample(REJECTED_PROOF if index % 2 else ACCEPTED_PROOF, 3, elapsed / n)
            for index in range(first, first + n)
        ]


_PRINT_AXIOMS = re.compile(r"#print axioms (\S+)$")


class FixedVerifier:
    """A stand-in live verifier: sleeps ``seconds`` per code and answers with leanloop's own
    messages. The code leanloop sends holds the statement, the proof and leanloop's two audit
    commands (``#print axioms NAME``, then ``set_option pp.fullNames true in #print axioms
    NAME``); each audit command is answered by an info at its line, and a ``simp`` proof gets an
    error at its line (the sorry it leaves shows in the axioms, as it would)."""

    # Live rather than recorded (live=False would skip the audit): the samples then take the path
    # a pool of REPLs gives them (AuditedCode.around, judge with the axiom audit), which is the
    # per-sample cost worth measuring; the audit replies are the stand-in's own messages.
    live = True
    source: Source = "lean"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.checks = 0
        self.inside = 0.0

    def check_batch(self, codes: Sequence[str], timeout: float) -> list[Verification]:
        return [self.check(code) for code in codes]

    def check(self, code: str) -> Verification:
        started = time.perf_counter()
        time.sleep(self.seconds)
        messages = []
        rejected = False
        for number, line in enumerate(code.splitlines(), 1):
            if line == REJECTED_PROOF.rstrip("\n"):
                rejected = True
                messages.append(LeanMessage("error", "simp made no progress", number, 2, number, 6))
            match = _PRINT_AXIOMS.search(line)
            if match is not None:
                axioms = "[propext, sorryAx, Classical.choice, Quot.sound]" if rejected else AXIOMS
                messages.append(
                    LeanMessage(
                        "info", f"'{match[1]}' depends on axioms: {axioms}", number, 0, number, 13
                    )
                )
        result = CheckResult.from_messages(messages)
        elapsed = time.perf_counter() - started
        with self.lock:
            self.checks += 1
            self.inside += elapsed
        return Verification(result, None, elapsed, "lean")

    def close(self) -> None:
        pass


def measure(path: Path, samples: int, workers: int, gen_s: float, check_s: float) -> dict:
    benchmark = BenchmarkFile(path)
    problems = benchmark.problems()
    sampler, verifier = FixedSampler(gen_s), FixedVerifier(check_s)
    config = BenchmarkConfig(samples=samples, workers=workers)
    started = time.perf_counter()
    outcome = run_benchmark(benchmark, problems, sampler, verifier, config=config)
    wall = time.perf_counter() - started
    statuses = Counter(a.status for a in outcome.new)
    expected = len(problems) * samples
    assert len(outcome.new) == expected, (len(outcome.new), expected)
    assert statuses[AttemptStatus.PROVED] == len(problems) * ((samples + 1) // 2), statuses
    assert statuses[AttemptStatus.FAILED] == len(problems) * (samples // 2), statuses
    assert all(a.axioms for a in outcome.new if a.status is AttemptStatus.PROVED)
    total_gen = expected * gen_s
    total_check = expected * check_s
    model = sum(a.model_seconds or 0.0 for a in outcome.new)
    lean = sum(a.lean_seconds or 0.0 for a in outcome.new)
    return {
        "problems": len(problems),
        "attempts": expected,
        "statuses": statuses,
        "wall": wall,
        "run_wall": outcome.wall_seconds,
        "total_gen": total_gen,
        "total_check": total_check,
        "bound": max(total_gen, total_check / workers),
        "model": model,
        "lean": lean,
        "measured_bound": max(model, lean / workers),
        "sequential": total_gen + total_check,
        "measured_sequential": model + lean,
        "sampler_calls": sampler.calls,
        "checks": verifier.checks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=200, help="Problems in the benchmark.")
    parser.add_argument("--samples", type=int, default=8, help="Samples per problem.")
    parser.add_argument("--workers", type=int, default=4, help="Verification workers.")
    parser.add_argument("--gen-ms", type=float, default=5.0, help="Generation ms per sample.")
    parser.add_argument("--check-ms", type=float, default=20.0, help="Verification ms per code.")
    parser.add_argument("--quick", action="store_true", help="40 problems (a quick check).")
    args = parser.parse_args()
    count = min(args.problems, 40) if args.quick else args.problems
    gen_s, check_s = args.gen_ms / 1e3, args.check_ms / 1e3

    with tempfile.TemporaryDirectory(prefix="leanloop-bench-eval-") as tmp:
        measure(write_benchmark(Path(tmp), 4), 4, args.workers, gen_s, check_s)  # warm up
        row = measure(write_benchmark(Path(tmp), count), args.samples, args.workers, gen_s, check_s)

    statuses = ", ".join(f"{s.value} {n}" for s, n in sorted(row["statuses"].items()))
    print(
        f"{row['problems']} problems x {args.samples} samples = {row['attempts']} attempts "
        f"({statuses}); {row['sampler_calls']} generator calls, {row['checks']} checks, "
        f"{args.workers} workers"
    )
    print(
        f"configured: generation {row['total_gen']:.2f} s ({args.gen_ms:g} ms x "
        f"{row['attempts']}), verification {row['total_check']:.2f} s ({args.check_ms:g} ms x "
        f"{row['attempts']}) = {row['total_check'] / args.workers:.2f} s over {args.workers} "
        f"workers"
    )
    print(
        f"measured:   model_seconds {row['model']:.2f} s, lean_seconds {row['lean']:.2f} s "
        f"= {row['lean'] / args.workers:.2f} s over {args.workers} workers"
    )
    ratio = row["wall"] / row["bound"]
    measured_ratio = row["wall"] / row["measured_bound"]
    print(
        f"baseline (no overlap, sequential): {row['sequential']:.2f} s configured, "
        f"{row['measured_sequential']:.2f} s measured"
    )
    print(
        f"run_benchmark wall: {row['wall']:.3f} s (its own wall_seconds {row['run_wall']:.3f} s); "
        f"bound {row['bound']:.3f} s configured, {row['measured_bound']:.3f} s measured"
    )
    print(
        f"ratio wall/bound: {ratio:.3f} configured, {measured_ratio:.3f} measured; "
        f"speed-up over sequential {row['sequential'] / row['wall']:.2f}x "
        f"(at most {row['sequential'] / row['bound']:.2f}x)"
    )
    print(f"target: ratio <= {TARGET} ({'met' if ratio <= TARGET else 'missed'})")
    print(
        f"RESULT: wall_s={row['wall']:.3f} bound_s={row['bound']:.3f} ratio={ratio:.3f} "
        f"measured_bound_s={row['measured_bound']:.3f} measured_ratio={measured_ratio:.3f} "
        f"sequential_s={row['sequential']:.3f} speedup={row['sequential'] / row['wall']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
