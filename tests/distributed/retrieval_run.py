"""Run as one of several processes by tests/test_distributed_training.py (under the launcher) or
alone: the premise retriever trained with EWC on a prepared database; each process writes a
digest of its trained weights, of the weights of the checkpoint saved, and the mean of its raw
EWC Fisher to DIGESTS/rank<N> (the test's own record, for comparing the processes)."""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from leanloop.database import DynamicDatabase
from leanloop.retrieval.model import PremiseRetriever
from leanloop.trainer.retrieval import RetrievalTrainer
from leanloop.trainer.retrieval_config import TrainingConfig

encoder, db, out, data, digests, batch, steps = sys.argv[1:8]
torch.set_num_threads(1)
database = DynamicDatabase(db)
config = TrainingConfig(
    model_name=encoder,
    output_dir=out,
    max_epochs=1,
    max_steps=int(steps),
    lr=2e-3,
    warmup_steps=1,
    max_seq_len=64,
    batch_size=int(batch),
    fisher_max_samples=16,
    enable_progress_bar=False,
    seed=11,
    num_sanity_val_steps=0,
)
trainer = RetrievalTrainer(config)
trainer.train(database.get_repositories(), database, data)
model = trainer.model  # this process's own (only the main process saved it)
weights = b"".join(p.detach().float().numpy().tobytes() for p in model.parameters())
saved = PremiseRetriever.load(trainer.output_dir)  # what the main process wrote
saved_weights = b"".join(p.detach().float().numpy().tobytes() for p in saved.parameters())
Path(digests).mkdir(parents=True, exist_ok=True)
Path(digests, f"rank{os.environ.get('RANK', '0')}").write_text(
    json.dumps(
        {
            "digest": hashlib.sha256(weights).hexdigest(),
            "saved": hashlib.sha256(saved_weights).hexdigest(),
            "fisher": model.ewc.scales[-1],
            "covers": model.ewc.covered,
            "val_r10": trainer.reports[-1].best_checkpoint_score,
            "fisher_samples": trainer.reports[-1].fisher_samples,
        }
    )
)
