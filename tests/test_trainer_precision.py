"""Precision that trains and the loading options a one-GPU user needs, checked on the CPU with the
GPU's settings forced (bf16 autocast on, ``Hardware`` reporting bf16): trained weights are
float32 master weights, so a few steps at a small learning rate change them (a bf16 model
trained in place keeps most of them); a LoRA adapter stays float32 over a bf16 base; 16-bit full
fine-tuning is refused; quantization, the attention kernel, the device map and the dtype reach
``from_pretrained`` as asked, and a machine that cannot honour them says so in one line."""

from __future__ import annotations

import pytest

from leanloop.errors import LeanloopError
from leanloop.ml import loading
from leanloop.ml.device import Hardware
from leanloop.trainer.sft import SFTTrainer
from tests.helpers import sample_theorems
from tests.tiny_causal import shared_tiny_model

pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

#: A GPU's settings on this CPU: bf16 autocast (TRL's ``bf16=True``) and what ``detect_hardware``
#: says about a GPU with bf16; training still runs on the CPU (``use_cpu``).
GPU_SETTINGS_ON_CPU = Hardware("cpu", bf16=True, gradient_checkpointing=False)
CUDA = Hardware("cuda", bf16=True, gradient_checkpointing=True)
LR = 2e-5
STEPS = 3


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


@pytest.fixture(scope="module")
def rows(sample_dir):
    from leanloop.data.prompt import PromptFormat

    examples = list(PromptFormat().examples(sample_theorems(sample_dir)))[:24]
    return [{"prompt": e.prompt, "completion": e.completion} for e in examples]


def snapshot(model) -> dict:
    return {n: p.detach().float().clone() for n, p in model.named_parameters() if p.requires_grad}


def changed_share(before: dict, model) -> float:
    """The share of the trained weights (the embedding rows aside: a row of a token no batch
    held gets no gradient) whose value changed."""
    after = dict(model.named_parameters())
    changed = total = 0
    for name, old in before.items():
        if "embed_tokens" in name:
            continue
        new = after[name].detach().float()
        changed += int((new != old).sum())
        total += new.numel()
    return changed / total


def train_steps(trainer: SFTTrainer, rows, tmp_path, model=None) -> object:
    """``STEPS`` steps of TRL's trainer built with ``trainer``'s arguments, on ``model`` (default:
    the trainer's own, as ``train_step`` hands it)."""
    from datasets import Dataset
    from trl import SFTConfig
    from trl import SFTTrainer as TRLSFTTrainer

    args = trainer.trl_arguments(tmp_path / "work")
    args.update(max_steps=STEPS, save_strategy="no", logging_steps=1)
    trl_trainer = TRLSFTTrainer(
        model=model if model is not None else trainer.model,
        args=SFTConfig(**args),
        train_dataset=Dataset.from_list(rows),
        processing_class=trainer.tokenizer,
    )
    if model is None:
        loading.upcast_trainable(trl_trainer.model)  # what train_step does
    trl_trainer.train()
    return trl_trainer.model


def test_full_fine_tuning_with_bf16_autocast_changes_every_trained_weight(tiny_dir, rows, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=tmp_path / "out",
        batch_size=4,
        lr=LR,
        hardware=GPU_SETTINGS_ON_CPU,
        progress_bars=False,
    )
    args = trainer.trl_arguments(tmp_path / "work")
    assert args["bf16"] is True  # the GPU's autocast
    trained = [p for p in trainer.model.parameters() if p.requires_grad]
    assert trained and all(p.dtype == torch.float32 for p in trained)  # master weights
    before = snapshot(trainer.model)
    model = train_steps(trainer, rows, tmp_path)
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    share = changed_share(before, model)
    assert share > 0.99, share

    # what the GPU path did before: the model loaded in bf16, trained in place under the same
    # autocast, learning rate and steps; most of its weights never move
    old = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.bfloat16)
    old_before = snapshot(old)
    old_share = changed_share(old_before, train_steps(trainer, rows, tmp_path, model=old))
    assert not old_share > 0.99
    assert old_share < 0.5, old_share


def test_lora_keeps_a_bf16_base_and_trains_float32_adapters(tiny_dir, rows, tmp_path):
    import torch
    from peft import LoraConfig

    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=tmp_path / "out",
        batch_size=4,
        lr=LR,
        lora_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        hardware=GPU_SETTINGS_ON_CPU,
        progress_bars=False,
    )
    named = dict(trainer.model.named_parameters())
    frozen = {n: p for n, p in named.items() if not p.requires_grad}
    adapters = {n: p for n, p in named.items() if p.requires_grad}
    assert adapters and all("lora_" in n for n in adapters)
    assert all(p.dtype == torch.bfloat16 for p in frozen.values())  # half the memory
    assert all(p.dtype == torch.float32 for p in adapters.values())
    base_before = {n: p.detach().clone() for n, p in frozen.items()}
    before = snapshot(trainer.model)
    model = train_steps(trainer, rows, tmp_path)
    assert changed_share(before, model) > 0.99
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], p) for n, p in base_before.items())


def test_16bit_full_fine_tuning_is_refused_and_lora_accepts_it(tiny_dir, tmp_path):
    import torch
    from peft import LoraConfig

    with pytest.raises(LeanloopError, match=r"field 'dtype' is 'bfloat16' with full fine") as info:
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, dtype="bfloat16", hardware=CUDA)
    assert "float32 master weights" in str(info.value) and "LoRA" in info.value.hint
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])
    trainer = SFTTrainer(
        str(tiny_dir), output_dir=tmp_path, dtype="float16", lora_config=lora, hardware=CUDA
    )
    dtypes = {p.dtype for p in trainer.model.parameters() if not p.requires_grad}
    assert dtypes == {torch.float16}
    # with FSDP or DeepSpeed the engine keeps master weights: everything loads in float32
    sharded = SFTTrainer(
        str(tiny_dir), output_dir=tmp_path, lora_config=lora, hardware=CUDA,
        trl_args={"fsdp": "full_shard"},
    )  # fmt: skip
    assert {p.dtype for p in sharded.model.parameters()} == {torch.float32}


@pytest.fixture
def from_pretrained_calls(monkeypatch):
    """Every ``AutoModelForCausalLM.from_pretrained`` call's keyword arguments; the model is then
    loaded on the CPU without what this machine cannot do (bitsandbytes, a GPU), and marked as
    4-bit when 4-bit was asked for."""
    from transformers import AutoModelForCausalLM

    calls: list[dict] = []
    real = AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, source, **kwargs):
        calls.append(dict(kwargs))
        quantization = kwargs.pop("quantization_config", None)
        kwargs.pop("device_map", None)
        model = real(cls, source, **kwargs)
        if quantization is not None and quantization.load_in_4bit:
            model.is_loaded_in_4bit = True
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    return calls


def test_qlora_options_reach_transformers(tiny_dir, tmp_path, monkeypatch, from_pretrained_calls):
    import peft
    import torch
    from transformers import BitsAndBytesConfig

    monkeypatch.setattr(loading, "installed", lambda package: True)  # bitsandbytes, pretended
    prepared = []
    real_prepare = peft.prepare_model_for_kbit_training

    def prepare(model, **kwargs):
        prepared.append(kwargs)
        return real_prepare(model, **kwargs)

    monkeypatch.setattr(peft, "prepare_model_for_kbit_training", prepare)
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=tmp_path,
        lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        quantization="4bit",
        attn_implementation="sdpa",
        device_map={"": 0},
        hardware=CUDA,
    )
    (kwargs,) = from_pretrained_calls
    config = kwargs["quantization_config"]
    assert isinstance(config, BitsAndBytesConfig) and config.load_in_4bit
    assert config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant
    assert config.bnb_4bit_compute_dtype == torch.bfloat16
    assert kwargs["attn_implementation"] == "sdpa" and kwargs["device_map"] == {"": 0}
    assert kwargs["dtype"] == torch.bfloat16  # the frozen base, in the GPU's compute dtype
    assert prepared == [{"use_gradient_checkpointing": True}]  # QLoRA's preparation
    assert trainer.use_lora
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters() if p.requires_grad)

    from_pretrained_calls.clear()
    SFTTrainer(
        str(tiny_dir), output_dir=tmp_path, lora={"r": 2, "target_modules": ["q_proj"]},
        quantization="8bit", hardware=CUDA,
    )  # fmt: skip
    assert from_pretrained_calls[0]["quantization_config"].load_in_8bit
    # quantized weights do not train: only an adapter over them does
    with pytest.raises(LeanloopError, match="a quantized model trains a LoRA adapter only"):
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, quantization="4bit", hardware=CUDA)


def test_what_this_machine_cannot_load_is_named_in_one_line(tiny_dir, tmp_path, monkeypatch):
    lora = {"r": 2, "target_modules": ["q_proj"]}
    monkeypatch.setattr(loading, "installed", lambda package: package != "bitsandbytes")
    with pytest.raises(LeanloopError) as info:
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, lora=lora, quantization="4bit")
    message = str(info.value)
    assert "\n" not in message
    assert "SFTTrainer: field 'quantization' is '4bit'" in message and "bitsandbytes" in message
    assert "pip install bitsandbytes" in info.value.hint
    monkeypatch.setattr(loading, "installed", lambda package: True)
    cpu = Hardware("cpu", bf16=False, gradient_checkpointing=False)
    with pytest.raises(LeanloopError, match=r"field 'quantization' .* needs a CUDA GPU"):
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, lora=lora, quantization="4bit", hardware=cpu)
    with pytest.raises(LeanloopError, match="field 'attn_implementation' is 'flash_attention_2'"):
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, attn_implementation="flash_attention_2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LeanloopError, match=r"field 'device_map' is 'auto'.* 2 processes"):
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, device_map="auto")
    with pytest.raises(LeanloopError, match="field 'quantization'"):
        SFTTrainer(str(tiny_dir), output_dir=tmp_path, quantization="2bit")


def test_the_prover_loads_its_generator_with_the_options(tiny_dir, from_pretrained_calls):
    import torch

    from leanloop.prover.hf import HFProver

    prover = HFProver(
        tiny_dir, config={"attn_implementation": "eager", "dtype": "float32"}, device="cpu"
    )
    generator = prover.load_generator()
    (kwargs,) = from_pretrained_calls
    assert kwargs["attn_implementation"] == "eager" and kwargs["dtype"] == torch.float32
    assert generator.model.config._attn_implementation == "eager"
    assert generator.source == str(tiny_dir)
    assert generator.generate("⊢ True", k=1, method="greedy", max_new_tokens=4) is not None
    with pytest.raises(LeanloopError, match="field 'quantization'"):
        HFProver(tiny_dir, config={"quantization": "3bit"})
