"""The agents end to end on the real sample without Lean: LeanDojo-v2's quick start (a tiny model,
a few training steps; prove() replays the recorded steps and says so), the database surviving a
restart with a second prove() skipping what is finished, evaluation, and the one-line errors
where Lean is needed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from leanloop.agent import (
    BaseAgent,
    ExternalAgent,
    HFAgent,
    ProgressEvaluation,
    TacticEvaluation,
)
from leanloop.agent.repositories import AgentRepository
from leanloop.data.records import AttemptStatus, Repository
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.errors import ToolchainNotFound
from leanloop.ml.models import checkpoint_version
from leanloop.prover.recorded import RecordedProver
from tests.conftest import REPO_ROOT
from tests.tiny_causal import shared_tiny_model

# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

SAMPLE_REPOSITORY = "leanprover-community/mathlib4"


@pytest.fixture
def no_lean(monkeypatch, tmp_path):
    """A machine without elan, lake or lean (as this one is), whatever the PATH holds."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))


def test_the_seed_quick_start(sample_dir, tmp_path, monkeypatch, caplog):
    """LeanDojo-v2's quick start with leanloop's import paths; setup_dataset on the real sample
    stands in for setup_github_repository (no network, no Lean here), and max_steps keeps the
    training to two steps."""
    from leanloop.agent import HFAgent
    from leanloop.trainer import SFTTrainer

    monkeypatch.chdir(tmp_path)
    trainer = SFTTrainer(
        model_name=str(shared_tiny_model(sample_dir)),
        output_dir="outputs-x",
        epochs_per_repo=1,
        batch_size=2,
        lr=2e-5,
        max_steps=2,
        progress_bars=False,
    )
    agent = HFAgent(trainer=trainer, database_path="lean.db")
    (repository,) = agent.setup_dataset(sample_dir)
    assert repository.name == SAMPLE_REPOSITORY
    (checkpoint,) = agent.train()
    assert checkpoint.parent == Path("outputs-x") and (checkpoint / "config.json").is_file()
    assert trainer.reports[0].global_steps == 2
    assert (tmp_path / "outputs-x" / "data" / "random" / "train.json").is_file()

    with caplog.at_level(logging.WARNING, logger="leanloop"):
        (report,) = agent.prove()
    # the repository's test theorems with recorded steps, replayed: never proved, nothing written
    replayed = agent.replay_theorems(agent.repos[0])
    assert len(report.rows) == len(replayed) > 0
    assert report.environment == "replay" and report.project_root is None
    assert {row.status for row in report.rows} <= {AttemptStatus.REPLAYED, AttemptStatus.FAILED}
    assert not report.written and "replay of recorded steps, not proving" in report.summary()
    assert "a replay, not proving; nothing is written" in caplog.text
    out = tmp_path / "outputs-x" / "prove" / agent.repos[0].slug
    data = json.loads((out / "report.json").read_text())
    assert len(data["rows"]) == len(replayed) and data["environment"] == "replay"
    assert "replay of recorded steps without Lean" in (out / "report.md").read_text()
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    runs = {a.run for a in agent.database.get_attempts()}
    version = checkpoint_version("outputs-x")
    assert version.startswith(f"{checkpoint.name}@")
    assert runs == {f"hf:outputs-x@{version}:sorries:replay"}  # the job's one rule
    assert agent.prover.name == "hf:outputs-x" and not agent.prover.use_lora

    result = agent.evaluate(k=2, max_steps=12)
    assert isinstance(result, TacticEvaluation)
    assert result.steps == 12 and result.k == 2 and 0.0 <= result.top1 <= result.topk <= 1.0
    assert result.checkpoint == str(checkpoint) and result.split == "random/test"


class RecordedAgent(BaseAgent):
    """A subclass choosing its prover, as the seed documents: the recorded diagnostic, which
    replays a dataset's own recorded proofs."""

    def __init__(self, dataset, database_path, **kwargs) -> None:
        super().__init__(database_path, **kwargs)
        self.dataset = dataset

    def _get_build_deps(self) -> bool:
        return False

    def _setup_prover(self) -> RecordedProver:
        self.prover = RecordedProver(self.dataset, config=self.prover_config)
        return self.prover


def test_the_database_survives_a_restart_and_a_second_prove_skips(
    sample_dir, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "lean.db"
    first = RecordedAgent(sample_dir, db, data_path=tmp_path / "data")
    first.setup_dataset(sample_dir)
    (report,) = first.prove(out_dir=tmp_path / "reports")
    outcomes = {row.outcome for row in report.rows}
    assert outcomes <= {"replayed", "failed"} and "replayed" in outcomes
    stored = first.database.get_attempts()
    assert len(stored) == len(report.rows)
    first.database.close()

    # a new process: the same database, nothing wiped, the repository set up again
    second = RecordedAgent(sample_dir, str(db), data_path=tmp_path / "data")
    assert second.database.stats().theorems == 177  # nothing lost, nothing doubled
    (repository,) = second.setup_dataset(sample_dir)
    assert repository.name == SAMPLE_REPOSITORY and second.database.stats().theorems == 177
    (again,) = second.prove(out_dir=tmp_path / "reports")
    assert [row.full_name for row in again.rows] == [row.full_name for row in report.rows]
    assert {row.outcome for row in again.rows} == {"skipped"}
    assert [row.status for row in again.rows] == [row.status for row in report.rows]
    assert len(second.database.get_attempts()) == len(stored)  # nothing tried again
    # a new run name tries everything again
    (fresh,) = second.prove(run="another", out_dir=tmp_path / "reports")
    assert "skipped" not in {row.outcome for row in fresh.rows}


def test_errors_say_what_to_do(sample_dir, tmp_path, no_lean):
    agent = RecordedAgent(sample_dir, tmp_path / "lean.db")
    with pytest.raises(LeanloopError, match="no repository set up to prove"):
        agent.prove()
    with pytest.raises(LeanloopError, match="has no trainer"):
        agent.train()
    with pytest.raises(LeanloopError, match="has no trainer"):
        agent.evaluate()
    with pytest.raises(LeanloopError, match="no such file or directory"):
        agent.setup_dataset(tmp_path / "missing")
    # tracing and proving a Lean project need Lean: one line saying what is missing, and how
    # to install it, before anything is cloned
    with pytest.raises(ToolchainNotFound) as raised:
        agent.setup_github_repository(
            "https://github.com/durant42040/lean4-example",
            "005de00d03f1aaa32cb2923d5e3cbaf0b954a192",
        )
    assert "elan" in raised.value.message and "elan-init.sh" in raised.value.hint
    with pytest.raises(ToolchainNotFound):
        agent.setup_local_repository(REPO_ROOT / "examples" / "lean-project")
    # a project stored by an earlier run (traced where Lean was installed) cannot be proved here
    stored = Repository(url=str(REPO_ROOT / "examples" / "lean-project"), commit="c" * 40)
    agent.database.add_repository(stored)
    agent.repos.append(AgentRepository(repository=stored, kind="local", location=stored.url))
    with pytest.raises(ToolchainNotFound, match="no Lean toolchain"):
        agent.prove()
    with pytest.raises(LeanloopError, match="SFTTrainer or a GRPOTrainer"):
        HFAgent(trainer=object(), database_path=tmp_path / "x.db")


def test_external_agent_trains_nothing_and_needs_its_key(sample_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("LEANLOOP_TEST_KEY", raising=False)
    agent = ExternalAgent(
        "some-model",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="LEANLOOP_TEST_KEY",
        database_path=DynamicDatabase(tmp_path / "lean.db"),
    )
    assert agent.work_dir.name == "leanloop-agent"
    with pytest.raises(LeanloopError, match="ExternalAgent has no trainer"):
        agent.train()
    agent.setup_dataset(sample_dir)
    with pytest.raises(LeanloopError, match=r"\$LEANLOOP_TEST_KEY is not set"):
        agent.prove(whole_proof=True)


class ProgressAgent(RecordedAgent):
    """A subclass choosing its trainer too: the progress regressor."""

    def __init__(self, trainer, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.trainer = trainer


def test_an_agent_trains_and_evaluates_a_progress_model(sample_dir, tiny_encoder, tmp_path):
    from leanloop.trainer.progress import ProgressTrainer

    (tmp_path / "rows.jsonl").write_text("")  # the trainer's own data, replaced by the agent's
    trainer = ProgressTrainer(
        tmp_path / "rows.jsonl",
        model_name=str(tiny_encoder),
        output_dir=tmp_path / "progress",
        epochs=1,
        batch_size=32,
    )
    agent = ProgressAgent(trainer, sample_dir, tmp_path / "lean.db", data_path=tmp_path / "d")
    agent.setup_dataset(sample_dir)
    assert agent.work_dir == tmp_path / "progress"
    assert agent.train() == [tmp_path / "progress"]
    rows = tmp_path / "d" / "progress.jsonl"
    assert trainer.data_path == rows
    # the traced steps of the train split's proofs: never of the theorems evaluated on
    trained = {json.loads(line)["theorem"] for line in rows.read_text().splitlines()}
    assert 300 < len(rows.read_text().splitlines()) < 435
    result = agent.evaluate(max_steps=40)
    assert isinstance(result, ProgressEvaluation)
    assert result.rows == 40 and result.mse >= result.mae**2 - 1e-9
    from leanloop.data import open_dataset

    test = open_dataset(tmp_path / "d" / "random" / "test.json").iter_theorems()
    assert not trained & {str(t.key) for t in test}
