from __future__ import annotations

import pytest
import torch

from leanloop.data.records import Pos, Premise, SourceFile
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import RetrievalStep
from leanloop.retrieval.index import PremiseIndex, evaluate_index
from leanloop.retrieval.metrics import evaluate_rankings, recall_at_k, reciprocal_rank


def test_metrics_on_a_hand_checked_case():
    ranked_a = ["c", "a", "d", "e", "f", "g", "h", "i", "j", "k", "l", "b"]
    assert recall_at_k({"a", "b"}, ranked_a, 1) == 0.0
    assert recall_at_k({"a", "b"}, ranked_a, 10) == 0.5
    assert recall_at_k({"a", "b"}, ranked_a, 12) == 1.0
    assert reciprocal_rank({"a", "b"}, ranked_a) == 0.5
    # R@1 divides by the number of positives, as ReProver does
    assert recall_at_k({"x", "z"}, ["x", "z"], 1) == 0.5
    assert reciprocal_rank({"q"}, ["a", "b", "c", "q"]) == 0.25
    assert reciprocal_rank({"y"}, ["a", "b"]) == 0.0

    metrics = evaluate_rankings(
        [
            ({"a", "b"}, ranked_a),  # R@1 0, R@10 1/2, RR 1/2
            ({"x"}, ["x", "a"]),  # 1, 1, 1
            ({"y"}, ["a", "b"]),  # 0, 0, 0
            (set(), ["a"]),  # no positive: not counted
        ]
    )
    assert metrics.steps == 3
    assert metrics.recall_at_1 == pytest.approx(1 / 3)
    assert metrics.recall_at_10 == pytest.approx(0.5)
    assert metrics.mrr == pytest.approx(0.5)
    assert metrics.as_dict() == {
        "R@1": pytest.approx(1 / 3),
        "R@10": 0.5,
        "MRR": 0.5,
        "steps": 3,
    }
    assert evaluate_rankings([]).steps == 0
    with pytest.raises(ValueError):
        recall_at_k(set(), ["a"], 1)


def _premise(name: str, path: str, line: int) -> Premise:
    return Premise(full_name=name, file_path=path, start=Pos(line, 1), end=Pos(line, 10))


class VectorRetriever:
    """Embeds a state by looking it up in a table (the index only needs ``encode_states``)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def encode_states(self, states, batch_size: int = 32):
        return torch.nn.functional.normalize(torch.tensor([self.table[s] for s in states]), dim=-1)


@pytest.fixture
def index() -> PremiseIndex:
    corpus = Corpus(
        [
            SourceFile(
                path="T.lean",
                imports=("L.lean",),
                premises=(_premise("t_before", "T.lean", 5), _premise("t_after", "T.lean", 90)),
            ),
            SourceFile(
                path="L.lean",
                premises=(_premise("l_one", "L.lean", 1), _premise("l_two", "L.lean", 2)),
            ),
            SourceFile(path="X.lean", premises=(_premise("x_far", "X.lean", 1),)),
        ]
    )
    # directions: t_before (1,0), t_after (1,0.1), l_one (0.8,0.6), l_two (0,1), x_far (1,0.05)
    embeddings = torch.nn.functional.normalize(
        torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.8, 0.6], [0.0, 1.0], [1.0, 0.05]]), dim=-1
    )
    retriever = VectorRetriever({"s1": [1.0, 0.0], "s2": [0.0, 1.0]})
    return PremiseIndex(corpus, embeddings, retriever)


def test_index_ranks_only_accessible_premises(index):
    hits = index.retrieve("s1", "T.lean", Pos(50, 1), k=10)
    # t_after is defined later in the file and x_far is not imported: both are left out
    assert [p.full_name for p, _ in hits] == ["t_before", "l_one", "l_two"]
    assert hits[0][1] == pytest.approx(1.0)
    assert [p.full_name for p, _ in index.retrieve("s1", "T.lean", Pos(50, 1), k=2)] == [
        "t_before",
        "l_one",
    ]
    later = index.retrieve("s1", "T.lean", Pos(95, 1), k=2)
    assert [p.full_name for p, _ in later] == ["t_before", "t_after"]
    assert [p.full_name for p, _ in index.retrieve("s2", "L.lean", Pos(99, 1), k=5)] == [
        "l_two",
        "l_one",
    ]


def test_evaluate_index_on_hand_checked_steps(index):
    steps = [
        RetrievalStep("s1", "T.lean", Pos(50, 1), ("l_one",), "thm1", 0),  # rank 2
        RetrievalStep("s2", "T.lean", Pos(50, 1), ("l_two", "x_far"), "thm2", 0),  # 1 of 2 found
    ]
    metrics = evaluate_index(index, steps, k=100)
    assert metrics.steps == 2
    assert metrics.recall_at_1 == pytest.approx((0 + 0.5) / 2)
    assert metrics.recall_at_10 == pytest.approx((1 + 0.5) / 2)
    assert metrics.mrr == pytest.approx((0.5 + 1) / 2)


def test_index_save_load_and_errors(index, tmp_path):
    path = index.save(tmp_path / "index.pt")
    again = PremiseIndex.load(path, index.corpus, index.retriever)
    assert torch.equal(again.embeddings, index.embeddings)
    other = Corpus([SourceFile(path="A.lean", premises=(_premise("a", "A.lean", 1),))])
    with pytest.raises(LeanloopError, match="another corpus"):
        PremiseIndex.load(path, other)
    with pytest.raises(LeanloopError, match=r"5 embeddings for 1 premise\b"):
        PremiseIndex(other, index.embeddings)
    with pytest.raises(LeanloopError, match="no retriever"):
        PremiseIndex(index.corpus, index.embeddings).retrieve("s1", "T.lean", Pos(1, 1))


def test_the_index_does_not_import_the_model():
    """The index works with any embedder; the model imports the index, never the reverse."""
    import ast
    import inspect

    from leanloop.retrieval import index

    imported = set()
    for node in ast.walk(ast.parse(inspect.getsource(index))):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert "leanloop.retrieval.model" not in imported
    assert "leanloop.retrieval.corpus" in imported  # the walk sees the module's imports
