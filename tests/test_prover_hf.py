"""HFProver on checkpoints as the SFT trainer writes them (a full model and a LoRA adapter, by
their output_dir), against the replay environment on real theorems: a model trained on their
steps finds their recorded proofs; the model loads on first use and is not shipped when the
prover is pickled; whole-proof mode reports only checked proofs."""

from __future__ import annotations

import os
import pickle

import pytest

from leanloop.data.records import AttemptStatus, Repository
from leanloop.database import DynamicDatabase, SplitConfig
from leanloop.errors import LeanloopError
from leanloop.prover.hf import HFProver
from leanloop.prover.replay import ReplayServer
from tests.helpers import sample_theorems
from tests.tiny_causal import shared_tiny_model

# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


@pytest.fixture(scope="module")
def few(sample_dir):
    """Three real theorems with one- and two-step proofs."""
    return [t for t in sample_theorems(sample_dir) if 1 <= len(t.traced_tactics) <= 2][:3]


def train(root, tiny, few, **options):
    from leanloop.trainer.sft import SFTTrainer

    repo = Repository(url=few[0].url, commit=few[0].commit)
    database = DynamicDatabase(root / "lean.db")
    database.add_repository(repo, few)
    database.export_merged_data([repo], root / "pre", split_config=SplitConfig(val=0, test=0))
    trainer = SFTTrainer(
        str(tiny),
        output_dir=root / "out",
        batch_size=4,
        lr_scheduler_type="constant",
        logging_steps=20,
        progress_bars=False,
        plot_curves=False,
        **options,
    )
    trainer.train([repo], database, root / "data")
    return root / "out"


@pytest.fixture(scope="module")
def trained(sample_dir, few, tmp_path_factory):
    """A trainer's output_dir: the tiny model fine-tuned until it knows the theorems' steps."""
    tiny = shared_tiny_model(sample_dir)
    return train(tmp_path_factory.mktemp("full"), tiny, few, lr=3e-3, max_steps=80)


@pytest.fixture(scope="module")
def adapter(sample_dir, few, tmp_path_factory):
    """A trainer's output_dir holding a LoRA adapter (two steps: only its loading matters)."""
    from peft import LoraConfig

    tiny = shared_tiny_model(sample_dir)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    return train(tmp_path_factory.mktemp("lora"), tiny, few, lr=1e-3, max_steps=2, lora_config=lora)


def prover(path, **kwargs) -> HFProver:
    return HFProver(
        path,
        config={"num_sampled_tactics": 4, **kwargs.pop("config", {})},
        decoding={"max_new_tokens": 48, **kwargs.pop("decoding", {})},
        **kwargs,
    )


def test_a_trained_checkpoint_finds_the_recorded_proofs(trained, few):
    hf = prover(trained)
    assert hf._generator is None  # nothing loaded yet
    server = ReplayServer(few)
    for theorem in few:
        result = hf.search(server, theorem=theorem)
        assert result.status is AttemptStatus.REPLAYED, result
        assert len(result.proof) == len(theorem.traced_tactics)
        assert result.model_seconds > 0 and result.expansions >= len(result.proof)
    first = few[0].traced_tactics[0]
    assert hf.next_tactic(first.state_before) == first.tactic
    by_goal = hf.search(server, goal=first.state_before)
    assert by_goal.status is AttemptStatus.REPLAYED
    assert hf.name == f"hf:{trained}"


def test_a_checkpoint_written_again_gives_the_prover_a_new_identity(tmp_path):
    output = tmp_path / "outputs"
    first = output / "0-repo"
    first.mkdir(parents=True)
    (first / "model.safetensors").write_bytes(b"weights")
    (output / "LATEST").write_text("0-repo\n")
    hf = HFProver(output)
    before = hf.identity
    assert before.startswith(f"hf:{output}@0-repo@") and hf.identity == before
    os.utime(first / "model.safetensors", ns=(1, 10**18))  # trained again: written anew
    assert hf.identity != before
    second = output / "1-other"
    second.mkdir()
    (second / "model.safetensors").write_bytes(b"more")
    (output / "LATEST").write_text("1-other\n")
    assert hf.identity.startswith(f"hf:{output}@1-other@")


class Proposals:
    """Wraps a generator and keeps, for each call, the options it was given and the tactics it
    proposed for each state."""

    def __init__(self, generator) -> None:
        self.generator = generator
        self.calls: list[tuple[dict, list[list[str]]]] = []

    def generate_batch(self, states, k, **options):
        found = self.generator.generate_batch(states, k, **options)
        self.calls.append((dict(options), [[g.tactic for g in ranked] for ranked in found]))
        return found


def test_sampling_is_seeded_by_attempt(trained, few, sample_dir):
    hf = prover(trained, decoding={"method": "sample", "num_samples": 6, "temperature": 1.5})
    assert hf.generator_options(2) == {"seed": 2}
    server = ReplayServer(few)
    runs = [hf.search(server, theorem=few[1], attempt=a) for a in (0, 0, 1)]
    assert runs[0].proof == runs[1].proof and runs[0].expansions == runs[1].expansions
    assert all(r.status in (AttemptStatus.REPLAYED, AttemptStatus.FAILED) for r in runs)
    # the untrained tiny model samples widely: the same attempt proposes the same tactics for
    # the theorem's first state, another attempt proposes others
    untrained = prover(
        shared_tiny_model(sample_dir),
        decoding={"method": "sample", "num_samples": 6, "temperature": 1.5},
    )
    spy = Proposals(untrained.generator)
    untrained._generator = spy
    first = []
    for attempt in (0, 0, 1):
        spy.calls.clear()
        untrained.search(server, theorem=few[1], attempt=attempt)
        options, proposed = spy.calls[0]
        assert options == {"seed": untrained.config.seed + attempt}
        first.append(proposed[0])
    assert first[0] and first[0] == first[1]
    assert first[2] and first[2] != first[0]


def test_the_prover_ships_without_its_model(trained, few):
    hf = prover(trained)
    before = pickle.dumps(hf)
    hf.search(ReplayServer(few), theorem=few[0])
    assert hf._generator is not None
    shipped = pickle.dumps(hf)
    assert shipped == before  # no weights inside
    copy = pickle.loads(shipped)
    assert copy._generator is None
    assert copy.search(ReplayServer(few), theorem=few[0]).status is AttemptStatus.REPLAYED


def test_a_lora_adapter_checkpoint(adapter, trained, few):
    hf = prover(adapter, use_lora=True)
    result = hf.search(ReplayServer(few), theorem=few[0])
    # the adapter was loaded on its base model and merged into it: the prover only generates
    assert hf.generator.adapter and not hasattr(hf.generator.model, "peft_config")
    assert result.status in (AttemptStatus.REPLAYED, AttemptStatus.FAILED)
    assert result.expansions >= 1 and result.model_seconds > 0
    with pytest.raises(LeanloopError, match="holds no LoRA adapter"):
        HFProver(trained, use_lora=True)
    with pytest.raises(
        LeanloopError, match="HFProver, field 'ckpt_path': '/no/such/checkpoint' does"
    ):
        HFProver("/no/such/checkpoint")


def test_whole_proof_mode_reports_only_checked_proofs(trained, few):
    hf = prover(trained, config={"num_whole_proofs": 4})
    candidates = hf.generate_whole_proofs(few[0], 4)
    assert 1 <= len(candidates) <= 4 and all(isinstance(c, str) and c for c in candidates)
    server = ReplayServer(few)
    outcomes = []
    for theorem in few:
        result = hf.prove_whole(server, theorem=theorem)
        outcomes.append(result.status)
        assert result.status in (AttemptStatus.REPLAYED, AttemptStatus.FAILED)
        if result.status is AttemptStatus.REPLAYED:
            # replayed tactic by tactic to no goals on the replay server
            assert [s.tactic for s in theorem.traced_tactics][: len(result.proof)] == list(
                result.proof
            )
        else:
            assert result.proof is None and "candidate proofs was accepted" in result.error
        assert result.model_seconds > 0
    assert AttemptStatus.REPLAYED in outcomes  # the one-step proof is among the candidates


def test_several_attempts_need_sampling(trained):
    """Beam search draws nothing at random: a second attempt would repeat the first search."""
    with pytest.raises(LeanloopError, match="num_attempts=3 with decoding method 'beam'"):
        prover(trained, config={"num_attempts": 3})
    with pytest.raises(LeanloopError, match="'greedy' repeats one identical search"):
        prover(trained, config={"num_attempts": 2}, decoding={"method": "greedy"})
    sampled = prover(trained, config={"num_attempts": 3}, decoding={"method": "sample"})
    assert [sampled.generator_options(a) for a in range(3)] == [{"seed": s} for s in range(3)]
