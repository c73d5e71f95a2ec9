"""The proof search's own cost: the search loop against a server that answers each tactic after a
fixed 1 ms and a generator that answers each call after a fixed 1 ms, at 100, 1,000 and 10,000
expansions (k = 8 tactics each, so about 9 ms of waiting per expansion).

The server never finishes a proof: of each expansion's 8 tactics about 3 fail, 1 gives a state
already in the tree and 4 give new states, so the tree grows to about 4 new states per expansion
(40,000 at 10,000 expansions) and every search ends on its expansion budget. The time spent
inside the server and the generator is measured where they answer; the rest of the wall-clock
time is the framework's overhead (tree, priority queue, duplicate checks, bookkeeping).

A search of 50 expansions warms up first. The baseline measured in the same run is the same
number of calls to the same server and generator in a bare loop (1,000 expansions' worth), the
least any search could take. Target: overhead under 2 %, flat as the tree grows. Last line:
``RESULT: overhead_pct=... expansions_per_s=...`` (the figures at 10,000 expansions).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from leanloop.lean.server import LeanServer, ProofState, TacticFailed
from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import search
from leanloop.prover.target import Target

WAIT = 0.001
K = 8


class FixedServer(LeanServer):
    """Answers every tactic after ``WAIT`` seconds: a failure, a state seen before or a new
    state, decided by the state and the tactic; never a finished proof."""

    backend = "bench"
    checks_with_lean = False

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0.0
        self._ids = itertools.count(1)

    def start_proof(self, goal: str) -> ProofState:
        return ProofState(0, (goal,), 1, id(self))

    def run_tactic(self, state, tactic, *, goal=None):
        started = time.perf_counter()
        time.sleep(WAIT)
        choice = (state.id * 7 + int(tactic[1:])) % 8
        if choice < 3:
            result = TacticFailed("the tactic failed")
        elif choice == 3:
            result = ProofState(next(self._ids), state.goals, 1, id(self))  # the same goals
        else:
            number = next(self._ids)
            result = ProofState(number, (f"⊢ state {number}",), 1, id(self))
        self.inside += time.perf_counter() - started
        return result

    def start_theorem(self, theorem):
        raise NotImplementedError

    def open_sorries(self, code):
        raise NotImplementedError

    def check(self, code):
        raise NotImplementedError

    @property
    def generation(self) -> int:
        return 1

    def close(self) -> None:
        pass


class FixedGenerator:
    """Answers every call after ``WAIT`` seconds with ``k`` tactics and log-probabilities."""

    def __init__(self) -> None:
        self.inside = 0.0

    def generate_batch(self, states, k, **options):
        started = time.perf_counter()
        time.sleep(WAIT)
        ranked = [[GeneratedTactic(f"t{i}", -0.25 * (i + 1)) for i in range(k)] for _ in states]
        self.inside += time.perf_counter() - started
        return ranked


def bare_loop(expansions: int) -> float:
    """Seconds for the calls alone: one generator call and K tactics per expansion."""
    server, generator = FixedServer(), FixedGenerator()
    state = server.start_proof("⊢ start")
    started = time.perf_counter()
    for _ in range(expansions):
        for tactic, _score in generator.generate_batch([state.pretty], K)[0]:
            server.run_tactic(state, tactic)
    return time.perf_counter() - started


def measure(expansions: int) -> dict[str, float]:
    server, generator = FixedServer(), FixedGenerator()
    config = ProverConfig(num_sampled_tactics=K, max_expansions=expansions, timeout=1e9)
    result = search(server, Target.of(goal="⊢ start"), generator, config)
    assert result.status == "budget" and result.expansions == expansions, result
    waited = server.inside + generator.inside
    return {
        "expansions": expansions,
        "seconds": result.seconds,
        "waited": waited,
        "overhead_pct": 100 * (result.seconds - waited) / result.seconds,
        "per_expansion_us": 1e6 * (result.seconds - waited) / expansions,
        "expansions_per_s": expansions / result.seconds,
        "tree": result.tree_size,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="Expansions per search.")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    measure(50)  # warm up (first calls, allocations) before timing
    baseline_expansions = 1000
    bare = bare_loop(baseline_expansions)
    print(
        f"baseline: the bare calls of {baseline_expansions} expansions take {bare:.2f} s "
        f"({1e3 * bare / baseline_expansions:.3f} ms per expansion, {K} tactics + 1 generation)"
    )
    print(f"{'expansions':>10} {'tree':>7} {'wall s':>8} {'waiting s':>9} {'overhead':>9} "
          f"{'per exp.':>9} {'exp/s':>7} {'vs bare':>8}")  # fmt: skip
    rows = []
    for size in sizes:
        row = measure(size)
        rows.append(row)
        versus = row["seconds"] / (bare * size / baseline_expansions)
        print(
            f"{size:>10} {row['tree']:>7} {row['seconds']:>8.2f} {row['waited']:>9.2f} "
            f"{row['overhead_pct']:>8.2f}% {row['per_expansion_us']:>7.0f}us "
            f"{row['expansions_per_s']:>7.1f} {versus:>7.3f}x"
        )
    worst = max(row["overhead_pct"] for row in rows)
    spread = max(row["per_expansion_us"] for row in rows) / min(
        row["per_expansion_us"] for row in rows
    )
    print(
        f"target: overhead under 2 % at every size ({'met' if worst < 2 else 'missed'}: worst "
        f"{worst:.2f} %), flat as the tree grows (per-expansion overhead varies {spread:.2f}x)"
    )
    last = rows[-1]
    print(
        f"RESULT: overhead_pct={last['overhead_pct']:.2f} "
        f"expansions_per_s={last['expansions_per_s']:.1f} worst_overhead_pct={worst:.2f} "
        f"expansions={last['expansions']} tree={last['tree']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
