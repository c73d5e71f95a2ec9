"""Proving on several Ray workers: the sample's theorems proved in the replay environment by the
recorded diagnostic behind a stand-in generator that answers each call after a fixed latency
(as a model server would), ``--attempts`` attempts each, with 1, 2 and 4 Ray workers on one
local Ray instance bound to 127.0.0.1 (each run starts its workers: their start-up, which loads
the dataset, is part of the wall time). The speed-up is the wall time of 1 worker over that of
N, against the ideal N, measured in the same run. Target: at least 0.8 x ideal for 2 workers on
this 2-core machine (the stand-in's latency is waiting, not computing, so 4 workers may go past
the cores).

Last line: ``RESULT: speedup_2=... speedup_4=... efficiency_2=...``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import time
from pathlib import Path

from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover.recorded import RecordedGenerator, RecordedProver
from leanloop.prover.replay import ReplayServer
from leanloop.prover.run import loopback_ray, run_proofs


class SlowRecorded(RecordedProver):
    """The recorded diagnostic behind a generator with a fixed latency per call."""

    latency = 0.05

    def load_generator(self):
        inner = RecordedGenerator.from_dataset(self.dataset, seed=self.config.seed)
        return Latency(inner, self.latency)


class Latency:
    def __init__(self, inner, seconds: float) -> None:
        self.inner, self.seconds = inner, seconds

    def generate_batch(self, states, k, **options) -> list[list[GeneratedTactic]]:
        time.sleep(self.seconds)
        return self.inner.generate_batch(states, k, **options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fixtures = Path(os.environ.get("LEANLOOP_FIXTURES", "../shared/fixtures"))
    parser.add_argument("--dataset", type=Path, default=fixtures / "leandojo_benchmark_4")
    parser.add_argument("--theorems", type=int, default=100)
    parser.add_argument("--attempts", type=int, default=3, help="attempts per theorem")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()

    import ray

    from leanloop.data.formats import open_dataset

    theorems = [t for t in open_dataset(args.dataset).iter_theorems() if t.traced_tactics]
    theorems = theorems[: args.theorems]
    SlowRecorded.latency = args.latency_ms / 1000
    prover = SlowRecorded(
        args.dataset,
        config={"num_sampled_tactics": 8, "timeout": 120, "num_attempts": args.attempts},
    )
    servers = functools.partial(ReplayServer.from_dataset, args.dataset)
    with loopback_ray(None):  # every Ray port on 127.0.0.1
        ray.init(
            num_cpus=max(args.workers),
            include_dashboard=False,
            logging_level=logging.WARNING,
            _node_ip_address="127.0.0.1",
        )
    # the workers receive this module's classes by value (they cannot import bench/)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    walls: dict[int, float] = {}
    outcomes: dict[int, dict[str, str]] = {}
    try:
        run_proofs(theorems[:2], prover, servers, num_workers=max(args.workers))  # warm-up
        for workers in args.workers:
            started = time.perf_counter()
            result = run_proofs(theorems, prover, servers, num_workers=workers)
            walls[workers] = time.perf_counter() - started
            outcomes[workers] = {a.full_name: a.status.value for a in result.attempts}
            found = sum(s == "replayed" for s in outcomes[workers].values())
            print(
                f"{workers} worker(s): {walls[workers]:.2f} s for {len(theorems)} theorems x "
                f"{args.attempts} attempts ({found} theorems replayed)",
                flush=True,
            )
    finally:
        ray.shutdown()
    same = all(o == outcomes[args.workers[0]] for o in outcomes.values())
    print(f"the same outcomes with every number of workers: {same}")
    base = walls[min(args.workers)]
    speedups = {w: base / walls[w] for w in args.workers}
    for workers, speedup in speedups.items():
        print(f"speed-up with {workers}: {speedup:.2f} (ideal {workers / min(args.workers):g})")
    efficiency = speedups.get(2, 0.0) / 2
    print(f"target: 2 workers at least 0.8 x ideal: {'met' if efficiency >= 0.8 else 'NOT met'}")
    print(
        f"RESULT: speedup_2={speedups.get(2, float('nan')):.2f} "
        f"speedup_4={speedups.get(4, float('nan')):.2f} efficiency_2={efficiency:.2f}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
