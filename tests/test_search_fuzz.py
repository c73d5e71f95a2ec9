"""Proof search fuzzed over random toy proof graphs (hypothesis): every proof returned is a path of
the graph to 'done' within the depth limit; a proof is found exactly when breadth-first search
finds one within the limit; a search that ran out of open states is 'failed', never 'budget';
and no proof state is left unreleased (nor released twice), whatever the outcome, also when the
server refuses a request or its process dies."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import deque
from dataclasses import dataclass

from hypothesis import given, note, settings
from hypothesis import strategies as st

from leanloop.data.records import AttemptStatus
from leanloop.lean.errors import LeanRequestError, ServerCrashed
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import search
from leanloop.prover.target import Target
from tests.test_search import Scripted, Toy

FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None)


@dataclass
class Graph:
    """A toy proof graph: ``edges[(state, tactic)]`` is the next state ('done' finishes),
    ``table`` the generator's proposals (every edge of a state, with its score, and tactics
    that fail), ``chain`` the states of its spine from 'root'."""

    chain: list[str]
    edges: dict[tuple[str, str], str]
    table: dict[str, list[tuple[str, float]]]

    def shortest_proof(self, max_depth: int | None) -> int | None:
        """The length of the shortest proof from 'root' (breadth-first), if any within
        ``max_depth``."""
        distance = {"root": 0}
        queue = deque(["root"])
        while queue:
            state = queue.popleft()
            if max_depth is not None and distance[state] >= max_depth:
                continue
            for (source, _), target in self.edges.items():
                if source != state:
                    continue
                if target == "done":
                    return distance[state] + 1  # breadth-first: the first found is the shortest
                if target not in distance:
                    distance[target] = distance[state] + 1
                    queue.append(target)
        return None

    def is_proof(self, tactics: tuple[str, ...]) -> bool:
        """Whether ``tactics`` lead from 'root' to 'done', only the last one finishing."""
        state = "root"
        for index, tactic in enumerate(tactics, 1):
            state = self.edges.get((state, tactic))
            if state is None or (state == "done") != (index == len(tactics)):
                return False
        return state == "done"


def random_graph(rng: random.Random) -> Graph:
    """A chain of well-scored tactics from the root; detours through states of their own,
    worse-scored and mostly shorter than the stretch of chain they bypass (so a state is often
    reached first by the longer path); random extra edges (back edges, cycles, more paths);
    'done' at the chain's end or, now and then, anywhere; tactics that fail."""
    edges: dict[tuple[str, str], str] = {}
    table: dict[str, list[tuple[str, float]]] = {}

    def edge(source: str, target: str, worst: int = -40) -> None:
        tactic = f"t{len(table.setdefault(source, []))}"
        edges[(source, tactic)] = target
        table[source].append((tactic, rng.randint(worst, 5) / 10))  # ties and positive too

    chain = ["root"] + [f"c{i}" for i in range(1, rng.randint(4, 9))]
    for source, target in itertools.pairwise(chain):
        edge(source, target, worst=-5)
    names = list(chain)
    last = len(chain) - 1
    for detour in range(rng.randint(1, 3)):
        if rng.random() < 0.7:  # a shortcut
            start = rng.randint(0, last - 3)
            end = rng.randint(start + 3, last)
            arm = [f"d{detour}.{i}" for i in range(rng.randint(1, end - start - 2))]
        else:
            start, end = sorted(rng.sample(range(len(chain)), 2))
            arm = [f"d{detour}.{i}" for i in range(rng.randint(0, 3))]
        names += arm
        for source, target in itertools.pairwise([chain[start], *arm, chain[end]]):
            edge(source, target)
    for _ in range(rng.randint(0, 3)):
        edge(rng.choice(names), rng.choice(names))
    if rng.random() < 0.7:
        edge(chain[-1], "done")
    for name in names:
        if rng.random() < 0.03:
            edge(name, "done")
        if rng.random() < 0.1:
            table.setdefault(name, []).append(("nope", rng.randint(-40, 5) / 10))  # fails
    for proposed in table.values():
        rng.shuffle(proposed)
    return Graph(chain, edges, table)


def random_config(rng: random.Random, graph: Graph) -> ProverConfig:
    """Either strategy, batches of 1 to 3 (best-first), a depth limit that is none, any, one
    that cuts the chain (only a detour may lead to a proof), or the length of the shortest
    proof (only the shortest proofs count), and an expansion budget or none."""
    strategy = rng.choice(["best_first", "depth_first"])
    length = len(graph.chain)
    limits = [None, rng.randint(1, 8), rng.randint(max(1, length - 3), length)]
    shortest = graph.shortest_proof(None)
    if shortest is not None:
        limits += [shortest, shortest, shortest + 1]
    return ProverConfig(
        strategy=strategy,
        batch_size=1 if strategy == "depth_first" else rng.randint(1, 3),
        max_depth=rng.choice(limits),
        max_expansions=rng.choice([None, None, rng.randint(1, 12), 500]),
        debug=True,  # the tree's invariants are checked after every batch
    )


@st.composite
def cases(draw) -> tuple[Graph, ProverConfig]:
    # drawn from a seeded generator: hypothesis's own draws cluster around few shapes here,
    # and the shapes that matter (a long well-scored path and a later shorter one) need many
    rng = draw(st.randoms(use_true_random=True))
    graph = random_graph(rng)
    config = random_config(rng, graph)
    note(f"{graph}\n{config}")
    return graph, config


@FUZZ
@given(cases())
def test_search_finds_a_proof_exactly_when_there_is_one(case):
    graph, config = case
    result = run(graph, config)
    shortest = graph.shortest_proof(config.max_depth)
    if result.found_proof:
        assert result.status is AttemptStatus.REPLAYED and graph.is_proof(result.proof)
        assert config.max_depth is None or len(result.proof) <= config.max_depth
        assert shortest is not None and len(result.proof) >= shortest
    # the same search without an expansion budget: it finds a proof if there is one
    unlimited = result
    if config.max_expansions is not None:
        unlimited = run(graph, dataclasses.replace(config, max_expansions=None))
    assert unlimited.found_proof == (shortest is not None), unlimited
    if result.status is AttemptStatus.BUDGET:  # it stopped a search that had open states
        assert result.expansions == config.max_expansions < unlimited.expansions, unlimited
    elif not result.found_proof:  # every open state was expanded
        assert result.status is AttemptStatus.FAILED, result
        assert result.error == "the search space is exhausted" and shortest is None
        assert unlimited.expansions == result.expansions


def run(graph: Graph, config: ProverConfig):
    """Search the graph from its root; every proof state was released at the end."""
    server = Toy(graph.edges)
    result = search(server, Target.of(goal="root"), Scripted(graph.table), config)
    assert not server.live, result
    return result


class Faulty(Toy):
    """A toy whose ``fault``-th request (start or tactic) fails: refused, or its process dies
    (after which any request, a release too, is a mistake)."""

    def __init__(self, edges, fault: int, dies: bool) -> None:
        super().__init__(edges)
        self.fault, self.dies = fault, dies
        self.requests = 0
        self.dead = False

    def _request(self) -> None:
        assert not self.dead, "a request to a server whose process is gone"
        self.requests += 1
        if self.requests == self.fault:
            if self.dies:
                self.dead = True
                raise ServerCrashed("the Lean REPL exited with status 137")
            raise LeanRequestError("unknown proof state")

    def start_proof(self, goal):
        self._request()
        return super().start_proof(goal)

    def run_tactic(self, state, tactic, *, goal=None):
        self._request()
        return super().run_tactic(state, tactic, goal=goal)

    def release(self, *states):
        assert not self.dead, "a release sent to a server whose process is gone"
        super().release(*states)


@FUZZ
@given(cases(), st.integers(1, 25), st.booleans())
def test_every_proof_state_is_released_when_the_server_fails(case, fault, dies):
    graph, config = case
    server = Faulty(graph.edges, fault, dies)
    result = search(server, Target.of(goal="root"), Scripted(graph.table), config)
    if server.requests >= fault:  # the fault came before the search ended
        assert result.status is AttemptStatus.ERROR and result.proof is None, result
    if not server.dead:
        assert not server.live, result
