"""``leanloop train sft|grpo|retrieval|progress``: train a model on the database's repositories in
curriculum order, configured by the trainer's YAML/JSON configuration (``--config``) with the
main fields as options on top."""

from __future__ import annotations

from pathlib import Path

import typer

from leanloop.cli.common import (
    DB_OPTION,
    console,
    load_config,
    new_app,
    open_database,
    progress_bar,
    select_repositories,
    user_path,
)
from leanloop.cli.launch import NPROC_OPTION, relaunched
from leanloop.errors import LeanloopError
from leanloop.words import plural

app = new_app(
    help="Train on the database's repositories in curriculum order (easiest first); each "
    "repository leaves a checkpoint in the output directory."
)

CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="The trainer's YAML/JSON configuration (its fields are the Python arguments); the "
    "options below override it.",
)
DATA_OPTION = typer.Option(
    None,
    "--data",
    metavar="DIR",
    help="Where the merged LeanDojo-format export trained on is written [default: "
    "OUTPUT_DIR/data].",
    show_default=False,
)
REPO_OPTION = typer.Option(
    [],
    "--repo",
    metavar="REPO",
    help="Train only on this repository (URL or owner/name[@commit]); repeat for several "
    "[default: every repository of the database].",
    show_default=False,
)
MODEL_OPTION = typer.Option(
    None, "--model", metavar="NAME", help="model_name: a hub name, a directory or a packaged model."
)
OUTPUT_OPTION = typer.Option(
    None, "--output-dir", metavar="DIR", help="output_dir: where checkpoints go."
)
BATCH_OPTION = typer.Option(None, "--batch-size", min=1, metavar="N", help="batch_size.")
LR_OPTION = typer.Option(None, "--lr", metavar="RATE", help="lr: peak learning rate.")
MAX_STEPS_OPTION = typer.Option(
    None, "--max-steps", min=1, metavar="N", help="max_steps: optimizer steps per repository."
)

EPOCHS_OPTION = typer.Option(None, "--epochs", min=0, metavar="N", help="epochs_per_repo.")

#: GRPO rewards by name besides ``lean`` (which checks each tactic with Lean in a project).
REWARDS = {
    "format": "format_reward",
    "exact_match": "exact_match_reward",
    "length": "length_penalty",
}


def _setup(db: str | None, repo: list[str]):
    database = open_database(db, must_exist=True)
    chosen = select_repositories(database, repo) if repo else None
    return database, chosen


def _train(agent, repositories) -> list[Path]:
    """Train ``agent`` on ``repositories`` (all when None) in curriculum order."""
    from leanloop.ml import distributed

    order = agent.curriculum(repositories)
    if distributed.current().is_main:
        console.print(
            f"training on {plural(len(order), 'repository')}: {', '.join(map(str, order))}"
        )
    return agent.train(order)


def _train_hf(trainer, database, repositories, data: Path | None) -> None:
    from leanloop.agent.hf_agent import HFAgent

    agent = HFAgent(trainer, database, data_path=user_path(data) if data else None)
    checkpoints = _train(agent, repositories)
    from leanloop.ml import distributed

    if not distributed.current().is_main:
        return  # the main process reports
    for report in trainer.reports:
        figures = ", ".join(f"{k} {v:.4g}" for k, v in sorted(report.metrics.items()))
        console.print(
            f"{report.index + 1}. {report.repository}: {plural(report.train_examples, 'example')}, "
            f"{plural(report.global_steps, 'step')} in {report.train_seconds:.1f} s"
            + (f"; {figures}" if figures else ""),
            highlight=False,
        )
    console.print(f"newest checkpoint: {checkpoints[-1]} (also loadable as {trainer.output_dir})")


@app.command("sft")
def sft(
    config: Path | None = CONFIG_OPTION,
    db: str | None = DB_OPTION,
    data: Path | None = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    model: str | None = MODEL_OPTION,
    output_dir: Path | None = OUTPUT_OPTION,
    epochs: float | None = EPOCHS_OPTION,
    batch_size: int | None = BATCH_OPTION,
    lr: float | None = LR_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    nproc: int | None = NPROC_OPTION,
) -> None:
    """Supervised fine-tuning of a tactic generator (SFTTrainer, SFTTrainerConfig fields)."""
    if relaunched(nproc):
        return
    from leanloop.trainer.sft import SFTTrainer
    from leanloop.trainer.sft_config import SFTTrainerConfig

    overrides = dict(
        model_name=model,
        output_dir=output_dir,
        epochs_per_repo=epochs,
        batch_size=batch_size,
        lr=lr,
        max_steps=max_steps,
    )
    settings, _ = load_config(SFTTrainerConfig, config, overrides)
    database, repositories = _setup(db, repo)
    with progress_bar(f"loading {settings.model_name}"):
        trainer = SFTTrainer.from_config(settings)
    _train_hf(trainer, database, repositories, data)


@app.command("grpo")
def grpo(
    config: Path | None = CONFIG_OPTION,
    db: str | None = DB_OPTION,
    data: Path | None = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    model: str | None = MODEL_OPTION,
    output_dir: Path | None = OUTPUT_OPTION,
    reward: list[str] = typer.Option(
        [],
        "--reward",
        metavar="NAME",
        help="reward_func by name: format, exact_match, length or lean; repeat to combine "
        "(weights: reward_weights) [default: the config's reward_func, else format and "
        "exact_match].",
        show_default=False,
    ),
    lean_project: Path | None = typer.Option(
        None,
        "--lean-project",
        metavar="DIR",
        help="The Lean project the 'lean' reward checks tactics in (needs Lean).",
    ),
    lean_header: str = typer.Option(
        "",
        "--lean-header",
        metavar="TEXT",
        help="Imports the 'lean' reward puts before each state, e.g. 'import Mathlib'.",
    ),
    lean: str = typer.Option(
        "repl",
        "--lean",
        metavar="BACKEND",
        help="The Lean backend the 'lean' reward checks with: repl or pantograph.",
    ),
    epochs: float | None = EPOCHS_OPTION,
    batch_size: int | None = BATCH_OPTION,
    num_generations: int | None = typer.Option(
        None, "--num-generations", min=2, metavar="N", help="Completions sampled per prompt."
    ),
    lr: float | None = LR_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    nproc: int | None = NPROC_OPTION,
) -> None:
    """Reinforcement learning of a tactic generator with GRPO (GRPOTrainer, GRPOTrainerConfig
    fields, and reward_func: a list of reward names)."""
    if relaunched(nproc):
        return
    from leanloop.trainer.grpo import GRPOTrainer
    from leanloop.trainer.grpo_config import GRPOTrainerConfig

    overrides = dict(
        model_name=model,
        output_dir=output_dir,
        epochs_per_repo=epochs,
        batch_size=batch_size,
        num_generations=num_generations,
        lr=lr,
        max_steps=max_steps,
    )
    settings, extras = load_config(GRPOTrainerConfig, config, overrides, extra=("reward_func",))
    names = reward or extras.get("reward_func") or ["format", "exact_match"]
    names = [names] if isinstance(names, str) else list(names)
    rewards = reward_functions(names, lean_project, lean_header, lean)
    database, repositories = _setup(db, repo)
    with progress_bar(f"loading {settings.model_name}"):
        trainer = GRPOTrainer.from_config(settings, reward_func=rewards)
    _train_hf(trainer, database, repositories, data)


def reward_functions(
    names: list[str], lean_project: Path | None, header: str, lean: str = "repl"
) -> list:
    """The reward functions named (see ``REWARDS``, and ``lean``, checked by the Lean backend
    ``lean``)."""
    from leanloop.trainer import rewards

    chosen = []
    for name in names:
        if name == "lean":
            chosen.append(_lean_reward(lean_project, header, lean))
        elif name in REWARDS:
            chosen.append(getattr(rewards, REWARDS[name]))
        else:
            raise LeanloopError(
                f"unknown reward {name!r}",
                hint=f"one of: {', '.join([*REWARDS, 'lean'])} (repeat --reward)",
            )
    return chosen


def _lean_reward(lean_project: Path | None, header: str, lean: str = "repl"):
    from leanloop.lean.backends import LeanOptions, open_servers
    from leanloop.prover.config import ProverConfig
    from leanloop.trainer.lean_reward import LeanCheckedReward

    if lean_project is None:
        raise LeanloopError(
            "the 'lean' reward checks tactics with Lean in a project: give --lean-project DIR"
        )
    options = LeanOptions(timeout=ProverConfig().tactic_timeout)
    launcher = open_servers(lean, user_path(lean_project), options)
    return LeanCheckedReward(launcher, header=header)


@app.command("retrieval")
def retrieval(
    config: Path | None = CONFIG_OPTION,
    db: str | None = DB_OPTION,
    data: Path | None = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    model: str | None = MODEL_OPTION,
    output_dir: Path | None = OUTPUT_OPTION,
    max_epochs: int | None = typer.Option(
        None, "--max-epochs", min=1, metavar="N", help="max_epochs per repository."
    ),
    batch_size: int | None = BATCH_OPTION,
    lr: float | None = LR_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    lambda_value: float | None = typer.Option(
        None, "--lambda", min=0, metavar="λ", help="lambda_value: the EWC weight (0: no EWC)."
    ),
    nproc: int | None = NPROC_OPTION,
) -> None:
    """Train the premise retriever as LeanAgent does (RetrievalTrainer, TrainingConfig fields):
    progressive with EWC, and after each repository R@10 on every earlier one (lifelong.json
    and lifelong.png in the output directory)."""
    if relaunched(nproc):
        return
    from leanloop.agent.lean_agent import LeanAgent
    from leanloop.trainer.retrieval_config import TrainingConfig

    overrides = dict(
        model_name=model,
        output_dir=output_dir,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        max_steps=max_steps,
        lambda_value=lambda_value,
    )
    settings, _ = load_config(TrainingConfig, config, overrides)
    database, repositories = _setup(db, repo)
    agent = LeanAgent(database, settings, data_path=user_path(data) if data else None)
    checkpoints = _train(agent, repositories)
    for number, report in enumerate(agent.trainer.reports, start=1):
        console.print(
            f"{number}. {report.repository}: {report.train_steps} steps, {report.val_steps} "
            f"validation steps, best score {report.best_checkpoint_score}",
            highlight=False,
        )
    matrix = agent.lifelong
    if matrix is not None:
        figures = ", ".join(
            f"{name.replace('_', ' ')} {value:.4f}"
            for name, value in matrix.figures().items()
            if value is not None
        )
        console.print(
            f"lifelong R@10 (lifelong.json, lifelong.png in {settings.output_dir}): "
            f"{figures or 'no test step to score'}",
            highlight=False,
        )
    console.print(f"newest checkpoint: {checkpoints[-1]}")


@app.command("progress")
def progress(
    config: Path | None = CONFIG_OPTION,
    db: str | None = DB_OPTION,
    data: Path | None = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    model: str | None = MODEL_OPTION,
    output_dir: Path | None = OUTPUT_OPTION,
    epochs: float | None = typer.Option(None, "--epochs", min=0, metavar="N", help="epochs."),
    batch_size: int | None = BATCH_OPTION,
    lr: float | None = typer.Option(
        None, "--lr", metavar="RATE", help="learning_rate: peak learning rate."
    ),
    nproc: int | None = NPROC_OPTION,
) -> None:
    """Train the progress model (ProgressTrainer, ProgressTrainerConfig fields) on the steps of
    the repositories' traced proofs, written to DATA/progress.jsonl (it replaces the
    configuration's data_path)."""
    if relaunched(nproc):
        return
    from leanloop.trainer.progress import ProgressTrainer
    from leanloop.trainer.progress_config import ProgressTrainerConfig
    from leanloop.trainer.progress_data import build_progress_dataset

    overrides = dict(
        model_name=model,
        output_dir=output_dir,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=lr,
        data_path="progress.jsonl",
    )
    database, repositories = _setup(db, repo)
    settings, _ = load_config(ProgressTrainerConfig, config, overrides)
    settings.data_path = (user_path(data) if data else settings.output_dir / "data") / (
        "progress.jsonl"
    )
    rows = settings.data_path
    order = database.sort_repositories_by_difficulty()
    if repositories is not None:
        order = [r for r in order if r in repositories]
    from leanloop.ml import distributed

    processes = distributed.current()
    if processes.is_main:  # the rows are written once; every process reads them
        build_progress_dataset(database, rows, order)
    processes.barrier()
    count = sum(1 for line in rows.open() if line.strip()) if rows.is_file() else 0
    if count == 0:
        raise LeanloopError(
            "the repositories hold no traced proof to learn progress from",
            hint="import a traced dataset first ('leanloop db import')",
        )
    if processes.is_main:
        console.print(
            f"{plural(count, 'progress row')} from {plural(len(order), 'repository')} in {rows}"
        )
    metrics = ProgressTrainer.from_config(settings).train()
    if not processes.is_main:
        return
    console.print(
        f"progress model in {settings.output_dir}: validation MSE {metrics['mse']:.3f}, "
        f"MAE {metrics['mae']:.3f} steps ({metrics['train_rows']} training rows)",
        highlight=False,
    )
