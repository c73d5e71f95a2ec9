"""The main job's report: what each step gave (data, retriever against BM25, generator against
its base model, replayed search, the Lean part), written as JSON, Markdown and a plot, and
summed up in a table for the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.prover.report import EvaluationReport
from leanloop.trainer.evaluation import TacticAccuracy


class DataSummary(BaseModel):
    dataset: str
    repositories: list[str]
    theorems: int
    tactics: int
    splits: dict[str, int]
    export: str


class RetrieverResults(BaseModel):
    """R@1, R@10 and MRR (fractions) on the test steps that use a premise, each ranked among
    the same candidate pool by BM25, the untrained and the trained retriever."""

    test_steps: int
    pool: str | None = Field(
        default=None,
        description="Where the candidates came from: corpus.jsonl, or without one the premises "
        "of the train split's proofs ('train split'); None in reports written before it was "
        "recorded.",
    )
    pool_premises: int | None = Field(default=None, description="Premises in the candidate pool.")
    bm25: dict[str, float]
    untrained: dict[str, float]
    trained: dict[str, float]
    train_steps: int = Field(description="Tactic steps the retriever trained on.")
    train_seconds: float
    seconds: float

    def pool_description(self) -> str | None:
        """The candidate pool in words (None when not recorded)."""
        from leanloop.retrieval.corpus import describe_pool

        if self.pool is None or self.pool_premises is None:
            return None
        return describe_pool(self.pool, self.pool_premises)


class GeneratorResults(BaseModel):
    model: str
    before: TacticAccuracy
    after: TacticAccuracy
    train_steps: int
    train_examples: int
    train_seconds: float
    train_tokens: int | None = None
    seconds: float


class SearchSummary(BaseModel):
    """Searches in the replay environment: found proofs are recorded proofs found again, not
    proofs checked by Lean."""

    model: EvaluationReport
    diagnostic: EvaluationReport


class LeanResults(BaseModel):
    """The Lean part: skipped (and why) where no toolchain is found, else its outcome."""

    status: str
    reason: str = ""
    proved: int = 0
    tried: int = 0
    report: dict[str, Any] | None = None


class RunReport(BaseModel):
    config: dict[str, Any]
    expected_seconds: float
    seconds: float = 0.0
    timings: dict[str, float] = Field(default_factory=dict)
    data: DataSummary | None = None
    retriever: RetrieverResults | None = None
    generator: GeneratorResults | None = None
    search: SearchSummary | None = None
    lean: LeanResults | None = None

    # -- writing --------------------------------------------------------------------------

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, result, compared with) for the summary table and the Markdown report."""
        rows: list[tuple[str, str, str]] = []
        if self.data is not None:
            splits = ", ".join(f"{k} {v}" for k, v in self.data.splits.items())
            rows.append(("data", f"{self.data.theorems} theorems ({splits})", self.data.dataset))
        if self.retriever is not None:
            r = self.retriever
            among = "" if r.pool is None else f", {r.pool_premises} candidates: {r.pool}"
            rows.append(
                (
                    f"retriever R@10 ({r.test_steps} test steps{among})",
                    f"{100 * r.trained['R@10']:.1f} % trained",
                    f"BM25 {100 * r.bm25['R@10']:.1f} %, untrained "
                    f"{100 * r.untrained['R@10']:.1f} %",
                )
            )
        if self.generator is not None:
            g = self.generator
            rows.append(
                (
                    f"tactic accuracy ({g.after.steps} test steps, k={g.after.k})",
                    f"top-1 {g.after.top1:.3f}, top-{g.after.k} {g.after.topk:.3f} trained",
                    f"untrained {g.model}: top-1 {g.before.top1:.3f}, top-{g.before.k} "
                    f"{g.before.topk:.3f}",
                )
            )
        if self.search is not None:
            m, d = self.search.model, self.search.diagnostic
            rows.append(
                (
                    "search, replay environment (no Lean)",
                    f"recorded proofs found for {round(m.rate_at_1 * m.theorems)} of "
                    f"{m.theorems} theorems (trained generator)",
                    f"recorded diagnostic: {round(d.rate_at_1 * d.theorems)} of {d.theorems}",
                )
            )
        if self.lean is not None:
            text = (
                f"{self.lean.proved} of {self.lean.tried} sorries proved and written"
                if self.lean.status == "done"
                else self.lean.status
            )
            rows.append(("Lean: example project", text, self.lean.reason.split(":")[0]))
        rows.append(("time", f"{self.seconds:.0f} s", f"expected ~{self.expected_seconds:.0f} s"))
        return rows

    def markdown(self) -> str:
        lines = [
            "# leanloop run",
            "",
            "| step | result | compared with |",
            "|---|---|---|",
            *(f"| {a} | {b} | {c} |" for a, b, c in self.rows()),
            "",
            *self._pool_lines(),
            "Found proofs in the replay environment are recorded proofs found again by the "
            "search over recorded transitions: no Lean checked them, so they are not called "
            "proved.",
            "",
            "Timings (seconds): "
            + ", ".join(f"{step} {seconds:.0f}" for step, seconds in self.timings.items()),
            "",
        ]
        return "\n".join(lines)

    def _pool_lines(self) -> list[str]:
        """What the retriever's R@k were measured among, in words."""
        described = None if self.retriever is None else self.retriever.pool_description()
        if described is None:
            return []
        return [f"Retriever R@k: each test step's premises are ranked among {described}.", ""]

    def write(self, out: Path) -> list[Path]:
        """report.json, report.md and report.png in ``out``."""
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "report.json", out / "report.md", out / "report.png"]
        write_text_atomic(paths[0], json.dumps(self.model_dump(mode="json"), indent=2) + "\n")
        write_text_atomic(paths[1], self.markdown())
        self.plot(paths[2])
        return paths

    def plot(self, path: Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(1, 3, figsize=(13, 4))
        if self.retriever is not None:
            r = self.retriever
            names = ["BM25", "untrained", "trained"]
            values = [100 * r.bm25["R@10"], 100 * r.untrained["R@10"], 100 * r.trained["R@10"]]
            bars = axes[0].bar(names, values, color=["#999999", "#bbbbbb", "#3366cc"])
            axes[0].bar_label(bars, fmt="%.1f")
            axes[0].set_title(f"retriever R@10 (%), {r.test_steps} test steps")
        if self.generator is not None:
            g = self.generator
            labels = ["top-1", f"top-{g.after.k}"]
            x = range(len(labels))
            before = [g.before.top1, g.before.topk]
            after = [g.after.top1, g.after.topk]
            bars = axes[1].bar([i - 0.2 for i in x], before, 0.4, label="base", color="#bbbbbb")
            axes[1].bar_label(bars, fmt="%.2f")
            bars = axes[1].bar([i + 0.2 for i in x], after, 0.4, label="trained", color="#3366cc")
            axes[1].bar_label(bars, fmt="%.2f")
            axes[1].set_xticks(list(x), labels)
            axes[1].set_ylim(0, max(0.1, *before, *after) * 1.25)
            axes[1].legend()
            axes[1].set_title(f"tactic accuracy, {g.after.steps} test steps")
        if self.search is not None:
            for offset, (name, report) in enumerate(
                (("trained", self.search.model), ("recorded", self.search.diagnostic))
            ):
                statuses = sorted(report.status_counts)
                axes[2].bar(
                    [f"{s}\n{name}" for s in statuses],
                    [report.status_counts[s] for s in statuses],
                    color="#3366cc" if offset == 0 else "#999999",
                )
            axes[2].set_title("replayed search: outcomes per theorem")
            axes[2].tick_params(axis="x", labelsize=7)
        figure.tight_layout()
        write_figure_atomic(path, figure)
        plt.close(figure)
        return path
