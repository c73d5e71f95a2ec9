from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from leanloop.database import DynamicDatabase
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.ml.progress import MODEL_ENV, ProgressScorer, progress_text
from leanloop.trainer.progress import (
    METRICS_FILE,
    ProgressTrainer,
    build_progress_dataset,
    read_progress_rows,
    split_rows,
)
from tests.helpers import sample_theorems
from tests.tiny_encoder import build_tiny_encoder, sample_texts


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, sample_dir) -> DynamicDatabase:
    db = DynamicDatabase(tmp_path_factory.mktemp("db") / "sample.db")
    db.import_leandojo(sample_dir)
    return db


@pytest.fixture(scope="module")
def rows_path(tmp_path_factory, sample_db) -> Path:
    path = tmp_path_factory.mktemp("rows") / "progress.jsonl"
    build_progress_dataset(sample_db, path)
    return path


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, sample_dir) -> Path:
    texts = sample_texts(sample_theorems(sample_dir))
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts)


class SpoilLastEpoch(TrainerCallback):
    """Wrecks the regression head just before the last epoch is evaluated and saved, so the
    last checkpoint is the worst one and must not be the one kept."""

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        if state.epoch >= args.num_train_epochs - 1e-6:
            with torch.no_grad():
                model.classifier.bias.add_(25.0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, rows_path, encoder):
    out = tmp_path_factory.mktemp("progress") / "model"
    trainer = ProgressTrainer(
        rows_path,
        model_name=str(encoder),
        output_dir=out,
        max_length=96,
        batch_size=16,
        epochs=3,
        learning_rate=1e-3,
        seed=5,
        callbacks=[SpoilLastEpoch()],
    )
    return trainer, trainer.train(), out


def test_dataset_from_the_real_sample(rows_path, sample_dir):
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    theorems = sample_theorems(sample_dir)
    assert len(rows) == sum(t.num_steps for t in theorems) == 435
    three = next(t for t in theorems if t.num_steps == 3)
    mine = [r for r in rows if r["theorem"].endswith("::" + three.full_name)]
    assert [r["steps_remaining"] for r in mine] == [2, 1, 0]
    assert [r["tactic"] for r in mine] == [s.tactic for s in three.traced_tactics]
    assert [r["goal"] for r in mine] == [s.state_before for s in three.traced_tactics]
    assert mine[0]["prefix"] == "" and mine[2]["prefix"] == "\n".join(
        s.tactic for s in three.traced_tactics[:2]
    )
    longest = max(theorems, key=lambda t: t.num_steps)
    assert max(r["steps_remaining"] for r in rows) == longest.num_steps - 1 == 92
    assert read_progress_rows(rows_path) == rows


def test_split_keeps_each_proof_on_one_side(rows_path):
    rows = read_progress_rows(rows_path)
    training, evaluation = split_rows(rows, 0.2, seed=1)
    assert len(training) + len(evaluation) == len(rows)
    assert not {r["theorem"] for r in training} & {r["theorem"] for r in evaluation}
    assert split_rows(rows, 0.2, seed=1) == (training, evaluation)
    plain = [{"goal": "g", "tactic": "t", "steps_remaining": i} for i in range(10)]
    train_plain, eval_plain = split_rows(plain, 0.3, seed=0)
    assert (len(train_plain), len(eval_plain)) == (7, 3)
    with pytest.raises(LeanloopError, match="cannot split 1 proof"):
        split_rows(plain[:1], 0.5, seed=0)


def test_kept_checkpoint_has_the_lowest_validation_mse(trained):
    _, metrics, out = trained
    history = [h["mse"] for h in metrics["history"]]
    assert len(history) == 3
    assert history[-1] > min(history)  # the spoilt last epoch is the worst one
    assert metrics["mse"] == pytest.approx(min(history), rel=1e-5)
    assert metrics["best_epoch"] == metrics["history"][history.index(min(history))]["epoch"]
    saved = json.loads((out / METRICS_FILE).read_text())
    assert saved["mse"] == metrics["mse"] and saved["mae"] == metrics["mae"]
    assert metrics["mae"] > 0 and metrics["mae"] ** 2 <= metrics["mse"] + 1e-9
    assert (out / "training_curves.png").is_file() and not (out / "checkpoints").exists()


def test_scorer_reproduces_the_reported_error(trained, rows_path, monkeypatch):
    trainer, metrics, out = trained
    monkeypatch.setenv(MODEL_ENV, str(out))
    scorer = ProgressScorer(batch_size=7)
    _, evaluation = split_rows(read_progress_rows(rows_path), trainer.eval_ratio, trainer.seed)
    items = [(r["goal"], r["prefix"], r["tactic"]) for r in evaluation]
    predicted = scorer.predict_batch(items)
    assert len(predicted) == len(evaluation) and all(p >= 0 for p in predicted)
    assert scorer.predict(*items[3]) == pytest.approx(predicted[3], abs=1e-4)
    raw = torch.tensor(predicted)
    actual = torch.tensor([float(r["steps_remaining"]) for r in evaluation])
    # predictions are clipped at 0 steps, which can only reduce the error
    assert float(((raw - actual) ** 2).mean()) <= metrics["mse"] + 1e-3
    assert float((raw - actual).abs().mean()) <= metrics["mae"] + 1e-3


def test_scorer_errors(tmp_path, monkeypatch, encoder):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    with pytest.raises(LeanloopError, match=f"{MODEL_ENV} is not set"):
        ProgressScorer()
    with pytest.raises(LeanloopError, match="does not exist"):
        ProgressScorer(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "empty"))
    with pytest.raises(LeanloopError, match="holds no progress model"):
        ProgressScorer()
    with pytest.raises(LeanloopError, match="not a progress regressor"):
        ProgressScorer(encoder)


def test_progress_text_puts_the_proof_so_far_last():
    text = progress_text("⊢ a = a", "intro x\nsimp", "rfl")
    assert text.splitlines()[0] == "tactic: rfl"
    assert text.index("goal:") < text.index("proof so far:")
    assert "proof so far" not in progress_text("⊢ a = a", "", "rfl")


def test_bad_arguments_are_clear_errors(tmp_path, rows_path):
    for ratio in (0, 1, 1.5, -0.2):
        with pytest.raises(LeanloopError, match="eval_ratio must be between 0 and 1"):
            ProgressTrainer(rows_path, eval_ratio=ratio)
    with pytest.raises(LeanloopError, match="does not exist"):
        ProgressTrainer(tmp_path / "missing.jsonl")
    with pytest.raises(LeanloopError, match="batch_size"):
        ProgressTrainer(rows_path, batch_size=0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(LeanloopError, match="is empty"):
        ProgressTrainer(empty, output_dir=tmp_path / "o").train()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": -1}\n')
    with pytest.raises(DataFormatError, match="steps_remaining"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "steps_remaining": 1}\n')
    with pytest.raises(DataFormatError, match="line 1, field 'tactic'"):
        read_progress_rows(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DataFormatError, match="not JSON"):
        read_progress_rows(bad)


def test_unreachable_model_names_the_offline_encoder(tmp_path, rows_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    trainer = ProgressTrainer(rows_path, output_dir=tmp_path / "o")  # bert-base-uncased
    with pytest.raises(LeanloopError) as info:
        trainer.train()
    message = str(info.value)
    assert "neither a local path nor in the Hugging Face cache" in message
    assert "hub is unreachable" in message and "all-minilm-l6-v2" in message
    with pytest.raises(LeanloopError, match="does not exist"):
        ProgressTrainer(rows_path, model_name=str(tmp_path / "no" / "model")).train()


def test_from_database_refuses_an_empty_database(tmp_path):
    with pytest.raises(LeanloopError, match="no traced proof"):
        ProgressTrainer.from_database(DynamicDatabase(tmp_path / "e.db"), tmp_path / "p.jsonl")
