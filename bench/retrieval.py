"""Premise retrieval on the real LeanDojo sample: BM25, the untrained MiniLM encoder and MiniLM
fine-tuned on the CPU by ``RetrievalTrainer``, all evaluated in one run on the same held-out steps.

The sample ($LEANLOOP_FIXTURES/leandojo_benchmark_4, 177 theorems, 435 tactics) is imported into
a fresh SQLite database and split by theorem with a seeded ``SplitConfig`` (val 10%, test 30%,
seed 1); the split is fixed by a first export and kept by the trainer's own exports. Theorem sizes
are very uneven (one proof has 93 steps), so the seed decides how many steps each side gets: with
seed 1 the sides hold 185/23/48 steps, while LeanDojo's seed 3407 leaves 105 for training and 13
for validation.

The corpus is built from the premises the tactics of every split refer to (the sample has no
corpus.jsonl), so premise documents are full names only, and every premise of another file counts
as accessible. This is a comparison of rankers over the same candidates, not leanloop's
evaluation figure: ``leanloop evaluate retrieval`` and the main job never let val or test proofs
add candidates (without corpus.jsonl their pool is the train split's premises), and on this
sample that caps R@10 near 9%; the run prints which pool it ranks.
Every method ranks the same accessible premises, from the same documents, for the same test
steps; the metrics are ReProver's (R@1, R@10, MRR). Checkpoints are chosen on the validation split
only, and validation figures are printed next to the test ones.

Fine-tuning (the defaults below): one example per tactic step with all its premises as positives;
8 hard negatives per step mined by the model itself before each epoch, 8 random accessible ones,
and the other steps' premises in the batch; naming examples from the training theorems (a
theorem's first proof state paired with its own name, Mathlib's naming convention at work); the
symbols MiniLM's vocabulary lacks (``∀ ⊢ ∑ ≫ ℕ`` ...) spelt out by their Unicode names instead of
all reading as [UNK]; queries of 128 tokens keeping the goal; 4 epochs at lr 5e-5.
These were chosen by 3-fold cross-validation by theorem over the training and validation
theorems (208 steps; the test split never used), R@10 averaged over steps: BM25 39.5%; MiniLM
untrained 37.8%; fine-tuned with mined hard and random negatives 41.2%; with naming
examples 43.4%; with symbols spelt out 47.3%. Six epochs or frozen embeddings (three folds),
256-token queries or premise documents with name and file-path words added (first fold only)
gave no gain there, nor did the theorem's file-path words added to the queries as well (first
fold: 46.0% and 38.4% against 49.6% without; BM25 over all 208 steps gains 1.4 points from them,
and 3 points even when every premise of the theorem's own file is put first). Mathlib's
naming words for the goal's symbols appended to the queries (``≤`` le, ``∈`` mem, ``*`` mul ...)
lifted the fine-tuned model from 47.3% to 49.4% over three folds, but BM25 given the same
queries from 39.5% to 45.9%, so they were left out.

Why 1.5 x is out of reach on this sample: 98 of the 107 premises the test steps use never
occur in training, and a premise's document is its name only, so what can be learnt is
Mathlib's naming convention from 185 training steps; BM25 already finds the premises whose
names are written in the goal. The target belongs to the full benchmark, whose corpus.jsonl
gives every premise its code: ``leanloop data download`` fetches it where Zenodo is reachable,
and ``--dataset <its directory> --keep-splits --max-eval-steps 2000`` runs this same
comparison on it.

The baseline measured in the same run is BM25 (rank-bm25, Okapi with its default k1/b, which were
within a point of the best of 36 settings on the cross-validation steps; identifiers split at
dots, underscores and other punctuation, lower case) on the proof states as they are; BM25 on the
states with the symbols spelt out, as the dense model reads them, is printed too, and the ratio
is taken against the stronger of the two on the test steps. Target: tuned R@10 at least 1.5 x
BM25's. Last line: ``RESULT: bm25_r10=... base_r10=... tuned_r10=... ratio=...``.
"""

from __future__ import annotations

import argparse
import os
import random
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


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def row(name: str, val, test, seconds: float | None = None) -> str:
    took = f"  ({seconds:.0f} s)" if seconds is not None else ""
    return (
        f"{name:<34} val R@10 {100 * val.recall_at_10:6.2f}% | test R@1 "
        f"{100 * test.recall_at_1:6.2f}%  R@10 {100 * test.recall_at_10:6.2f}%  "
        f"MRR {test.mrr:.4f}{took}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="fine-tuning epochs (at most)")
    parser.add_argument("--minutes", type=int, default=12, help="fine-tuning time limit")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-seq-len", type=int, default=128)
    parser.add_argument("--negatives", type=int, default=8, help="random negatives per step")
    parser.add_argument("--in-file-negatives", type=int, default=0)
    parser.add_argument("--hard-negatives", type=int, default=8, help="mined by the model")
    parser.add_argument("--no-naming", action="store_true", help="leave out the naming examples")
    parser.add_argument("--keep", type=Path, help="keep the work directory here")
    parser.add_argument(
        "--dataset",
        type=Path,
        help="a LeanDojo-format dataset (default: the sample in $LEANLOOP_FIXTURES); the full "
        "benchmark, from `leanloop data download`, adds premise code from its corpus.jsonl",
    )
    parser.add_argument(
        "--keep-splits", action="store_true", help="use the dataset's own train/val/test split"
    )
    parser.add_argument(
        "--max-eval-steps",
        type=int,
        default=0,
        help="evaluate on a seeded sample of this many val and test steps (0: all)",
    )
    args = parser.parse_args()

    from leanloop.database import DynamicDatabase, SplitConfig
    from leanloop.ml.device import limit_threads
    from leanloop.ml.models import latest_checkpoint, resolve_model
    from leanloop.retrieval.bm25 import bm25_rankings
    from leanloop.retrieval.corpus import Corpus
    from leanloop.retrieval.encoder import spell_symbols
    from leanloop.retrieval.examples import load_all_splits, retrieval_steps
    from leanloop.retrieval.index import PremiseIndex, evaluate_index
    from leanloop.retrieval.metrics import RetrievalMetrics, evaluate_rankings
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig

    limit_threads()
    work = args.keep or Path(tempfile.mkdtemp(prefix="leanloop-bench-retrieval-"))
    shutil.rmtree(work / "data", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    try:
        db = DynamicDatabase(work / "bench.db")
        if not db.get_repositories():
            dataset = args.dataset or fixtures() / "leandojo_benchmark_4"
            db.import_leandojo(dataset, keep_splits=args.keep_splits)
        repos = db.get_repositories()
        split = SplitConfig(val=SPLITS["val"], test=SPLITS["test"], seed=SPLITS["seed"])
        db.export_merged_data(repos, work / "data", split_config=split)
        theorems = load_all_splits(work / "data", "random")
        corpus = Corpus.from_dataset(work / "data", [t for part in theorems.values() for t in part])
        steps = {name: retrieval_steps(part, corpus) for name, part in theorems.items()}
        for name in ("val", "test"):
            if 0 < args.max_eval_steps < len(steps[name]):
                steps[name] = random.Random(SPLITS["seed"]).sample(steps[name], args.max_eval_steps)
        if not steps["train"] or not steps["test"]:
            parser.error(
                "the dataset gives no training or no test steps with premises "
                f"(train {len(steps['train'])}, test {len(steps['test'])})"
            )
        print(
            f"sample: {sum(len(p) for p in theorems.values())} theorems; corpus {len(corpus)} "
            "premises (from the proofs of every split: test proofs add candidates here, unlike "
            "in leanloop's evaluations); steps with premises: train "
            f"{len(steps['train'])}, val "
            f"{len(steps['val'])}, test {len(steps['test'])} (theorems: "
            + ", ".join(f"{k} {len(v)}" for k, v in theorems.items())
            + ")"
        )
        k = 100
        results: dict[str, RetrievalMetrics] = {}

        def bm25(split: str, query=lambda text: text) -> RetrievalMetrics:
            ranked = bm25_rankings(corpus, steps[split], k, query)
            return evaluate_rankings(zip((s.positives for s in steps[split]), ranked, strict=True))

        start = time.perf_counter()
        results["bm25"] = bm25("test")
        print(row("BM25 (baseline)", bm25("val"), results["bm25"], time.perf_counter() - start))
        # the dense model reads symbols its vocabulary lacks as words: BM25 may have them too
        base = PremiseRetriever(model_name=resolve_model("all-minilm-l6-v2"), max_seq_len=256)
        base.freeze()

        tokenizer = base.tokenizer

        def spelt(text: str) -> str:
            return spell_symbols(tokenizer, [text])[0]

        results["bm25spelt"] = bm25("test", spelt)
        print(row("BM25, symbols spelt out", bm25("val", spelt), results["bm25spelt"]))

        start = time.perf_counter()
        index = PremiseIndex.build(base, corpus)
        results["base"] = evaluate_index(index, steps["test"], k)
        base_val = evaluate_index(index, steps["val"], k)
        print(row("MiniLM, untrained", base_val, results["base"], time.perf_counter() - start))
        del base, index

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
            num_hard_negatives=args.hard_negatives,
            naming_examples=not args.no_naming,
            val_check_interval=0.5,
            lambda_value=0.0,  # one repository: nothing to consolidate against
            enable_progress_bar=False,
        )
        trainer = RetrievalTrainer(config)
        trainer.train(repos, db, work / "data")
        seconds = time.perf_counter() - start

        model = trainer.load_model(latest_checkpoint(trainer.output_dir))
        model.freeze()
        index = PremiseIndex.build(model, corpus)

        def tuned(split: str) -> RetrievalMetrics:
            return evaluate_index(index, steps[split], k)

        results["tuned"] = tuned("test")
        report = trainer.reports[-1]
        print(
            row("MiniLM, fine-tuned", tuned("val"), results["tuned"], seconds)
            + f"  [{report.train_steps} steps + {report.naming_examples} naming examples]"
        )
        # the stronger BM25 on the test steps is the baseline (it can only make the bar higher)
        bm25_r10 = max(results["bm25"].recall_at_10, results["bm25spelt"].recall_at_10)
        ratio = results["tuned"].recall_at_10 / bm25_r10 if bm25_r10 else float("inf")
        print(
            f"tuned R@10 / best BM25 R@10 = {ratio:.2f} (target 1.5: "
            f"{'met' if ratio >= 1.5 else 'missed'})"
        )
        print(
            "RESULT: "
            + " ".join(f"{name}_r10={m.recall_at_10:.4f}" for name, m in results.items())
            + " "
            + " ".join(f"{name}_mrr={m.mrr:.4f}" for name, m in results.items())
            + f" ratio={ratio:.2f} test_steps={results['bm25'].steps} train_s={seconds:.0f}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
