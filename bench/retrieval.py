"""Premise retrieval on the real LeanDojo sample: BM25, the untrained MiniLM encoder and MiniLM
fine-tuned on the CPU by ``RetrievalTrainer``, all evaluated in one run on the same held-out steps.

The sample ($LEANLOOP_FIXTURES/leandojo_benchmark_4, 177 theorems, 435 tactics) is imported into
a fresh SQLite database and split by theorem with a seeded ``SplitConfig`` (val 10%, test 30%,
seed 1); the split is fixed by a first export and kept by the trainer's own exports. Theorem sizes
are very uneven (one proof has 93 steps), so the seed decides how many steps each side gets: with
seed 1 the sides hold 185/23/48 steps, while LeanDojo's seed 3407 leaves 105 for training and 13
for validation. The fine-tuning settings were chosen on the validation steps of this split.

The corpus is built from the premises the tactics refer to (the sample has no corpus.jsonl), so
premise documents are full names only, and every premise of another file counts as accessible.
The three methods rank the same accessible premises for the same test steps; the metrics are
ReProver's (R@1, R@10, MRR). Checkpoints are chosen on the validation split only.

The baseline measured in the same run is BM25 (rank-bm25, Okapi, identifiers split at dots,
underscores and other punctuation, lower case). Target: tuned R@10 at least 1.5 x BM25's.
Last line: ``RESULT: bm25_r10=... base_r10=... tuned_r10=...``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SPLITS = {"val": 0.1, "test": 0.3, "seed": 1}
_WORD = re.compile(r"[^\W_]+")


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def bm25_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_rankings(corpus, steps, k: int) -> list[list[str]]:
    import numpy as np
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([bm25_words(text) for text in corpus.texts()])
    ranked = []
    for step in steps:
        scores = bm25.get_scores(bm25_words(step.context))
        scores = np.where(corpus.accessible_mask(step.file_path, step.position), scores, -np.inf)
        order = np.argsort(-scores, kind="stable")[:k]
        ranked.append([corpus[int(i)].full_name for i in order if np.isfinite(scores[i])])
    return ranked


def row(name: str, metrics, seconds: float) -> str:
    return (
        f"{name:<28} R@1 {100 * metrics.recall_at_1:6.2f}%  R@10 {100 * metrics.recall_at_10:6.2f}%"
        f"  MRR {metrics.mrr:.4f}  ({seconds:.0f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs (at most)")
    parser.add_argument("--minutes", type=int, default=15, help="fine-tuning time limit")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--max-seq-len", type=int, default=256)
    parser.add_argument("--negatives", type=int, default=15, help="random negatives per pair")
    parser.add_argument("--in-file-negatives", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the work directory here")
    args = parser.parse_args()

    from leanloop.database import DynamicDatabase, SplitConfig
    from leanloop.ml.device import limit_threads
    from leanloop.ml.models import resolve_model
    from leanloop.retrieval.corpus import Corpus
    from leanloop.retrieval.examples import load_all_splits, retrieval_steps
    from leanloop.retrieval.index import PremiseIndex, evaluate_index
    from leanloop.retrieval.metrics import RetrievalMetrics, evaluate_rankings
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval import RetrievalTrainer, TrainingConfig

    limit_threads()
    work = args.keep or Path(tempfile.mkdtemp(prefix="leanloop-bench-retrieval-"))
    shutil.rmtree(work / "data", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    try:
        db = DynamicDatabase(work / "bench.db")
        if not db.get_repositories():
            db.import_leandojo(fixtures() / "leandojo_benchmark_4")
        repos = db.get_repositories()
        split = SplitConfig(val=SPLITS["val"], test=SPLITS["test"], seed=SPLITS["seed"])
        db.export_merged_data(repos, work / "data", split_config=split)
        theorems = load_all_splits(work / "data", "random")
        corpus = Corpus.from_dataset(work / "data", [t for part in theorems.values() for t in part])
        steps = {name: retrieval_steps(part, corpus) for name, part in theorems.items()}
        print(
            f"sample: {sum(len(p) for p in theorems.values())} theorems; corpus {len(corpus)} "
            f"premises; steps with premises: train {len(steps['train'])}, val "
            f"{len(steps['val'])}, test {len(steps['test'])} (theorems: "
            + ", ".join(f"{k} {len(v)}" for k, v in theorems.items())
            + ")"
        )
        k = 100
        results: dict[str, RetrievalMetrics] = {}

        start = time.perf_counter()
        results["bm25"] = evaluate_rankings(
            zip(
                (s.positives for s in steps["test"]),
                bm25_rankings(corpus, steps["test"], k),
                strict=True,
            )
        )
        print(row("BM25 (baseline)", results["bm25"], time.perf_counter() - start), flush=True)

        start = time.perf_counter()
        base = PremiseRetriever(model_name=resolve_model("all-minilm-l6-v2"), max_seq_len=256)
        base.freeze()
        results["base"] = evaluate_index(PremiseIndex.build(base, corpus), steps["test"], k)
        print(row("MiniLM, untrained", results["base"], time.perf_counter() - start), flush=True)
        del base

        start = time.perf_counter()
        config = TrainingConfig(
            model_name="all-minilm-l6-v2",
            output_dir=work / "retriever",
            max_epochs=args.epochs,
            max_time=f"00:00:{args.minutes:02d}:00",
            lr=args.lr,
            max_seq_len=args.max_seq_len,
            num_negatives=args.negatives,
            num_in_file_negatives=args.in_file_negatives,
            val_check_interval=0.5,
            lambda_value=0.0,  # one repository: nothing to consolidate against
            enable_progress_bar=False,
        )
        trainer = RetrievalTrainer(config)
        trainer.train(repos, db, work / "data")
        tuned = trainer.evaluate(work / "data", split="test")
        results["tuned"] = RetrievalMetrics(
            tuned["R@1"], tuned["R@10"], tuned["MRR"], tuned["steps"]
        )
        seconds = time.perf_counter() - start
        report = trainer.reports[-1]
        print(
            row("MiniLM, fine-tuned", results["tuned"], seconds)
            + f"  [best val R@10 {report['best_checkpoint_score']}]"
        )
        bm25_r10 = results["bm25"].recall_at_10
        ratio = results["tuned"].recall_at_10 / bm25_r10 if bm25_r10 else float("inf")
        print(
            f"tuned R@10 / BM25 R@10 = {ratio:.2f} (target 1.5: "
            f"{'met' if ratio >= 1.5 else 'missed'})"
        )
        print(
            "RESULT: "
            + " ".join(f"{name}_r10={m.recall_at_10:.4f}" for name, m in results.items())
            + " "
            + " ".join(f"{name}_mrr={m.mrr:.4f}" for name, m in results.items())
            + f" ratio={ratio:.2f} test_steps={results['bm25'].steps}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
