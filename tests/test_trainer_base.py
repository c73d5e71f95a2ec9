"""The newest checkpoint is mirrored at the top of a trainer's output directory; the trainer
configurations share one way of being described, loaded and checked."""

from __future__ import annotations

import dataclasses

import pytest

from leanloop.errors import LeanloopError
from leanloop.trainer.base import MIRROR_FILE, mirror_checkpoint
from leanloop.trainer.config import TrainerConfig
from leanloop.trainer.grpo_config import GRPOTrainerConfig
from leanloop.trainer.progress_config import ProgressTrainerConfig
from leanloop.trainer.retrieval_config import TrainingConfig
from leanloop.trainer.sft_config import SFTTrainerConfig


def test_mirror_follows_the_newest_checkpoint(tmp_path):
    out = tmp_path / "out"
    first, second = out / "repo00-a", out / "repo01-b"
    for directory in (first, second):
        (directory / "sub").mkdir(parents=True)
    (first / "config.json").write_text("first")
    (first / "model.safetensors").write_text("full model")
    (second / "config.json").write_text("second")
    (second / "adapter_model.safetensors").write_text("adapter")
    (second / "sub" / "inner.txt").write_text("not mirrored")
    (out / "notes.txt").write_text("the user's")

    mirror_checkpoint(first, out)
    assert (out / "config.json").read_text() == "first"
    assert (out / "model.safetensors").samefile(first / "model.safetensors")

    mirror_checkpoint(second, out)
    assert (out / "config.json").read_text() == "second"
    assert (out / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists()  # left over from the older checkpoint
    assert (first / "model.safetensors").read_text() == "full model"  # the checkpoint keeps it
    assert not (out / "inner.txt").exists() and not (out / "sub").exists()
    assert (out / "notes.txt").read_text() == "the user's"  # never mirrored, never removed
    assert sorted((out / MIRROR_FILE).read_text().split()) == [
        "adapter_model.safetensors",
        "config.json",
    ]
    assert not list(out.glob(".*.mirror"))


def test_every_trainer_config_field_has_help_text():
    for config in (SFTTrainerConfig, GRPOTrainerConfig, TrainingConfig, ProgressTrainerConfig):
        assert issubclass(config, TrainerConfig) and dataclasses.is_dataclass(config)
        fields = config.__pydantic_fields__
        assert len(fields) >= 9
        missing = [name for name, info in fields.items() if not info.description]
        assert not missing, f"{config.__name__}: {missing}"


def test_configs_load_from_files_and_check_fields_together(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text("model_name: tinycoder\nbatch_size: 6\nnum_generations: 3\n")
    config = GRPOTrainerConfig.from_yaml(path)
    assert config.generation_sizes() == (3, 6)
    assert GRPOTrainerConfig.load(path, batch_size=3).generation_sizes() == (3, 3)
    assert GRPOTrainerConfig.from_yaml(config.to_yaml(tmp_path / "again.yaml")) == config
    # the batch / generation rule is checked when the file is read, naming the file
    path.write_text("model_name: tinycoder\nbatch_size: 3\nnum_generations: 4\n")
    with pytest.raises(LeanloopError, match=r"grpo\.yaml: batch_size=3 .* num_generations=4"):
        GRPOTrainerConfig.from_yaml(path)
    path.write_text("model_name: tinycoder\nbatch_size: 0\n")
    with pytest.raises(LeanloopError, match=r"grpo\.yaml, line 2, field 'batch_size'"):
        GRPOTrainerConfig.from_yaml(path)
    path.write_text("batch_size: 2\n")
    with pytest.raises(
        LeanloopError, match=r"grpo\.yaml, field 'model_name': the field is missing"
    ):
        GRPOTrainerConfig.from_yaml(path)
    # and when a field is changed afterwards
    with pytest.raises(LeanloopError, match="does not divide by num_generations=3"):
        config.batch_size = 4


@pytest.mark.parametrize(
    ("trainer", "config"),
    [
        ("leanloop.trainer.sft:SFTTrainer", "leanloop.trainer.sft_config:SFTTrainerConfig"),
        ("leanloop.trainer.grpo:GRPOTrainer", "leanloop.trainer.grpo_config:GRPOTrainerConfig"),
        (
            "leanloop.trainer.progress:ProgressTrainer",
            "leanloop.trainer.progress_config:ProgressTrainerConfig",
        ),
    ],
)
def test_constructor_defaults_are_the_configurations(trainer, config):
    """The seed's constructor signatures spell defaults out; they must be the config's."""
    import dataclasses
    import importlib
    import inspect

    def load(spec):
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)

    fields = {f.name: f for f in dataclasses.fields(load(config))}
    compared = 0
    for name, parameter in inspect.signature(load(trainer).__init__).parameters.items():
        if name not in fields or parameter.default is inspect.Parameter.empty:
            continue
        default = fields[name].default
        default = getattr(default, "default", default)  # a pydantic Field's own default
        given = type(default)(parameter.default) if default is not None else None  # str -> Path
        assert given == default, name
        compared += 1
    assert compared >= 4
