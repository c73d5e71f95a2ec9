"""Trainers pick their device and precision from the hardware: fp32 on a CPU, bf16 on a GPU
that has it, and the user's explicit settings win. The arguments are checked by building the
libraries' own trainers from them."""

from __future__ import annotations

import contextlib
import json
from unittest import mock

import pytest

from leanloop.errors import LeanloopError
from leanloop.ml.device import Hardware
from leanloop.trainer.progress import ProgressTrainer
from leanloop.trainer.retrieval import RetrievalTrainer
from leanloop.trainer.retrieval_config import TrainingConfig

CPU = Hardware("cpu", bf16=False, gradient_checkpointing=False)
CUDA = Hardware("cuda", bf16=True, gradient_checkpointing=True)
PACKAGED = "all-minilm-l6-v2"  # a model that loads here (the constructor checks it)


def lightning_trainer(tmp_path, hardware, **settings):
    """The Lightning trainer ``RetrievalTrainer`` builds for a repository on ``hardware``."""
    config = TrainingConfig(output_dir=tmp_path, enable_progress_bar=False, **settings)
    return RetrievalTrainer(config, hardware=hardware).lightning_trainer(tmp_path, has_val=True)


@contextlib.contextmanager
def cuda_devices(count: int):
    """Lightning believes ``count`` CUDA devices are present (this machine has none): enough to
    build a trainer and read how it would run, not to run it."""
    from lightning.pytorch.accelerators import CUDAAccelerator

    with (
        mock.patch.object(CUDAAccelerator, "is_available", staticmethod(lambda: True)),
        mock.patch("lightning.fabric.accelerators.cuda.num_cuda_devices", lambda: count),
        mock.patch("lightning.pytorch.accelerators.cuda.num_cuda_devices", lambda: count),
        mock.patch("torch.cuda.is_available", lambda: True),
        mock.patch("torch.cuda.device_count", lambda: count),
    ):
        yield


def test_retriever_trains_in_fp32_on_the_cpu(tmp_path):
    from lightning.pytorch.accelerators import CPUAccelerator
    from lightning.pytorch.strategies import SingleDeviceStrategy

    trainer = lightning_trainer(tmp_path, CPU)
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert isinstance(trainer.strategy, SingleDeviceStrategy)
    assert trainer.strategy.root_device.type == "cpu" and trainer.num_devices == 1
    assert trainer.precision == "32-true"
    # asking for GPUs changes nothing where there is none
    assert isinstance(lightning_trainer(tmp_path, CPU, num_gpus=4).accelerator, CPUAccelerator)


def test_retriever_uses_the_gpu_in_bf16_and_ddp_for_several(tmp_path):
    from lightning.pytorch.accelerators import CUDAAccelerator
    from lightning.pytorch.strategies import SingleDeviceStrategy

    with cuda_devices(2):
        one = lightning_trainer(tmp_path, CUDA)
        assert isinstance(one.accelerator, CUDAAccelerator)
        assert isinstance(one.strategy, SingleDeviceStrategy) and one.num_devices == 1
        assert one.precision == "bf16-mixed"
        fp32_gpu = Hardware("cuda", bf16=False, gradient_checkpointing=True)
        assert lightning_trainer(tmp_path, fp32_gpu).precision == "32-true"
        # several GPUs are several processes, started by the launcher, not by Lightning
        with pytest.raises(LeanloopError, match="--nproc 2"):
            lightning_trainer(tmp_path, CUDA, num_gpus=2, timeout_seconds=60)


def test_under_the_launcher_the_retriever_joins_its_processes(tmp_path, monkeypatch):
    from lightning.pytorch.strategies import DDPStrategy

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "2")):
        monkeypatch.setenv(name, value)
    with cuda_devices(2):
        two = lightning_trainer(tmp_path, CUDA, num_gpus=2, timeout_seconds=60)
        assert isinstance(two.strategy, DDPStrategy) and two.num_devices == 2
        assert two.strategy._timeout.total_seconds() == 60
        assert two.precision == "bf16-mixed"


# num_gpus=0 leaves the (pretended) GPU unused on purpose
@pytest.mark.filterwarnings("ignore:GPU available but not used")
def test_retriever_settings_win_over_the_hardware(tmp_path):
    from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator

    with cuda_devices(1):
        forced = lightning_trainer(tmp_path, CUDA, precision="32-true")
        assert isinstance(forced.accelerator, CUDAAccelerator) and forced.precision == "32-true"
        on_cpu = lightning_trainer(tmp_path, CUDA, num_gpus=0)
        assert isinstance(on_cpu.accelerator, CPUAccelerator) and on_cpu.precision == "32-true"


@pytest.fixture
def progress_rows(tmp_path):
    path = tmp_path / "progress.jsonl"
    rows = [{"goal": f"⊢ {i} = {i}", "tactic": "rfl", "steps_remaining": i % 3} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_progress_trainer_arguments_follow_the_hardware(progress_rows, tmp_path):
    from transformers import TrainingArguments

    cpu = ProgressTrainer(progress_rows, PACKAGED, output_dir=tmp_path / "out", hardware=CPU)
    args = TrainingArguments(**cpu.training_arguments(tmp_path / "work", steps_per_epoch=8))
    assert args.device.type == "cpu" and args.bf16 is False
    assert args.load_best_model_at_end and args.metric_for_best_model == "mse"
    assert args.greater_is_better is False and args.logging_steps == 2
    assert args.learning_rate == 1e-5
    gpu = ProgressTrainer(progress_rows, PACKAGED, output_dir=tmp_path / "out", hardware=CUDA)
    values = gpu.training_arguments(tmp_path / "work", steps_per_epoch=8)
    assert values["bf16"] is True and values["use_cpu"] is False
    # transformers itself refuses these where no GPU has bf16: they are what a GPU run gets
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        with pytest.raises(ValueError, match="bf16"):
            TrainingArguments(**values)
