"""``LeanAgent``: lifelong learning of the premise retriever (``RetrievalTrainer``, progressive
with EWC) over repositories in curriculum order, with the matrix of R@10 by (trained up to,
evaluated on) recorded after each repository, and proving with ``RetrievalProver``.

``python -m leanloop.agent.lean_agent --config lean_agent.yaml`` runs it from a YAML file
(``LeanAgentConfig``): the repositories to set up, the training and prover settings, the
database."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.agent.base_agent import BaseAgent
from leanloop.agent.lifelong import LifelongEvaluator, LifelongMatrix
from leanloop.configfile import CONFIG, ConfigBase, ConfigError
from leanloop.data.records import Repository
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.prover.retrieval import RetrievalProver
from leanloop.trainer.retrieval import RetrievalTrainer
from leanloop.trainer.retrieval_config import TrainingConfig
from leanloop.words import plural

log = logging.getLogger(__name__)


class LeanAgent(BaseAgent):
    """``LeanAgent(database_path=None, training_config=None, prover_config=None,
    generator=None)``: ``train()`` trains the retriever on the repositories in curriculum order,
    each repository continuing from the checkpoint of the one before with EWC
    (``training_config``: a ``TrainingConfig``, a mapping of its fields or a YAML/JSON file).
    After each repository the new checkpoint is evaluated on the test theorems of every
    repository trained on so far; ``self.lifelong`` holds the resulting
    ``leanloop.agent.lifelong.LifelongMatrix`` (average accuracy, backward transfer,
    forgetting), also written to ``lifelong.json`` and ``lifelong.png`` in the trainer's
    ``output_dir``.

    ``prove()`` uses ``RetrievalProver``: the newest retriever, the corpus of the training
    export, and the tactic generator ``generator`` (a trained ``SFTTrainer`` output_dir, a
    checkpoint, or a model name such as ``smollm2-135m-instruct``). See ``BaseAgent`` for
    the other arguments.

    Args:
        database_path: A SQLite file, a ``postgresql://`` URL, an open ``DynamicDatabase``,
            or None for the default database.
        training_config: The retriever's training: a ``TrainingConfig``, a mapping of its
            fields or a YAML/JSON file (default ``TrainingConfig()``).
        prover_config: The search budgets of ``prove()``.
        generator: The tactic generator ``prove()`` uses beside the retriever.
        data_path: Where the trainer's merged export is written.
    """

    def __init__(
        self,
        database_path: str | os.PathLike | DynamicDatabase | None = None,
        training_config: TrainingConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        prover_config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        *,
        generator: str | os.PathLike | None = None,
        data_path: str | os.PathLike | None = None,
    ) -> None:
        super().__init__(database_path, prover_config=prover_config, data_path=data_path)
        self.config = (
            TrainingConfig() if training_config is None else TrainingConfig.load(training_config)
        )
        self.trainer = RetrievalTrainer(config=self.config)
        self.generator = None if generator is None else os.fspath(generator)
        self.lifelong: LifelongMatrix | None = None

    def _get_build_deps(self) -> bool:
        return True  # premises defined in dependencies are what the retriever learns to find

    def train(self, repositories: Sequence[Repository] | None = None) -> list[Path]:
        """``BaseAgent.train`` with the lifelong-learning matrix recorded after each
        repository (``self.lifelong``).

        Args:
            repositories: Only these (None: every repository of the database).

        Returns:
            The retriever's checkpoint of each repository, in order.
        """
        repos = self.curriculum(repositories)
        evaluator = LifelongEvaluator(self.config)
        checkpoints = self.trainer.train(repos, self.database, self.data_path, after_step=evaluator)
        self.lifelong = evaluator.matrix
        return checkpoints

    def _setup_prover(self) -> RetrievalProver:
        if self.generator is None:
            raise LeanloopError(
                "LeanAgent proves with a tactic generator beside its retriever, and none was given",
                hint="LeanAgent(generator=...): a trained SFTTrainer output_dir, a checkpoint or "
                "a model name (e.g. smollm2-135m-instruct)",
            )
        if not self.data_path.exists():  # the corpus of the training export
            self.database.export_merged_data(self.curriculum(), self.data_path)
        self.prover = RetrievalProver(
            self.trainer.output_dir,
            self.generator,
            self.data_path,
            config=self.prover_config,
        )
        return self.prover


# -- running from a YAML file ------------------------------------------------------------------


@dataclass(config=CONFIG)
class RepositorySpec(ConfigBase):
    """One repository to set up: a git ``url`` at ``commit``, a local ``path``, or a LeanDojo
    ``dataset``."""

    url: str | None = Field(default=None, description="A git URL (needs commit); traced with Lean.")
    commit: str | None = Field(default=None, description="The commit of url.")
    path: str | None = Field(
        default=None, description="A local Lean project directory; traced with Lean."
    )
    dataset: str | None = Field(
        default=None,
        description="A LeanDojo-format dataset directory or split file (no Lean needed).",
    )

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> Self:
        given = [name for name in ("url", "path", "dataset") if getattr(self, name)]
        if len(given) != 1:
            raise self.invalid(info, "give exactly one of url (with commit), path or dataset")
        if (self.url is None) != (self.commit is None):
            raise self.invalid(info, "commit goes with url, and url needs a commit")
        return self

    def setup(self, agent: BaseAgent) -> list[Repository]:
        if self.url is not None and self.commit is not None:  # given together (checked)
            return [agent.setup_github_repository(self.url, self.commit)]
        if self.path is not None:
            return [agent.setup_local_repository(self.path)]
        assert self.dataset is not None  # exactly one source is given (checked)
        return agent.setup_dataset(self.dataset)


@dataclass(config=CONFIG)
class LeanAgentConfig(ConfigBase):
    """What ``python -m leanloop.agent.lean_agent`` runs: the repositories are set up in order,
    then the agent trains (``train``) and proves (``prove``)."""

    repositories: list[RepositorySpec] = Field(description="The repositories to set up.")
    training: TrainingConfig = Field(
        default_factory=TrainingConfig, description="The retriever's training (TrainingConfig)."
    )
    prover: ProverConfig = Field(
        default_factory=ProverConfig, description="Search budgets of prove() (ProverConfig)."
    )
    database: str | None = Field(
        default=None,
        description="SQLite file or postgresql:// URL (None: leanloop's default database).",
    )
    generator: str | None = Field(
        default=None, description="The tactic generator of the prover (needed to prove)."
    )
    data_path: Path | None = Field(
        default=None, description="Where the merged export goes (None: <training.output_dir>/data)."
    )
    train: bool = Field(default=True, description="Train on the repositories.")
    prove: bool = Field(default=True, description="Prove the repositories' open sorries.")
    mode: ProofMode = Field(
        default=ProofMode.SEARCH, description="How prove() proves: search, or whole (whole proofs)."
    )
    branch: str | None = Field(
        default=None, description="Commit written proofs on this new git branch of each project."
    )

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Self:
        """Every section is checked with the others, each problem naming its section's field
        (``prover.timeout``, ``repositories[0].url``)."""
        where = source or cls.__name__
        if not isinstance(data, Mapping):
            raise LeanloopError(
                f"{where}: expected a mapping with repositories:, training:, prover:, database:"
            )
        if data.get("repositories") == []:
            raise LeanloopError(
                f"{where}: field 'repositories' must list at least one repository",
                hint="e.g. repositories: [{dataset: path/to/leandojo_dataset}] or "
                "[{url: https://github.com/..., commit: SHA}] or [{path: my-project}]",
            )
        return super().from_dict(data, source)


def run(config: LeanAgentConfig) -> LeanAgent:
    """Set up the repositories, train and prove as ``config`` says; returns the agent."""
    agent = LeanAgent(
        config.database,
        config.training,
        config.prover,
        generator=config.generator,
        data_path=config.data_path,
    )
    for spec in config.repositories:
        for repository in spec.setup(agent):
            print(f"set up {repository}")
    if config.train:
        checkpoints = agent.train()
        print(
            f"trained {plural(len(checkpoints), 'repository')}; newest checkpoint {checkpoints[-1]}"
        )
        if agent.lifelong is not None:
            figures = ", ".join(
                f"{name.replace('_', ' ')} {value:.4f}"
                for name, value in agent.lifelong.figures().items()
                if value is not None
            )
            print(f"lifelong R@10: {figures or 'no test steps'} ({config.training.output_dir})")
    if config.prove:
        for report in agent.prove(mode=config.mode, branch=config.branch):
            print(report.summary())
    return agent


_USAGE = (
    "python -m leanloop.agent.lean_agent needs --config FILE: a YAML file with repositories: "
    "(each {url: ..., commit: ...}, {path: ...} or {dataset: ...}), training: (TrainingConfig "
    "fields), prover: (ProverConfig fields), database: (a SQLite file or postgresql:// URL) and "
    "generator: (the tactic generator to prove with); see docs/agents.md"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leanloop.agent.lean_agent",
        description="Run LeanAgent from a YAML configuration: set the repositories up, train "
        "the retriever in curriculum order (with the lifelong R@10 matrix) and prove sorries.",
    )
    parser.add_argument("--config", metavar="FILE", help="The LeanAgentConfig YAML file.")
    parser.add_argument("--verbose", "-v", action="store_true", help="Show progress notes.")
    args = parser.parse_args(argv)
    if not args.config:
        print(f"error: {_USAGE}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    try:
        run(LeanAgentConfig.from_yaml(Path(args.config).expanduser()))
    except ConfigError as exc:  # every problem of the file, one line each
        for line in exc.lines():
            print(f"error: {line}", file=sys.stderr)
        return 1
    except LeanloopError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
