from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from leanloop.data.records import Repository
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.ml.models import latest_checkpoint, resolve_model
from leanloop.retrieval.model import CHECKPOINT_FILE, PremiseRetriever
from leanloop.trainer.retrieval import RetrievalTrainer
from leanloop.trainer.retrieval_config import TrainingConfig
from tests.helpers import moved, sample_theorems

REPO_A = Repository(url="https://github.com/example/lean-a", commit="a" * 40)
REPO_B = Repository(url="https://github.com/example/lean-b", commit="b" * 40)


class StartWeights(pl.Callback):
    """Records the weights and the EWC penalty each repository's training starts with."""

    def __init__(self) -> None:
        self.starts: list[dict] = []

    def on_train_start(self, trainer, pl_module) -> None:
        self.starts.append(
            {
                "weights": {k: v.detach().clone() for k, v in pl_module.state_dict().items()},
                "ewc_active": pl_module.ewc.active,
                "penalty": pl_module.ewc_penalty().item(),
            }
        )


def two_repository_database(path: Path, sample_dir: Path) -> DynamicDatabase:
    """The real sample split in two repositories (first 100 theorems, the other 77)."""
    theorems = sample_theorems(sample_dir)
    db = DynamicDatabase(path)
    db.add_repository(
        REPO_A, [moved(t, url=REPO_A.url, commit=REPO_A.commit) for t in theorems[:100]]
    )
    db.add_repository(
        REPO_B, [moved(t, url=REPO_B.url, commit=REPO_B.commit) for t in theorems[100:]]
    )
    return db


#: The default EWC weight, which the two-repository run trains with.
LAMBDA = TrainingConfig().lambda_value


def tiny_config(encoder: Path, output_dir: Path, **changes) -> TrainingConfig:
    settings = {
        "model_name": str(encoder),
        "output_dir": output_dir,
        "max_epochs": 2,
        "lr": 2e-3,
        "warmup_steps": 2,
        "max_seq_len": 96,
        "batch_size": 8,
        "lambda_value": LAMBDA,
        "fisher_max_samples": 48,
        "enable_progress_bar": False,
        "seed": 11,
    }
    settings.update(changes)
    return TrainingConfig(**settings)


@pytest.fixture(scope="module")
def encoder(tiny_encoder) -> Path:
    return tiny_encoder


@pytest.fixture(scope="module")
def ewc_run(tmp_path_factory, sample_dir, encoder):
    """Two repositories trained in order with EWC (the default λ)."""
    root = tmp_path_factory.mktemp("ewc")
    db = two_repository_database(root / "db.sqlite", sample_dir)
    starts = StartWeights()
    trainer = RetrievalTrainer(
        tiny_config(encoder, root / "out"), callbacks=[starts], progress=PROGRESS.append
    )
    checkpoints = trainer.train([REPO_A, REPO_B], db, root / "data")
    return trainer, checkpoints, starts, root


#: The progress lines of the two-repository run (its progress bar is off).
PROGRESS: list[str] = []


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# -- configuration ---------------------------------------------------------------------------------


def test_config_defaults_and_files(tmp_path):
    config = TrainingConfig()
    assert config.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert config.precision is None and config.lambda_value > 0
    assert config.get_lambda_value() == config.lambda_value
    assert TrainingConfig(run_progressive_training=False).get_lambda_value() == 0.0
    changed = TrainingConfig(lr=3e-4, max_epochs=4, precision="32-true", output_dir=tmp_path)
    assert TrainingConfig.from_yaml(changed.to_yaml(tmp_path / "c.yaml")) == changed
    assert TrainingConfig.from_json(changed.to_json(tmp_path / "c.json")) == changed
    # a LeanDojo-v2 style file with the training section nested
    (tmp_path / "ld.yaml").write_text(
        "training:\n  lr: 0.001\n  num_gpus: 1\n  single_repo: true\n"
    )
    assert TrainingConfig.from_yaml(tmp_path / "ld.yaml").lr == 0.001


def test_config_is_a_dataclass(tmp_path):
    config = TrainingConfig(lr=3e-4, output_dir=tmp_path)
    assert dataclasses.is_dataclass(config)
    values = dataclasses.asdict(config)
    assert values["lr"] == 3e-4 and values["output_dir"] == tmp_path
    assert {f.name for f in dataclasses.fields(TrainingConfig)} >= {"lr", "num_negatives", "seed"}
    assert dataclasses.replace(config, max_epochs=3).max_epochs == 3
    with pytest.raises(LeanloopError, match="field 'lr'"):  # replace checks values too
        dataclasses.replace(config, lr=-1.0)


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(LeanloopError, match=r"field 'lrr': unknown field.*did you mean 'lr'"):
        TrainingConfig(lrr=0.1)
    with pytest.raises(LeanloopError, match="field 'batch_size'"):
        TrainingConfig(batch_size=0)
    with pytest.raises(LeanloopError, match="field 'precision': must be one of"):
        TrainingConfig(precision="fp8")
    with pytest.raises(LeanloopError, match="field 'checkpoint_monitor'"):
        TrainingConfig(checkpoint_monitor="accuracy")
    with pytest.raises(LeanloopError, match="field 'max_time': expected \"DD:HH:MM:SS\""):
        TrainingConfig(max_time="5 minutes")
    assert TrainingConfig(max_time="00:00:05:00").max_time == "00:00:05:00"
    config = TrainingConfig()
    with pytest.raises(LeanloopError, match="field 'lr'"):  # changes are checked too
        config.lr = -1.0
    # a monitor's mode must be the way its metric improves
    with pytest.raises(LeanloopError, match="checkpoint_mode='max' does not fit"):
        TrainingConfig(checkpoint_monitor="loss_train")
    loss = TrainingConfig(checkpoint_monitor="loss_train", checkpoint_mode="min")
    assert loss.checkpoint_mode == "min"
    (tmp_path / "mode.yaml").write_text("early_stopping_mode: min\n")
    with pytest.raises(LeanloopError, match=r"mode\.yaml: early_stopping_mode='min'"):
        TrainingConfig.from_yaml(tmp_path / "mode.yaml")
    (tmp_path / "bad.yaml").write_text("lr: fast\n")
    with pytest.raises(LeanloopError, match=r"bad\.yaml, line \d+, field 'lr'"):
        TrainingConfig.from_yaml(tmp_path / "bad.yaml")
    with pytest.raises(LeanloopError, match="does not exist"):
        TrainingConfig.from_json(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(LeanloopError, match="expected a mapping"):
        TrainingConfig.from_json(tmp_path / "list.json")


# -- training on two repositories --------------------------------------------------------------


def test_each_repository_leaves_a_reloadable_checkpoint(ewc_run):
    trainer, checkpoints, _, root = ewc_run
    assert [c.name for c in checkpoints] == [
        "repo00-example-lean-a-aaaaaaaa",
        "repo01-example-lean-b-bbbbbbbb",
    ]
    assert latest_checkpoint(root / "out") == checkpoints[1]
    for checkpoint in checkpoints:
        for name in (CHECKPOINT_FILE, "config.json", "metrics.csv", "metrics.json"):
            assert (checkpoint / name).is_file(), name
        assert (checkpoint / "training_curves.png").stat().st_size > 1000
        model = PremiseRetriever.load(checkpoint)
        embedding = model.encode_states(["⊢ a * b = b * a"])
        assert embedding.shape == (1, 32)
    report = json.loads((checkpoints[1] / "metrics.json").read_text())
    assert report["started_from"] == str(checkpoints[0])
    assert report["train_steps"] > trainer.reports[0].train_steps  # merged data grows
    # the output directory itself resolves to the newest encoder
    assert Path(resolve_model(root / "out")) == checkpoints[1]


def test_training_says_how_it_goes(ewc_run):
    """With the progress bar off, training says what it does, each epoch's step and loss, and
    where it ended; the report counts the optimizer steps and epochs."""
    trainer = ewc_run[0]
    starts = [line for line in PROGRESS if line.startswith("retriever: training, ")]
    assert len(starts) == 2  # one per repository
    assert re.fullmatch(
        r"retriever: training, \d+ batch(es)? per epoch \(at most 2 epochs\)", starts[0]
    )
    epochs = [line for line in PROGRESS if " ended at step " in line]
    assert len(epochs) == 4  # two epochs per repository
    assert re.match(
        r"retriever: epoch 1 ended at step \d+, loss \d+\.\d{3}, R@10 on val \d+\.\d %, \d+ s$",
        epochs[0],
    )
    ends = [line for line in PROGRESS if line.startswith("retriever: training ended after ")]
    assert len(ends) == 2
    for report in trainer.reports:
        assert report.epochs == 2.0 and report.optimizer_steps > 0 and report.seconds > 0
        assert f"ended after {report.optimizer_steps} steps in " in "\n".join(ends)


def test_second_repository_starts_from_the_first_ones_weights(ewc_run, encoder):
    _, checkpoints, starts, _ = ewc_run
    assert len(starts.starts) == 2
    first = PremiseRetriever.load(checkpoints[0]).state_dict()
    second_start = starts.starts[1]["weights"]
    base = PremiseRetriever.load(encoder).state_dict()
    for name, value in first.items():
        assert torch.equal(second_start[name], value), name
    assert any(not torch.equal(base[n], first[n]) for n in first)  # training moved the weights
    for name, value in base.items():
        assert torch.equal(starts.starts[0]["weights"][name], value)


def test_ewc_penalty_zero_before_any_fisher_then_positive(ewc_run):
    _, checkpoints, starts, _ = ewc_run
    # repository 1: no Fisher yet, the penalty is exactly zero and not applied
    assert starts.starts[0]["ewc_active"] is False
    assert starts.starts[0]["penalty"] == 0.0
    first_log = csv_rows(checkpoints[0] / "metrics.csv")
    assert not any(row.get("ewc_penalty") for row in first_log)
    # repository 2: the Fisher of repository 1 is there, and the weights start at its anchor
    assert starts.starts[1]["ewc_active"] is True
    assert starts.starts[1]["penalty"] == 0.0
    logged = [row for row in csv_rows(checkpoints[1] / "metrics.csv") if row.get("ewc_penalty")]
    assert logged and float(logged[-1]["ewc_penalty"]) > 0
    for row in logged:  # the loss optimised is the task loss plus λ times the penalty
        expected = float(row["loss_train"]) + LAMBDA * float(row["ewc_penalty"])
        assert float(row["loss_total"]) == pytest.approx(expected, rel=1e-4)
    # at the default λ the penalty weighs on the loss: not a rounding error of it
    last = logged[-1]
    share = LAMBDA * float(last["ewc_penalty"]) / float(last["loss_train"])
    assert share > 0.01, last
    # the penalty of the final weights against repository 1's Fisher and anchor
    after_first = PremiseRetriever.load(checkpoints[0])
    final = PremiseRetriever.load(checkpoints[1])
    assert after_first.ewc.penalty(final.named_parameters()).item() > 0


def test_fisher_is_stored_per_parameter_and_accumulates(ewc_run):
    trainer, checkpoints, _, _ = ewc_run
    first = PremiseRetriever.load(checkpoints[0])
    second = PremiseRetriever.load(checkpoints[1])
    params = dict(first.named_parameters())
    assert set(first.ewc.fisher) == set(params)
    for name, param in params.items():
        assert first.ewc.fisher[name].shape == param.shape
        assert torch.equal(first.ewc.anchor[name], param.detach())
    # each repository's Fisher is scaled to mean 1 over the weights, then added up
    entries = sum(p.numel() for p in params.values())
    assert sum(float(f.sum()) for f in first.ewc.fisher.values()) == pytest.approx(
        entries, rel=1e-4
    )
    assert sum(float(f.sum()) for f in second.ewc.fisher.values()) == pytest.approx(
        2 * entries, rel=1e-4
    )
    assert first.ewc.repositories == 1 and second.ewc.repositories == 2
    keys = [f"{r.url}@{r.commit}" for r in (REPO_A, REPO_B)]
    assert first.ewc.covered == keys[:1] and second.ewc.covered == keys
    assert [r.ewc_covers for r in trainer.reports] == [keys[:1], keys]
    assert trainer.reports[0].fisher_samples == 48
    for name in params:  # repository 2's Fisher was added to repository 1's
        assert (second.ewc.fisher[name] >= first.ewc.fisher[name] - 1e-12).all()
        assert torch.equal(second.ewc.anchor[name], dict(second.named_parameters())[name].detach())


def test_lambda_zero_disables_ewc(tmp_path, sample_dir, encoder):
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    config = tiny_config(encoder, tmp_path / "out", lambda_value=0.0, max_epochs=1)
    trainer = RetrievalTrainer(config)
    checkpoints = trainer.train([REPO_A, REPO_B], db, tmp_path / "data")
    for checkpoint in checkpoints:
        model = PremiseRetriever.load(checkpoint)
        assert not model.ewc.active and model.ewc_penalty().item() == 0.0
        assert not any(row.get("ewc_penalty") for row in csv_rows(checkpoint / "metrics.csv"))
    assert [r.fisher_samples for r in trainer.reports] == [0, 0]


def test_evaluate_reports_recall_and_mrr(ewc_run):
    trainer, checkpoints, _, root = ewc_run
    result = trainer.evaluate()
    assert set(result) == {"R@1", "R@10", "MRR", "steps"}
    assert result["steps"] > 0
    assert 0.0 <= result["R@1"] <= result["R@10"] <= 1.0 and 0.0 <= result["MRR"] <= 1.0
    saved = json.loads((checkpoints[1] / "evaluation-random-test.json").read_text())
    assert saved["R@10"] == result["R@10"]
    # a fresh trainer on the same output directory evaluates the same checkpoint
    again = RetrievalTrainer(trainer.config).evaluate(root / "data")
    assert again == result


def test_training_continues_from_a_given_checkpoint(tmp_path, sample_dir, encoder, ewc_run):
    _, checkpoints, _, _ = ewc_run
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    starts = StartWeights()
    config = tiny_config(encoder, tmp_path / "out", max_steps=2, lambda_value=0.0)
    RetrievalTrainer(config, callbacks=[starts]).train(
        [REPO_B], db, tmp_path / "data", model_checkpoint_path=checkpoints[0]
    )
    first = PremiseRetriever.load(checkpoints[0]).state_dict()
    assert all(torch.equal(starts.starts[0]["weights"][k], v) for k, v in first.items())


class EndWeights(pl.Callback):
    """Records the weights each repository's training ends with."""

    def __init__(self) -> None:
        self.ends: list[dict] = []

    def on_train_end(self, trainer, pl_module) -> None:
        self.ends.append({k: v.detach().clone() for k, v in pl_module.state_dict().items()})


def test_a_run_that_stops_before_validating_keeps_its_last_weights(tmp_path, sample_dir, encoder):
    """``max_steps`` ends training before the first validation: the checkpoint is not chosen by
    a validation metric that was never logged (Lightning would warn), the last weights are."""
    import warnings

    from lightning.pytorch.callbacks import model_checkpoint

    model_checkpoint.warning_cache.clear()  # Lightning gives each warning once per process
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    ends = EndWeights()
    config = tiny_config(encoder, tmp_path / "out", max_steps=2, lambda_value=0.0)
    trainer = RetrievalTrainer(config, callbacks=[ends])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (checkpoint,) = trainer.train([REPO_A], db, tmp_path / "data")
    assert trainer.reports[0].val_steps > 0  # there was validation data: training stopped first
    unlogged = [w for w in caught if "could not find the monitored key" in str(w.message)]
    assert not unlogged, unlogged[0].message
    assert trainer.reports[0].best_checkpoint_score is None
    # two steps of an epoch of more batches: a share of one epoch
    assert trainer.reports[0].optimizer_steps == 2 and 0 < trainer.reports[0].epochs < 1
    saved = PremiseRetriever.load(checkpoint).state_dict()
    assert all(torch.equal(ends.ends[0][name], value) for name, value in saved.items())


def test_user_errors(tmp_path, sample_dir, encoder):
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    trainer = RetrievalTrainer(tiny_config(encoder, tmp_path / "out"))
    with pytest.raises(LeanloopError, match="dataset_path was not given"):
        trainer.evaluate()
    with pytest.raises(LeanloopError, match="does not exist"):
        trainer.evaluate(tmp_path / "nowhere")
    with pytest.raises(LeanloopError, match="model_checkpoint_path"):
        trainer.train([REPO_A], db, tmp_path / "data", model_checkpoint_path=tmp_path / "nope")
    with pytest.raises(LeanloopError, match="no repositories"):
        trainer.train([], db, tmp_path / "data")
    db.export_merged_data([REPO_A], tmp_path / "data")
    with pytest.raises(LeanloopError, match="no trained retriever"):
        trainer.evaluate(tmp_path / "data")
    with pytest.raises(LeanloopError, match=r"no random/dev\.json|unknown split"):
        trainer.evaluate(tmp_path / "data", split="dev")
    with pytest.raises(LeanloopError, match="all-minilm-l6-v2"):  # refused before training
        RetrievalTrainer(TrainingConfig(model_name="bert-base-uncased", output_dir=tmp_path))


def test_no_training_examples_is_a_clear_error(tmp_path, sample_dir, encoder):
    theorems = [t for t in sample_theorems(sample_dir) if not t.traced_tactics][:20]
    db = DynamicDatabase(tmp_path / "db.sqlite")
    db.add_repository(REPO_A, [moved(t, url=REPO_A.url, commit=REPO_A.commit) for t in theorems])
    trainer = RetrievalTrainer(tiny_config(encoder, tmp_path / "out"))
    with pytest.raises(LeanloopError, match="no training examples"):
        trainer.train([REPO_A], db, tmp_path / "data")


def test_a_repository_with_nothing_to_train_on_is_skipped_and_the_curriculum_goes_on(
    tmp_path, sample_dir, encoder, caplog
):
    theorems = sample_theorems(sample_dir)
    untraced = [t for t in theorems if not t.traced_tactics][:20]
    db = DynamicDatabase(tmp_path / "db.sqlite")
    db.add_repository(REPO_A, [moved(t, url=REPO_A.url, commit=REPO_A.commit) for t in untraced])
    db.add_repository(
        REPO_B, [moved(t, url=REPO_B.url, commit=REPO_B.commit) for t in theorems[:60]]
    )
    out = tmp_path / "out"
    trainer = RetrievalTrainer(tiny_config(encoder, out, max_epochs=1, max_steps=2))
    with caplog.at_level("WARNING", logger="leanloop.trainer.retrieval"):
        first, second = trainer.train([REPO_A, REPO_B], db, tmp_path / "data")

    skipped, trained = trainer.reports
    assert skipped.skipped is not None and "uses a premise of the corpus" in skipped.skipped
    assert (skipped.train_steps, skipped.optimizer_steps, skipped.fisher_samples) == (0, 0, 0)
    assert trained.skipped is None and trained.train_steps > 0 and trained.optimizer_steps == 2
    assert trained.started_from == str(first)  # the curriculum went on from the skipped step
    (said,) = [r.getMessage() for r in caplog.records if "nothing to train on" in r.getMessage()]
    assert said.startswith(f"repository {REPO_A}: nothing to train on (no tactic step in ")
    # recorded: the skipped checkpoint holds the start model and its report says why
    untrained = PremiseRetriever.load(encoder).state_dict()
    kept = PremiseRetriever.load(first).state_dict()
    assert all(torch.equal(untrained[name], value) for name, value in kept.items())
    saved = json.loads((first / "metrics.json").read_text())
    assert saved["skipped"] == skipped.skipped
    record = json.loads((out / "curriculum.json").read_text())
    assert [e["url"] for e in record["finished"]] == [REPO_A.url, REPO_B.url]
    assert latest_checkpoint(out) == second


def test_hard_negatives_and_naming_examples_in_training(tmp_path, sample_dir, encoder):
    from leanloop.retrieval.datamodule import HardNegativeMining

    class Seen(pl.Callback):
        """Records the mining callback and the hard candidates each epoch trains with."""

        def __init__(self) -> None:
            self.mining = False
            self.candidates: list = []

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            self.mining = any(isinstance(c, HardNegativeMining) for c in trainer.callbacks)
            table = trainer.datamodule.train_set.hard_candidates
            self.candidates.append(None if table is None else [list(c) for c in table])

    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    seen = Seen()
    config = tiny_config(
        encoder,
        tmp_path / "out",
        lambda_value=0.0,
        num_hard_negatives=4,
        naming_examples=True,
        lr=5e-3,
    )
    trainer = RetrievalTrainer(config, callbacks=[seen])
    trainer.train([REPO_A], db, tmp_path / "data")
    report = trainer.reports[0]
    assert report.naming_examples > 20
    assert seen.mining and len(seen.candidates) == 2
    first, second = seen.candidates
    assert first is not None and second is not None
    assert len(first) == report.train_steps + report.naming_examples
    assert first != second  # mined again with the weights of the first epoch


# -- resuming a curriculum ---------------------------------------------------------------------


class Crash(pl.Callback):
    """Raises in the second repository's training once the optimizer step count reaches each of
    ``at`` (once each, over however many runs it is given to)."""

    def __init__(self, *at: int) -> None:
        self.at = set(at)
        self.steps: list[int] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        repository = trainer.datamodule.train_steps[-1]
        if repository.belongs_to(REPO_B.url, REPO_B.commit) and trainer.global_step in self.at:
            self.at.discard(trainer.global_step)
            self.steps.append(trainer.global_step)
            raise RuntimeError("injected failure")


class Batches(pl.Callback):
    """Records each training's start (step, batches per epoch, weights) and a fingerprint of
    every batch of the second repository, in order."""

    def __init__(self) -> None:
        self.starts: list[dict] = []
        self.batches: list[tuple[int, int]] = []

    def on_train_start(self, trainer, pl_module) -> None:
        self.starts.append(
            {
                "step": trainer.global_step,
                "batches": trainer.num_training_batches,
                "weights": {k: v.detach().clone() for k, v in pl_module.state_dict().items()},
            }
        )

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.datamodule.train_steps[-1].belongs_to(REPO_B.url, REPO_B.commit):
            contents = (
                batch["context_ids"].numpy().tobytes() + batch["premise_ids"].numpy().tobytes()
            )
            self.batches.append((trainer.current_epoch, hash(contents)))


def test_a_run_stopped_mid_repository_resumes_and_counts_each_repository_once(
    tmp_path, sample_dir, encoder
):
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    # the batches of an uninterrupted run: what the interrupted ones must train on, in order
    reference = Batches()
    RetrievalTrainer(tiny_config(encoder, tmp_path / "reference"), callbacks=[reference]).train(
        [REPO_A, REPO_B], db, tmp_path / "data"
    )
    per_epoch = reference.starts[1]["batches"]
    assert len(reference.batches) == 2 * per_epoch

    out = tmp_path / "out"
    config = tiny_config(encoder, out, checkpoint_every_n_train_steps=2)
    # stopped within B's first epoch, within the second, and after its very last batch
    crash = Crash(3, per_epoch + 2, 2 * per_epoch)
    seen = Batches()
    with pytest.raises(RuntimeError, match="injected failure"):
        RetrievalTrainer(config, callbacks=[crash, seen]).train(
            [REPO_A, REPO_B], db, tmp_path / "data"
        )
    first, second = (out / "repo00-example-lean-a-aaaaaaaa", out / "repo01-example-lean-b-bbbbbbbb")
    assert latest_checkpoint(out) == first and not second.exists()
    work = out / f".{second.name}.work"
    left = {p.name for p in (work / "resume").iterdir()}
    assert left == {"step=2.ckpt", "on-exception.ckpt"}, left  # the newest is the failure's
    stopped = torch.load(work / "resume" / "on-exception.ckpt", weights_only=False)
    assert stopped["global_step"] == 3 and "optimizer_states" in stopped
    first_weights = (first / CHECKPOINT_FILE).read_bytes()

    # run again: repository A is skipped, B resumes where it stopped, with its weights
    for _ in range(2):
        with pytest.raises(RuntimeError, match="injected failure"):
            RetrievalTrainer(config, callbacks=[crash, seen]).train(
                [REPO_A, REPO_B], db, tmp_path / "data"
            )
    assert crash.steps == [3, per_epoch + 2, 2 * per_epoch]
    for name, value in stopped["state_dict"].items():
        assert torch.equal(seen.starts[2]["weights"][name], value), name
    trainer = RetrievalTrainer(config, callbacks=[seen])
    checkpoints = trainer.train([REPO_A, REPO_B], db, tmp_path / "data")
    assert checkpoints == [first, second]
    # A, then B four times, each resumed where the one before stopped; A was never trained again
    assert [s["step"] for s in seen.starts] == [0, 0, 3, per_epoch + 2, 2 * per_epoch]
    # the interrupted runs trained on the uninterrupted run's batches, each once, in order
    assert seen.batches == reference.batches
    reused, resumed = trainer.reports
    assert reused.reused and reused.repository == str(REPO_A)
    assert not resumed.reused and resumed.resumed_from == str(work / "resume" / "on-exception.ckpt")
    assert resumed.optimizer_steps == 2 * per_epoch  # two epochs, as without the failures
    assert not work.exists() and (first / CHECKPOINT_FILE).read_bytes() == first_weights
    keys = [f"{r.url}@{r.commit}" for r in (REPO_A, REPO_B)]
    final = PremiseRetriever.load(second)
    assert final.ewc.covered == keys and final.ewc.repositories == 2
    assert latest_checkpoint(out) == second

    # a fourth run has nothing left to do
    idle = Batches()
    again = RetrievalTrainer(config, callbacks=[idle])
    assert again.train([REPO_A, REPO_B], db, tmp_path / "data") == [first, second]
    assert idle.starts == [] and all(r.reused for r in again.reports)
    assert again.reports[1].ewc_covers == keys

    # B trained again at another place of a curriculum: its Fisher is not counted twice
    alone = RetrievalTrainer(tiny_config(encoder, out, max_steps=2))
    (checkpoint,) = alone.train([REPO_B], db, tmp_path / "data")
    assert checkpoint.name == "repo00-example-lean-b-bbbbbbbb"
    assert alone.reports[0].fisher_samples == 0 and alone.reports[0].ewc_covers == keys
    assert PremiseRetriever.load(checkpoint).ewc.repositories == 2


def test_the_checkpoint_holds_the_weights_the_strategy_gathers(
    tmp_path, sample_dir, encoder, monkeypatch
):
    """Where the strategy shards the weights (FSDP), each process's module holds only its
    shard after training: the checkpoint must be Lightning's, which asks the strategy for the
    whole weights, not the module's. A stand-in strategy keeps the whole weights aside at the
    end of training and leaves empty shards in the module, as FSDP leaves a process's."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    class ShardingStandIn(SingleDeviceStrategy):
        whole: dict | None = None

        def teardown(self) -> None:
            module = self.lightning_module
            ShardingStandIn.whole = {k: v.detach().clone() for k, v in module.state_dict().items()}
            super().teardown()
            with torch.no_grad():
                for param in module.parameters():
                    param.data = torch.empty(0)

        def lightning_module_state_dict(self) -> dict:
            whole = ShardingStandIn.whole
            return dict(whole) if whole is not None else super().lightning_module_state_dict()

    def device_arguments(self):
        return {
            "accelerator": "cpu",
            "devices": 1,
            "strategy": ShardingStandIn(device=torch.device("cpu")),
            "precision": "32-true",
        }

    monkeypatch.setattr(RetrievalTrainer, "device_arguments", device_arguments)
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    config = tiny_config(
        encoder, tmp_path / "out", max_steps=2, lambda_value=0.0, checkpoint_save_top_k=0
    )
    trainer = RetrievalTrainer(config)
    (checkpoint,) = trainer.train([REPO_A], db, tmp_path / "data")
    assert all(p.numel() == 0 for p in trainer.model.parameters())  # the module: shards only
    whole = ShardingStandIn.whole
    assert whole is not None
    saved = PremiseRetriever.load(checkpoint).state_dict()
    assert saved.keys() == whole.keys()
    assert all(torch.equal(saved[k], whole[k]) for k in whole)
    from leanloop.retrieval.encoder import load_encoder

    _, hf_copy = load_encoder(checkpoint)
    for name, value in hf_copy.state_dict().items():
        assert torch.equal(value, whole[f"encoder.{name}"]), name


def test_a_byt5_retriever_trains_through_the_curriculum(tmp_path, sample_dir):
    """A T5-family encoder (ByT5, as ReProver's and LeanDojo-v2's retriever) trains with EWC over
    two repositories and retrieves."""
    from transformers import T5EncoderModel

    from tests.tiny_encoder import build_tiny_byt5

    byt5 = build_tiny_byt5(tmp_path / "byt5")
    db = two_repository_database(tmp_path / "db.sqlite", sample_dir)
    config = tiny_config(byt5, tmp_path / "out", max_steps=3, max_seq_len=128)
    trainer = RetrievalTrainer(config)
    checkpoints = trainer.train([REPO_A, REPO_B], db, tmp_path / "data")
    model = PremiseRetriever.load(checkpoints[1])
    assert type(model.encoder) is T5EncoderModel and model.ewc.repositories == 2
    assert [r.optimizer_steps for r in trainer.reports] == [3, 3]
    assert [r.fisher_samples for r in trainer.reports] == [48, 48]
    result = trainer.evaluate()
    assert result["steps"] > 0 and 0.0 <= result["R@1"] <= result["R@10"] <= 1.0
