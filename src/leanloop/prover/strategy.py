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
    """A proof state in the search tree, reached from ``parent`` by ``tactic``.

    A state is in the tree once. Reached again by a strictly shorter path, its node takes that
    path (``parent``, ``tactic``, ``score``, ``depth``, ``logprob``; ``priority`` moves by as
    much as ``logprob``) and is open again: expanded again at the smaller depth if it had been
    expanded already. Its descendants are not updated then, only when they are reached again
    through it; so ``depth`` is an upper bound of the length of ``path()`` (always at least the
    parent's depth + 1), and ``logprob`` is the sum of the scores on the path where ``depth`` is
    exactly the parent's + 1.
    """

    state: ProofState
    key: str  # the state's goals as text: two nodes never share it
    parent: Node | None
    tactic: str | None
    score: float  # the generator's score of ``tactic``
    depth: int  # the length of the path it was last reached by (see above)
    logprob: float  # the sum of the scores on that path
    priority: float
    # made when the node is expanded (most nodes never are: fewer objects to track), and made
    # anew when it is reached by a shorter path
    tried: set[str] | None = None  # tactics run on it, whitespace collapsed
    failures: list[Failure] | None = None
    expansions: int = 0  # since it was last reached by a shorter path

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

    def update(self, node: Node) -> None:  # noqa: B027 - keeping the node's place is valid
        """Take the new priority of a node waiting in the frontier into account (it was reached
        by a shorter path); by default the node keeps its place."""

    def pop_many(self, count: int) -> list[Node]:
        """Up to ``count`` nodes to expand together."""
        nodes: list[Node] = []
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
        self._entry: dict[Node, int] = {}  # each open node's current entry in the heap

    def push(self, node: Node) -> None:
        order = next(self._order)
        self._entry[node] = order  # an older entry of the node, if any, no longer counts
        heapq.heappush(self._heap, (-node.priority, order, node))

    def push_children(self, children: Sequence[Node]) -> None:
        for child in children:
            self.push(child)

    def update(self, node: Node) -> None:
        if node in self._entry:  # pushed again: for ties, it is now the newer node
            self.push(node)

    def pop(self) -> Node | None:
        while self._heap:
            _, order, node = heapq.heappop(self._heap)
            if self._entry.get(node) == order:
                del self._entry[node]
                return node
        return None

    def __len__(self) -> int:
        return len(self._entry)


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
