"""LeanDojo-v2's call forms, each as LeanDojo-v2 made it: the progress scorer's positional
``predict(goal, tactic, prefix)`` and its constructor, a model trained by LeanDojo-v2 scored as
LeanDojo-v2 scored it, ``search(server=..., goal=..., verbose=False)`` unpacking as
``(result, used_tactics)``, the agents' and provers' constructors and defaults, the database's
JSON form, the one-line notice, its LeanProgress helpers and its model server."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import yaml

from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from leanloop.lean.server import TheoremSource
from leanloop.ml.generation import GeneratedTactic
from leanloop.prover.replay import ReplayServer
from leanloop.retrieval.encoder import LEANDOJO_RETRIEVER
from tests.serve_support import live_server
from tests.test_search_repl import Judged, Recorded, script
from tests.tiny_causal import shared_tiny_model

GOAL = "∀ {p q : Prop}, p ∧ q → q ∧ p"  # examples/theorem_proving/generate_tactics.py


@pytest.fixture(autouse=True)
def fresh_notice(monkeypatch):
    from lean_dojo_v2 import _notice

    monkeypatch.setattr(_notice, "_state", {"said": False, "quiet": False})
    monkeypatch.delenv("LEANLOOP_COMPAT_QUIET", raising=False)


@pytest.fixture
def v2(fixtures) -> Path:
    return fixtures / "leandojo_v2_files"


@pytest.fixture
def v2_theorems(v2):
    from leanloop.data import open_dataset

    return list(open_dataset(v2 / "export_merged_data").iter_theorems())


@pytest.fixture(scope="module")
def v2_progress_model(tmp_path_factory, tiny_encoder) -> Path:
    """A progress model as LeanDojo-v2's train_steps_model saves it (Trainer.save_model and the
    tokenizer): a one-output regression head on raw step counts, no leanloop metadata. Its bias
    is high so that predictions are not clipped at 0; its weights are large so that texts get
    outputs apart (at the usual initial scale every text gets nearly the same)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, BertForSequenceClassification

    out = tmp_path_factory.mktemp("ldv2-progress")
    config = AutoConfig.from_pretrained(
        tiny_encoder, num_labels=1, problem_type="regression", initializer_range=0.3
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # outputs that tell texts apart, well above 0
        model.classifier.weight.normal_(0.0, 1.0)
        model.classifier.bias.fill_(20.0)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_encoder).save_pretrained(out)
    return out


def leandojo_v2_prediction(directory: Path, goal: str, tactic: str, prefix: str | None) -> float:
    """What LeanDojo-v2's scorer computes: its text, the raw output, clipped at 0."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForSequenceClassification.from_pretrained(directory).eval()
    text = f"Goal:\n{goal}\n\nPrefix:\n{prefix or ''}\n\nCandidate tactic:\n{tactic}\n".strip()
    with torch.no_grad():
        logit = model(**tokenizer(text, return_tensors="pt", truncation=True)).logits.item()
    return max(0.0, logit)


# -- the progress scorer ------------------------------------------------------------------------


def test_a_positional_predict_reads_as_leandojo_v2_meant(v2_progress_model):
    from lean_dojo_v2.external_api.python.leanprogress import LeanProgressScorer

    scorer = LeanProgressScorer(model_name=str(v2_progress_model), device="auto")
    assert scorer.leandojo_v2  # recognised as LeanDojo-v2's: its text, no target scaling
    goal, tactic, prefix = "n : ℕ\n⊢ n + 0 = n", "simp", "intro n"
    positional = scorer.predict(goal, tactic, prefix)
    assert positional == scorer.predict(goal=goal, tactic=tactic, prefix=prefix)
    assert positional == pytest.approx(
        leandojo_v2_prediction(v2_progress_model, goal, tactic, prefix), abs=1e-4
    )
    assert positional > 0 and math.isfinite(positional)
    # the order matters: the arguments the other way round are another text, another number
    assert scorer.predict(goal, prefix, tactic) != pytest.approx(positional, abs=0.1)
    assert scorer.predict(goal, tactic) == scorer.predict_batch([(goal, None, tactic)])[0]
    # LeanDojo-v2's template argument
    custom = LeanProgressScorer(str(v2_progress_model), template="{tactic} | {goal}")
    assert custom.text(goal, prefix, tactic) == f"{tactic} | {goal}"
    with pytest.raises(LeanloopError, match="not both"):
        LeanProgressScorer(v2_progress_model, model_name=str(v2_progress_model))


def test_leanloop_s_own_scorer_reads_a_leandojo_v2_model_from_the_environment(
    v2_progress_model, monkeypatch
):
    from leanloop.ml.progress import ProgressScorer

    monkeypatch.setenv("LEANPROGRESS_MODEL", str(v2_progress_model))
    scorer = ProgressScorer(device="auto")
    items = [("⊢ True", None, "trivial"), ("a b : ℕ\n⊢ a + b = b + a", "", "omega")]
    batch = scorer.predict_batch(items)
    for (goal, prefix, tactic), value in zip(items, batch, strict=True):
        assert value == pytest.approx(
            leandojo_v2_prediction(v2_progress_model, goal, tactic, prefix), abs=1e-4
        )


# -- search ---------------------------------------------------------------------------------------


def test_search_returns_what_leandojo_v2_returned(sample_dir, v2_theorems, transcripts):
    from lean_dojo_v2.prover import BaseProver, HFProver

    server = ReplayServer(v2_theorems)
    prover = HFProver(ckpt_path=str(shared_tiny_model(sample_dir)))

    result, used_tactics = prover.search(server=server, goal=GOAL, verbose=False)

    assert result.success is False and used_tactics is None  # an untrained model
    assert result.n_goals_root == 1 and result.steps >= 1 and result.duration > 0
    assert result.status == "failed" and result.outcome.status is AttemptStatus.FAILED

    class Recorded_(BaseProver):
        """A user's own prover (LeanDojo-v2's subclassing) proposing given tactics."""

        def __init__(self, tactics) -> None:
            super().__init__()
            self.tactics = tactics

        @property
        def name(self) -> str:
            return "table"

        def load_generator(self):
            table = self.tactics

            class Table:
                def generate_batch(self, states, k, **options):
                    return [[GeneratedTactic(t, 0.0) for t in table.get(s, [])] for s in states]

            return Table()

    theorem = next(t for t in v2_theorems if t.full_name == "my_and_comm")
    steps = {s.state_before: [s.tactic] for s in theorem.traced_tactics}
    result, used_tactics = Recorded_(steps).search(server=server, goal=GOAL, verbose=False)
    # found again in recorded data, which no Lean checked: not a success, the tactics given
    assert result.success is False and result.status == "replayed"
    assert used_tactics == [s.tactic for s in theorem.traced_tactics]

    transcript = transcripts["proof_branching2"]  # the REPL's recorded answers, Lean's verdict
    source = TheoremSource("and_swap", "Swap.lean", "", "(p q : Prop) : p ∧ q → q ∧ p")
    result, used_tactics = Recorded_(script(transcript)).search(
        server=Judged(Recorded(transcript)), theorem=source, verbose=False
    )
    assert result.success is True and result.status == "proved"
    assert used_tactics == [r["tactic"] for r in transcript["requests"] if "tactic" in r]

    with pytest.raises(LeanloopError, match="needs a leanloop Lean server"):
        prover.search(server=object(), goal=GOAL)


def test_the_external_prover_and_agent_default_to_leandojo_v2_s_provider(monkeypatch):
    from lean_dojo_v2.agent import ExternalAgent
    from lean_dojo_v2.prover import ExternalProver
    from leanloop.prover.external import HF_ROUTER_URL

    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(LeanloopError, match=r"\$HF_TOKEN is not set"):
        ExternalProver()
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    prover = ExternalProver()  # examples/theorem_proving/generate_whole_proof.py
    assert prover.model_name == "deepseek-ai/DeepSeek-Prover-V2-671B:novita"
    assert (prover.base_url, prover.api_key_env) == (HF_ROUTER_URL, "HF_TOKEN")

    agent = ExternalAgent(  # examples/external_api.py
        model_name="deepseek-ai/DeepSeek-Prover-V2-671B:novita", database_path="lean.db"
    )
    built = agent._setup_prover()
    assert (built.base_url, built.api_key_env) == (HF_ROUTER_URL, "HF_TOKEN")


# -- constructors ---------------------------------------------------------------------------------


def test_agents_take_leandojo_v2_s_positional_forms(sample_dir, v2, tmp_path, monkeypatch, caplog):
    from lean_dojo_v2.agent.hf_agent import HFAgent as V2HFAgent
    from lean_dojo_v2.agent.lean_agent import LeanAgent as V2LeanAgent
    from lean_dojo_v2.lean_agent.config import ProverConfig, TrainingConfig
    from lean_dojo_v2.trainer.sft_trainer import SFTTrainer
    from leanloop import DynamicDatabase, HFAgent

    monkeypatch.chdir(tmp_path)
    trainer = SFTTrainer(str(shared_tiny_model(sample_dir)), output_dir="out")
    with caplog.at_level(logging.WARNING):
        agent = HFAgent(trainer, "lean.db", TrainingConfig(), ProverConfig(timeout=30))
    assert agent.prover_config.timeout == 30 and isinstance(agent.config, TrainingConfig)
    assert "training_config has no effect" in caplog.text
    assert agent.database.sqlite_path == tmp_path / "lean.db"

    # LeanDojo-v2's database file as database_path: imported, not overwritten
    v2_agent = V2HFAgent(trainer, str(v2 / "dynamic_database.json"), None, ProverConfig())
    assert isinstance(v2_agent.database, DynamicDatabase)
    assert len(v2_agent.database.get_repositories()) == 2
    forms = (str(v2 / "dynamic_database.json"), v2 / "ldv2_both.yaml", v2 / "ldv2_prover.yaml")
    # LeanDojo-v2's retriever is a hub model: offline and not cached, refused at once
    with pytest.raises(LeanloopError, match="RetrievalTrainer, field 'model_name': 'kaiyuy/"):
        V2LeanAgent(*forms)
    from leanloop.ml import models

    monkeypatch.setattr(models, "_in_hub_cache", lambda name: name == LEANDOJO_RETRIEVER)
    lean_agent = V2LeanAgent(*forms)  # as where the hub's cache holds it
    assert lean_agent.config.lambda_value == 0.1 and lean_agent.prover_config.batch_size == 12
    assert lean_agent.trainer.config is lean_agent.config


def test_retrieval_trainer_trains_without_a_data_path(sample_dir, tiny_encoder, tmp_path):
    from lean_dojo_v2.database import DynamicDatabase
    from lean_dojo_v2.lean_agent.config import TrainingConfig
    from lean_dojo_v2.trainer.retrieval_trainer import RetrievalTrainer

    database = DynamicDatabase(json_path=None, url=tmp_path / "lean.db")
    database.import_dataset(sample_dir)
    repos = database.sort_repositories_by_difficulty()
    config = TrainingConfig(
        model_name=str(tiny_encoder),
        output_dir=tmp_path / "retriever",
        max_steps=1,
        batch_size=4,
        max_seq_len=64,
        fisher_max_samples=4,
        precision="32-true",
        enable_progress_bar=False,
    )
    trainer = RetrievalTrainer(config=config)
    (checkpoint,) = trainer.train(repos, database)
    assert trainer.data_path == tmp_path / "retriever" / "data"
    assert (trainer.data_path / "random" / "train.json").is_file() and checkpoint.is_dir()


def test_the_database_s_leandojo_v2_forms_and_the_one_line_notice(
    v2, tmp_path, monkeypatch, caplog
):
    import lean_dojo_v2
    from lean_dojo_v2.database import DynamicDatabase

    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="lean_dojo_v2"):
        empty = DynamicDatabase()  # LeanDojo-v2's default file, not there: nothing imported
        assert empty.get_repositories() == [] and not Path("dynamic_database.json").exists()
        loaded = DynamicDatabase(json_path=str(v2 / "dynamic_database.json"))
        again = DynamicDatabase.from_json(v2 / "dynamic_database.json")
    assert len(loaded.get_repositories()) == len(again.get_repositories()) == 2
    lines = [r for r in caplog.records if r.name == "lean_dojo_v2"]
    assert len(lines) == 1 and "\n" not in lines[0].getMessage()
    assert loaded.url == empty.url  # leanloop's default database, grown, never wiped

    caplog.clear()
    from lean_dojo_v2 import _notice

    monkeypatch.setattr(_notice, "_state", {"said": False, "quiet": False})
    lean_dojo_v2.quiet()
    with caplog.at_level(logging.WARNING, logger="lean_dojo_v2"):
        DynamicDatabase()
    monkeypatch.setattr(_notice, "_state", {"said": False, "quiet": False})
    monkeypatch.setenv("LEANLOOP_COMPAT_QUIET", "1")
    with caplog.at_level(logging.WARNING, logger="lean_dojo_v2"):
        DynamicDatabase()
    assert not [r for r in caplog.records if r.name == "lean_dojo_v2"]


def test_save_configs_to_file_is_read_back_by_both(tmp_path):
    from lean_dojo_v2.lean_agent.config import ProverConfig, TrainingConfig, save_configs_to_file

    training, prover = TrainingConfig(lr=3e-4, max_epochs=2), ProverConfig(num_sampled_tactics=8)
    save_configs_to_file(training, prover, tmp_path / "both.yaml")
    assert set(yaml.safe_load((tmp_path / "both.yaml").read_text())) == {"training", "prover"}
    assert TrainingConfig.from_yaml(tmp_path / "both.yaml") == training
    assert ProverConfig.from_yaml(tmp_path / "both.yaml") == prover


# -- LeanProgress's helpers (the semantics LeanDojo-v2's own tests check) ------------------------


def test_create_sample_dataset_main_writes_its_rows(tmp_path, monkeypatch):
    from lean_dojo_v2.lean_progress import create_sample_dataset

    output = tmp_path / "deep" / "sample.jsonl"
    monkeypatch.setattr(create_sample_dataset, "parse_args", lambda: SimpleNamespace(output=output))
    create_sample_dataset.main()
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert rows == create_sample_dataset.SAMPLE_DATA


def test_build_text_and_tokenize_batch(tiny_encoder):
    from transformers import AutoTokenizer

    from lean_dojo_v2.lean_progress import train_steps_model

    text = train_steps_model.build_text("gcd n n = n", "intro n", "simpa")
    assert text == "Goal:\ngcd n n = n\n\nPrefix:\nintro n\n\nCandidate tactic:\nsimpa"
    assert train_steps_model.build_text("g", None, "t") == train_steps_model.build_text(
        "g", "", "t"
    )

    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder)
    tokenize = train_steps_model.tokenize_batch(tokenizer, max_length=32)
    batch = {"goal": ["goal 1", "goal 2"], "tactic": ["tac1", "tac2"], "steps_remaining": [3, 0]}
    encoded = tokenize(batch)  # no prefix column: none
    assert encoded["labels"] == [3.0, 0.0]
    assert [len(ids) for ids in encoded["input_ids"]] == [32, 32]  # padded to max_length
    expected = tokenizer(
        [train_steps_model.build_text("goal 1", "", "tac1")],
        padding="max_length",
        truncation=True,
        max_length=32,
    )
    assert encoded["input_ids"][0] == expected["input_ids"][0]
    args = train_steps_model.parse_args(["--dataset", "d.jsonl", "--output-dir", "o"])
    assert (args.dataset, args.output_dir, args.model_name) == (
        Path("d.jsonl"),
        Path("o"),
        "bert-base-uncased",
    )
    assert (args.max_length, args.batch_size, args.epochs, args.learning_rate) == (
        512,
        8,
        3.0,
        1e-5,
    )


# -- the model server ----------------------------------------------------------------------------


def test_the_server_app_serves_leandojo_v2_s_model_or_the_configured_ones(
    sample_dir, v2_progress_model, tmp_path, monkeypatch
):
    from lean_dojo_v2.external_api.python import server
    from leanloop.ml.progress import LeanProgressScorer
    from leanloop.prover.external import HF_ROUTER_URL

    monkeypatch.delenv("LEANLOOP_SERVE_CONFIG", raising=False)
    (deepseek,) = server.leandojo_v2_config().models
    assert (deepseek.name, deepseek.base_url, deepseek.api_key_env) == (
        "deepseek",
        HF_ROUTER_URL,
        "HF_TOKEN",
    )
    with live_server(server.build_app()) as url:
        models = httpx.get(f"{url}/models", timeout=30).json()["models"]
    assert [(m["name"], m["provider"]) for m in models] == [("deepseek", "openai")]

    # LeanDojo-v2's workflow: LEANPROGRESS_MODEL names a model it trained; use_reward ranks
    config = tmp_path / "models.yaml"
    model = shared_tiny_model(sample_dir)
    config.write_text(
        yaml.safe_dump({"models": [{"name": "tiny", "provider": "hf", "model": str(model)}]})
    )
    monkeypatch.setenv("LEANLOOP_SERVE_CONFIG", str(config))
    monkeypatch.setenv("LEANPROGRESS_MODEL", str(v2_progress_model))
    goal = "n : ℕ\n⊢ n + 0 = n"
    with live_server(server.build_app()) as url:
        answer = httpx.post(
            f"{url}/generate",
            json={"name": "tiny", "input": goal, "prefix": "", "use_reward": True},
            timeout=120,
        ).json()
    outputs = answer["outputs"]
    assert outputs
    scorer = LeanProgressScorer(v2_progress_model)
    for output in outputs:
        expected = scorer.predict(goal, output["output"])
        assert output["steps_remaining"] == pytest.approx(expected, abs=1e-4)
        assert output["reward"] == pytest.approx(-expected, abs=1e-4)
