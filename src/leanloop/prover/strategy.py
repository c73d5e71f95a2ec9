"""The search tree's nodes and the strategies that order them: a ``Frontier`` of open nodes
(best-first by priority, or depth-first), the small interface another strategy implements."""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from leanloop.lean.server import ProofState


class Failure(NamedTuple):
    """A tactic Lean rejected on a node, and its error."""

    tactic: str
    error: str


@dataclass(slots=True, eq=False)
class Node:
    """A proof state in the search tree, reached from ``parent`` by ``tactic`` (the first path
    that reached it: a state reached again is not added twice)."""

    state: ProofState
    key: str  # the state's goals as text: two nodes never share it
    parent: Node | None
    tactic: str | None
    score: float  # the generator's score of ``tactic``
    depth: int
    logprob: float  # the sum of the scores on the path from the root
    priority: float
    # made when the node is first expanded (most nodes never are: fewer objects to track)
    tried: set[str] | None = None  # tactics run on it, whitespace collapsed
    failures: list[Failure] | None = None
    expansions: int = 0

    def path(self) -> list[str]:
        """The tactics from the root to this node."""
        tactics = []
        node: Node | None = self
        while node is not None and node.tactic is not None:
            tactics.append(node.tactic)
            node = node.parent
        tactics.reverse()
        return tactics


class Frontier(ABC):
    """The open nodes of a search and the order they are expanded in."""

    @abstractmethod
    def push(self, node: Node) -> None:
        """Add one node (e.g. a node put back to be expanded again)."""

    @abstractmethod
    def push_children(self, children: Sequence[Node]) -> None:
        """Add the new children of one expansion, given best first."""

    @abstractmethod
    def pop(self) -> Node | None:
        """The next node to expand (None when there is none)."""

    @abstractmethod
    def __len__(self) -> int: ...

    def pop_many(self, count: int) -> list[Node]:
        """Up to ``count`` nodes to expand together."""
        nodes = []
        while len(nodes) < count:
            node = self.pop()
            if node is None:
                break
            nodes.append(node)
        return nodes

    def drain(self) -> list[Node]:
        """Every open node, leaving the frontier empty."""
        return self.pop_many(len(self))


class BestFirst(Frontier):
    """The open node with the highest priority first (ReProver); ties go to the older node."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Node]] = []
        self._order = itertools.count()

    def push(self, node: Node) -> None:
        heapq.heappush(self._heap, (-node.priority, next(self._order), node))

    def push_children(self, children: Sequence[Node]) -> None:
        for child in children:
            self.push(child)

    def pop(self) -> Node | None:
        return heapq.heappop(self._heap)[2] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)


class DepthFirst(Frontier):
    """The newest expansion's best child first; when a node's children are exhausted, its next
    sibling (backtracking)."""

    def __init__(self) -> None:
        self._stack: list[Node] = []

    def push(self, node: Node) -> None:
        self._stack.append(node)

    def push_children(self, children: Sequence[Node]) -> None:
        self._stack.extend(reversed(children))

    def pop(self) -> Node | None:
        return self._stack.pop() if self._stack else None

    def __len__(self) -> int:
        return len(self._stack)


#: The strategies ``ProverConfig.strategy`` names.
STRATEGIES: dict[str, type[Frontier]] = {"best_first": BestFirst, "depth_first": DepthFirst}
