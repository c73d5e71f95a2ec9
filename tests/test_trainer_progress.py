from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from leanloop.database import DynamicDatabase
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.ml.progress import MODEL_ENV, ProgressScorer, progress_text
from leanloop.trainer.progress import METRICS_FILE, ProgressTrainer
from leanloop.trainer.progress_config import ProgressTrainerConfig
from leanloop.trainer.progress_data import (
    ProgressRow,
    build_progress_dataset,
    read_progress_rows,
    split_rows,
)
from tests.helpers import sample_theorems


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
def encoder(tiny_encoder) -> Path:
    return tiny_encoder


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


def split_keys(db: DynamicDatabase, repositories=None) -> dict[str, set[str]]:
    """The keys of the theorems of each split of the database's stored assignment."""
    import tempfile

    from leanloop.data import open_dataset

    with tempfile.TemporaryDirectory() as directory:
        db.export_merged_data(list(repositories or db.get_repositories()), directory)
        return {
            split: {
                str(t.key)
                for t in open_dataset(Path(directory, "random", f"{split}.json")).iter_theorems()
            }
            for split in ("train", "val", "test")
        }


def train_theorems(db: DynamicDatabase, theorems, repositories=None) -> list:
    train = split_keys(db, repositories)["train"]
    return [t for t in theorems if str(t.key) in train]


def test_rows_hold_no_val_or_test_theorem(rows_path, sample_db, sample_dir):
    """The regressor never trains on the theorems it is evaluated on: every row is of a train
    split theorem, and no proof state of a val or test theorem is in the rows (unless a train
    theorem has it too)."""
    splits = split_keys(sample_db)
    rows = read_progress_rows(rows_path)
    theorems = sample_theorems(sample_dir)
    held_out = [t for t in theorems if str(t.key) in splits["val"] | splits["test"]]
    test_proofs = [t for t in held_out if str(t.key) in splits["test"] and t.traced_tactics]
    assert len(test_proofs) >= 5  # the check below has test states to look for
    assert {r.theorem for r in rows} <= splits["train"]
    train_states = {
        s.state_before for t in theorems if str(t.key) in splits["train"] for s in t.traced_tactics
    }
    held_out_states = {s.state_before for t in held_out for s in t.traced_tactics} - train_states
    assert len(held_out_states) >= 10
    assert not held_out_states & {r.goal for r in rows}
    # every traced proof of the train split gives its rows
    assert {r.theorem for r in rows} == {
        str(t.key) for t in theorems if str(t.key) in splits["train"] and t.traced_tactics
    }
    with pytest.raises(LeanloopError, match="unknown split 'dev'"):
        build_progress_dataset(sample_db, rows_path.with_name("dev.jsonl"), split="dev")


def test_dataset_from_the_real_sample(rows_path, sample_db, sample_dir):
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    theorems = train_theorems(sample_db, sample_theorems(sample_dir))
    assert len(rows) == sum(t.num_steps for t in theorems) > 300
    three = next(t for t in theorems if t.num_steps == 3)
    mine = [r for r in rows if r["theorem"].endswith("::" + three.full_name)]
    assert [r["steps_remaining"] for r in mine] == [2, 1, 0]
    assert [r["tactic"] for r in mine] == [s.tactic for s in three.traced_tactics]
    assert [r["goal"] for r in mine] == [s.state_before for s in three.traced_tactics]
    assert mine[0]["prefix"] == "" and mine[2]["prefix"] == "\n".join(
        s.tactic for s in three.traced_tactics[:2]
    )
    longest = max(theorems, key=lambda t: t.num_steps)
    assert max(r["steps_remaining"] for r in rows) == longest.num_steps - 1
    records = read_progress_rows(rows_path)
    assert [r.model_dump() for r in records] == rows
    assert all(isinstance(r, ProgressRow) and isinstance(r.steps_remaining, int) for r in records)


def test_split_keeps_each_proof_on_one_side(rows_path):
    rows = read_progress_rows(rows_path)
    training, evaluation = split_rows(rows, 0.2, seed=1)
    assert len(training) + len(evaluation) == len(rows)
    assert not {r.theorem for r in training} & {r.theorem for r in evaluation}
    assert split_rows(rows, 0.2, seed=1) == (training, evaluation)
    plain = [ProgressRow(goal="g", tactic="t", steps_remaining=i) for i in range(10)]
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
    assert scorer.max_length == 96  # texts are cut where they were cut in training
    _, evaluation = split_rows(read_progress_rows(rows_path), trainer.eval_ratio, trainer.seed)
    items = [(r.goal, r.prefix, r.tactic) for r in evaluation]
    predicted = scorer.predict_batch(items)
    assert len(predicted) == len(evaluation) and all(p >= 0 for p in predicted)
    goal, prefix, tactic = items[3]
    assert scorer.predict(goal, tactic, prefix) == pytest.approx(predicted[3], abs=1e-4)
    raw = torch.tensor(predicted)
    actual = torch.tensor([float(r.steps_remaining) for r in evaluation])
    # predictions are clipped at 0 steps, which can only reduce the error
    assert float(((raw - actual) ** 2).mean()) <= metrics["mse"] + 1e-3
    assert float((raw - actual).abs().mean()) <= metrics["mae"] + 1e-3


def test_a_broken_model_is_never_read_as_done(trained):
    _, _, out = trained
    scorer = ProgressScorer(out)
    with torch.no_grad():
        for parameter in scorer.model.parameters():
            parameter.fill_(float("nan"))
    assert scorer.predict_batch([("⊢ True", None, "trivial")] * 2) == [math.inf, math.inf]


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
        with pytest.raises(LeanloopError, match="ProgressTrainer, field 'eval_ratio'"):
            ProgressTrainer(rows_path, eval_ratio=ratio)
    with pytest.raises(LeanloopError, match="does not exist"):
        ProgressTrainer(tmp_path / "missing.jsonl")
    with pytest.raises(LeanloopError, match="batch_size"):
        ProgressTrainer(rows_path, batch_size=0)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(LeanloopError, match="is empty"):
        ProgressTrainer(empty, "all-minilm-l6-v2", output_dir=tmp_path / "o").train()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": -1}\n')
    with pytest.raises(DataFormatError, match="steps_remaining"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "steps_remaining": 1}\n')
    with pytest.raises(DataFormatError, match="line 1, field 'tactic'"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": true}\n')
    with pytest.raises(DataFormatError, match="field 'steps_remaining': expected a number"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": 1, "prefix": 3}\n')
    with pytest.raises(DataFormatError, match="line 1, field 'prefix'"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": 1}\n[1]\n')
    with pytest.raises(DataFormatError, match="line 2: expected a JSON object"):
        read_progress_rows(bad)
    bad.write_text('{"goal": "g", "tactic": "t", "steps_remaining": 1}\n\n{not json\n')
    with pytest.raises(DataFormatError, match=r"bad\.jsonl, line 3, column \d+: malformed JSON"):
        read_progress_rows(bad)


def test_a_model_that_cannot_load_is_refused_by_the_constructor(tmp_path, rows_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataFormatError) as info:
        ProgressTrainer(rows_path, output_dir=tmp_path / "o")  # bert-base-uncased, not cached
    assert info.value.message == (
        "ProgressTrainer, field 'model_name': 'bert-base-uncased' is no local path, no packaged "
        "model, and not in the Hugging Face cache; the hub is off (HF_HUB_OFFLINE=1)"
    )
    assert "all-minilm-l6-v2" in str(info.value.hint)
    with pytest.raises(DataFormatError, match=r"'model_name': '.*' does not exist"):
        ProgressTrainer(rows_path, model_name=str(tmp_path / "no" / "model"))


def test_from_database_refuses_an_empty_database(tmp_path):
    with pytest.raises(LeanloopError, match="no traced proof"):
        ProgressTrainer.from_database(DynamicDatabase(tmp_path / "e.db"), tmp_path / "p.jsonl")


def test_steps_remaining_counts_the_steps_after_each_step(rows_path, sample_db, sample_dir):
    rows = read_progress_rows(rows_path)
    by_theorem: dict[str, list[dict]] = {}
    for row in rows:
        by_theorem.setdefault(row.theorem, []).append(row)
    theorems = train_theorems(sample_db, sample_theorems(sample_dir))
    proofs = [t for t in theorems if t.traced_tactics]
    assert len(proofs) == len(by_theorem) > 60  # term-mode proofs give no row
    for theorem in proofs:
        mine = by_theorem[str(theorem.key)]
        tactics = [s.tactic for s in theorem.traced_tactics]
        assert [r.tactic for r in mine] == tactics
        for index, row in enumerate(mine):
            assert row.steps_remaining == len(tactics[index + 1 :]), theorem.full_name
            assert row.prefix == "\n".join(tactics[:index])
        assert mine[-1].steps_remaining == 0 and theorem.traced_tactics[-1].closes_goal


OTHER = "https://github.com/example/lean-progress-other"
TERMS = "https://github.com/example/lean-terms-only"


@pytest.fixture(scope="module")
def two_repo_db(tmp_path_factory, sample_dir):
    """The real sample, plus a repository holding copies of six short real proofs and one sorry
    proof, plus a repository whose theorems are all term-mode proofs (no tactics)."""
    from leanloop.data.records import Repository
    from tests.helpers import renamed, with_sorry

    theorems = sample_theorems(sample_dir)
    short = [t for t in theorems if 2 <= t.num_steps <= 4][:6]
    other = [renamed(t, "_other", url=OTHER, commit="c0ffee") for t in short]
    other.append(with_sorry(renamed(short[0], "_sorry", url=OTHER, commit="c0ffee")))
    terms = [renamed(t, "_term", url=TERMS, commit="7e57") for t in theorems if not t.num_steps]
    db = DynamicDatabase(tmp_path_factory.mktemp("db2") / "two.db")
    db.import_leandojo(sample_dir)
    db.add_repository(Repository(url=OTHER, commit="c0ffee"), other)
    db.add_repository(Repository(url=TERMS, commit="7e57"), terms[:5])
    return db, sum(t.num_steps for t in short)


def repository(db: DynamicDatabase, url: str):
    return next(r for r in db.repositories if r.url == url)


def train_steps(db: DynamicDatabase, repositories) -> int:
    """Steps of the traced proofs (without sorry) of the train split of ``repositories``."""
    train = split_keys(db, repositories)["train"]
    return sum(
        t.num_steps
        for r in repositories
        for t in db.iter_theorems(r)
        if str(t.key) in train and not any(s.is_sorry for s in t.traced_tactics)
    )


def test_repositories_filter_keeps_only_their_rows(two_repo_db, tmp_path):
    db, _ = two_repo_db
    mathlib = repository(db, "https://github.com/leanprover-community/mathlib4")
    other, terms = repository(db, OTHER), repository(db, TERMS)

    def rows_of(repositories) -> list[dict]:
        path = tmp_path / f"rows{len(list(tmp_path.iterdir()))}.jsonl"
        count = build_progress_dataset(db, path, repositories)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(rows) == count
        return rows

    everything = rows_of(None)
    other_steps, mathlib_steps = (train_steps(db, [r]) for r in (other, mathlib))
    assert len(everything) == mathlib_steps + other_steps  # the sorry proof gives no row
    only_other = rows_of([other])
    assert len(only_other) == other_steps > 0
    assert all(r["theorem"].startswith(OTHER + "::") for r in only_other)
    assert not any("_sorry" in r["theorem"] for r in everything)
    only_mathlib = rows_of([(mathlib.url, mathlib.commit)])  # a (url, commit) pair works too
    assert len(only_mathlib) == mathlib_steps > 300
    assert all(r["theorem"].startswith(mathlib.url + "::") for r in only_mathlib)
    assert rows_of([mathlib, other]) == everything
    assert rows_of([terms]) == []
    with pytest.raises(LeanloopError, match="no traced proof"):
        ProgressTrainer.from_database(db, tmp_path / "terms.jsonl", repositories=[terms])


def test_from_database_trains_a_model_the_scorer_loads(two_repo_db, encoder, tmp_path, monkeypatch):
    db, _ = two_repo_db
    out = tmp_path / "model"
    data = tmp_path / "other.jsonl"
    trainer = ProgressTrainer.from_database(
        db,
        data,
        repositories=[repository(db, OTHER)],
        model_name=str(encoder),
        output_dir=out,
        max_length=48,
        batch_size=8,
        epochs=2,
        learning_rate=1e-3,
        seed=3,
    )
    rows = read_progress_rows(data)
    other_steps = train_steps(db, [repository(db, OTHER)])
    assert trainer.data_path == data and len(rows) == other_steps
    metrics = trainer.train()
    assert metrics["train_rows"] + metrics["eval_rows"] == other_steps
    assert len(metrics["history"]) == 2
    assert metrics["mse"] == pytest.approx(min(h["mse"] for h in metrics["history"]), rel=1e-5)
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert json.loads((out / METRICS_FILE).read_text())["mse"] == metrics["mse"]
    assert not (out / "checkpoints").exists()

    goal, tactic = rows[0].goal, rows[0].tactic
    direct = ProgressScorer(out)
    value = direct.predict(goal, tactic, "")
    assert isinstance(value, float) and math.isfinite(value) and value >= 0
    # the prediction is the raw output in steps (de-standardised), clipped at 0
    encoded = direct.tokenizer(
        [progress_text(goal, "", tactic)],
        truncation=True,
        max_length=direct.max_length,  # cut as the scorer cuts
        return_tensors="pt",
    )
    with torch.no_grad():
        raw = direct.model(**encoded.to(direct.device)).logits
    assert raw.shape == (1, 1) and bool(torch.isfinite(raw).all())
    assert value == pytest.approx(max(0.0, float(raw) * direct.std + direct.mean), abs=1e-4)
    assert direct.mean == pytest.approx(metrics["steps_mean"])
    monkeypatch.setenv(MODEL_ENV, str(out))
    from_env = ProgressScorer()
    assert from_env.path == out
    assert from_env.predict(goal, tactic, "") == pytest.approx(value, abs=1e-5)
    batch = from_env.predict_batch([(r.goal, r.prefix, r.tactic) for r in rows])
    assert len(batch) == other_steps and all(math.isfinite(v) and v >= 0 for v in batch)
    assert len({round(v, 4) for v in batch}) > 1  # the prediction depends on the input


def test_training_is_reproducible_whatever_ran_before(two_repo_db, encoder, tmp_path):
    db, _ = two_repo_db
    results = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)  # what earlier code left in the global generator
        trainer = ProgressTrainer.from_database(
            db,
            tmp_path / "rows.jsonl",
            repositories=[repository(db, OTHER)],
            model_name=str(encoder),
            output_dir=tmp_path / f"model{global_seed}",
            max_length=48,
            batch_size=8,
            epochs=1,
            learning_rate=1e-3,
            seed=3,
        )
        results.append(trainer.train())
    assert results[0]["mse"] == results[1]["mse"]
    assert results[0]["history"] == results[1]["history"]


def test_from_config_file(tmp_path, rows_path):
    path = tmp_path / "progress.yaml"
    path.write_text(
        f"data_path: {rows_path}\nbatch_size: 4\nepochs: 2\nmodel_name: all-minilm-l6-v2\n"
    )
    trainer = ProgressTrainer.from_config(path, output_dir=tmp_path / "o")
    assert (trainer.batch_size, trainer.epochs, trainer.output_dir) == (4, 2.0, tmp_path / "o")
    assert trainer.data_path == rows_path and trainer.model_name == "all-minilm-l6-v2"
    assert ProgressTrainerConfig(data_path=rows_path).model_name == "bert-base-uncased"
    assert ProgressTrainer.from_config(trainer.config).config == trainer.config
    path.write_text(f"data_path: {rows_path}\nlearning_rate: 0\n")
    with pytest.raises(LeanloopError, match=r"progress\.yaml, line \d+, field 'learning_rate'"):
        ProgressTrainer.from_config(path)
