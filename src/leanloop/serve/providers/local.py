"""Models that run in the server's process: a causal LM (leanloop checkpoint, trainer output,
LoRA adapter, packaged or hub name) through ``TacticGenerator``, and a retriever or Hugging Face
encoder through ``PremiseRetriever``; each loaded once on its own thread and fed in batches (a
streamed reply is a batch of its own, whose tokens go to the client as they come)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any, cast

from leanloop.errors import LeanloopError
from leanloop.ml.causal import END_OF_TURN
from leanloop.ml.generation import rank_tactics
from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve.admission import Gate
from leanloop.serve.batching import BatchWorker
from leanloop.serve.config import ModelConfig
from leanloop.serve.errors import BadRequest
from leanloop.serve.providers.base import (
    ChatReply,
    EncoderBackend,
    GeneratorBackend,
    Piece,
    TextAnswer,
    TextCall,
    TokenLogprob,
)
from leanloop.serve.streaming import TokenSink

#: Goal states an encoder embeds in one forward pass at most (``PremiseRetriever.encode``'s).
ENCODER_BATCH = 32


#: Temperatures below this decode as 0 (dividing the logits by less overflows them).
MIN_TEMPERATURE = 1e-4


class LocalGenerator(GeneratorBackend):
    """A ``TacticGenerator`` loaded from the model's checkpoint on first use; it answers
    /generate in batches and the OpenAI requests of /v1 (chats through the model's chat
    template, texts as they are), whole in batches or streamed token by token."""

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

    async def complete(self, call: TextCall) -> TextAnswer:
        """The replies to an OpenAI request; requests with the same options are generated in
        one batch."""
        options = self.decoding(call)
        key = ("text", call.n, tuple(sorted(options.items())), call.logprobs)
        return await self.worker.submit(key, self.prompt(call))

    async def stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        """The replies as the model generates them (beam search, which cannot stream, first
        makes the whole replies); a stream whose client leaves stops the generation at its
        next token."""
        options = self.decoding(call)
        if options["method"] == "beam":
            answer = await self.complete(call)
            for index, reply in enumerate(answer.replies):
                yield Piece(index, reply.text)
            yield answer
            return
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[Piece] = asyncio.Queue()

        def deliver(index: int, text: str) -> None:  # on the model's thread
            loop.call_soon_threadsafe(pieces.put_nowait, Piece(index, text))

        sink = TokenSink(
            self.generator.tokenizer, self.generator.end_ids, deliver, markers=[END_OF_TURN]
        )
        job = asyncio.ensure_future(
            self.worker.submit(("stream", object()), (self.prompt(call), call, options, sink))
        )
        try:
            while not job.done():
                piece = asyncio.ensure_future(pieces.get())
                await asyncio.wait({piece, job}, return_when=asyncio.FIRST_COMPLETED)
                if piece.done():
                    yield piece.result()
                else:
                    piece.cancel()
            # the thread handed its pieces to the loop before its answer: they are queued
            while not pieces.empty():
                yield pieces.get_nowait()
            yield job.result()
        finally:
            sink.abandon()
            if not job.done():
                job.cancel()

    def prompt(self, call: TextCall) -> str:
        """The text the model continues: a chat rendered by its template, or the prompt."""
        if call.messages is None:
            if not call.prompt:
                raise BadRequest("the prompt is empty", hint="give the text to continue")
            return call.prompt
        try:
            return self.generator.tokenizer.apply_chat_template(
                call.messages, tokenize=False, add_generation_prompt=True
            )
        except Exception as exc:  # the template's own check of the messages
            raise BadRequest(
                f"model '{self.config.name}' cannot read these messages: {exc}"
            ) from None

    def decoding(self, call: TextCall) -> dict[str, Any]:
        """The request as decoding options: greedy (one reply) or beam search (several) at
        temperature 0, else sampling; the reply's tokens capped at the model's ``max_tokens``."""
        temperature = 1.0 if call.temperature is None else call.temperature
        limit = self.config.max_tokens
        options: dict[str, Any] = {
            "max_new_tokens": min(call.max_tokens or limit, limit),
            "seed": call.seed,
        }
        if temperature < MIN_TEMPERATURE:
            if call.n == 1:
                options["method"] = "greedy"
            else:
                options.update(method="beam", num_beams=call.n)
        else:
            options.update(
                method="sample",
                num_samples=call.n,
                temperature=temperature,
                top_p=call.top_p or 1.0,
            )
        return options

    # -- on the worker's thread ------------------------------------------------------------------

    def _run(self, key: Hashable, items: list[Any]) -> list[Any]:
        kind, *rest = cast("tuple[Any, ...]", key)  # the keys made above are tuples
        if kind == "tactics":
            return self._tactics(items, rest[0])
        if kind == "stream":
            ((prompt, call, options, sink),) = items
            return [self._answers([prompt], call.n, options, call.logprobs, sink)[0]]
        n, options, logprobs = rest
        return self._answers(items, n, dict(options), logprobs)

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

    def _answers(
        self,
        prompts: list[str],
        n: int,
        options: dict[str, Any],
        logprobs: int | None,
        streamer: TokenSink | None = None,
    ) -> list[TextAnswer]:
        """The replies to ``prompts`` with their token counts and, when asked, each token's
        log-probability (of the tokens generated, which a streamer records; beam search,
        which takes no streamer, gives them from the reply's text)."""
        generator = self.generator
        if logprobs is not None and streamer is None and options["method"] != "beam":
            if len(prompts) > 1:  # one recording per prompt
                return [
                    answer
                    for prompt in prompts
                    for answer in self._answers([prompt], n, options, logprobs)
                ]
            streamer = TokenSink(generator.tokenizer, generator.end_ids, lambda *_: None)
        try:
            if streamer is None:
                replies = generator.generate_counted(prompts, n, **options)
            else:
                replies = generator.generate_counted(prompts, n, streamer=streamer, **options)
        except LeanloopError as exc:
            raise BadRequest(exc.message) from None
        limit = generator.options.max_prompt_tokens
        recorded = streamer.tokens if streamer is not None else None
        answers = []
        for prompt, found in zip(prompts, replies, strict=True):
            ids = generator.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            ids = ids[-limit:] if limit else ids
            chosen = []
            for number, (text, score, count) in enumerate(found[:n]):
                tokens = None
                if logprobs is not None:
                    reply_ids = (
                        recorded[number]
                        if recorded is not None and number < len(recorded)
                        else generator.tokenizer(text, add_special_tokens=False)["input_ids"]
                    )
                    tokens = self._token_logprobs(ids, reply_ids, logprobs)
                chosen.append(ChatReply(text, score, count, tokens))
            answers.append(TextAnswer(chosen, len(ids)))
        return answers

    def _token_logprobs(
        self, prompt_ids: list[int], reply_ids: list[int], top: int
    ) -> list[TokenLogprob]:
        """Each token of a reply with its log-probability under the model after the prompt,
        and the ``top`` most likely tokens at its place."""
        import torch

        generator = self.generator
        tokenizer = generator.tokenizer
        if not reply_ids:
            return []
        ids = torch.tensor([prompt_ids + reply_ids], device=generator.device)
        with torch.inference_mode():
            logits = generator.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        table = torch.log_softmax(logits, dim=-1)
        chosen = torch.tensor(reply_ids, device=table.device).unsqueeze(-1)
        values = table.gather(-1, chosen).squeeze(-1).tolist()
        best: list[list[tuple[str, float]]] = [[] for _ in reply_ids]
        if top:
            found = torch.topk(table, k=min(top, table.shape[-1]), dim=-1)
            best = [
                [(tokenizer.decode([t]), v) for t, v in zip(row, vals, strict=True)]
                for row, vals in zip(found.indices.tolist(), found.values.tolist(), strict=True)
            ]
        return [
            TokenLogprob(tokenizer.decode([t]), v, alternatives)
            for t, v, alternatives in zip(reply_ids, values, best, strict=True)
        ]

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
