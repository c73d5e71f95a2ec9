"""TacticGenerator and the top-k evaluation: a model trained on a few real steps reproduces their
tactics, scores are the model's log-probabilities, batching changes nothing, and errors."""

from __future__ import annotations

import pytest

from leanloop.data.prompt import PromptFormat
from leanloop.data.records import Repository
from leanloop.database import DynamicDatabase, SplitConfig
from leanloop.errors import LeanloopError
from leanloop.ml.generation import TacticGenerator, rank_tactics
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.trainer.evaluation import (
    TacticAccuracy,
    evaluate_tactics,
    load_examples,
    load_steps,
    same_first_line,
    tactic_accuracy,
)
from leanloop.trainer.rewards import is_recorded_tactic
from tests.helpers import sample_theorems, with_sorry, write_dataset
from tests.tiny_causal import shared_tiny_model

# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


@pytest.fixture(scope="module")
def few_theorems(sample_dir):
    """Three real theorems with short proofs."""
    with_steps = [t for t in sample_theorems(sample_dir) if 1 <= len(t.traced_tactics) <= 3]
    return with_steps[:3]


@pytest.fixture(scope="module")
def trained(tiny_dir, few_theorems, tmp_path_factory):
    """The tiny model fine-tuned until it has learned the few theorems' steps."""
    from leanloop.trainer.sft import SFTTrainer

    root = tmp_path_factory.mktemp("overfit")
    repo = Repository(url=few_theorems[0].url, commit=few_theorems[0].commit)
    database = DynamicDatabase(root / "lean.db")
    database.add_repository(repo, few_theorems)
    # every theorem in train: assign the splits before the trainer's own export
    database.export_merged_data([repo], root / "pre", split_config=SplitConfig(val=0, test=0))
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=root / "out",
        batch_size=4,
        lr=3e-3,
        max_steps=80,
        lr_scheduler_type="constant",
        logging_steps=20,
        progress_bars=False,
    )
    (checkpoint,) = trainer.train([repo], database, root / "data")
    return checkpoint


def test_trained_model_reproduces_the_tactics(trained, tiny_dir, few_theorems):
    steps = load_steps(few_theorems)
    assert len(steps) == sum(len(t.traced_tactics) for t in few_theorems) >= 4
    generator = TacticGenerator(trained, max_new_tokens=48)
    assert isinstance(generator, Generator)
    accuracy = evaluate_tactics(generator, few_theorems, k=4)
    assert accuracy.steps == len(steps) and accuracy.k == 4
    assert accuracy.top1 >= 0.5 and accuracy.topk >= max(accuracy.top1, 0.6)
    untrained = evaluate_tactics(TacticGenerator(tiny_dir, max_new_tokens=32), few_theorems, k=4)
    assert untrained.top1 == untrained.topk == 0.0
    greedy = evaluate_tactics(generator, few_theorems, k=1, method="greedy")
    assert greedy.top1 == greedy.topk >= 0.5


def test_greedy_score_is_the_reply_log_probability(trained, few_theorems):
    import torch

    generator = TacticGenerator(trained, method="greedy", max_new_tokens=32)
    tok = generator.tokenizer
    checked = 0
    for state, tactic in load_steps(few_theorems):
        (best,) = generator.generate(state, k=1)
        if best.tactic != tactic:
            continue
        prompt = tok(generator.prompt_text(state), add_special_tokens=False)["input_ids"]
        reply = tok(tactic + "<|im_end|>", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt + reply])
        with torch.no_grad():
            logprobs = torch.log_softmax(generator.model(ids).logits[0].float(), dim=-1)
        expected = sum(logprobs[len(prompt) + i - 1, token].item() for i, token in enumerate(reply))
        assert best.score == pytest.approx(expected, abs=1e-3)
        assert best.score < 0
        checked += 1
    assert checked >= 2


def test_batches_give_the_same_answers(trained, few_theorems):
    states = [state for state, _ in load_steps(few_theorems)]
    generator = TacticGenerator(trained, method="greedy", max_new_tokens=24, batch_size=3)
    batched = generator.generate_batch(states, k=1)
    assert len(batched) == len(states)
    for state, got in zip(states, batched, strict=True):
        (alone,) = generator.generate(state, k=1)
        assert got[0].tactic == alone.tactic
        assert got[0].score == pytest.approx(alone.score, abs=1e-3)


def test_beam_and_sampling_return_distinct_ranked_tactics(trained, few_theorems):
    state, _ = load_steps(few_theorems)[0]
    generator = TacticGenerator(trained, max_new_tokens=24)
    for options in ({"method": "beam"}, {"method": "sample", "num_samples": 12, "seed": 1}):
        tactics = generator.generate(state, k=5, **options)
        assert 1 <= len(tactics) <= 5
        assert all(isinstance(t, GeneratedTactic) and t.tactic for t in tactics)
        scores = [t.score for t in tactics]
        assert scores == sorted(scores, reverse=True)
        keys = [" ".join(t.tactic.split()) for t in tactics]
        assert len(set(keys)) == len(keys)
        # copying the prompt's cache to every beam/sample changes nothing
        plain = generator.generate(state, k=5, share_prompt_cache=False, **options)
        assert [t.tactic for t in plain] == [t.tactic for t in tactics]
        assert [t.score for t in plain] == pytest.approx(scores, abs=1e-4)
    first = generator.generate(state, k=4, method="sample", seed=7)
    again = generator.generate(state, k=4, method="sample", seed=7)
    assert first == again
    with pytest.raises(LeanloopError, match="unknown decoding option"):
        generator.generate(state, k=2, beams=3)
    with pytest.raises(LeanloopError, match="decoding option 'top_p'"):
        generator.generate(state, k=2, top_p=2.0)
    with pytest.raises(LeanloopError, match="k=0"):
        generator.generate(state, k=0)


def test_rank_tactics_parses_deduplicates_and_orders():
    candidates = [
        ("simp  [h]<|im_end|>\ngarbage", -2.0),
        ("```lean\nsimp [h]\n```", -1.0),  # same tactic, better score
        ("sorry", -0.1),  # never proposed
        ("", -0.2),
        ("exact h", -3.0),
        ("rfl", -0.5),
    ]
    ranked = rank_tactics(candidates, PromptFormat(), k=3)
    assert ranked == [
        GeneratedTactic("rfl", -0.5),
        GeneratedTactic("simp [h]", -1.0),
        GeneratedTactic("exact h", -3.0),
    ]
    assert rank_tactics(candidates, PromptFormat(), k=1) == [GeneratedTactic("rfl", -0.5)]


class _Oracle:
    """Proposes the recorded tactic (with its whitespace changed) at a given rank."""

    def __init__(self, answers: dict[str, str], rank: int) -> None:
        self.answers = answers
        self.rank = rank

    def generate_batch(self, states, k=8, **kwargs):
        out = []
        for state in states:
            tactic = self.answers[state].replace(" ", "  ") + " "
            others = [GeneratedTactic(f"other_{i}", -float(i)) for i in range(k)]
            others.insert(self.rank, GeneratedTactic(tactic, 0.0))
            out.append(others[:k])
        return out


def test_evaluation_counts_exact_matches(few_theorems, sample_dir, tmp_path):
    steps = load_steps(few_theorems)
    answers = dict(steps)
    n = len(steps)
    assert isinstance(_Oracle(answers, 0), Generator)
    assert evaluate_tactics(_Oracle(answers, 0), few_theorems, k=3) == TacticAccuracy(
        steps=n, k=3, top1_hits=n, topk_hits=n, per_step=[(True, True)] * n
    )
    second = evaluate_tactics(_Oracle(answers, 1), few_theorems, k=3)
    assert (second.top1, second.topk) == (0.0, 1.0)
    assert evaluate_tactics(_Oracle(answers, 3), few_theorems, k=3).topk == 0.0
    # only the whole of a multi-line tactic is a hit, written on one line or several
    examples = load_examples(sample_theorems(sample_dir))
    multi_line = [e for e in examples if "\n" in e.tactic]
    assert len(multi_line) == 43
    # (a state recorded twice with different tactics can match only one of them)
    recorded = [e.state for e in multi_line]
    multi_line = [e for e in multi_line if recorded.count(e.state) == 1]
    assert len(multi_line) == 39
    states = [e.state for e in multi_line]

    def accuracy(answers: dict[str, str], **options) -> TacticAccuracy:
        candidates = _Oracle(answers, 0).generate_batch(states, 1)
        return tactic_accuracy(multi_line, candidates, 1, **options)

    whole = {e.state: e.tactic for e in multi_line}
    assert accuracy(whole).top1 == 1.0
    assert accuracy({s: " ".join(t.split()) for s, t in whole.items()}).top1 == 1.0
    first_lines = {state: tactic.splitlines()[0] for state, tactic in whole.items()}
    assert accuracy(first_lines).top1_hits == 0
    # the first-line figure, when asked for explicitly with a matcher of one's own

    assert accuracy(first_lines, match=same_first_line).top1 == 1.0
    # a split file, a dataset directory and the theorems give the same steps; sorry is skipped
    sorry = with_sorry(sample_theorems(sample_dir)[0])
    root = write_dataset(tmp_path / "ds", {"random/test": [*few_theorems, sorry]})
    assert load_steps(root / "random" / "test.json") == steps
    assert load_steps(root) == steps
    assert load_steps(root, max_steps=2) == steps[:2]
    with pytest.raises(LeanloopError, match="missing data split file"):
        evaluate_tactics(_Oracle(answers, 0), root, split="random/val")
    assert is_recorded_tactic("rw  [a,\tb]", "rw [a, b]")
    assert not is_recorded_tactic("rw [a]", "rw [b]")
    result = evaluate_tactics(_Oracle(answers, 0), [], k=2)
    assert result.steps == 0 and result.top1 == 0.0


def test_a_checkpoint_brings_its_prompt_format(tiny_dir, tmp_path):
    """A format trained with is the format generated with, unless the caller gives another."""
    import json

    from leanloop.trainer.sft import SFTTrainer

    custom = PromptFormat(system="Prove the goal in Lean 4. Answer with one tactic.")
    trainer = SFTTrainer(
        str(tiny_dir), output_dir=tmp_path / "out", prompt_format=custom, plot_curves=False
    )
    checkpoint = trainer.save_checkpoint(tmp_path / "checkpoint")
    generator = TacticGenerator(checkpoint, max_new_tokens=4)
    assert generator.prompt_format == custom
    assert custom.system in generator.prompt_text("⊢ True")
    explicit = PromptFormat(system="Something else.")
    assert TacticGenerator(checkpoint, prompt_format=explicit).prompt_format == explicit
    assert TacticGenerator(tiny_dir).prompt_format == PromptFormat()  # no record: the default
    info = checkpoint / "leanloop_checkpoint.json"
    recorded = json.loads(info.read_text())
    recorded["config"]["prompt_format"] = {"system": 3}
    info.write_text(json.dumps(recorded))
    with pytest.raises(LeanloopError, match=r"leanloop_checkpoint\.json, field 'config\.prompt"):
        TacticGenerator(checkpoint)
    info.write_text("{")
    with pytest.raises(LeanloopError, match=r"leanloop_checkpoint\.json.*malformed JSON"):
        TacticGenerator(checkpoint)


def test_unknown_model(tmp_path):
    with pytest.raises(LeanloopError, match="unknown model 'nobody/nothing'") as info:
        TacticGenerator("nobody/nothing")
    assert "smollm2-135m-instruct" in str(info.value)
