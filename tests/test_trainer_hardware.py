"""Trainers pick their device and precision from the hardware: fp32 on a CPU, bf16 on a GPU
that has it, and the user's explicit settings win."""

from __future__ import annotations

import json

import pytest

from leanloop.ml.device import Hardware
from leanloop.trainer.progress import ProgressTrainer
from leanloop.trainer.retrieval import RetrievalTrainer
from leanloop.trainer.retrieval_config import TrainingConfig

CPU = Hardware("cpu", bf16=False, gradient_checkpointing=False)
CUDA = Hardware("cuda", bf16=True, gradient_checkpointing=True)


def retrieval(tmp_path, hardware, **settings):
    config = TrainingConfig(output_dir=tmp_path, **settings)
    return RetrievalTrainer(config, hardware=hardware).device_arguments()


def test_retriever_trains_in_fp32_on_the_cpu(tmp_path):
    assert retrieval(tmp_path, CPU) == {
        "accelerator": "cpu",
        "devices": 1,
        "strategy": "auto",
        "precision": "32-true",
    }
    # asking for GPUs changes nothing where there is none
    assert retrieval(tmp_path, CPU, num_gpus=4)["accelerator"] == "cpu"


def test_retriever_uses_the_gpu_in_bf16_and_ddp_for_several(tmp_path):
    one = retrieval(tmp_path, CUDA)
    assert one["accelerator"] == "gpu" and one["devices"] == 1
    assert one["strategy"] == "auto" and one["precision"] == "bf16-mixed"
    fp32_gpu = Hardware("cuda", bf16=False, gradient_checkpointing=True)
    assert retrieval(tmp_path, fp32_gpu)["precision"] == "32-true"

    from lightning.pytorch.strategies import DDPStrategy

    two = retrieval(tmp_path, CUDA, num_gpus=2, timeout_seconds=60)
    assert two["devices"] == 2 and isinstance(two["strategy"], DDPStrategy)
    assert two["strategy"]._timeout.total_seconds() == 60


def test_retriever_settings_win_over_the_hardware(tmp_path):
    assert retrieval(tmp_path, CUDA, precision="32-true")["precision"] == "32-true"
    on_cpu = retrieval(tmp_path, CUDA, num_gpus=0)
    assert on_cpu["accelerator"] == "cpu" and on_cpu["precision"] == "32-true"


@pytest.fixture
def progress_rows(tmp_path):
    path = tmp_path / "progress.jsonl"
    rows = [{"goal": f"⊢ {i} = {i}", "tactic": "rfl", "steps_remaining": i % 3} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_progress_trainer_arguments_follow_the_hardware(progress_rows, tmp_path):
    from transformers import TrainingArguments

    cpu = ProgressTrainer(progress_rows, output_dir=tmp_path / "out", hardware=CPU)
    values = cpu.training_arguments(tmp_path / "work", steps_per_epoch=8)
    assert values["use_cpu"] is True and values["bf16"] is False
    assert values["metric_for_best_model"] == "mse" and values["greater_is_better"] is False
    assert values["logging_steps"] == 2
    args = TrainingArguments(**values)  # the values are ones transformers accepts
    assert args.load_best_model_at_end and args.learning_rate == 1e-5
    gpu = ProgressTrainer(progress_rows, output_dir=tmp_path / "out", hardware=CUDA)
    values = gpu.training_arguments(tmp_path / "work", steps_per_epoch=8)
    assert values["use_cpu"] is False and values["bf16"] is True
