"""``RetrievalProver``: an ``HFProver`` whose generator reads, before each state, the premises a
trained retriever ranks best among those accessible from the theorem (ReProver's design)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leanloop.data.prompt import PromptFormat
from leanloop.errors import LeanloopError
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.prover.config import ProverConfig
from leanloop.prover.hf import HFProver
from leanloop.prover.target import Target, TheoremTarget


class PremiseAugmented:
    """A generator whose states are given with the ``k`` best premises accessible from
    ``position`` in ``file_path``, in the prompt the trainers teach: the user turn is
    ``PromptFormat.user_content(state, premises)`` of the generator's prompt format (see
    ``leanloop.data.prompt.state_with_premises``). Where the generator says its tokenizer and
    prompt budget (``TacticGenerator``: ``options.max_prompt_tokens``), the prompt is fitted to
    it inside the user turn (``PromptFormat.fit_prompt``): premises, then the state's first
    lines go; the template and the system prompt stay whole."""

    def __init__(self, generator: Generator, index, file_path: str, position, k: int) -> None:
        self.generator = generator
        self.index = index
        self.file_path = file_path
        self.position = position
        self.k = k

    def user_content(self, state: str, premises: Sequence[str]) -> str:
        """What the generator is given for ``state`` with ``premises`` (best first)."""
        prompt_format = getattr(self.generator, "prompt_format", None) or PromptFormat()
        tokenizer = getattr(self.generator, "tokenizer", None)
        options = getattr(self.generator, "options", None)
        budget = getattr(options, "max_prompt_tokens", None)
        if tokenizer is not None and budget is not None:
            fitted = prompt_format.fit_prompt(
                state, premises, tokenizer=tokenizer, max_tokens=budget
            )
            if fitted is not None:
                return fitted.messages[1]["content"]
        return prompt_format.user_content(state, premises)

    def generate_batch(
        self, states: Sequence[str], k: int, **options: Any
    ) -> list[list[GeneratedTactic]]:
        from leanloop.retrieval.corpus import premise_text

        n = len(states)
        found = self.index.retrieve_batch(
            list(states), [self.file_path] * n, [self.position] * n, self.k
        )
        augmented = [
            self.user_content(state, [premise_text(p) for p, _ in premises])
            for state, premises in zip(states, found, strict=True)
        ]
        return self.generator.generate_batch(augmented, k, **options)


class RetrievalProver(HFProver):
    """``HFProver`` over ``gen_ckpt_path`` with premises retrieved by the retriever checkpoint
    ``ret_ckpt_path`` (``RetrievalTrainer``'s output) from the corpus of
    ``indexed_corpus_path`` (a LeanDojo-format dataset directory; premises its ``corpus.jsonl``
    lacks are taken from the tactics of its train split — never from val or test proofs — or of
    all its theorems when it has no splits). The corpus is embedded once, on first use;
    ``num_retrieved`` premises go before each state.

    Args:
        ret_ckpt_path: The retriever: a ``RetrievalTrainer`` checkpoint or output directory.
        gen_ckpt_path: The tactic generator, as ``HFProver``'s ``ckpt_path``.
        indexed_corpus_path: A LeanDojo-format dataset directory whose premises are
            retrieved.
        num_retrieved: Premises put before each state.
        use_lora: Assert that ``gen_ckpt_path`` is a LoRA adapter.
        device: ``auto``, ``cuda`` or ``cpu``.
        config: A ``ProverConfig``, a mapping of its fields or a YAML/JSON file.
        decoding: Fields of ``DecodingOptions``.

    Raises:
        LeanloopError: ``num_retrieved`` is below 1, or a path does not exist.
    """

    checkpoint_field = "gen_ckpt_path"

    def __init__(
        self,
        ret_ckpt_path: str | os.PathLike,
        gen_ckpt_path: str | os.PathLike,
        indexed_corpus_path: str | os.PathLike,
        *,
        num_retrieved: int = 10,
        use_lora: bool = False,
        device: str = "auto",
        config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        decoding: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            gen_ckpt_path,
            use_lora,
            device,
            config=config,
            decoding=decoding,
        )
        self.ret_ckpt_path = os.fspath(ret_ckpt_path)
        self.indexed_corpus_path = Path(indexed_corpus_path).expanduser()
        self.num_retrieved = num_retrieved
        if num_retrieved < 1:
            raise LeanloopError(f"num_retrieved={num_retrieved}: retrieve at least one premise")
        for what, path in (
            ("retriever checkpoint", Path(self.ret_ckpt_path).expanduser()),
            ("indexed corpus", self.indexed_corpus_path),
        ):
            if not path.exists():
                raise LeanloopError(f"{what} {path}: no such file or directory")
        self._index = None

    @property
    def name(self) -> str:
        return f"retrieval:{self.ret_ckpt_path}+{self.ckpt_path}"

    @property
    def version(self) -> str:
        from leanloop.ml.models import checkpoint_version

        return f"{checkpoint_version(self.ret_ckpt_path)}+{super().version}".strip("+")

    @property
    def index(self):
        """The premise index of the corpus (built on first use)."""
        if self._index is None:
            from leanloop.data.leandojo import LeanDojoDataset
            from leanloop.retrieval.corpus import CandidatePool
            from leanloop.retrieval.index import PremiseIndex
            from leanloop.retrieval.model import PremiseRetriever

            device = None if self.device == "auto" else self.device
            retriever = PremiseRetriever.load(self.ret_ckpt_path, device=device, freeze=True)
            dataset = LeanDojoDataset(self.indexed_corpus_path)
            train = [f for f in dataset.split_files if f.split == "train"]
            if train:  # the proofs of val and test theorems never add candidates
                theorems = (item.parse() for item in dataset.iter_theorem_items(train))
            else:  # a dataset without splits: its theorems are the corpus it was given as
                theorems = dataset.iter_theorems()
            corpus = CandidatePool.of_dataset(self.indexed_corpus_path, theorems).corpus
            if len(corpus) == 0:
                raise LeanloopError(
                    f"{self.indexed_corpus_path}: the corpus has no premise to retrieve",
                    hint="give a dataset with corpus.jsonl or traced tactics using premises",
                )
            self._index = PremiseIndex.build(retriever, corpus)
        return self._index

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_index": None}

    def generator_for(self, target: Target) -> Generator:
        file_path, position = "", (0, 0)  # a goal: every premise counts as accessible
        if isinstance(target, TheoremTarget):
            file_path, position = target.theorem.file_path, target.theorem.start
        elif target.source is not None:
            file_path = target.source.file_path
            position = (target.source.prefix.count("\n") + 1, 0)
        return PremiseAugmented(self.generator, self.index, file_path, position, self.num_retrieved)
