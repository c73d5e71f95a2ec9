"""Run as one of several processes by tests/test_distributed_training.py (under the launcher) or
alone: SFT of a tiny model on a prepared database; each process writes a digest of its trained
weights to DIGESTS/rank<N> (the test's own record, for comparing the processes), with how often
it called the TRL trainer's ``save_model`` (a collective under FSDP and ZeRO-3) and with which
directory."""

import hashlib
import json
import os
import sys
from pathlib import Path

import torch
import trl

from leanloop.database import DynamicDatabase
from leanloop.trainer.sft import SFTTrainer

saves: list[str] = []
save_model = trl.SFTTrainer.save_model


def recording_save_model(self, output_dir=None, _internal_call=False):
    if not _internal_call:  # the checkpoint's save, not a step checkpoint's
        saves.append(str(output_dir))
    return save_model(self, output_dir, _internal_call)


trl.SFTTrainer.save_model = recording_save_model

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
            "saves": saves,
        }
    )
)
