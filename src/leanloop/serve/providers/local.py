"""Models that run in the server's process: a causal LM (leanloop checkpoint, trainer output,
LoRA adapter, packaged or hub name) through ``TacticGenerator``, and a retriever or Hugging Face
encoder through ``PremiseRetriever``; each loaded once on its own thread and fed in batches."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple, cast

from leanloop.errors import LeanloopError
from leanloop.ml.generation import rank_tactics
from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve.admission import Gate
from leanloop.serve.batching import BatchWorker
from leanloop.serve.config import ModelConfig
from leanloop.serve.errors import BadRequest
from leanloop.serve.providers.base import EncoderBackend, GeneratorBackend

#: Goal states an encoder embeds in one forward pass at most (``PremiseRetriever.encode``'s).
ENCODER_BATCH = 32


class ChatReply(NamedTuple):
    """One reply to a chat: its text, log-probability, length in tokens and, when asked, each
    token with its log-probability."""

    text: str
    logprob: float
    length: int
    tokens: list[tuple[str, float]] | None


class LocalGenerator(GeneratorBackend):
    """A ``TacticGenerator`` loaded from the model's checkpoint on first use."""

    def __init__(self, config: ModelConfig, gate: Gate) -> None:
        super().__init__(config, gate)
        self.generator: Any = None
        self.worker = BatchWorker(
            config.name, self._run, gate=gate, max_batch=config.decoding.batch_size
        )

    def _load_checkpoint(self) -> Any:
        from leanloop.ml.generation import TacticGenerator

        return TacticGenerator(
            self.config.model, prompt_format=self.config.prompt_format, options=self.config.decoding
        )

    async def load(self) -> None:
        self.generator = await self.worker.call(self._load_checkpoint)
        self.loaded = True

    async def generate(self, state: str, prefix: str, k: int) -> list[GeneratedTactic]:
        return await self.worker.submit(("tactics", k), (state, prefix))

    async def chat(
        self,
        messages: list[dict[str, str]],
        n: int,
        options: dict[str, Any],
        *,
        logprobs: bool = False,
    ) -> list[ChatReply]:
        """``n`` replies to a chat (one with greedy decoding); ``options`` are decoding options
        (method, temperature, top_p, max_new_tokens, ...)."""
        key = ("chat", n, tuple(sorted(options.items())), logprobs)
        return await self.worker.submit(key, messages)

    # -- on the worker's thread ------------------------------------------------------------------

    def _run(self, key: Hashable, items: list[Any]) -> list[Any]:
        kind, n, *rest = cast("tuple[Any, ...]", key)  # the keys made above are tuples
        if kind == "tactics":
            return self._tactics(items, n)
        options, logprobs = rest
        return self._chat(items, n, dict(options), logprobs)

    def _tactics(self, items: list[tuple[str, str]], k: int) -> list[list[GeneratedTactic]]:
        generator = self.generator
        prompts = [generator.prompt_text(state) + prefix for state, prefix in items]
        replies = generator.generate_replies(prompts, k)
        return [
            rank_tactics(
                [(prefix + text, score) for text, score in found], generator.prompt_format, k
            )
            for (_, prefix), found in zip(items, replies, strict=True)
        ]

    def _chat(
        self, chats: list[list[dict[str, str]]], n: int, options: dict[str, Any], logprobs: bool
    ) -> list[list[ChatReply]]:
        tokenizer = self.generator.tokenizer
        prompts = []
        for messages in chats:
            try:
                prompts.append(
                    tokenizer.apply_chat_template(
                        messages, tokenize=False, add_generation_prompt=True
                    )
                )
            except Exception as exc:  # the template's own check of the messages
                raise BadRequest(
                    f"model '{self.config.name}' cannot read these messages: {exc}"
                ) from None
        try:
            replies = self.generator.generate_replies(prompts, n, **options)
        except LeanloopError as exc:
            raise BadRequest(exc.message) from None
        return [
            [self._reply(prompt, text, score, logprobs) for text, score in found[:n]]
            for prompt, found in zip(prompts, replies, strict=True)
        ]

    def _reply(self, prompt: str, text: str, score: float, logprobs: bool) -> ChatReply:
        length = len(self.generator.tokenizer(text, add_special_tokens=False)["input_ids"])
        tokens = self._token_logprobs(prompt, text) if logprobs else None
        return ChatReply(text, score, length, tokens)

    def _token_logprobs(self, prompt: str, reply: str) -> list[tuple[str, float]]:
        """Each token of ``reply`` with its log-probability under the model after ``prompt``."""
        import torch

        generator = self.generator
        tokenizer = generator.tokenizer
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        if not reply_ids:
            return []
        ids = torch.tensor([prompt_ids + reply_ids], device=generator.device)
        with torch.inference_mode():
            logits = generator.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        chosen = torch.tensor(reply_ids, device=logits.device).unsqueeze(-1)
        values = torch.log_softmax(logits, dim=-1).gather(-1, chosen).squeeze(-1).tolist()
        return [(tokenizer.decode([t]), v) for t, v in zip(reply_ids, values, strict=True)]

    async def close(self) -> None:
        await self.worker.close()
        self.generator = None
        self.loaded = False


class LocalEncoder(EncoderBackend):
    """A ``PremiseRetriever`` checkpoint (or a Hugging Face encoder) embedding goal states."""

    def __init__(self, config: ModelConfig, gate: Gate) -> None:
        super().__init__(config, gate)
        self.retriever: Any = None
        self.worker = BatchWorker(config.name, self._run, gate=gate, max_batch=ENCODER_BATCH)

    def _load_checkpoint(self) -> Any:
        from leanloop.ml.device import detect_hardware
        from leanloop.retrieval.model import PremiseRetriever

        return PremiseRetriever.load(
            self.config.model, device=detect_hardware().device, freeze=True
        )

    async def load(self) -> None:
        self.retriever = await self.worker.call(self._load_checkpoint)
        self.loaded = True

    async def encode(self, text: str) -> list[float]:
        return await self.worker.submit("encode", text)

    def _run(self, key: Hashable, texts: Sequence[str]) -> list[list[float]]:
        return self.retriever.encode_states(list(texts)).tolist()

    async def close(self) -> None:
        await self.worker.close()
        self.retriever = None
        self.loaded = False
