"""``RunConfig``: the main job's settings — where the data comes from and the results go, and the
time each step may take — with a one-minute preset (``quick``) for a first look.

The budgets bound the time of each step whatever the machine's load: training stops after its
time, and each evaluation of the untrained generator measures the test steps that fit in its
time (the trained generator is then measured on the same steps)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic.dataclasses import dataclass

from leanloop.configfile import ConfigBase

#: The output directory of the job (and of ``--quick``, when none is given).
DEFAULT_OUTPUT = Path("build/run")
QUICK_OUTPUT = Path("build/run-quick")


@dataclass
class RunConfig(ConfigBase):
    """What ``leanloop run`` does, step by step (every budget is wall-clock seconds)."""

    data: Path | None = Field(
        default=None,
        description="A LeanDojo-format dataset (default: $LEANLOOP_FIXTURES/"
        "leandojo_benchmark_4, else the official LeanDojo Benchmark 4 where it can be "
        "downloaded).",
    )
    output: Path = Field(
        default=DEFAULT_OUTPUT,
        description="Where the database, the export, models and report go (--quick: "
        "build/run-quick unless given).",
    )
    database: str | None = Field(
        default=None,
        description="The database (a SQLite file or URL; default: output/leanloop.db).",
    )
    val: float | int = Field(default=0.1, description="Validation theorems: a fraction or a count.")
    test: float | int = Field(default=0.1, description="Test theorems: a fraction or a count.")
    seed: int = Field(default=3407, description="Seed of the splits and of every model's training.")

    retriever_model: str = Field(
        default="all-minilm-l6-v2",
        description="The premise retriever's encoder (packaged on PyPI).",
    )
    retriever_seconds: float = Field(
        default=120, gt=0, description="Training time of the retriever."
    )
    retriever_batch_size: int = Field(default=8, ge=1, description="Retriever training batch.")
    retriever_max_seq_len: int = Field(
        default=128, ge=16, description="Tokens of a state or premise."
    )

    generator_model: str = Field(
        default="smollm2-135m-instruct",
        description="The tactic generator's base model (SmolLM2-135M-Instruct, packaged).",
    )
    generator_seconds: float = Field(
        default=120, gt=0, description="Training time of the generator."
    )
    generator_batch_size: int = Field(default=2, ge=1, description="Generator training batch.")
    generator_lr: float = Field(
        default=2e-4, gt=0, description="Learning rate of the LoRA adapter."
    )
    lora_r: int = Field(default=16, ge=1, description="LoRA rank of the generator's adapter.")

    loss_steps: int = Field(
        default=64,
        ge=2,
        description="Test tactic steps whose held-out loss (the loss of the recorded tactic "
        "given the prompt) is measured before and after training, at most.",
    )
    loss_seconds: float = Field(
        default=45,
        gt=0,
        description="Time of the untrained generator's held-out loss: the test steps measured "
        "within it (at least two) are measured again after training.",
    )
    eval_steps: int = Field(
        default=10,
        ge=1,
        description="Test tactic steps of the generator's top-k accuracy (before/after), at most.",
    )
    eval_seconds: float = Field(
        default=20,
        gt=0,
        description="Time of the untrained generator's top-k accuracy: the test steps measured "
        "within it (at least one) are measured again after training.",
    )
    eval_k: int = Field(
        default=4, ge=1, description="Candidates per state in tactic accuracy and search."
    )
    eval_max_new_tokens: int = Field(
        default=48, ge=8, description="Tokens generated per candidate."
    )

    search_theorems: int = Field(
        default=4,
        ge=0,
        description="Test theorems searched with the trained generator (replayed).",
    )
    search_expansions: int = Field(
        default=4, ge=1, description="Expansions per theorem in that search."
    )
    search_seconds: float = Field(default=15, gt=0, description="Time per theorem in that search.")
    parallel: bool = Field(
        default=True,
        description="Evaluate the untrained generator and train the retriever in a process of "
        "their own (on the other core) while the generator trains; off: one after the other.",
    )

    lean_project: Path | None = Field(
        default=None,
        description="Where Lean is installed: a Lean project whose sorries are traced and "
        "proved (default: examples/lean-project of a leanloop checkout; it is copied first).",
    )
    quick: bool = Field(
        default=False, description="The one-minute version (see RunConfig.quick_run)."
    )

    def quick_run(self) -> RunConfig:
        """The same job at the size of a first look: a tiny generator (tinycoder), seconds of
        training, a few steps and theorems."""
        from dataclasses import replace

        return replace(
            self,
            quick=True,
            output=QUICK_OUTPUT if self.output == DEFAULT_OUTPUT else self.output,
            retriever_seconds=min(self.retriever_seconds, 10),
            generator_model="tinycoder",
            generator_seconds=min(self.generator_seconds, 8),
            generator_batch_size=4,
            loss_steps=min(self.loss_steps, 16),
            loss_seconds=min(self.loss_seconds, 10),
            eval_steps=min(self.eval_steps, 4),
            eval_seconds=min(self.eval_seconds, 5),
            eval_k=min(self.eval_k, 2),
            eval_max_new_tokens=min(self.eval_max_new_tokens, 16),
            search_theorems=min(self.search_theorems, 4),
            search_expansions=min(self.search_expansions, 2),
            search_seconds=min(self.search_seconds, 5),
        )
