"""``python -m lean_dojo_v2.lean_progress.train_steps_model --dataset FILE --output-dir DIR
[--model-name NAME ...]``: leanloop's ``ProgressTrainer`` on a JSONL file of LeanProgress rows.

The model it writes is leanloop's (the epoch with the lowest validation MSE, its text format
and target scaling recorded with it); set ``LEANPROGRESS_MODEL=DIR`` for leanloop's server and
provers. ``build_text`` and ``tokenize_batch`` are LeanDojo-v2's helpers: the text models trained
by LeanDojo-v2 read (leanloop's scorer reads such models with it too) and its batch
tokenization.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from leanloop.ml.progress import leandojo_v2_text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: ``--dataset`` and ``--output-dir`` (required paths), ``--model-name``
    (default ``bert-base-uncased``), ``--max-length``, ``--batch-size``, ``--epochs``,
    ``--learning-rate``, ``--eval-ratio``, ``--seed`` (``ProgressTrainer``'s defaults).

    Args:
        argv: The arguments (None: the process's).

    Returns:
        The parsed arguments.
    """
    parser = argparse.ArgumentParser(
        prog="python -m lean_dojo_v2.lean_progress.train_steps_model",
        description="Train a LeanProgress regressor of the steps remaining (leanloop's "
        "ProgressTrainer).",
    )
    parser.add_argument("--dataset", type=Path, required=True, help="The JSONL rows.")
    parser.add_argument("--output-dir", type=Path, required=True, help="Where the model goes.")
    parser.add_argument("--model-name", default="bert-base-uncased", help="The encoder.")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--eval-ratio", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args(argv)


def build_text(goal: str, prefix: str | None, tactic: str) -> str:
    """The text a model trained by LeanDojo-v2 reads: ``Goal:``, ``Prefix:`` and ``Candidate
    tactic:`` sections (leanloop's ``leandojo_v2_text``).

    Args:
        goal: The proof state.
        prefix: The proof so far (None or empty: none).
        tactic: The candidate tactic.

    Returns:
        The text.
    """
    return leandojo_v2_text(goal, prefix, tactic)


def tokenize_batch(
    tokenizer: Callable[..., Any], max_length: int
) -> Callable[[Mapping[str, list[Any]]], Any]:
    """A ``datasets.map`` function (batched) tokenizing ``build_text`` of each row, padded to
    ``max_length``, with the steps remaining as float ``labels``; a batch without ``prefix``
    has none.

    Args:
        tokenizer: A Hugging Face tokenizer.
        max_length: Tokens per text (padded and cut to it).

    Returns:
        The function of a batch (columns to lists).
    """

    def tokenize(batch: Mapping[str, list[Any]]) -> Any:
        goals, tactics = batch["goal"], batch["tactic"]
        prefixes = batch.get("prefix") or [""] * len(goals)
        texts = [build_text(g, p, t) for g, p, t in zip(goals, prefixes, tactics, strict=True)]
        encoded = tokenizer(texts, padding="max_length", truncation=True, max_length=max_length)
        encoded["labels"] = [float(steps) for steps in batch["steps_remaining"]]
        return encoded

    return tokenize


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train on ``--dataset`` and save the best model in ``--output-dir``.

    Args:
        argv: The arguments (None: the process's).

    Returns:
        The trainer's metrics (MSE and MAE in steps, among others).
    """
    from leanloop.trainer.progress import ProgressTrainer

    args = parse_args(argv)
    trainer = ProgressTrainer(
        data_path=args.dataset,
        model_name=args.model_name,
        output_dir=args.output_dir,
        max_length=args.max_length,
        batch_size=args.batch_size,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        eval_ratio=args.eval_ratio,
        seed=args.seed,
    )
    metrics = trainer.train()
    print(
        f"LeanProgress model saved to {Path(args.output_dir).resolve()} (validation MSE "
        f"{metrics['mse']:.3f}, MAE {metrics['mae']:.3f} steps); set LEANPROGRESS_MODEL to it"
    )
    return metrics


if __name__ == "__main__":
    main()
