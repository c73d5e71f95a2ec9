"""Elastic weight consolidation against forgetting: the premise retriever trained on repository 1,
then on repository 2 with λ = 0 (the baseline, measured in the same run) and with the default λ,
on the real LeanDojo sample split into two repositories.

The sample ($LEANLOOP_FIXTURES/leandojo_benchmark_4, 177 theorems) is imported into a fresh SQLite
database as two repositories: the first 100 theorems are repository 1, the other 77 repository 2
(the order of the file, so the two hold different Mathlib files). Splits are assigned once by the
database (val 10 %, test 10 %, seed 3407) and kept.

1. ``RetrievalTrainer`` trains on repository 1 with the default λ (nothing to protect yet; its
   Fisher is computed at the end and saved with the checkpoint).
2. From that checkpoint, training continues on repository 2's export alone, once with λ = 0 and
   once with the default λ, everything else equal (seed, data, epochs). The curriculum's own
   step 2 trains on the merged export of both repositories, whose replay of repository 1 hides
   forgetting; training on repository 2 alone isolates what EWC does.
3. Each model is measured against repository 1's weights θ₁: the Fisher-weighted drift
   ``Σ F (θ − θ₁)²`` (F: repository 1's Fisher scaled to mean 1; the distance EWC holds down, and
   its penalty) and the plain drift ``‖θ − θ₁‖``; and by R@10 (ReProver's metric, the 100 best
   accessible premises of one fixed pool: every premise the train splits of both repositories
   use) on repository 1's training steps (what it learnt: the old task) and held-out steps, and
   on repository 2's training steps (the new task).

Why the plain drift hardly moves: Adam moves every weight that has a gradient by about the
learning rate per step, however small the gradient, and most weights barely matter to repository
1 (their Fisher is near 0, so EWC leaves them free). The plain distance is dominated by them; the
weights repository 1 depends on are the ones held, which the Fisher-weighted drift and the
old-task R@10 show.

Default encoder: the tiny BERT encoder the tests build (tests/tiny_encoder.py: 2 layers, 32
dimensions, a word-piece vocabulary of the sample, random weights), which learns the sample from
scratch in about a minute on one core; ``--encoder minilm`` uses the packaged all-MiniLM-L6-v2
(about 20 minutes on one core). Target: at the default λ the Fisher-weighted drift is under
0.6 x λ = 0's and repository 1's R@10 is not below λ = 0's. Last line: ``RESULT: lambda=...
weighted_drift_ratio=... drift_ratio=... penalty_l0=... penalty_lambda=... drift_l0=...
drift_lambda=... old_r10_before=... old_r10_l0=... old_r10_lambda=... new_r10_l0=...
new_r10_lambda=... raw_fisher_mean=...``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
URLS = ("https://github.com/bench/repository-1", "https://github.com/bench/repository-2")


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def build_database(path: Path, theorems):
    """The sample as two repositories (first 100 theorems, the rest)."""
    from leanloop.data.records import Repository
    from leanloop.database import DynamicDatabase

    db = DynamicDatabase(path)
    repositories = []
    for number, (url, part) in enumerate(zip(URLS, (theorems[:100], theorems[100:]), strict=True)):
        repository = Repository(url=url, commit=f"{number + 1}" * 40)
        moved = [t.model_copy(update={"url": url, "commit": repository.commit}) for t in part]
        db.add_repository(repository, moved)
        repositories.append(repository)
    return db, repositories


def encoder_path(kind: str, work: Path, theorems) -> tuple[str, float]:
    """The encoder to start from and its learning rate."""
    if kind == "minilm":
        return "all-minilm-l6-v2", 1e-4
    sys.path.insert(0, str(REPO))
    from tests.tiny_encoder import build_tiny_encoder, sample_texts

    return str(build_tiny_encoder(work / "tiny", sample_texts(theorems))), 2e-3


def drift(model, anchor: dict) -> tuple[float, float]:
    """‖θ − θ₁‖ over the encoder's weights, and ‖θ₁‖."""
    import torch

    moved = total = 0.0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in anchor:
                moved += float((param - anchor[name]).pow(2).sum())
                total += float(anchor[name].pow(2).sum())
    return moved**0.5, total**0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", choices=("tiny", "minilm"), default="tiny")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per repository")
    parser.add_argument("--lambda", dest="lam", type=float, help="λ to compare (default: config's)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", type=Path, help="keep the work directory here")
    args = parser.parse_args()

    from leanloop.agent.pipeline import quiet_libraries
    from leanloop.data import open_dataset
    from leanloop.database import SplitConfig
    from leanloop.ml.device import limit_threads
    from leanloop.retrieval.corpus import Corpus
    from leanloop.retrieval.examples import load_all_splits, retrieval_steps
    from leanloop.retrieval.index import PremiseIndex, evaluate_index
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig

    limit_threads()
    quiet_libraries()
    default_lambda = TrainingConfig().lambda_value
    lam = default_lambda if args.lam is None else args.lam
    work = args.keep or Path(tempfile.mkdtemp(prefix="leanloop-bench-ewc-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.perf_counter()
    try:
        theorems = list(open_dataset(fixtures() / "leandojo_benchmark_4").iter_theorems())
        db, (first, second) = build_database(work / "bench.db", theorems)
        db.export_merged_data([first, second], work / "all", split_config=SplitConfig())
        model_name, lr = encoder_path(args.encoder, work, theorems)

        def config(output: str, value: float) -> TrainingConfig:
            return TrainingConfig(
                model_name=model_name,
                output_dir=work / output,
                max_epochs=args.epochs,
                lr=lr,
                warmup_steps=5,
                max_seq_len=96,
                batch_size=8,
                lambda_value=value,
                fisher_max_samples=256,
                checkpoint_save_top_k=0,  # the last weights of each repository
                early_stopping_patience=args.epochs,
                enable_progress_bar=False,
                num_gpus=0,
                seed=args.seed,
            )

        # the fixed measuring ground: one pool, each repository's train and test steps
        splits = load_all_splits(work / "all", "random")
        corpus = Corpus.from_theorems(splits["train"])
        steps = {}
        for number, repository in enumerate((first, second), start=1):
            for split in ("train", "test"):
                own = [t for t in splits[split] if t.url == repository.url]
                steps[f"r{number}_{split}"] = retrieval_steps(own, corpus)

        def recall(model) -> dict[str, float]:
            model.freeze()
            index = PremiseIndex.build(model, corpus)
            return {
                name: evaluate_index(index, part, k=100).recall_at_10
                for name, part in steps.items()
            }

        print(
            f"sample: {len(theorems)} theorems as 2 repositories; pool {len(corpus)} premises; "
            + ", ".join(f"{name} {len(part)} steps" for name, part in steps.items())
        )
        one = RetrievalTrainer(config("r1", lam))
        (checkpoint,) = one.train([first], db, work / "data-r1")
        after_first = PremiseRetriever.load(checkpoint)
        anchor = {n: p.detach().clone() for n, p in after_first.named_parameters()}
        fisher = after_first.ewc
        before = recall(after_first)
        print(
            f"after repository 1 ({one.reports[-1].optimizer_steps} steps, Fisher of "
            f"{one.reports[-1].fisher_samples} examples): "
            + ", ".join(f"R@10 {k} {100 * v:.1f}%" for k, v in before.items())
        )
        results = {}
        for label, value in (("l0", 0.0), ("lambda", lam)):
            trainer = RetrievalTrainer(config(f"r2-{label}", value))
            (done,) = trainer.train([second], db, work / f"data-{label}", checkpoint)
            model = PremiseRetriever.load(done)
            moved, norm = drift(model, anchor)
            penalty = float(fisher.penalty(model.named_parameters()).detach())
            figures = recall(model)
            results[label] = {"drift": moved, "penalty": penalty, **figures}
            print(
                f"repository 2, λ = {value:g}: drift {moved:.4f} ({100 * moved / norm:.2f} % of "
                f"‖θ₁‖), penalty Σ F (θ − θ₁)² {penalty:.4f}; "
                + ", ".join(f"R@10 {k} {100 * v:.1f}%" for k, v in figures.items())
            )
        weighted = results["lambda"]["penalty"] / results["l0"]["penalty"]
        ratio = results["lambda"]["drift"] / results["l0"]["drift"]
        kept = results["lambda"]["r1_train"] >= results["l0"]["r1_train"]
        met = weighted < 0.6 and kept
        raw = fisher.scales[0]
        print(
            f"with λ = {lam:g}: Fisher-weighted drift {weighted:.2f} x λ = 0's, plain drift "
            f"{ratio:.2f} x; old-task R@10 {100 * before['r1_train']:.1f}% after repository 1, "
            f"{100 * results['l0']['r1_train']:.1f}% (λ = 0) and "
            f"{100 * results['lambda']['r1_train']:.1f}% (λ = {lam:g}) after repository 2 "
            f"(target: weighted drift under 0.6 x and old-task R@10 not below λ = 0's: "
            f"{'met' if met else 'missed'})"
        )
        print(
            f"the raw Fisher's mean was {raw:.3g}: unscaled, as before, λ = {lam:g} would have "
            f"added {lam * raw * results['l0']['penalty']:.2g} to a loss of order 1 at λ = 0's "
            f"weights; {time.perf_counter() - started:.0f} s"
        )
        print(
            f"RESULT: lambda={lam:g} weighted_drift_ratio={weighted:.3f} drift_ratio={ratio:.3f} "
            f"penalty_l0={results['l0']['penalty']:.4f} "
            f"penalty_lambda={results['lambda']['penalty']:.4f} "
            f"drift_l0={results['l0']['drift']:.4f} drift_lambda={results['lambda']['drift']:.4f} "
            f"old_r10_before={before['r1_train']:.4f} old_r10_l0={results['l0']['r1_train']:.4f} "
            f"old_r10_lambda={results['lambda']['r1_train']:.4f} "
            f"new_r10_l0={results['l0']['r2_train']:.4f} "
            f"new_r10_lambda={results['lambda']['r2_train']:.4f} raw_fisher_mean={raw:.3g}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
