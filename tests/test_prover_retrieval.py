"""RetrievalProver: the premises a retriever ranks best among those accessible from the theorem go
before each state the generator reads (the best one last, nearest the state); the corpus is
embedded once, on first use, and not shipped with the prover; searches run end to end on the
replay of real theorems."""

from __future__ import annotations

import pickle

import pytest

from leanloop.data.prompt import PREMISES_HEADING, STATE_HEADING, state_with_premises
from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from leanloop.prover.recorded import RecordedGenerator
from leanloop.prover.replay import ReplayServer
from leanloop.prover.retrieval import RetrievalProver
from leanloop.retrieval.corpus import premise_text
from tests.helpers import sample_theorems, write_dataset
from tests.tiny_causal import shared_tiny_model


class Reading:
    """Records what the generator is given; answers with the recorded tactics of the state."""

    def __init__(self, recorded: RecordedGenerator) -> None:
        self.recorded = recorded
        self.inputs: list[str] = []

    def generate_batch(self, states, k, **options):
        self.inputs.extend(states)
        return self.recorded.generate_batch(
            [s.split(f"{STATE_HEADING}\n", 1)[-1] for s in states], k
        )


@pytest.fixture(scope="module")
def traced(sample_dir):
    return [t for t in sample_theorems(sample_dir) if t.traced_tactics]


@pytest.fixture(scope="module")
def retrieval(tiny_encoder, sample_dir, traced):
    prover = RetrievalProver(
        tiny_encoder,
        shared_tiny_model(sample_dir),
        sample_dir,
        num_retrieved=3,
        config={"num_sampled_tactics": 8},
    )
    prover._generator = Reading(RecordedGenerator(traced))  # stands in for the tiny model
    return prover


def premises_given(text: str) -> list[str]:
    assert text.startswith(PREMISES_HEADING + "\n")
    listed = text[len(PREMISES_HEADING) + 1 :].split(f"\n\n{STATE_HEADING}\n")[0]
    return listed.split("\n\n")


def given_state(text: str) -> str:
    return text.split(f"\n\n{STATE_HEADING}\n", 1)[1]


def test_accessible_premises_go_before_each_state(retrieval, traced):
    server = ReplayServer(traced)
    theorem = next(t for t in traced if t.full_name == "FractionalIdeal.count_mul")
    result = retrieval.search(server, theorem=theorem)
    assert result.status is AttemptStatus.REPLAYED
    index = retrieval.index
    corpus = index.corpus
    assert len(corpus) > 100  # the premises the sample's tactics use
    reading = retrieval._generator
    assert len(reading.inputs) == result.expansions
    for text in reading.inputs:
        names = premises_given(text)
        assert len(names) == 3
        for name in names:
            position = corpus.index_of(name)
            assert corpus.is_accessible(position, theorem.file_path, theorem.start)
    # the best premise is last, nearest the state
    state = theorem.traced_tactics[0].state_before
    best = index.retrieve(state, theorem.file_path, theorem.start, k=3)
    assert premises_given(reading.inputs[0]) == [p.full_name for p, _ in reversed(best)]
    assert reading.inputs[0].endswith(f"{STATE_HEADING}\n{state}")


def test_the_index_decides_what_the_generator_reads(tiny_encoder, sample_dir, traced, tmp_path):
    """The same theorem searched with two indexes: each index's best premises go before the
    state, so another corpus gives the generator another input."""
    theorem = next(t for t in traced if t.full_name == "FractionalIdeal.count_mul")
    state = theorem.traced_tactics[0].state_before

    def first_input(corpus_path) -> tuple[str, list[str]]:
        prover = RetrievalProver(
            tiny_encoder, shared_tiny_model(sample_dir), corpus_path, num_retrieved=3
        )
        prover._generator = Reading(RecordedGenerator(traced))
        result = prover.search(ReplayServer(traced), theorem=theorem)
        assert result.status is AttemptStatus.REPLAYED
        best = prover.index.retrieve(state, theorem.file_path, theorem.start, k=3)
        given = prover._generator.inputs[0]
        assert given == state_with_premises(state, [premise_text(p) for p, _ in best])
        return given, [p.full_name for p, _ in best]

    whole, best_of_whole = first_input(sample_dir)
    assert given_state(whole) == state and len(premises_given(whole)) == 3
    # a corpus made of the premises of the theorems that use none of those three
    others = [
        t
        for t in traced
        if not any(p.full_name in best_of_whole for s in t.traced_tactics for p in s.premises)
    ]
    other_corpus = write_dataset(tmp_path / "other", {"random/test": others})
    other, best_of_other = first_input(other_corpus)
    assert given_state(other) == state and len(premises_given(other)) == 3
    assert not set(best_of_other) & set(best_of_whole)
    assert other != whole


def test_every_recorded_proof_of_a_sample_part_is_found(retrieval, traced):
    server = ReplayServer(traced)
    results = [retrieval.search(server, theorem=t) for t in traced[:12]]
    assert [r.status for r in results].count(AttemptStatus.REPLAYED) == 12


def test_a_goal_search_reads_premises_from_anywhere(retrieval, traced):
    server = ReplayServer(traced)
    state = traced[0].traced_tactics[0].state_before
    result = retrieval.search(server, goal=state)
    assert result.status is AttemptStatus.REPLAYED
    assert len(premises_given(retrieval._generator.inputs[-1])) == 3


def test_the_index_is_not_shipped_and_bad_paths_are_refused(retrieval, tiny_encoder, sample_dir):
    copy = pickle.loads(pickle.dumps(retrieval))
    assert copy._index is None and copy._generator is None
    assert len(pickle.dumps(retrieval)) < 5000
    tiny = shared_tiny_model(sample_dir)
    with pytest.raises(LeanloopError, match="retriever checkpoint"):
        RetrievalProver(sample_dir / "nothing", tiny, sample_dir)
    with pytest.raises(LeanloopError, match="indexed corpus"):
        RetrievalProver(tiny_encoder, tiny, sample_dir / "nothing")
    with pytest.raises(LeanloopError, match="num_retrieved"):
        RetrievalProver(tiny_encoder, tiny, sample_dir, num_retrieved=0)


def test_state_with_premises():
    assert state_with_premises("⊢ p", []) == "⊢ p"
    text = state_with_premises("⊢ p", ["best", "second"])
    assert text == f"{PREMISES_HEADING}\nsecond\n\nbest\n\n{STATE_HEADING}\n⊢ p"


class Prompts:
    """Stands for a ``TacticGenerator`` in a ``PremiseAugmented``: it has the generator's
    tokenizer, prompt format and prompt budget, and records the states it is given."""

    def __init__(self, generator) -> None:
        self.tokenizer = generator.tokenizer
        self.prompt_format = generator.prompt_format
        self.options = generator.options
        self.states: list[str] = []

    def generate_batch(self, states, k, **options):
        self.states.extend(states)
        return [[] for _ in states]


def test_the_prover_prompts_as_the_trainer_teaches(tiny_encoder, sample_dir, tmp_path):
    """The generator of a ``RetrievalProver`` reads, for a training state, exactly the prompt an
    ``SFTTrainer`` given the same retriever trained on: the same premises in the same format;
    with the same budget, a prompt too long for it is cut the same way."""
    from leanloop.data import open_dataset
    from leanloop.ml.generation import TacticGenerator
    from leanloop.prover.retrieval import PremiseAugmented
    from leanloop.trainer.grpo import GRPOTrainer
    from leanloop.trainer.sft import SFTTrainer

    model = shared_tiny_model(sample_dir)
    train_file = sample_dir / "random" / "test.json"  # the sample's one split
    theorem = next(t for t in open_dataset(train_file).iter_theorems() if t.traced_tactics)
    state = theorem.traced_tactics[0].state_before
    prover = RetrievalProver(tiny_encoder, model, sample_dir, num_retrieved=3)
    trainer = SFTTrainer(
        model, output_dir=tmp_path / "sft", retriever=str(tiny_encoder), num_retrieved=3
    )
    source = trainer.premise_source(sample_dir)
    rows = trainer.read_examples(train_file, required=True, premises=source)
    trained = next(r for r in rows if r["prompt"][1]["content"].endswith(state.strip()))
    assert trained["prompt"][1]["content"].startswith(PREMISES_HEADING)

    generator = TacticGenerator(model, device="cpu")
    prompts = Prompts(generator)
    PremiseAugmented(prompts, prover.index, theorem.file_path, theorem.start, 3).generate_batch(
        [state], k=1
    )
    (given,) = prompts.states
    prompt = generator.prompt_text(given)
    assert prompt == generator.tokenizer.apply_chat_template(
        trained["prompt"], tokenize=False, add_generation_prompt=True
    )

    # a budget that cuts: the prover and GRPO (whose prompts are fitted alone) cut alike
    budget = len(generator.tokenizer(prompt, add_special_tokens=False)["input_ids"]) - 20
    short = TacticGenerator.from_model(
        generator.model, generator.tokenizer, max_prompt_tokens=budget
    )
    prompts = Prompts(short)
    PremiseAugmented(prompts, prover.index, theorem.file_path, theorem.start, 3).generate_batch(
        [state], k=1
    )
    grpo = GRPOTrainer(
        model,
        reward_func=lambda completions, **kwargs: [0.0] * len(completions),
        output_dir=tmp_path / "grpo",
        retriever=str(tiny_encoder),
        num_retrieved=3,
        max_prompt_length=budget,
    )
    grpo_rows = grpo.read_examples(train_file, required=True, premises=source)
    fitted = next(r for r in grpo_rows if r["state"] == theorem.traced_tactics[0].state_before)
    assert fitted["prompt"][1]["content"] == prompts.states[0]
    assert short.prompt_text(prompts.states[0]).startswith("<|im_start|>system\n")
    assert len(short.tokenizer(short.prompt_text(prompts.states[0]))["input_ids"]) <= budget
