"""The OpenAI API of the local models, exercised with the official ``openai`` client against the
live server on a tiny model built in the test: model list, ``n`` replies, greedy and beam
decoding at temperature 0 (the same replies as the generator's), ``max_tokens``, ``stop``, token
log-probabilities, ``usage``, streaming (the same text as the whole answer, usage in the last
chunk), text completions, and the client's own error types for 404, 400 and 422."""

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
                {"name": "encoder", "provider": "encoder", "model": str(tiny_dir)},
            ]
        }
    )
    with live_server(create_app(config)) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def generator(tiny_dir):
    from leanloop.ml.generation import TacticGenerator

    return TacticGenerator(tiny_dir)


def test_models_lists_the_generators(client):
    assert [m.id for m in client.models.list().data] == ["tiny", "remote"]


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


def collect(stream) -> tuple[dict[int, str], dict[int, str], list]:
    """The text and finish reason of each reply of a streamed chat, and the chunks."""
    texts: dict[int, str] = {}
    finished: dict[int, str] = {}
    chunks = list(stream)
    for chunk in chunks:
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            if choice.index not in texts:
                assert choice.delta.role == "assistant"  # each reply's first chunk says who
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                assert choice.index not in finished
                finished[choice.index] = choice.finish_reason
    return texts, finished, chunks


@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 0, "n": 1},  # greedy: token by token
        {"temperature": 0, "n": 2},  # beam search: made whole, then sent
        {"temperature": 1.0, "n": 3, "seed": 7},  # sampled: token by token, each reply
    ],
)
def test_streaming_sends_the_replies_of_the_whole_answer(client, settings):
    whole = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=8, **settings
    )
    stream = client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
        **settings,
    )
    texts, finished, chunks = collect(stream)
    n = settings["n"]
    assert [texts[i] for i in range(n)] == [c.message.content for c in whole.choices]
    assert finished == {c.index: c.finish_reason for c in whole.choices}
    # the usage comes last, in a chunk of its own, and matches the whole answer's
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_streaming_without_include_usage_sends_none(client):
    stream = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, max_tokens=4, stream=True
    )
    _, finished, chunks = collect(stream)
    assert set(finished) == {0} and all(chunk.usage is None for chunk in chunks)


def test_usage_counts_the_prompt_and_the_generated_tokens(client, generator):
    prompt = generator.tokenizer.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True
    )
    prompt_tokens = len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    (counted,) = generator.generate_counted([prompt], 3, method="beam", max_new_tokens=6)
    answer = client.chat.completions.create(
        model="tiny", messages=MESSAGES, temperature=0, n=3, max_tokens=6
    )
    assert answer.usage.prompt_tokens == prompt_tokens
    assert answer.usage.completion_tokens == sum(length for _, _, length in counted[:3])
    assert answer.usage.total_tokens == prompt_tokens + answer.usage.completion_tokens
    assert 3 <= answer.usage.completion_tokens <= 18


def test_text_completions_continue_the_prompt(client, generator):
    prompt = "theorem add_zero (n : ℕ) : n + 0 = n := by"
    (greedy,) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=10)
    answer = client.completions.create(model="tiny", prompt=prompt, temperature=0, max_tokens=10)
    assert answer.object == "text_completion"
    (choice,) = answer.choices
    assert choice.text == greedy[0][0] and choice.finish_reason in ("stop", "length")
    prompt_tokens = len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert answer.usage.prompt_tokens == prompt_tokens

    # OpenAI's default of 16 tokens, n per prompt in the order of the prompts
    default = client.completions.create(model="tiny", prompt=prompt, temperature=0)
    (longer,) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=16)
    assert default.choices[0].text == longer[0][0]
    both = client.completions.create(
        model="tiny", prompt=[prompt, "example : 1 = 1 :="], n=2, temperature=0, max_tokens=4
    )
    assert [c.index for c in both.choices] == [0, 1, 2, 3]
    (beams,) = generator.generate_replies([prompt], 2, method="beam", max_new_tokens=4)
    assert [c.text for c in both.choices[:2]] == [text for text, _ in beams[:2]]


def test_text_completions_stop_logprobs_and_streaming(client, generator):
    prompt = "theorem add_zero (n : ℕ) : n + 0 = n := by"
    full = client.completions.create(model="tiny", prompt=prompt, temperature=0, max_tokens=12)
    text = full.choices[0].text
    assert len(text) > 3
    cut = client.completions.create(
        model="tiny", prompt=prompt, temperature=0, max_tokens=12, stop=text[2:4]
    ).choices[0]
    assert cut.text == text[: text.index(text[2:4])] and cut.finish_reason == "stop"

    scored = client.completions.create(
        model="tiny", prompt=prompt, temperature=0, max_tokens=6, logprobs=3
    ).choices[0]
    # the tokens generated (not the reply's text tokenized again): their log-probabilities add
    # up to the reply's, which has no end token when it ran out of tokens
    (((_, total),),) = generator.generate_replies([prompt], 1, method="greedy", max_new_tokens=6)
    assert scored.finish_reason == "length" and len(scored.logprobs.tokens) == 6
    assert math.fsum(scored.logprobs.token_logprobs) == pytest.approx(total, abs=1e-3)
    assert all(value <= 0 for value in scored.logprobs.token_logprobs)
    assert all(len(top) <= 3 for top in scored.logprobs.top_logprobs)
    # greedy decoding: every token is the most likely one at its place
    for token, value, top in zip(
        scored.logprobs.tokens,
        scored.logprobs.token_logprobs,
        scored.logprobs.top_logprobs,
        strict=True,
    ):
        assert max(top.values()) == pytest.approx(value, abs=1e-4)
        assert token in top
    assert scored.logprobs.text_offset[0] == 0

    pieces, finish = [], None
    for chunk in client.completions.create(
        model="tiny", prompt=prompt, temperature=0, max_tokens=12, stream=True
    ):
        assert chunk.object == "text_completion"
        for choice in chunk.choices:
            pieces.append(choice.text)
            finish = choice.finish_reason or finish
    assert "".join(pieces) == text and finish == full.choices[0].finish_reason


def test_errors_are_the_clients_own(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert "unknown model 'nope'" in missing.value.message
    with pytest.raises(openai.BadRequestError) as encoder:
        client.chat.completions.create(model="encoder", messages=MESSAGES)
    assert "is an encoder" in encoder.value.message
    with pytest.raises(openai.BadRequestError, match="echo is not supported"):
        client.completions.create(model="tiny", prompt="a", echo=True)
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
