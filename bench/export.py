"""Import and export speed of DynamicDatabase at 1k, 20k and 50k theorems.

The real LeanDojo sample ($LEANLOOP_FIXTURES/leandojo_benchmark_4, 177 theorems, 435 tactics) is
scaled up with renamed copies. Each size runs in a fresh process (so peak memory is its own) that
imports the dataset into a new SQLite database and exports the merged data (random and
novel_premises splits). The baseline, measured in the same run, is what LeanDojo-v2 does to write a
dataset: hold every theorem in memory and ``json.dump`` each split.

Targets (on a quiet machine): export of 20k theorems under 1.0 s (the issue that set it put that
at about a quarter of its own baseline; the ratio to this run's baseline is printed too), import
of 20k under 2.5 s, time per theorem flat (linear) up to 50k, peak memory under 2 GB. Measured on
the 2-core development machine, quiet: export 20k 0.86 s (baseline 2.66 s, ratio 0.33), import
20k 2.02 s, 50k 2.42 s and 5.97 s, per-theorem time x1.12 (export) and x1.18 (import) from 20k to
50k, peak 147 MB (baseline 645 MB). Last line:
``RESULT: export_20k_s=... import_20k_s=... export_vs_baseline=... per_theorem_growth=... ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 20_000, 50_000)


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def build_dataset(size: int, root: Path) -> Path:
    """``size`` theorems: the sample's theorems renamed copy by copy, as random/train.json."""
    sample = json.loads((fixtures() / "leandojo_benchmark_4" / "random" / "test.json").read_text())
    out = root / f"scaled_{size}" / "random" / "train.json"
    out.parent.mkdir(parents=True)
    with out.open("w") as handle:
        handle.write("[")
        for i in range(size):
            theorem = dict(sample[i % len(sample)])
            copy = i // len(sample)
            theorem["full_name"] = f"{theorem['full_name']}_copy{copy}"
            theorem["file_path"] = theorem["file_path"].replace(".lean", f"_{copy % 50}.lean")
            handle.write((", " if i else "") + json.dumps(theorem))
        handle.write("]")
    return out.parent.parent


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def warm_up(work: Path) -> None:
    """Import and export the real sample once, so that what the first call loads and compiles
    (driver modules, statements) is not counted as the work the benchmark measures."""
    from leanloop.database import DynamicDatabase

    db = DynamicDatabase(work / "warm-up.db")
    db.import_leandojo(fixtures() / "leandojo_benchmark_4")
    db.export_merged_data(db.get_repositories(), work / "warm-up")


def child_leanloop(dataset: Path, work: Path) -> dict:
    from leanloop.database import DynamicDatabase

    warm_up(work)
    db = DynamicDatabase(work / "bench.db")
    start = time.perf_counter()
    counts = db.import_leandojo(dataset)
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    report = db.export_merged_data(db.get_repositories(), work / "export")
    export_s = time.perf_counter() - start
    return {
        "theorems": counts.theorems_added,
        "exported": report.theorems,
        "import_s": import_s,
        "export_s": export_s,
        "peak_mb": peak_mb(),
    }


def child_baseline(dataset: Path, work: Path) -> dict:
    """LeanDojo-v2's way: everything in memory, split by shuffling, ``json.dump`` per split."""
    import random

    start = time.perf_counter()
    theorems = json.loads((dataset / "random" / "train.json").read_text())
    random.Random(3407).shuffle(theorems)
    n = len(theorems) // 10
    for scheme in ("random", "novel_premises"):
        (work / scheme).mkdir(parents=True)
        for name, part in (
            ("val", theorems[:n]),
            ("test", theorems[n : 2 * n]),
            ("train", theorems[2 * n :]),
        ):
            with (work / scheme / f"{name}.json").open("w") as handle:
                json.dump(part, handle)
    return {"export_s": time.perf_counter() - start, "peak_mb": peak_mb()}


def run_child(kind: str, dataset: Path, work: Path) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(dataset), str(work)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"{kind} run failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("KIND", "DATASET", "WORK"))
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    args = parser.parse_args()
    if args.child:
        kind, dataset, work = args.child
        run = child_leanloop if kind == "leanloop" else child_baseline
        print(json.dumps(run(Path(dataset), Path(work))))
        return

    rows = []
    with tempfile.TemporaryDirectory(prefix="leanloop-bench-") as tmp:
        root = Path(tmp)
        for size in args.sizes:
            dataset = build_dataset(size, root)
            ours = run_child("leanloop", dataset, root / f"work_{size}")
            base = run_child("baseline", dataset, root / f"base_{size}")
            assert ours["theorems"] == ours["exported"] == size, ours
            rows.append((size, ours, base))
            print(
                f"{size:>6} theorems | import {ours['import_s']:6.2f} s "
                f"({size / ours['import_s']:8.0f} thm/s) | export {ours['export_s']:6.2f} s "
                f"({size / ours['export_s']:8.0f} thm/s) | peak {ours['peak_mb']:6.0f} MB | "
                f"baseline export {base['export_s']:6.2f} s, peak {base['peak_mb']:6.0f} MB",
                flush=True,
            )
    # growth from the middle size up: at 1k fixed costs (opening, committing) dominate
    middle = rows[len(rows) // 2] if len(rows) > 2 else rows[0]
    last = rows[-1]
    growth = (last[1]["export_s"] / last[0]) / (middle[1]["export_s"] / middle[0])
    import_growth = (last[1]["import_s"] / last[0]) / (middle[1]["import_s"] / middle[0])
    print(
        f"time per theorem, {last[0]} vs {middle[0]} theorems (1.0 = linear): export "
        f"x{growth:.2f}, import x{import_growth:.2f}"
    )
    size, ours, base = middle
    ratio = ours["export_s"] / base["export_s"]
    met = ours["export_s"] < 1.0 and ours["import_s"] < 2.5
    print(
        f"at {size} theorems: export {ours['export_s']:.2f} s (target < 1.0 s; "
        f"{ratio:.2f} x the baseline's {base['export_s']:.2f} s), import "
        f"{ours['import_s']:.2f} s (target < 2.5 s): {'met' if met else 'NOT met'}"
    )
    label = f"{size // 1000}k"
    print(
        f"RESULT: export_{label}_s={ours['export_s']:.2f} import_{label}_s={ours['import_s']:.2f} "
        f"baseline_export_{label}_s={base['export_s']:.2f} export_vs_baseline={ratio:.2f} "
        f"export_{last[0] // 1000}k_s={last[1]['export_s']:.2f} "
        f"import_{last[0] // 1000}k_s={last[1]['import_s']:.2f} "
        f"peak_mb={max(r[1]['peak_mb'] for r in rows):.0f} "
        f"per_theorem_growth={growth:.2f} import_per_theorem_growth={import_growth:.2f}"
    )


if __name__ == "__main__":
    main()
