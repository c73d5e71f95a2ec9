"""The vLLM backend behind the generator protocol: asked for without vLLM, a one-line error naming
the extra; with vLLM (here ``tests/standins/vllm_standin.py``, vLLM's API answered by the same
tiny transformers model) search, whole-proof sampling and GRPO select it through their existing
configuration, and its replies are read, cut, scored and ranked as the transformers generator's."""

from __future__ import annotations

import importlib.util

import pytest

from leanloop.errors import LeanloopError
from leanloop.ml.generation import TacticGenerator
from leanloop.ml.protocols import Generator
from leanloop.ml.vllm_backend import VLLMGenerator, open_generator
from tests.standins import vllm_standin
from tests.tiny_causal import shared_tiny_model

STATES = ["n : ℕ\n⊢ n + 0 = n", "a b : ℕ\nh : a = b\n⊢ b = a"]

needs_no_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here"
)


@pytest.fixture(scope="module")
def tiny(sample_dir):
    return shared_tiny_model(sample_dir)


@needs_no_vllm
def test_asking_for_vllm_without_it_names_the_extra(tiny):
    from leanloop.prover.hf import HFProver
    from leanloop.trainer.grpo import GRPOTrainer

    with pytest.raises(LeanloopError, match="needs vLLM, which is not installed") as error:
        open_generator(tiny, backend="vllm")
    assert "\n" not in error.value.message and "leanloop[vllm]" in (error.value.hint or "")
    with pytest.raises(LeanloopError, match="the 'vllm' extra"):
        HFProver(tiny, decoding={"backend": "vllm"}).load_generator()
    with pytest.raises(LeanloopError, match="GRPOTrainer's generation_backend='vllm' needs vLLM"):
        GRPOTrainer(
            str(tiny), lambda completions, **_: [0.0] * len(completions), generation_backend="vllm"
        )
    with pytest.raises(LeanloopError, match="unknown generation backend 'tgi'"):
        open_generator(tiny, backend="tgi")


def test_greedy_and_beam_replies_match_the_transformers_generator(tiny, monkeypatch):
    llm_class = vllm_standin.install(monkeypatch)
    ours = open_generator(tiny, backend="vllm", max_new_tokens=12)
    assert isinstance(ours, VLLMGenerator) and isinstance(ours, Generator)
    (llm,) = llm_class.made
    assert llm.model_path == str(tiny) and ours.tokenizer is llm.tokenizer
    reference = TacticGenerator(tiny, device="cpu", max_new_tokens=12)
    prompts = [reference.prompt_text(s) for s in STATES]
    assert [ours.prompt_text(s) for s in STATES] == prompts
    for method, k in (("greedy", 1), ("beam", 4)):
        want = reference.generate_counted(prompts, k, method=method, share_prompt_cache=False)
        got = ours.generate_counted(prompts, k, method=method)
        for a, b in zip(want, got, strict=True):
            assert [r[0] for r in b] == [r[0] for r in a]  # text cut at its end token
            assert [r[2] for r in b] == [r[2] for r in a]  # tokens generated
            assert [r[1] for r in b] == pytest.approx([r[1] for r in a], abs=1e-3)
    kind, params, _ = llm.calls[-1]
    assert kind == "beam_search" and params.beam_width == 4 and params.length_penalty == 0.0
    kind, params, _ = llm.calls[0]
    assert kind == "generate" and [p.temperature for p in params] == [0.0, 0.0]
    assert all(p.logprobs == 0 and p.stop_token_ids == ours.end_ids for p in params)


def test_sampling_seeds_each_prompt_and_attempt(tiny, monkeypatch):
    vllm_standin.install(monkeypatch)
    ours = VLLMGenerator(tiny, max_new_tokens=10)
    (llm,) = vllm_standin.LLM.made
    prompt = ours.prompt_text(STATES[0])

    def draw(seed):
        (replies,) = ours.generate_counted([prompt], 5, method="sample", seed=seed, top_p=0.9)
        return replies

    first = draw(0)
    assert len(first) == 5 and draw(0) == first
    assert draw(1) != first
    seeds = [call[1][0].seed for call in llm.calls]
    assert seeds[0] == seeds[1] != seeds[2]
    params = llm.calls[0][1][0]
    assert (params.n, params.top_p, params.max_tokens) == (5, 0.9, 10)
    tactics = ours.generate(STATES[1], k=3, method="sample", seed=2)
    assert [t.score for t in tactics] == sorted((t.score for t in tactics), reverse=True)


def test_search_whole_proofs_and_grpo_select_vllm(tiny, tmp_path, monkeypatch):
    from leanloop.data.benchmark import BenchmarkProblem
    from leanloop.prover.benchmark_config import ProofPrompt
    from leanloop.prover.hf import HFProver
    from leanloop.prover.samplers import ModelSampler
    from leanloop.prover.whole import WholeProofFormat
    from leanloop.trainer.grpo import GRPOTrainer

    llm_class = vllm_standin.install(monkeypatch)
    hf = HFProver(tiny, decoding={"backend": "vllm"})
    assert isinstance(hf.generator, VLLMGenerator)
    whole = hf.whole_proof_generator
    assert isinstance(whole, VLLMGenerator) and whole.llm is hf.generator.llm
    assert (
        isinstance(whole.prompt_format, WholeProofFormat)
        and whole.options.max_new_tokens == 4 * 128
    )
    assert len(llm_class.made) == 1  # one engine for tactics and whole proofs

    sampler = ModelSampler(tiny, ProofPrompt(), max_tokens=6, seed=0, backend="vllm")
    problem = BenchmarkProblem(name="t", formal_statement="theorem t : 1 + 1 = 2 := by")
    samples = sampler.sample(problem, 3, 0)
    assert len(samples) == 3 and all(1 <= (s.tokens or 0) <= 6 for s in samples)
    assert isinstance(sampler.generator, VLLMGenerator)

    trainer = GRPOTrainer(
        str(tiny),
        lambda completions, **_: [0.0] * len(completions),
        output_dir=tmp_path / "grpo",
        batch_size=2,
        generation_backend="vllm",
    )
    args = trainer.trl_arguments("work")
    assert args["use_vllm"] is True and args["vllm_mode"] == "colocate"


def test_a_lora_adapter_is_served_on_its_base(tiny, tmp_path, monkeypatch):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny), lora).save_pretrained(tmp_path)
    llm_class = vllm_standin.install(monkeypatch)
    ours = VLLMGenerator(tmp_path, max_new_tokens=4)
    (llm,) = llm_class.made
    assert ours.adapter and llm.model_path == str(tiny) and llm.engine_args["enable_lora"]
    ours.generate(STATES[0], k=1, method="greedy")
    _, _, extra = llm.calls[-1]
    assert extra["lora_request"].lora_path == str(tmp_path)
