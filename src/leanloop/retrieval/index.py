"""A premise index: the corpus embedded once by an embedder (such as ``PremiseRetriever``),
queries answered with one matrix product and the top-k premises accessible from the query's
theorem."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import torch

from leanloop.data.records import Pos, Premise
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import RetrievalStep
from leanloop.retrieval.metrics import RetrievalMetrics, evaluate_rankings
from leanloop.words import plural


class Embedder(Protocol):
    """What the index needs of a retriever: unit-length embeddings of proof states (queries) and
    of premise texts (documents), one row per text, in order."""

    def encode_states(self, states: Sequence[str], batch_size: int = 32) -> torch.Tensor: ...

    def encode_premises(self, texts: Sequence[str], batch_size: int = 32) -> torch.Tensor: ...


class PremiseIndex:
    """Embeddings of every premise of ``corpus`` (row i is premise i), and the retriever that
    embeds queries."""

    def __init__(
        self, corpus: Corpus, embeddings: torch.Tensor, retriever: Embedder | None = None
    ) -> None:
        if embeddings.shape[0] != len(corpus):
            raise LeanloopError(
                f"index has {plural(embeddings.shape[0], 'embedding')} for "
                f"{plural(len(corpus), 'premise')}",
                hint="rebuild the index for this corpus",
            )
        self.corpus = corpus
        self.embeddings = embeddings.float()
        self.retriever = retriever

    @classmethod
    def build(cls, retriever: Embedder, corpus: Corpus, *, batch_size: int = 64) -> PremiseIndex:
        """Embed the whole corpus with ``retriever`` (one pass, no gradients)."""
        embeddings = retriever.encode_premises(corpus.texts(), batch_size=batch_size)
        return cls(corpus, embeddings, retriever)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        names = [p.full_name for p in self.corpus]
        torch.save({"names": names, "embeddings": self.embeddings.cpu()}, path)
        return path

    @classmethod
    def load(
        cls, path: str | Path, corpus: Corpus, retriever: Embedder | None = None
    ) -> PremiseIndex:
        """An index saved by ``save`` for the same corpus."""
        data = torch.load(Path(path), map_location="cpu", weights_only=True)
        if data["names"] != [p.full_name for p in corpus]:
            raise LeanloopError(
                f"index {path} was built for another corpus", hint="rebuild it with build()"
            )
        return cls(corpus, data["embeddings"], retriever)

    def search(
        self,
        queries: torch.Tensor,
        file_paths: Sequence[str],
        positions: Sequence[Pos | Sequence[int]],
        k: int,
    ) -> list[list[tuple[int, float]]]:
        """For each query embedding, the ``k`` best accessible premises as (index, score)."""
        embeddings = self.embeddings.to(queries.device)
        scores = queries.float() @ embeddings.T
        results: list[list[tuple[int, float]]] = []
        for row, (file_path, position) in enumerate(zip(file_paths, positions, strict=True)):
            mask = torch.from_numpy(self.corpus.accessible_mask(file_path, position))
            available = int(mask.sum())
            if available == 0 or k <= 0:
                results.append([])
                continue
            masked = scores[row].masked_fill(~mask.to(scores.device), float("-inf"))
            top = torch.topk(masked, min(k, available))
            results.append(
                [
                    (int(i), float(s))
                    for i, s in zip(top.indices.tolist(), top.values.tolist(), strict=True)
                ]
            )
        return results

    def _require_retriever(self) -> Embedder:
        if self.retriever is None:
            raise LeanloopError(
                "this premise index has no retriever to embed queries",
                hint="build it with PremiseIndex.build(retriever, corpus)",
            )
        return self.retriever

    def retrieve_batch(
        self,
        states: Sequence[str],
        file_paths: Sequence[str],
        positions: Sequence[Pos | Sequence[int]],
        k: int = 10,
    ) -> list[list[tuple[Premise, float]]]:
        """``retrieve`` for many states at once."""
        queries = self._require_retriever().encode_states(list(states))
        found = self.search(queries, file_paths, positions, k)
        return [[(self.corpus[i], score) for i, score in hits] for hits in found]

    def retrieve(
        self, state: str, file_path: str, position: Pos | Sequence[int], k: int = 10
    ) -> list[tuple[Premise, float]]:
        """The ``k`` premises most similar to ``state`` among those accessible from
        ``position`` in ``file_path``, best first, with their cosine similarity."""
        return self.retrieve_batch([state], [file_path], [position], k)[0]


def rank_steps(
    index: PremiseIndex, steps: Sequence[RetrievalStep], k: int, *, batch_size: int = 32
) -> list[list[str]]:
    """For each step, the names of the ``k`` best accessible premises, best first."""
    retriever = index._require_retriever()
    ranked: list[list[str]] = []
    for start in range(0, len(steps), batch_size):
        part = steps[start : start + batch_size]
        queries = retriever.encode_states([s.context for s in part], batch_size=batch_size)
        found = index.search(queries, [s.file_path for s in part], [s.position for s in part], k)
        ranked.extend([index.corpus[i].full_name for i, _ in hits] for hits in found)
    return ranked


def evaluate_index(
    index: PremiseIndex, steps: Sequence[RetrievalStep], k: int = 100
) -> RetrievalMetrics:
    """R@1, R@10 and MRR of the index on ``steps`` (``k`` premises ranked per step)."""
    ranked = rank_steps(index, steps, k)
    return evaluate_rankings((s.positives, r) for s, r in zip(steps, ranked, strict=True))
