"""The main job's model steps, each of which leaves its outputs whole or not at all (trained in a
staging directory renamed into place) and its record (``run_steps``): the untrained generator's
held-out loss and top-k accuracy, the retriever (BM25, untrained, trained, every test step ranked
among all candidates), the generator's LoRA training, and the trained generator measured on the
same test steps as the untrained one. ``side_track`` runs the first two in a process of its own,
on the other core, while the generator trains."""

from __future__ import annotations

import contextlib
import csv
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.run_output import LOG_FILE, library_output, one_interrupt
from leanloop.agent.run_steps import STEP_WORDS, Decision, RunSteps
from leanloop.atomic import replace_directory
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.ml.models import LATEST_FILE, latest_checkpoint
from leanloop.words import percent, plural

Say = Callable[[str], None]

#: The metrics the trainers log as their training loss, and what the loss is.
GENERATOR_LOSS = ("loss", "nats per completion token")
RETRIEVER_LOSS = ("loss_train", "nats per query, contrastive")


@dataclass(frozen=True)
class StepSpec:
    """What a step runs with and writes (see ``RunSteps.decide``), and the decision taken."""

    settings: dict[str, Any]
    inputs: dict[str, str]
    outputs: list[str]
    decision: Decision


def say_line(text: str) -> None:
    """A line of the job on its output, from any of its processes."""
    print(text, flush=True)


def _is_ours(directory: Path) -> bool:
    """Whether a directory in the output directory holds what a trainer of the job left."""
    return (directory / LATEST_FILE).is_file() or not any(directory.iterdir())


def _decoding(config: RunConfig) -> dict[str, Any]:
    return {"method": "beam", "max_new_tokens": config.eval_max_new_tokens, "batch_size": 1}


# -- the untrained generator ------------------------------------------------------------------


def generator_before(config: RunConfig, out: Path, say: Say) -> dict[str, Any]:
    """The untrained generator's held-out loss and top-k accuracy on the first test steps,
    each within its time (the trained generator is later measured on the steps measured
    here)."""
    from leanloop.data.prompt import PromptFormat
    from leanloop.ml.generation import TacticGenerator
    from leanloop.trainer.evaluation import completion_loss, evaluate_tactics, load_examples

    export = out / "export"
    say(f"tactic generator: held-out loss and accuracy of the untrained {config.generator_model}")
    base = TacticGenerator(config.generator_model, device="cpu")
    examples = load_examples(export, prompt_format=PromptFormat(), max_steps=config.loss_steps)
    loss = completion_loss(
        base.model, base.tokenizer, examples, max_seconds=config.loss_seconds, min_steps=2
    )
    accuracy = evaluate_tactics(
        base,
        export,
        k=config.eval_k,
        max_steps=config.eval_steps,
        max_seconds=config.eval_seconds,
        **_decoding(config),
    )
    say(f"  untrained: {loss}; {accuracy}")
    return {"loss": loss.model_dump(), "accuracy": accuracy.model_dump()}


def generator_after(
    config: RunConfig, out: Path, before: dict[str, Any], say: Say
) -> dict[str, Any]:
    """The trained generator's held-out loss and top-k accuracy on the test steps the
    untrained one was measured on, each within the same time as the untrained one's (the
    report compares the steps both measured, so the job's time stays what its plan says)."""
    from leanloop.data.prompt import PromptFormat
    from leanloop.ml.generation import TacticGenerator
    from leanloop.trainer.evaluation import completion_loss, evaluate_tactics, load_examples

    export = out / "export"
    steps = len(before["loss"]["per_step"])
    accuracy_steps = before["accuracy"]["steps"]
    say("tactic generator: the same held-out loss and accuracy after training ...")
    trained = TacticGenerator(out / "generator", device="cpu")
    examples = load_examples(export, prompt_format=PromptFormat(), max_steps=steps)
    loss = completion_loss(
        trained.model, trained.tokenizer, examples, max_seconds=config.loss_seconds, min_steps=2
    )
    accuracy = evaluate_tactics(
        trained,
        export,
        k=config.eval_k,
        max_steps=accuracy_steps,
        max_seconds=config.eval_seconds,
        **_decoding(config),
    )
    say(f"  trained: {loss}; {accuracy}")
    return {"loss": loss.model_dump(), "accuracy": accuracy.model_dump()}


# -- the generator's training -------------------------------------------------------------------


def train_generator(
    config: RunConfig, database: DynamicDatabase, out: Path, say: Say
) -> dict[str, Any]:
    """LoRA fine-tuning of the generator within its time, written aside and renamed into
    ``out/generator`` once saved; its loss per step from the trainer's log history."""
    import gc

    from peft import LoraConfig

    from leanloop.trainer.hf_common import LOG_HISTORY
    from leanloop.trainer.sft import SFTTrainer

    say(f"tactic generator: LoRA training for {config.generator_seconds:.0f} s ...")
    with replace_directory(out / "generator", may_replace=_is_ours) as staging:
        trainer = SFTTrainer(
            config.generator_model,
            output_dir=staging,
            batch_size=config.generator_batch_size,
            lr=config.generator_lr,
            lora_config=LoraConfig(r=config.lora_r, lora_alpha=2 * config.lora_r),
            max_steps=100_000,
            max_seconds=config.generator_seconds,
            evaluate=False,
            progress_bars=False,
            logging_steps=1,
            seed=config.seed,
        )
        trainer.train(database.sort_repositories_by_difficulty(), database, staging / "data")
        step = trainer.reports[-1]
        device = trainer.hardware.device
        checkpoint = latest_checkpoint(staging)
        curve = _history_curve(None if checkpoint is None else checkpoint / LOG_HISTORY)
        del trainer
        gc.collect()
    say(
        f"  {plural(step.global_steps, 'optimizer step')} on "
        f"{plural(step.train_examples, 'example')} in {step.train_seconds:.0f} s"
        + (f" ({step.train_tokens / step.train_seconds:.0f} tokens/s)" if step.train_tokens else "")
    )
    return {
        "train_steps": step.global_steps,
        "train_examples": step.train_examples,
        "train_seconds": step.train_seconds,
        "train_tokens": step.train_tokens,
        "batch_size": config.generator_batch_size,
        "device": device,
        "curve": curve,
    }


def _history_curve(path: Path | None) -> dict[str, Any] | None:
    """The training loss per step in a Hugging Face log history (None: no history)."""
    if path is None or not path.is_file():
        return None
    key, unit = GENERATOR_LOSS
    entries = [e for e in json.loads(path.read_text()) if key in e and "step" in e]
    return {
        "unit": unit,
        "steps": [int(e["step"]) for e in entries],
        "values": [float(e[key]) for e in entries],
    }


def _csv_curve(path: Path | None) -> dict[str, Any] | None:
    """The training loss per step in a Lightning ``metrics.csv`` (None: no such file)."""
    if path is None or not path.is_file():
        return None
    key, unit = RETRIEVER_LOSS
    steps, values = [], []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get(key) and row.get("step"):
                steps.append(int(float(row["step"])) + 1)  # Lightning counts steps from 0
                values.append(float(row[key]))
    return {"unit": unit, "steps": steps, "values": values}


# -- the retriever ---------------------------------------------------------------------------


def retriever_track(config: RunConfig, database_url: str, out: Path, say: Say) -> dict[str, Any]:
    """BM25, the untrained encoder and the trained retriever on the test split, among the same
    candidate pool (``evaluation_data``: corpus.jsonl, or the train split's premises): every
    test step's premises ranked among all the candidates accessible to it, so that each step's
    rank of its first premise is known; the retriever trained within its time, written aside
    and renamed into ``out/retriever``."""
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig
    from leanloop.trainer.retrieval_evaluation import evaluation_data

    export = out / "export"
    started = time.perf_counter()
    test_steps, pool = evaluation_data(export, "random", "test")
    _, best_possible = best_possible_recall(test_steps, pool.corpus)
    bm25 = _rank(None, pool, test_steps)
    untrained = _rank(
        PremiseRetriever.load(config.retriever_model, max_seq_len=config.retriever_max_seq_len),
        pool,
        test_steps,
    )
    say(
        f"retriever: R@10 on {plural(len(test_steps), 'test step')}: BM25 "
        f"{percent(bm25['figures']['R@10'])}, untrained {percent(untrained['figures']['R@10'])}; "
        f"training for {config.retriever_seconds:.0f} s ..."
    )
    minutes, seconds = divmod(int(config.retriever_seconds), 60)
    with replace_directory(out / "retriever", may_replace=_is_ours) as staging:
        settings = TrainingConfig(
            model_name=config.retriever_model,
            output_dir=staging,
            run_progressive_training=False,  # one run, no later repository to protect
            max_epochs=50,
            max_time=f"00:00:{minutes:02d}:{seconds:02d}",
            batch_size=config.retriever_batch_size,
            max_seq_len=config.retriever_max_seq_len,
            num_gpus=0,
            enable_progress_bar=False,  # lines instead, on the job's output
            log_every_n_steps=1,
            seed=config.seed,
        )
        trainer = RetrievalTrainer(settings, progress=say)
        database = DynamicDatabase(database_url)
        train_started = time.perf_counter()
        try:
            trainer.train(database.sort_repositories_by_difficulty(), database, staging / "data")
        except SystemExit as exc:  # Lightning ends a fit that Ctrl-C stopped with sys.exit(1)
            raise KeyboardInterrupt from exc
        train_seconds = time.perf_counter() - train_started
        checkpoint = latest_checkpoint(staging)
        assert checkpoint is not None  # train() saved one
        model = trainer.load_model(checkpoint)
        model.freeze()
        trained = _rank(model, pool, test_steps)
        curve = _csv_curve(checkpoint / "metrics.csv")
    say(f"retriever: trained R@10 {percent(trained['figures']['R@10'])}")
    last = trainer.reports[-1] if trainer.reports else None
    rankers = {"bm25": bm25, "untrained": untrained, "trained": trained}
    ranks = {name: ranked["ranks"] for name, ranked in rankers.items()}
    return {
        "test_steps": len(test_steps),
        "pool": pool.source,
        "pool_premises": pool.size,
        "reachable_steps": sum(rank is not None for rank in ranks["trained"]),
        "best_possible_r10": best_possible,
        "bm25": bm25["figures"],
        "untrained": untrained["figures"],
        "trained": trained["figures"],
        "ranks": ranks,
        "recall10": {name: ranked["recall10"] for name, ranked in rankers.items()},
        "train_steps": last.train_steps if last else 0,
        "optimizer_steps": last.optimizer_steps if last else 0,
        "epochs": last.epochs if last else 0.0,
        "best_val_r10": last.best_checkpoint_score if last else None,
        "device": "cpu",  # num_gpus=0
        "curve": curve,
        "train_seconds": train_seconds,
        "seconds": time.perf_counter() - started,
    }


def _rank(retriever, pool, steps) -> dict[str, Any]:
    """Every step's premises ranked among all the candidates accessible to it (BM25 when
    ``retriever`` is None): the summary figures (R@k and MRR over the first 100, as
    ``evaluate_retriever`` gives them), each step's rank of its first premise (None: none is
    accessible) and each step's R@10."""
    from leanloop.retrieval.bm25 import bm25_rankings
    from leanloop.retrieval.index import PremiseIndex, rank_steps
    from leanloop.retrieval.metrics import evaluate_rankings, recall_at_k

    everything = max(1, pool.size)
    if retriever is None:
        ranked = bm25_rankings(pool.corpus, steps, everything)
    else:
        index = PremiseIndex.build(retriever, pool.corpus, batch_size=32)
        ranked = rank_steps(index, steps, everything)
    ranks: list[int | None] = []
    for step, names in zip(steps, ranked, strict=True):
        wanted = set(step.positives)
        ranks.append(next((i for i, name in enumerate(names, start=1) if name in wanted), None))
    figures = evaluate_rankings((s.positives, r[:100]) for s, r in zip(steps, ranked, strict=True))
    return {
        "figures": figures.as_dict(),
        "ranks": ranks,
        "recall10": [recall_at_k(s.positives, r, 10) for s, r in zip(steps, ranked, strict=True)],
    }


def best_possible_recall(steps, corpus) -> tuple[int, float]:
    """How many of ``steps`` use a premise among the candidates of ``corpus`` (the others are
    misses for every ranker), and the highest R@10 any ranking of them could give."""
    reachable = 0
    total = 0.0
    for step in steps:
        present = sum(name in corpus for name in set(step.positives))
        reachable += present > 0
        total += min(present, 10) / len(set(step.positives))
    return reachable, total / len(steps) if steps else 0.0


# -- the other core ----------------------------------------------------------------------------


SIDE_STEPS = ("generator-before", "retriever")


def run_side_steps(
    config: RunConfig,
    database_url: str,
    out: Path,
    specs: dict[str, StepSpec],
    say: Say,
    send: Callable[[str, dict[str, Any]], None],
) -> None:
    """The steps of the other core that ``specs`` names, in order: each one's record is
    written as soon as its outputs are in place, and its result sent on."""
    steps = RunSteps(out)
    for name in SIDE_STEPS:
        spec = specs.get(name)
        if spec is None:
            continue
        started = time.perf_counter()
        if name == "generator-before":
            result = generator_before(config, out, say)
        else:
            result = retriever_track(config, database_url, out, say)
        steps.finish(spec.decision, spec.settings, spec.inputs, spec.outputs, result, started)
        send(name, result)


def side_track(
    config_data: dict[str, Any],
    database_url: str,
    out: str,
    specs: dict[str, StepSpec],
    verbose: bool,
    connection,
) -> None:
    """``run_side_steps`` in a process of its own, on one core, its results and failures sent
    back through ``connection``: ("result", step, result), ("error", message, hint), or
    ("interrupted",) after Ctrl-C (its unfinished step leaves nothing behind)."""

    def send(*message) -> None:
        with contextlib.suppress(OSError, EOFError):  # the job is gone
            connection.send(message)

    try:
        with one_interrupt(), library_output(Path(out) / LOG_FILE, verbose=verbose):
            from leanloop.ml.device import limit_threads

            limit_threads(1)
            config = RunConfig.from_dict(config_data)
            try:
                run_side_steps(
                    config,
                    database_url,
                    Path(out),
                    specs,
                    say_line,
                    lambda name, result: send("result", name, result),
                )
            except LeanloopError as exc:
                send("error", exc.message, exc.hint)
            except Exception as exc:  # said in one line; the traceback goes to the log
                traceback.print_exc()
                send("error", f"{type(exc).__name__}: {exc}", f"see {Path(out) / LOG_FILE}")
    except KeyboardInterrupt:
        send("interrupted")


class SideProcess:
    """``side_track`` in a process of its own (spawned: no state of this one is shared), its
    results read as they come."""

    def __init__(
        self, config: RunConfig, url: str, out: Path, specs: dict[str, StepSpec], verbose: bool
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.out = out
        self.connection, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=side_track,
            args=(config.to_dict(), url, str(out), specs, verbose, sender),
            name="leanloop-run-other-core",
        )
        self.process.start()
        sender.close()
        self.ended = False

    def wait_for(self, step: str, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The result of ``step``, once the process sends it (others are kept in
        ``results``)."""
        while step not in results:
            ready = multiprocessing.connection.wait([self.connection, self.process.sentinel])
            if self.connection in ready or self.connection.poll():
                try:
                    message = self.connection.recv()
                except EOFError:
                    message = ("ended",)
            else:
                message = ("ended",)
            self._take(message, results, step)
        return results[step]

    def _take(self, message: tuple, results: dict[str, dict[str, Any]], step: str) -> None:
        kind = message[0]
        if kind == "result":
            results[message[1]] = message[2]
            return
        self.ended = True
        if kind == "interrupted":
            raise KeyboardInterrupt
        if kind == "error":
            raise LeanloopError(message[1], hint=message[2])
        raise LeanloopError(
            f"the job's other process ended (exit code {self.process.exitcode}) before "
            f"{STEP_WORDS[step]} was finished",
            hint=f"see {self.out / LOG_FILE}",
        )

    def close(self, *, interrupt: bool) -> None:
        """Wait for the process to end; with ``interrupt``, first stop it as Ctrl-C would
        (its unfinished step removes what it had written)."""
        pid = self.process.pid
        if interrupt and not self.ended and self.process.is_alive() and pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
        self.process.join(timeout=120)
        if self.process.is_alive():  # it does not answer: stop it the hard way
            self.process.terminate()
            self.process.join()
        self.connection.close()
