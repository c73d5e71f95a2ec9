"""Run as one of several processes by tests/test_distributed_training.py (under the launcher) or
alone: SFT of a tiny model on a prepared database; each process writes a digest of its trained
weights to DIGESTS/rank<N> (the test's own record, for comparing the processes)."""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from leanloop.database import DynamicDatabase
from leanloop.trainer.sft import SFTTrainer

model, db, out, data, digests, batch, steps = sys.argv[1:8]
torch.set_num_threads(1)
database = DynamicDatabase(db)
trainer = SFTTrainer(
    model,
    output_dir=out,
    batch_size=int(batch),
    max_steps=int(steps),
    lr=1e-3,
    logging_steps=1,
    evaluate=False,
    plot_curves=False,
    progress_bars=False,
    seed=1,
)
trainer.train(database.get_repositories(), database, data)
weights = b"".join(p.detach().cpu().float().numpy().tobytes() for p in trainer.model.parameters())
report = trainer.reports[-1]
Path(digests).mkdir(parents=True, exist_ok=True)
Path(digests, f"rank{os.environ.get('RANK', '0')}").write_text(
    json.dumps(
        {
            "digest": hashlib.sha256(weights).hexdigest(),
            "steps": report.global_steps,
            "examples": report.train_examples,
        }
    )
)
