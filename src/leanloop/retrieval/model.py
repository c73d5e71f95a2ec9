"""``PremiseRetriever``: a Lightning bi-encoder (encoder, mean pooling, L2 normalisation) trained
contrastively to embed a proof state near the premises its tactic uses, with an optional EWC
penalty that is saved with its checkpoints."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F

from leanloop.errors import LeanloopError
from leanloop.retrieval.encoder import load_encoder, mean_pool, tokenize
from leanloop.retrieval.ewc import AlreadyConsolidated, EWCState, diagonal_fisher
from leanloop.retrieval.index import PremiseIndex
from leanloop.retrieval.metrics import MetricsAccumulator

log = logging.getLogger(__name__)

#: Name of the Lightning checkpoint inside a retriever checkpoint directory.
CHECKPOINT_FILE = "retriever.ckpt"


class PremiseRetriever(pl.LightningModule):
    """Embeds proof states (queries) and premises (documents) into one space; the score of a
    premise is the cosine similarity of the two embeddings.

    The loss is InfoNCE over the batch: each positive of a query against every premise in the
    batch that is not a positive of that query (the other queries' positives, and the mined
    hard, in-file and random negatives), averaged over the query's positives. With
    ``lambda_value`` > 0 and a Fisher from earlier repositories, ``lambda_value · Σ F (θ − θ*)²``
    is added, F being each earlier repository's Fisher scaled to mean 1 (see
    ``leanloop.retrieval.ewc``).

    The encoder is any Hugging Face encoder (BERT, MiniLM...) or the encoder half of a T5-family
    model (ByT5 as in ReProver and LeanDojo-v2's retriever), with its own tokenizer.
    """

    def __init__(
        self,
        model_name: str,
        lr: float = 2e-5,
        warmup_steps: int = 0,
        max_seq_len: int = 256,
        num_retrieved: int = 100,
        temperature: float = 0.05,
        lambda_value: float = 0.0,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer, self.encoder = load_encoder(model_name)
        self.ewc = EWCState()
        self._val_index: PremiseIndex | None = None
        self._val_metrics: MetricsAccumulator | None = None

    # -- loading and saving ----------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        device: str | torch.device | None = None,
        freeze: bool = False,
        **overrides: Any,
    ) -> PremiseRetriever:
        """A retriever from a leanloop checkpoint directory (or its ``retriever.ckpt``), which
        brings back the EWC state too, or a fresh one around a Hugging Face encoder (a local
        directory or a model name). ``overrides`` replace saved hyper-parameters."""
        from leanloop.ml.models import latest_checkpoint

        text = os.fspath(path)
        local = Path(text).expanduser()
        if local.is_dir() and not (local / CHECKPOINT_FILE).is_file():
            local = latest_checkpoint(local) or local
        ckpt = local / CHECKPOINT_FILE if local.is_dir() else local
        if ckpt.is_file() and ckpt.suffix == ".ckpt":
            # the encoder weights are in the directory too: build from there, not the base model
            if ckpt.parent.joinpath("config.json").is_file():
                overrides.setdefault("model_name", str(ckpt.parent))
            try:
                model = cls.load_from_checkpoint(ckpt, map_location="cpu", **overrides)
            except (KeyError, RuntimeError) as exc:
                raise LeanloopError(
                    f"{ckpt} is not a premise retriever checkpoint: {exc}",
                    hint="give a directory written by RetrievalTrainer",
                ) from None
        else:
            overrides.pop("model_name", None)
            model = cls(model_name=text if not local.exists() else str(local), **overrides)
        if device is not None:
            model = model.to(device)
        if freeze:
            model.freeze()
        return model

    def save_retriever(self, directory: str | Path, checkpoint: str | Path | None = None) -> Path:
        """Write ``directory``: the Lightning checkpoint (weights, hyper-parameters, EWC state)
        and the encoder with its tokenizer in Hugging Face format.

        Args:
            directory: Where to write (created if missing).
            checkpoint: A Lightning checkpoint of this model to use (moved into ``directory``):
                what ``Trainer.save_checkpoint`` wrote, with the whole weights even where the
                strategy shards them (FSDP). None: this module's own weights, as they are here.

        Returns:
            ``directory``.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / CHECKPOINT_FILE
        if checkpoint is not None:
            state = torch.load(checkpoint, map_location="cpu", weights_only=False, mmap=True)
            weights = state["state_dict"]
            os.replace(checkpoint, target)
        else:
            weights = self.state_dict()
            saved = {
                "state_dict": weights,
                "hyper_parameters": dict(self.hparams),
                "pytorch-lightning_version": pl.__version__,
            }
            self.on_save_checkpoint(saved)
            torch.save(saved, target)
        prefix = "encoder."
        encoder_weights = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        self.encoder.save_pretrained(directory, state_dict=encoder_weights)
        self.tokenizer.save_pretrained(directory)
        return directory

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["ewc"] = self.ewc.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.ewc.load_state_dict(checkpoint.get("ewc", {}))

    # -- embedding -------------------------------------------------------------------------------

    @property
    def max_length(self) -> int:
        """``max_seq_len``, capped by what the encoder and its tokenizer accept."""
        limits = [int(self.hparams.max_seq_len)]
        positions = getattr(self.encoder.config, "max_position_embeddings", None)
        if positions:
            limits.append(int(positions))
        tokenizer_limit = getattr(self.tokenizer, "model_max_length", None)
        if tokenizer_limit and tokenizer_limit < 1_000_000:
            limits.append(int(tokenizer_limit))
        return min(limits)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return mean_pool(hidden, attention_mask)

    @torch.no_grad()
    def encode(
        self, texts: Sequence[str], batch_size: int = 32, *, keep_end: bool = False
    ) -> torch.Tensor:
        """Unit-length embeddings of ``texts`` (rows in order), without gradients; long texts
        lose their end, or their start with ``keep_end``."""
        was_training = self.training
        self.eval()
        chunks = []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
        for start in range(0, len(order), batch_size):
            part = [texts[i] for i in order[start : start + batch_size]]
            encoded = tokenize(self.tokenizer, part, self.max_length, keep_end=keep_end)
            encoded = encoded.to(self.device)
            chunks.append(self.embed(encoded["input_ids"], encoded["attention_mask"]))
        self.train(was_training)
        if not chunks:
            return torch.zeros(0, self.encoder.config.hidden_size, device=self.device)
        sorted_embeddings = torch.cat(chunks)
        result = torch.empty_like(sorted_embeddings)
        result[torch.tensor(order, device=result.device)] = sorted_embeddings
        return result

    def encode_states(self, states: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """Query embeddings: proof states keep their end (the goal) when too long."""
        return self.encode(states, batch_size, keep_end=True)

    def encode_premises(self, texts: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """Document embeddings: premise texts keep their start (name and signature)."""
        return self.encode(texts, batch_size, keep_end=False)

    # -- training --------------------------------------------------------------------------------

    def contrastive_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """InfoNCE averaged over each query's positives, then over the queries: a positive
        competes with every candidate that is not a positive of the same query."""
        queries = self.embed(batch["context_ids"], batch["context_mask"])
        premises = self.embed(batch["premise_ids"], batch["premise_mask"])
        logits = queries @ premises.T / self.hparams.temperature
        positive = batch["positive_mask"]
        # a large finite fill (not -inf) keeps gradients finite for a query without negatives
        negatives = logits.masked_fill(positive, -1e4).logsumexp(dim=1, keepdim=True)
        # -log(e^s / (e^s + Σ e^negative)) = softplus(log Σ e^negative - s)
        per_positive = F.softplus(negatives - logits).masked_fill(~positive, 0.0)
        counts = positive.sum(dim=1)
        if not bool((counts > 0).all()):
            raise ValueError("every query of a training batch needs a positive candidate")
        return (per_positive.sum(dim=1) / counts).mean()

    def ewc_penalty(self) -> torch.Tensor:
        """Σ F (θ − θ*)² against the Fisher and weights of the earlier repositories (0 before
        the first Fisher exists); not multiplied by λ."""
        return self.ewc.penalty(self.named_parameters())

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.contrastive_loss(batch)
        size = batch["context_ids"].shape[0]
        self.log("loss_train", loss, prog_bar=True, batch_size=size)
        if self.hparams.lambda_value > 0 and self.ewc.active:
            penalty = self.ewc_penalty()
            self.log("ewc_penalty", penalty, prog_bar=True, batch_size=size)
            loss = loss + self.hparams.lambda_value * penalty
            self.log("loss_total", loss, batch_size=size)
        return loss

    def configure_optimizers(self):
        from transformers import get_cosine_schedule_with_warmup

        decay, no_decay = [], []
        for name, param in self.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": self.hparams.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=self.hparams.lr,
        )
        total = max(1, self._training_steps())
        scheduler = get_cosine_schedule_with_warmup(
            optimizer,
            num_warmup_steps=min(self.hparams.warmup_steps, total),
            num_training_steps=total,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def _training_steps(self) -> int:
        """The optimizer steps training will take, for the learning-rate schedule. Counted from
        the data module's training set when it has one: Lightning's
        ``estimated_stepping_batches`` sets up the training data before a resumed run's state
        is restored, so the data loader would start the resumed epoch from its beginning."""
        trainer = self.trainer
        data = getattr(trainer, "datamodule", None)
        if data is None or not hasattr(data, "train_set") or trainer.max_epochs in (None, -1):
            return int(trainer.estimated_stepping_batches)
        per_process = math.ceil(len(data.train_set) / max(1, trainer.world_size))
        batches = math.ceil(per_process / data.batch_size)
        if isinstance(trainer.limit_train_batches, int):
            batches = min(batches, trainer.limit_train_batches)
        else:
            batches = int(batches * trainer.limit_train_batches)
        steps = math.ceil(batches / trainer.accumulate_grad_batches) * max(trainer.max_epochs, 1)
        return min(steps, trainer.max_steps) if trainer.max_steps != -1 else steps

    # -- EWC -------------------------------------------------------------------------------------

    def consolidate(
        self, batches: Iterable[dict[str, torch.Tensor]], max_samples: int, repository: str
    ) -> int:
        """Compute the diagonal Fisher of ``repository`` (a key such as ``url@commit``) on
        ``batches`` (one training example each, dropout off) and fold it into the EWC state
        anchored at the current weights; returns the number of examples used.

        Raises:
            AlreadyConsolidated: The EWC state covers ``repository`` already.
        """
        if self.ewc.covers(repository):
            raise AlreadyConsolidated(f"the EWC state already covers {repository}")
        was_training = self.training
        self.eval()

        def loss_of(batch):
            batch = {k: v.to(self.device) for k, v in batch.items()}
            return self.contrastive_loss(batch)

        with torch.enable_grad():
            fisher, count = diagonal_fisher(loss_of, batches, self.named_parameters(), max_samples)
        self.train(was_training)
        if count:
            self.ewc.consolidate(self.named_parameters(), fisher, count, repository)
        return count

    # -- validation: rank the whole corpus ---------------------------------------------------------

    def on_validation_epoch_start(self) -> None:
        corpus = self.trainer.datamodule.corpus
        self._val_index = PremiseIndex.build(self, corpus)
        self._val_metrics = MetricsAccumulator()

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        index, metrics = self._val_index, self._val_metrics
        assert index is not None and metrics is not None  # made when the epoch started
        queries = self.embed(batch["context_ids"], batch["context_mask"])
        found = index.search(
            queries, batch["file_paths"], batch["positions"], self.hparams.num_retrieved
        )
        corpus = index.corpus
        for positives, hits in zip(batch["positives"], found, strict=True):
            metrics.add(positives, [corpus[i].full_name for i, _ in hits])

    def on_validation_epoch_end(self) -> None:
        """Log R@1, R@10 and MRR over the validation steps of every process: each process
        measured its share, the sums are added up across them (a mean of the processes' means
        would weigh their steps unequally), and the figures are logged with ``sync_dist`` so
        that every process's early stopping and checkpointing see the same value."""
        metrics = self._val_metrics
        assert metrics is not None  # made when the epoch started
        sums = torch.tensor(
            [sum(metrics.r1), sum(metrics.r10), sum(metrics.rr), float(len(metrics.rr))],
            dtype=torch.float64,
            device=self.device,
        )
        if self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        steps = max(float(sums[3]), 1.0)
        figures = {"Recall@1_val": sums[0], "Recall@10_val": sums[1], "MRR_val": sums[2]}
        for name, total in figures.items():
            value = (total / steps).float()
            self.log(name, value, prog_bar=name != "Recall@1_val", sync_dist=True, batch_size=1)
        self._val_index = None
        self._val_metrics = None
