"""A curriculum survives a crash: a repository interrupted mid-way keeps its step checkpoint and
the next ``train`` resumes it from there (the global step goes on, it does not start again);
finished repositories are recorded once, skipped on a re-run and reported as they were; the
record is what subclasses ask (``finished_repositories``, ``is_finished``)."""

from __future__ import annotations

import json

import pytest

from leanloop.ml.models import latest_checkpoint
from leanloop.trainer.base import CURRICULUM_RECORD, checkpoint_name, read_curriculum_record
from leanloop.trainer.sft import SFTTrainer
from tests.tiny_causal import same_weights, shared_tiny_model, two_repository_db, weights

pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


class PowerCut(RuntimeError):
    pass


def callbacks():
    from transformers import TrainerCallback

    class CrashInSecondRepository(TrainerCallback):
        """Raises after ``step`` optimizer steps of the second repository's training."""

        def __init__(self, step: int) -> None:
            self.step = step
            self.repositories = 0

        def on_train_begin(self, args, state, control, **kwargs):
            self.repositories += 1

        def on_step_end(self, args, state, control, **kwargs):
            if self.repositories == 2 and state.global_step == self.step:
                raise PowerCut(f"power cut after step {state.global_step}")

    class Steps(TrainerCallback):
        """The optimizer steps each training ran, and the weights it started from."""

        def __init__(self) -> None:
            self.steps: list[int] = []
            self.starts: list[dict] = []

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.starts.append(weights(model))

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.append(state.global_step)

    return CrashInSecondRepository, Steps


def builds(trainer, monkeypatch) -> list[int]:
    """Counts the TRL trainers ``trainer`` builds (one per repository trained)."""
    count: list[int] = []
    build = trainer.build_trl_trainer

    def spy(*args, **kwargs):
        count.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(trainer, "build_trl_trainer", spy)
    return count


def test_a_crash_mid_repository_resumes_from_the_step_checkpoint(sample_dir, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    crash_type, steps_type = callbacks()
    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=20)
    out = tmp_path / "out"
    common = {
        "output_dir": out,
        "batch_size": 2,
        "lr": 1e-3,
        "max_steps": 5,
        "save_steps": 2,
        "evaluate": False,
        "plot_curves": False,
        "progress_bars": False,
    }
    model = str(shared_tiny_model(sample_dir))
    first = SFTTrainer(model, callbacks=[crash_type(step=3)], **common)
    with pytest.raises(PowerCut):
        first.train(repos, database, tmp_path / "data")

    # the first repository is finished and recorded; the second kept its step checkpoint
    finished = first.finished_repositories()
    assert [(f.index, f.repository) for f in finished] == [(0, repos[0])]
    assert first.is_finished(repos[0]) and not first.is_finished(repos[1])
    assert latest_checkpoint(out) == finished[0].checkpoint
    work = out / f".{checkpoint_name(1, repos[1])}.work"
    assert sorted(p.name for p in work.glob("checkpoint-*")) == ["checkpoint-2"]
    assert (work / "checkpoint-2" / "trainer_state.json").is_file()
    assert not (out / checkpoint_name(1, repos[1])).exists()
    step_weights = load_file(work / "checkpoint-2" / "model.safetensors")

    # started again: the first repository is skipped, the second goes on from step 2
    steps = steps_type()
    second = SFTTrainer(model, callbacks=[steps], **common)
    built = builds(second, monkeypatch)
    checkpoints = second.train(repos, database, tmp_path / "data")
    assert len(built) == 1  # one repository trained
    assert steps.steps == [3, 4, 5]  # the global step went on from the step checkpoint
    (start,) = steps.starts
    assert all(same_weights({k: start[k]}, {k: v}) for k, v in step_weights.items())
    report = second.reports[-1]
    assert report.resumed_from_step == 2 and report.global_steps == 5
    assert second.reports[0] == first.reports[0]  # the finished one, as it was recorded
    assert not work.exists()  # removed once its repository is finished
    assert [f.checkpoint for f in second.finished_repositories()] == checkpoints
    assert latest_checkpoint(out) == checkpoints[1]
    info = json.loads((checkpoints[1] / "leanloop_checkpoint.json").read_text())
    assert info["report"]["resumed_from_step"] == 2

    # a third run finds everything finished: nothing trains, the model is the last one's; a run
    # stopped between the record and LATEST is repaired
    (out / "LATEST").write_text(checkpoints[0].name + "\n")
    third = SFTTrainer(model, **common)
    built = builds(third, monkeypatch)
    assert third.train(repos, database, tmp_path / "data") == checkpoints
    assert built == [] and len(third.reports) == 2
    assert latest_checkpoint(out) == checkpoints[1]
    from transformers import AutoModelForCausalLM

    saved = weights(AutoModelForCausalLM.from_pretrained(checkpoints[1]))
    assert same_weights(weights(third.model), saved)


def test_the_record_follows_the_curriculum_and_resume_false_trains_again(
    sample_dir, tmp_path, monkeypatch
):
    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=10)
    out = tmp_path / "out"
    common = {
        "output_dir": out,
        "batch_size": 2,
        "max_steps": 1,
        "evaluate": False,
        "plot_curves": False,
        "progress_bars": False,
    }
    model = str(shared_tiny_model(sample_dir))
    trainer = SFTTrainer(model, **common)
    trainer.train(repos[:1], database, tmp_path / "data")
    trainer_name, finished = read_curriculum_record(out)
    assert trainer_name == "SFTTrainer" and [f.repository for f in finished] == repos[:1]

    # another order: the record's first repository is not this curriculum's first, so
    # nothing is skipped, and the record is rewritten as the new curriculum goes
    again = SFTTrainer(model, **common)
    built = builds(again, monkeypatch)
    again.train(list(reversed(repos)), database, tmp_path / "data")
    assert len(built) == 2
    assert [f.repository for f in again.finished_repositories()] == list(reversed(repos))

    # resume: false trains everything again
    fresh = SFTTrainer(model, resume=False, **common)
    built = builds(fresh, monkeypatch)
    fresh.train(list(reversed(repos)), database, tmp_path / "data")
    assert len(built) == 2

    # the record of another trainer class is not this one's
    record = json.loads((out / CURRICULUM_RECORD).read_text())
    record["trainer"] = "GRPOTrainer"
    (out / CURRICULUM_RECORD).write_text(json.dumps(record))
    assert SFTTrainer(model, **common).finished_repositories() == []
