from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.datamodule import NegativeSampler, TrainingCollator, TrainingExample
from leanloop.retrieval.encoder import load_encoder
from leanloop.retrieval.ewc import AlreadyConsolidated, EWCState, diagonal_fisher
from leanloop.retrieval.examples import retrieval_steps
from leanloop.retrieval.model import CHECKPOINT_FILE, PremiseRetriever
from tests.helpers import sample_theorems


@pytest.fixture(scope="module")
def theorems(sample_dir):
    return sample_theorems(sample_dir)


@pytest.fixture(scope="module")
def tiny(tiny_encoder):
    return tiny_encoder


@pytest.fixture(scope="module")
def corpus(theorems):
    return Corpus.from_theorems(theorems)


@pytest.fixture(scope="module")
def steps(theorems, corpus):
    return retrieval_steps(theorems, corpus)


@pytest.fixture
def retriever(tiny):
    torch.manual_seed(0)
    return PremiseRetriever(model_name=str(tiny), max_seq_len=64, temperature=0.1)


def test_embeddings_are_unit_length_in_order_and_ignore_padding(retriever, steps):
    texts = [steps[0].context, "mul_comm", steps[1].context]
    together = retriever.encode(texts, batch_size=3)
    assert together.shape == (3, retriever.encoder.config.hidden_size)
    assert torch.allclose(together.norm(dim=-1), torch.ones(3), atol=1e-5)
    for i, text in enumerate(texts):  # alone (no padding) == in a padded batch, same row
        assert torch.allclose(retriever.encode([text])[0], together[i], atol=1e-5)


def test_long_states_keep_their_goal(retriever):
    long_state = "x : ℕ\n" * 200 + "⊢ mul_comm a b = c"
    cut = retriever.encode_states([long_state])
    goal_only = retriever.encode_states(["x : ℕ\n" * 20 + "⊢ mul_comm a b = c"])
    start_kept = retriever.encode_premises([long_state])
    # truncated from the left, the long state ends like the short one
    assert (
        F.cosine_similarity(cut, goal_only).item()
        > F.cosine_similarity(start_kept, goal_only).item()
    )


def test_contrastive_loss_is_infonce_without_other_positives(retriever, corpus, steps):
    step = next(s for s in steps if len(s.positives) >= 2)
    other = next(s for s in steps if not set(s.positives) & set(step.positives))
    p0, p1 = (corpus.index_of(n) for n in step.positives[:2])
    q0 = corpus.index_of(other.positives[0])
    negative = next(
        i for i in range(len(corpus)) if corpus[i].full_name not in step.positives + other.positives
    )
    examples = [
        TrainingExample(step, (p0, p1), (negative,)),  # two positives of the same step
        TrainingExample(other, (q0,), (negative,)),
    ]
    batch = TrainingCollator(retriever.tokenizer, corpus, 64)(examples)
    assert batch["positive_mask"].tolist() == [  # candidates: p0, p1, negative, q0
        [True, True, False, False],
        [False, False, False, True],
    ]
    retriever.eval()
    loss = retriever.contrastive_loss(batch)
    queries = retriever.encode_states([step.context, other.context])
    docs = retriever.encode_premises(
        [corpus.texts()[i] for i in (p0, p1, negative, q0)], batch_size=4
    )
    logits = queries @ docs.T / 0.1
    # each positive of the first query against the non-positives (the other positive left out)
    first_p0 = -logits[0, 0] + torch.logsumexp(logits[0, [0, 2, 3]], dim=0)
    first_p1 = -logits[0, 1] + torch.logsumexp(logits[0, [1, 2, 3]], dim=0)
    second = -logits[1, 3] + torch.logsumexp(logits[1], dim=0)
    expected = ((first_p0 + first_p1) / 2 + second) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-4)


def test_contrastive_loss_without_negatives_is_zero_with_finite_gradients(retriever, corpus, steps):
    step = next(s for s in steps if len(s.positives) >= 2)
    positives = tuple(corpus.index_of(n) for n in step.positives)
    collate = TrainingCollator(retriever.tokenizer, corpus, 64)
    batch = collate([TrainingExample(step, positives, ())])
    loss = retriever.contrastive_loss(batch)
    loss.backward()
    assert loss.item() == pytest.approx(0.0, abs=1e-6)
    assert all(torch.isfinite(p.grad).all() for p in retriever.parameters() if p.grad is not None)


def test_negatives_are_accessible_and_never_positive(corpus, steps):
    sampler = NegativeSampler(corpus, random.Random(0))
    in_file_seen = 0
    for step in steps[:120]:
        positive = corpus.index_of(step.positives[0])
        negatives = sampler.sample(step, positive, in_file=1, others=3)
        assert len(set(negatives)) == len(negatives) == 4
        for index in negatives:
            assert corpus[index].full_name not in step.positives
            assert corpus.is_accessible(index, step.file_path, step.position)
        same_file = [
            i
            for i in corpus.in_file(corpus[positive].file_path)
            if corpus[i].full_name not in step.positives
            and corpus.is_accessible(i, step.file_path, step.position)
        ]
        if same_file:
            assert negatives[0] in same_file
            in_file_seen += 1
    assert in_file_seen > 10


def test_ewc_penalty_formula_and_consolidation():
    layer = torch.nn.Linear(3, 2)
    state = EWCState()
    assert not state.active
    zero = state.penalty(layer.named_parameters())
    assert zero.item() == 0.0
    fisher = {name: torch.ones_like(p) for name, p in layer.named_parameters()}
    state.consolidate(layer.named_parameters(), fisher, samples=4, repository="u@1")
    assert state.active and state.repositories == 1 and state.covered == ["u@1"]
    assert state.penalty(layer.named_parameters()).item() == 0.0  # at the anchor
    with torch.no_grad():
        layer.weight.add_(0.5)  # 6 weights moved by 0.5, Fisher 1 → 6 · 0.25
    assert state.penalty(layer.named_parameters()).item() == pytest.approx(1.5)
    state.consolidate(layer.named_parameters(), fisher, samples=4, repository="u@2")
    assert torch.equal(state.fisher["weight"], torch.full((2, 3), 2.0))  # Fishers add up
    assert torch.equal(state.anchor["weight"], layer.weight.detach())  # anchor moves
    with pytest.raises(AlreadyConsolidated, match="already covers u@1"):
        state.consolidate(layer.named_parameters(), fisher, samples=4, repository="u@1")
    assert state.repositories == 2  # a repository is never counted twice
    copy = EWCState()
    copy.load_state_dict(state.state_dict())
    assert copy.repositories == 2 and copy.samples == 8 and copy.covered == ["u@1", "u@2"]
    assert copy.covers("u@2") and not copy.covers("u@3")
    assert torch.equal(copy.fisher["bias"], state.fisher["bias"])


def test_each_repositorys_fisher_is_scaled_to_mean_one():
    """A raw Fisher of squared gradients is tiny: scaled to mean 1 it weighs each weight against
    the others, and every repository counts the same whatever its loss."""
    layer = torch.nn.Linear(3, 2)
    state = EWCState()
    tiny = {"weight": torch.full((2, 3), 2e-6), "bias": torch.tensor([0.0, 8e-6])}
    state.consolidate(layer.named_parameters(), tiny, samples=4, repository="u@1")
    # mean of the 8 entries: (6 · 2e-6 + 8e-6) / 8 = 2.5e-6
    assert torch.allclose(state.fisher["weight"], torch.full((2, 3), 0.8))
    assert torch.allclose(state.fisher["bias"], torch.tensor([0.0, 3.2]))
    with torch.no_grad():
        layer.bias.add_(1.0)  # only the weight that mattered counts: 3.2 · 1²
    assert state.penalty(layer.named_parameters()).item() == pytest.approx(3.2)
    big = {"weight": torch.full((2, 3), 50.0), "bias": torch.full((2,), 50.0)}
    state.consolidate(layer.named_parameters(), big, samples=4, repository="u@2")
    assert torch.allclose(state.fisher["weight"], torch.full((2, 3), 1.8))  # 0.8 + 1
    total = sum(float(f.sum()) for f in state.fisher.values())
    assert total == pytest.approx(2 * 8)  # mean 1 per repository


def test_a_saved_raw_fisher_is_read_scaled():
    """A checkpoint written before the Fisher was scaled (no version, a count of repositories)
    is read as if each repository's Fisher had been scaled: mean = the count."""
    layer = torch.nn.Linear(2, 1)
    raw = {"weight": torch.tensor([[1e-6, 3e-6]]), "bias": torch.tensor([2e-6])}
    state = EWCState()
    state.load_state_dict(
        {
            "fisher": raw,
            "anchor": {n: p.detach().clone() for n, p in layer.named_parameters()},
            "repositories": 2,
            "samples": 10,
        }
    )
    assert state.repositories == 2 and state.covered == [] and state.samples == 10
    assert torch.allclose(state.fisher["weight"], torch.tensor([[1.0, 3.0]]))
    assert torch.allclose(state.fisher["bias"], torch.tensor([2.0]))
    state.consolidate(layer.named_parameters(), raw, samples=5, repository="u@3")
    assert state.repositories == 3 and state.state_dict()["unnamed"] == 2


def test_diagonal_fisher_is_the_mean_squared_gradient():
    layer = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, -1.0]]))
    inputs = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 0.0])]

    def loss_of(x):  # d/dw (w·x)^2 / 2 = (w·x) x
        return layer(x).pow(2).sum() / 2

    fisher, count = diagonal_fisher(loss_of, inputs, layer.named_parameters(), max_samples=10)
    # gradients: (-1)·[1, 2] = [-1, -2] and 3·[3, 0] = [9, 0]
    assert count == 2
    assert torch.allclose(fisher["weight"], torch.tensor([[(1 + 81) / 2, (4 + 0) / 2]]))
    _, capped = diagonal_fisher(loss_of, inputs, layer.named_parameters(), max_samples=1)
    assert capped == 1


def test_checkpoint_round_trip_keeps_weights_and_ewc(retriever, tmp_path, corpus, steps):
    collate = TrainingCollator(retriever.tokenizer, corpus, 64)
    examples = [
        TrainingExample(
            s, (corpus.index_of(s.positives[0]),), (corpus.index_of(steps[-1].positives[0]),)
        )
        for s in steps[:6]
        if steps[-1].positives[0] not in s.positives
    ]
    count = retriever.consolidate((collate([e]) for e in examples), max_samples=4, repository="r@1")
    assert count == 4
    with pytest.raises(AlreadyConsolidated):
        retriever.consolidate((collate([e]) for e in examples), max_samples=4, repository="r@1")
    fisher = retriever.ewc.fisher
    params = dict(retriever.named_parameters())
    assert set(fisher) == set(params)
    assert all(fisher[n].shape == p.shape for n, p in params.items())
    assert all((f >= 0).all() for f in fisher.values())
    assert sum(float(f.sum()) for f in fisher.values()) > 0

    directory = retriever.save_retriever(tmp_path / "ckpt")
    assert (directory / CHECKPOINT_FILE).is_file() and (directory / "config.json").is_file()
    loaded = PremiseRetriever.load(directory, lr=3e-4)
    assert loaded.hparams.lr == 3e-4 and loaded.hparams.temperature == 0.1
    for name, value in retriever.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[name])
    assert loaded.ewc.repositories == 1 and loaded.ewc.covered == ["r@1"]
    for name in fisher:
        assert torch.equal(loaded.ewc.fisher[name], fisher[name].cpu())
    # the Hugging Face copy loads on its own, as an encoder for other tools
    _, encoder = load_encoder(directory)
    assert torch.equal(
        encoder.state_dict()["embeddings.word_embeddings.weight"],
        retriever.encoder.state_dict()["embeddings.word_embeddings.weight"],
    )


def test_load_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(LeanloopError, match="holds no model"):
        PremiseRetriever.load(tmp_path / "empty")
    bogus = tmp_path / "bogus.ckpt"
    torch.save({"state_dict": {}}, bogus)
    with pytest.raises(LeanloopError, match="not a premise retriever checkpoint"):
        PremiseRetriever.load(bogus)
    with pytest.raises(LeanloopError, match="does not exist"):
        PremiseRetriever.load(tmp_path / "missing" / "model")


def test_unreachable_hub_model_names_the_offline_encoder(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LeanloopError) as info:
        load_encoder("bert-base-uncased")
    text = str(info.value)
    assert "neither a local path nor in the Hugging Face cache" in text
    assert "unreachable" in text and "all-minilm-l6-v2" in text


def test_symbols_the_vocabulary_lacks_are_spelt_out():
    from transformers import AutoTokenizer

    from leanloop.ml.models import resolve_model
    from leanloop.retrieval.encoder import spell_symbols, tokenize, unknown_symbols

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("all-minilm-l6-v2"))
    state = "h : ∀ x ∈ s, f x ≤ 1\n⊢ ∑ i ∈ s, f i ≤ s.card"
    assert unknown_symbols(tokenizer, [state]) == {
        "∀": " for all ",
        "⊢": " right tack ",
        "∑": " n-ary summation ",
    }
    (spelt,) = spell_symbols(tokenizer, [state])
    expected = "h : for all x ∈ s, f x ≤ 1\n right tack n-ary summation i ∈ s, f i ≤ s.card"
    assert " ".join(spelt.split()) == " ".join(expected.split())
    assert spell_symbols(tokenizer, ["mul_comm a b"]) == ["mul_comm a b"]
    ids = tokenize(tokenizer, [state], 64)["input_ids"][0].tolist()
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.unk_token_id in tokenizer(state)["input_ids"]  # what it replaces


# -- T5 / ByT5 encoders (ReProver's and LeanDojo-v2's retrievers) ------------------------------


@pytest.fixture(scope="module")
def tiny_byt5(tmp_path_factory):
    from tests.tiny_encoder import build_tiny_byt5

    return build_tiny_byt5(tmp_path_factory.mktemp("byt5") / "encoder")


def test_a_byt5_encoder_trains_saves_and_retrieves(tiny_byt5, tmp_path, corpus, steps):
    from transformers import T5EncoderModel

    from leanloop.retrieval.index import PremiseIndex

    torch.manual_seed(0)
    retriever = PremiseRetriever(model_name=str(tiny_byt5), max_seq_len=96, lr=3e-3)
    assert type(retriever.encoder) is T5EncoderModel  # the encoder half, as ReProver reads it
    assert type(retriever.tokenizer).__name__ == "ByT5Tokenizer"
    assert retriever.max_length == 96  # relative positions: the configured limit holds
    # Lean's symbols are bytes to ByT5: nothing is spelt out, nothing is unknown
    state = "h : ∀ x ∈ s, f x ≤ 1\n⊢ ∑ i ∈ s, f i ≤ s.card"
    ids = retriever.tokenizer(state)["input_ids"]
    assert retriever.tokenizer.unk_token_id not in ids and len(ids) == len(state.encode()) + 1

    # a few optimizer steps on one batch lower its loss
    examples = [TrainingExample(s, (corpus.index_of(s.positives[0]),), ()) for s in steps[:8]]
    batch = TrainingCollator(retriever.tokenizer, corpus, 96)(examples)
    optimizer = torch.optim.AdamW(retriever.parameters(), lr=3e-3)
    retriever.train()
    losses = []
    for _ in range(6):
        loss = retriever.contrastive_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]

    # saved and loaded back: the same embeddings, the Hugging Face copy loads on its own
    retriever.eval()
    texts = [steps[0].context, "Nat.add_comm"]
    before = retriever.encode(texts)
    directory = retriever.save_retriever(tmp_path / "byt5-ckpt")
    loaded = PremiseRetriever.load(directory)
    assert type(loaded.encoder) is T5EncoderModel
    assert torch.allclose(loaded.encode(texts), before, atol=1e-6)
    tokenizer, encoder = load_encoder(directory)
    assert type(encoder) is T5EncoderModel and type(tokenizer).__name__ == "ByT5Tokenizer"

    # and it retrieves: every step gets the accessible premises ranked, the positive trained on
    # among them
    index = PremiseIndex.build(loaded, corpus)
    step = steps[0]
    hits = index.search(loaded.encode_states([step.context]), [step.file_path], [step.position], 20)
    assert len(hits[0]) == min(20, len(corpus.accessible(step.file_path, step.position)))


def test_leandojos_retriever_name_goes_to_the_hub(monkeypatch):
    """LeanDojo-v2's default retriever is a ByT5 model on the hub: the name is handed to the hub
    as it is, and without the hub the error says so."""
    from leanloop.ml.models import resolve_model
    from leanloop.retrieval.encoder import LEANDOJO_RETRIEVER
    from leanloop.trainer.retrieval_config import TrainingConfig

    assert TrainingConfig(model_name=LEANDOJO_RETRIEVER).model_name == LEANDOJO_RETRIEVER
    assert resolve_model(LEANDOJO_RETRIEVER) == LEANDOJO_RETRIEVER
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(LeanloopError) as info:
        PremiseRetriever.load(LEANDOJO_RETRIEVER)
    text = str(info.value)
    assert f"unknown model '{LEANDOJO_RETRIEVER}'" in text and "HF_HUB_OFFLINE=1" in text


def test_other_encoder_decoders_are_refused_in_one_line(tmp_path):
    from transformers import BartConfig

    BartConfig(d_model=16, encoder_layers=1, decoder_layers=1).save_pretrained(tmp_path)
    with pytest.raises(LeanloopError, match="is a bart encoder-decoder: the retriever reads"):
        load_encoder(tmp_path)
