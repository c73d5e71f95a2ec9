"""Evaluation of a trained checkpoint on a split of a LeanDojo-format export, one typed result per
kind of model: tactic accuracy of a generator (SFT, GRPO), R@1/R@10/MRR of a premise retriever,
MAE/MSE of a progress model (in proof steps)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic.dataclasses import dataclass

from leanloop.configfile import CONFIG, ConfigBase
from leanloop.errors import LeanloopError
from leanloop.ml.models import latest_checkpoint
from leanloop.words import percent, plural, share

Kind = Literal["tactics", "retrieval", "progress"]


class Evaluation(BaseModel):
    """What was evaluated, and on what."""

    kind: str
    checkpoint: str = Field(description="The checkpoint evaluated.")
    dataset: str = Field(description="The LeanDojo-format export it was evaluated on.")
    split: str = Field(description="SCHEME/SPLIT, e.g. random/test.")

    def figures(self) -> dict[str, float]:
        """The metrics, by name."""
        raise NotImplementedError

    def shown(self) -> str:
        """The figures in words: counts as counts, rates as percentages."""
        return ", ".join(
            f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
            for name, value in self.figures().items()
        )

    def __str__(self) -> str:
        return f"{self.kind} on {self.split} of {self.dataset}: {self.shown()}"


class TacticEvaluation(Evaluation):
    """How often the recorded tactic is the generator's first candidate, and among its ``k``
    first (whole tactic, whitespace collapsed)."""

    kind: Literal["tactics"] = "tactics"
    k: int
    steps: int
    top1: float
    topk: float

    def figures(self) -> dict[str, float]:
        return {"top1": self.top1, f"top{self.k}": self.topk, "steps": self.steps}

    def shown(self) -> str:
        top1, topk = round(self.top1 * self.steps), round(self.topk * self.steps)
        return f"top-1 {share(top1, self.steps, 'step')}, top-{self.k} {share(topk, self.steps)}"


class RetrievalEvaluation(Evaluation):
    """Premise retrieval: recall among the first 1 and 10 premises, mean reciprocal rank, and
    the candidate pool the premises were ranked among."""

    kind: Literal["retrieval"] = "retrieval"
    steps: int
    recall_at_1: float
    recall_at_10: float
    mrr: float
    pool: str = Field(
        description="Where the candidates came from: corpus.jsonl (completed with the premises "
        "of the train split's proofs it lacks: 'corpus.jsonl and train split'), or without one "
        "the train split's premises ('train split'); test proofs never add candidates."
    )
    pool_premises: int = Field(description="Premises in the candidate pool.")

    def figures(self) -> dict[str, float]:
        return {
            "R@1": self.recall_at_1,
            "R@10": self.recall_at_10,
            "MRR": self.mrr,
            "steps": self.steps,
        }

    def shown(self) -> str:
        return (
            f"R@1 {percent(self.recall_at_1)}, R@10 {percent(self.recall_at_10)}, MRR "
            f"{self.mrr:.3f} on {plural(self.steps, 'step')}"
        )

    def pool_description(self) -> str:
        """The candidate pool in words."""
        from leanloop.retrieval.corpus import describe_pool

        return describe_pool(self.pool, self.pool_premises)

    def __str__(self) -> str:
        return f"{super().__str__()}; candidates: {self.pool_description()}"


class ProgressEvaluation(Evaluation):
    """The progress model's error in proof steps remaining, over every step of the split."""

    kind: Literal["progress"] = "progress"
    rows: int
    mae: float
    mse: float

    def figures(self) -> dict[str, float]:
        return {"MAE": self.mae, "MSE": self.mse, "rows": self.rows}

    def shown(self) -> str:
        return (
            f"MAE {self.mae:.2f} steps, MSE {self.mse:.2f} over {plural(self.rows, 'proof step')}"
        )


def split_name(split: str) -> tuple[str, str]:
    """``(scheme, split)`` of ``test`` (the random scheme) or ``novel_premises/test``."""
    scheme, _, name = split.rpartition("/")
    return scheme or "random", name


def _split_path(dataset: str | os.PathLike, split: str) -> Path:
    scheme, name = split_name(split)
    path = Path(dataset) / scheme / f"{name}.json"
    if not path.is_file():
        raise LeanloopError(
            f"missing data split file {path}",
            hint="give a LeanDojo-format export (leanloop db export) and a split such as "
            "test or novel_premises/test",
        )
    return path


def _checkpoint(path: str | os.PathLike) -> Path:
    directory = Path(path).expanduser()
    if not directory.exists():
        raise LeanloopError(
            f"checkpoint {directory}: no such directory",
            hint="give a trainer's output_dir or one of its checkpoint directories",
        )
    return latest_checkpoint(directory) or directory


def evaluate_generator(
    checkpoint: str | os.PathLike,
    dataset: str | os.PathLike,
    *,
    split: str = "test",
    k: int = 8,
    max_steps: int | None = None,
) -> TacticEvaluation:
    """Top-1 and top-``k`` tactic accuracy of the generator in ``checkpoint`` (a trainer's
    output_dir or a checkpoint) on the steps of ``split`` of ``dataset`` (at most
    ``max_steps``), beam search."""
    from leanloop.ml.generation import TacticGenerator
    from leanloop.trainer.evaluation import evaluate_tactics

    path = _split_path(dataset, split)
    chosen = _checkpoint(checkpoint)
    generator = TacticGenerator(chosen)
    accuracy = evaluate_tactics(generator, path, k=k, max_steps=max_steps)
    if accuracy.steps == 0:
        raise LeanloopError(f"{path} has no tactic step to evaluate on")
    return TacticEvaluation(
        checkpoint=str(chosen),
        dataset=str(dataset),
        split="/".join(split_name(split)),
        k=k,
        steps=accuracy.steps,
        top1=accuracy.top1,
        topk=accuracy.topk,
    )


def evaluate_retrieval(
    checkpoint: str | os.PathLike,
    dataset: str | os.PathLike,
    *,
    split: str = "test",
    k: int = 100,
    batch_size: int = 32,
) -> RetrievalEvaluation:
    """R@1, R@10 and MRR of the premise retriever in ``checkpoint`` (``RetrievalTrainer``'s
    output_dir or a checkpoint) on ``split`` of ``dataset``, ``k`` premises ranked per step."""
    from leanloop.ml.device import detect_hardware
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval_evaluation import evaluate_retriever

    _split_path(dataset, split)
    chosen = _checkpoint(checkpoint)
    scheme, name = split_name(split)
    model = PremiseRetriever.load(chosen, device=detect_hardware().device, freeze=True)
    metrics = evaluate_retriever(
        model, os.fspath(dataset), scheme=scheme, split=name, k=k, batch_size=batch_size
    )
    return RetrievalEvaluation(
        checkpoint=str(chosen),
        dataset=str(dataset),
        split=f"{scheme}/{name}",
        steps=metrics.steps,
        recall_at_1=metrics.recall_at_1,
        recall_at_10=metrics.recall_at_10,
        mrr=metrics.mrr,
        pool=metrics.pool,
        pool_premises=metrics.pool_size,
    )


def evaluate_progress(
    checkpoint: str | os.PathLike,
    dataset: str | os.PathLike,
    *,
    split: str = "test",
    max_rows: int | None = None,
) -> ProgressEvaluation:
    """Mean absolute and squared error, in steps, of the progress model in ``checkpoint``
    (``ProgressTrainer``'s output_dir) on every step of the traced proofs in ``split`` of
    ``dataset`` (at most ``max_rows``)."""
    from leanloop.data import open_dataset
    from leanloop.ml.progress import ProgressScorer
    from leanloop.trainer.progress_data import progress_rows

    path = _split_path(dataset, split)
    chosen = _checkpoint(checkpoint)
    rows = []
    for theorem in open_dataset(path).iter_theorems():
        rows.extend(progress_rows(theorem))
        if max_rows is not None and len(rows) >= max_rows:
            rows = rows[:max_rows]
            break
    if not rows:
        raise LeanloopError(f"{path} has no traced proof to evaluate progress on")
    scorer = ProgressScorer(chosen)
    predicted = scorer.predict_batch([(r.goal, r.prefix, r.tactic) for r in rows])
    errors = [p - float(r.steps_remaining) for p, r in zip(predicted, rows, strict=True)]
    return ProgressEvaluation(
        checkpoint=str(chosen),
        dataset=str(dataset),
        split="/".join(split_name(split)),
        rows=len(rows),
        mae=sum(abs(e) for e in errors) / len(errors),
        mse=sum(e * e for e in errors) / len(errors),
    )


@dataclass(config=CONFIG)
class EvaluationConfig(ConfigBase):
    """What ``leanloop evaluate`` evaluates, on what: the arguments of ``evaluate_generator``,
    ``evaluate_retrieval`` and ``evaluate_progress``."""

    checkpoint: Path = Field(description="A trainer's output_dir or one of its checkpoints.")
    dataset: Path | None = Field(
        default=None,
        description="A LeanDojo-format export (None: the database's repositories, exported first).",
    )
    split: str = Field(default="test", description="The split: test, val, train or SCHEME/SPLIT.")
    k: int | None = Field(
        default=None,
        ge=1,
        description="Tactics: candidates per state (None: 8). Retrieval: premises ranked per "
        "step, at least 10 (None: 100).",
    )
    max_steps: int | None = Field(
        default=None,
        ge=1,
        description="Tactic steps (or progress rows) evaluated at most (None: all).",
    )
    batch_size: int = Field(default=32, ge=1, description="Retrieval: texts embedded per batch.")


def evaluate_checkpoint(kind: Kind, config: EvaluationConfig) -> Evaluation:
    """Evaluate ``config.checkpoint`` as a model of ``kind`` on ``config.dataset``."""
    if config.dataset is None:
        raise LeanloopError("no dataset to evaluate on", hint="give a LeanDojo-format export")
    if kind == "tactics":
        return evaluate_generator(
            config.checkpoint,
            config.dataset,
            split=config.split,
            k=config.k or 8,
            max_steps=config.max_steps,
        )
    if kind == "retrieval":
        k = config.k or 100
        if k < 10:
            raise LeanloopError(f"k={k}: R@10 needs at least 10 premises ranked per step")
        return evaluate_retrieval(
            config.checkpoint,
            config.dataset,
            split=config.split,
            k=k,
            batch_size=config.batch_size,
        )
    return evaluate_progress(
        config.checkpoint, config.dataset, split=config.split, max_rows=config.max_steps
    )
