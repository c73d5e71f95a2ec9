"""Inference that keeps only what it needs: a reply's score comes from the tokens chosen (no
full-vocabulary logits kept), equal to what the model says of the reply; beam scores equal
transformers' own; seeds give each call its own reproducible draw without touching the
process's random state; a LoRA adapter is merged for generation; a T5 encoder-decoder (ReProver's
generator's kind) loads and generates."""

from __future__ import annotations

import pytest

from leanloop.ml.generation import TacticGenerator
from tests.tiny_causal import shared_tiny_model

STATES = [
    "n : ℕ\n⊢ n + 0 = n",
    "a b : ℕ\nh : a = b\n⊢ b = a",
    "⊢ True",
]


@pytest.fixture(scope="module")
def generator(sample_dir):
    import torch

    torch.manual_seed(0)
    return TacticGenerator(shared_tiny_model(sample_dir), max_new_tokens=12, device="cpu")


def teacher_forced(model, prompt_ids: list[int], reply_ids: list[int]) -> float:
    """The model's log-probability of ``reply_ids`` after ``prompt_ids`` in one forward pass."""
    import torch

    ids = torch.tensor([prompt_ids + reply_ids])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    start = len(prompt_ids)
    return sum(logprobs[start + i - 1, token].item() for i, token in enumerate(reply_ids))


def spy_generate(generator, monkeypatch) -> list:
    """Every output of the model's ``generate`` (and the configuration it was given)."""
    seen = []
    original = generator.model.generate

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append((kwargs["generation_config"], out))
        return out

    monkeypatch.setattr(generator.model, "generate", spy)
    return seen


def test_sampled_scores_are_the_model_log_probabilities_without_keeping_logits(
    generator, monkeypatch
):
    """With temperature and top-p (which change the sampling distribution), a sample's score is
    still the model's own log-probability of its tokens, and ``generate`` keeps neither scores
    nor logits."""
    seen = spy_generate(generator, monkeypatch)
    tok = generator.tokenizer
    prompt = generator.prompt_text(STATES[0])
    (replies,) = generator.generate_counted(
        [prompt], 6, method="sample", temperature=1.7, top_p=0.9, seed=3
    )
    ((config, out),) = seen
    assert not config.output_scores and not config.output_logits
    assert out.scores is None and out.logits is None
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    generated = out.sequences[:, len(prompt_ids) :]
    for row, (_text, score, length) in zip(generated.tolist(), replies, strict=True):
        expected = teacher_forced(generator.model, prompt_ids, row[:length])
        assert score == pytest.approx(expected, abs=1e-3)


def test_greedy_scores_in_a_padded_batch(generator, monkeypatch):
    seen = spy_generate(generator, monkeypatch)
    tok = generator.tokenizer
    prompts = [generator.prompt_text(s) for s in STATES]  # different lengths: left padding
    replies = generator.generate_counted(prompts, 1, method="greedy")
    ((_config, out),) = seen
    width = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
    generated = out.sequences[:, width:].tolist()
    for prompt, row, ((_text, score, length),) in zip(prompts, generated, replies, strict=True):
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        expected = teacher_forced(generator.model, prompt_ids, row[:length])
        assert score == pytest.approx(expected, abs=1e-3)


def test_beam_scores_equal_transformers_own(generator):
    """The beam recorder reads each beam's score along ``beam_indices``: the same figures as
    ``sequences_scores``, which transformers gives only when it keeps every step's scores."""
    import torch
    from transformers import LogitsProcessorList

    options = generator.options.model_copy(update={"method": "beam", "max_new_tokens": 10})
    input_ids, mask = generator._encode([generator.prompt_text(s) for s in STATES], options)
    config, processors, recorder = generator._generation_config(5, options)
    config.output_scores = True  # transformers' own figures, for the comparison
    with torch.inference_mode():
        out = generator.model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            generation_config=config,
            logits_processor=LogitsProcessorList(processors),
        )
    ours = recorder.sequence_scores(out.sequences[:, input_ids.shape[1] :], out.beam_indices)
    assert len(ours) == 15
    assert ours == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)
    ranked = generator.generate_replies(
        [generator.prompt_text(STATES[1])], 5, method="beam", max_new_tokens=10
    )
    assert [score for _, score in ranked[0]] == pytest.approx(ours[5:10], abs=1e-3)


def test_seeds_give_each_call_its_own_reproducible_draw(generator):
    import torch

    prompt = generator.prompt_text(STATES[1])

    def draw(seed, prompts=(prompt,)):
        replies = generator.generate_counted(list(prompts), 6, method="sample", seed=seed)
        return [text for text, _, _ in replies[0]]

    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = draw(0)
    assert torch.equal(torch.get_rng_state(), state)  # the process's random state is untouched
    assert draw(0) == first  # reproducible
    assert draw(1) != first  # the next attempt draws others
    other = generator.prompt_text(STATES[2])
    both = generator.generate_counted([prompt, other], 6, method="sample", seed=0)
    assert [t for t, _, _ in both[0]] != [t for t, _, _ in both[1]] or len(set(first)) == 1


def test_a_lora_adapter_is_merged_for_generation(sample_dir, tmp_path):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    tiny = shared_tiny_model(sample_dir)
    base = AutoModelForCausalLM.from_pretrained(tiny)
    torch.manual_seed(1)
    lora = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    peft_model = get_peft_model(base, lora)
    peft_model.save_pretrained(tmp_path / "adapter")
    unmerged = TacticGenerator.from_model(
        PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), tmp_path / "adapter"),
        TacticGenerator(tiny, device="cpu").tokenizer,
        device="cpu",
        max_new_tokens=10,
    )
    merged = TacticGenerator(tmp_path / "adapter", device="cpu", max_new_tokens=10)
    assert merged.adapter and not isinstance(merged.model, PeftModel)
    assert not any("lora_" in name for name, _ in merged.model.named_parameters())
    assert unmerged.adapter and isinstance(unmerged.model, PeftModel)  # from_model: as given
    prompts = [merged.prompt_text(s) for s in STATES]
    want = unmerged.generate_counted(prompts, 1, method="greedy")
    got = merged.generate_counted(prompts, 1, method="greedy")
    for (a,), (b,) in zip(want, got, strict=True):
        assert a[0] == b[0] and a[2] == b[2]
        assert a[1] == pytest.approx(b[1], abs=1e-3)


def tiny_t5(directory):
    """A randomly initialised T5 encoder-decoder with ByT5's byte tokenizer (ReProver's
    generator is a ByT5 ``T5ForConditionalGeneration``)."""
    import torch
    from transformers import ByT5Tokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = ByT5Tokenizer()
    config = T5Config(
        vocab_size=384,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_a_t5_encoder_decoder_loads_and_generates(tmp_path, monkeypatch):
    import torch
    from transformers import T5ForConditionalGeneration

    generator = TacticGenerator(tiny_t5(tmp_path / "t5"), device="cpu", max_new_tokens=8)
    assert isinstance(generator.model, T5ForConditionalGeneration) and generator.encoder_decoder
    assert generator.prompt_text(STATES[0]) == STATES[0]  # the encoder reads the state itself
    tok = generator.tokenizer
    seen = spy_generate(generator, monkeypatch)
    for method in ("greedy", "sample", "beam"):
        replies = generator.generate_counted([STATES[0], STATES[2]], 3, method=method, seed=0)
        assert [len(r) for r in replies] == [1, 1] if method == "greedy" else [3, 3]
        _config, out = seen[-1]
        generated = out.sequences[:, 1:]  # after the decoder's start token
        per_prompt = generated.shape[0] // 2
        for index, state in enumerate((STATES[0], STATES[2])):
            row = index * per_prompt
            _text, score, length = replies[index][0]
            labels = generated[row : row + 1, :length]
            with torch.no_grad():
                logits = generator.model(**tok(state, return_tensors="pt"), labels=labels).logits
            expected = torch.log_softmax(logits[0], -1).gather(-1, labels.T).sum().item()
            assert score == pytest.approx(expected, abs=1e-3)
    tactics = generator.generate(STATES[1], k=2, method="beam")
    assert all(t.score <= 0 for t in tactics)
