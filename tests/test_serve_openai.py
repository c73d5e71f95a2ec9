"""The OpenAI chat API of the local models, exercised with the official ``openai`` client against
the live server: model list, ``n`` replies, greedy and beam decoding at temperature 0 (the same
replies as the generator's), ``max_tokens``, ``stop``, token log-probabilities, streaming, and the
client's own error types for 404, 400 and 422."""

from __future__ import annotations

import math

import openai
import pytest

from leanloop.serve import ServeConfig, create_app
from tests.serve_support import live_server
from tests.tiny_causal import shared_tiny_model

MESSAGES = [
    {"role": "system", "content": "Reply with one Lean 4 tactic."},
    {"role": "user", "content": "n : ℕ\n⊢ n + 0 = n"},
]


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


@pytest.fixture(scope="module")
def client(tiny_dir):
    config = ServeConfig.from_dict(
        {
            "models": [
                {"name": "tiny", "provider": "hf", "model": str(tiny_dir)},
                {"name": "remote", "provider": "openai", "model": "x"},
            ]
        }
    )
    with live_server(create_app(config)) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def generator(tiny_dir):
    from leanloop.ml.generation import TacticGenerator

    return TacticGenerator(tiny_dir)


def test_models_lists_the_local_generators(client):
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_greedy_and_beam_replies_are_the_models(client, generator):
    prompt = generator.tokenizer.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True
    )
    (greedy,) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=10)
    answer = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_tokens=10
    )
    assert answer.object == "chat.completion" and answer.model == "tiny"
    (choice,) = answer.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == greedy[0][0]
    assert choice.finish_reason in ("stop", "length")

    tiny = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=5e-324, max_tokens=10
    )
    assert tiny.choices[0].message.content == greedy[0][0]  # an underflowing temperature is 0

    (beams,) = generator.generate_replies([prompt], 3, method="beam", max_new_tokens=10)
    answer = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, n=3, max_tokens=10
    )
    assert [c.message.content for c in answer.choices] == [text for text, _ in beams[:3]]
    assert [c.index for c in answer.choices] == [0, 1, 2]


def test_sampling_gives_n_replies_repeatable_with_a_seed(client):
    def ask():
        return client.chat.completions.create(
            model="tiny", messages=MESSAGES, n=4, temperature=1.2, top_p=0.9, max_tokens=6, seed=1
        )

    answer = ask()
    assert len(answer.choices) == 4
    assert [c.message.content for c in ask().choices] == [c.message.content for c in answer.choices]


def test_max_tokens_limits_the_reply(client, generator):
    prompt = generator.tokenizer.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True
    )
    for limit in (2, 12):
        (replies,) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=limit)
        answer = client.chat.completions.create(
            model="tiny", messages=MESSAGES, temperature=0, max_tokens=limit
        )
        assert answer.choices[0].message.content == replies[0][0]
    assert answer.choices[0].finish_reason in ("stop", "length")
    short = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_completion_tokens=2
    ).choices[0]
    assert short.finish_reason == "length"


def test_stop_sequences_cut_the_reply(client):
    full = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_tokens=12
    ).choices[0]
    text = full.message.content
    assert len(text) > 2
    stop = text[2:4]
    cut = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_tokens=12, stop=[stop]
    ).choices[0]
    assert cut.message.content == text[: text.index(stop)]
    assert cut.finish_reason == "stop"


def test_token_logprobs_add_up_to_the_reply(client, generator):
    answer = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_tokens=6, logprobs=True
    )
    choice = answer.choices[0]
    tokens = choice.logprobs.content
    assert "".join(t.token for t in tokens) == choice.message.content
    assert all(t.logprob <= 0 for t in tokens)
    # read back token by token, they add up to the log-probability generation gave the reply
    prompt = generator.tokenizer.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True
    )
    ((_, total),) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=6)[0]
    assert math.fsum(t.logprob for t in tokens) == pytest.approx(total, abs=0.05)


def test_streaming(client):
    stream = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, n=2, max_tokens=8, stream=True
    )
    texts = {0: "", 1: ""}
    finished = {}
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finished[choice.index] = choice.finish_reason
    whole = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, n=2, max_tokens=8
    )
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]
    assert set(finished) == {0, 1}


def test_errors_are_the_clients_own(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert "unknown model 'nope'" in missing.value.message
    with pytest.raises(openai.BadRequestError) as remote:
        client.chat.completions.create(model="remote", messages=MESSAGES)
    assert "serves the local models" in remote.value.message
    with pytest.raises(openai.UnprocessableEntityError) as invalid:
        client.chat.completions.create(model="tiny", messages=MESSAGES, n=0)
    assert "field 'n'" in invalid.value.message
    with pytest.raises(openai.BadRequestError, match="only text content"):
        client.chat.completions.create(
            model="tiny",
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ],
        )
