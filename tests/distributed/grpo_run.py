"""Run as one of several processes by tests/test_distributed_training.py (under the launcher):
GRPO of a tiny model with the format reward on a prepared database; each process writes a
digest of its trained weights to DIGESTS/rank<N> (the test's own record)."""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from leanloop.database import DynamicDatabase
from leanloop.trainer.grpo import GRPOTrainer
from leanloop.trainer.rewards import format_reward

model, db, out, data, digests = sys.argv[1:6]
torch.set_num_threads(1)
database = DynamicDatabase(db)
trainer = GRPOTrainer(
    model,
    format_reward,
    output_dir=out,
    batch_size=2,
    num_generations=2,
    max_steps=2,
    max_completion_length=8,
    logging_steps=1,
    progress_bars=False,
    evaluate=False,
    plot_curves=False,
    lr=1e-3,
)
trainer.train(database.get_repositories(), database, data)
weights = b"".join(p.detach().cpu().float().numpy().tobytes() for p in trainer.model.parameters())
Path(digests).mkdir(parents=True, exist_ok=True)
Path(digests, f"rank{os.environ.get('RANK', '0')}").write_text(
    json.dumps(
        {"digest": hashlib.sha256(weights).hexdigest(), "steps": trainer.reports[-1].global_steps}
    )
)
