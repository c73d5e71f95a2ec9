"""The main job's report: what each step gave (data, retriever against BM25, generator against
its base model, replayed search, the Lean part), whether each trained model beat its baseline and,
where it did not, the likely reasons the job knows; written as JSON, Markdown and a plot, and
summed up in a table for the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus
from leanloop.prover.report import EvaluationReport
from leanloop.trainer.evaluation import TacticAccuracy
from leanloop.words import count_of, percent, plural, share

#: Below this many test steps one step moves a figure by more than a point.
SMALL_SAMPLE = 100
#: Below this many passes over the training data, training is called short.
FEW_EPOCHS = 3


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
    reachable_steps: int | None = Field(
        default=None,
        description="Test steps with at least one of their premises among the candidates (the "
        "others are misses for every ranker); None: not recorded.",
    )
    best_possible_r10: float | None = Field(
        default=None, description="The highest R@10 any ranker could reach among these candidates."
    )
    bm25: dict[str, float]
    untrained: dict[str, float]
    trained: dict[str, float]
    train_steps: int = Field(description="Tactic steps the retriever trained on.")
    optimizer_steps: int | None = Field(
        default=None, description="Optimizer steps of the training."
    )
    epochs: float | None = Field(default=None, description="Passes over the training examples.")
    best_val_r10: float | None = Field(
        default=None,
        description="R@10 on the val split of the weights kept (None: no validation finished, "
        "the last weights were kept).",
    )
    device: str | None = Field(default=None, description="Where it trained (cpu, cuda).")
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
    batch_size: int | None = Field(default=None, description="Examples per optimizer step.")
    device: str | None = Field(default=None, description="Where it trained (cpu, cuda).")
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


class Comparison(BaseModel):
    """A trained model against one baseline on the same test data: whether it did better
    (``goal`` "beat": strictly above; "reach": at least as high, for a baseline that is a
    ceiling) and, where it did not, the likely reasons the job knows."""

    subject: str = Field(description="What was trained, e.g. 'trained retriever'.")
    baseline: str = Field(description="What it is measured against, e.g. 'BM25'.")
    metric: str
    value: float = Field(description="The subject's figure (a fraction).")
    baseline_value: float
    shown: str = Field(description="The subject's figure in words (a count or a percentage).")
    baseline_shown: str
    goal: Literal["beat", "reach"] = "beat"
    better: bool
    reasons: list[str] = Field(default_factory=list)

    def verdict(self) -> str:
        """'the trained retriever did not beat BM25' (or beat, reached, did not reach)."""
        if self.goal == "beat":
            done = "beat" if self.better else "did not beat"
        else:
            done = "reached" if self.better else "did not reach"
        return f"the {self.subject} {done} {self.baseline}"

    def relation(self) -> str:
        """The subject's figure against the baseline's: 'below BM25', 'equal to ...'."""
        if abs(self.value - self.baseline_value) < 1e-12:
            return f"equal to {self.baseline}"
        return f"{'above' if self.value > self.baseline_value else 'below'} {self.baseline}"

    def sentence(self) -> str:
        text = (
            f"{_capital(self.verdict())}: {self.metric} {self.shown} against {self.baseline_shown}"
        )
        if self.reasons:
            text += ". Likely why: " + "; ".join(self.reasons)
        return text + "."


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

    # -- trained models against their baselines ------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def comparisons(self) -> list[Comparison]:
        """Each trained model against each of its baselines, in the order of the report."""
        found: list[Comparison] = []
        if self.retriever is not None:
            r = self.retriever
            for name, baseline in (("BM25", r.bm25), ("the untrained encoder", r.untrained)):
                better = r.trained["R@10"] > baseline["R@10"]
                found.append(
                    Comparison(
                        subject="trained retriever",
                        baseline=name,
                        metric="R@10",
                        value=r.trained["R@10"],
                        baseline_value=baseline["R@10"],
                        shown=percent(r.trained["R@10"]),
                        baseline_shown=percent(baseline["R@10"]),
                        better=better,
                        reasons=[] if better else self._retriever_reasons(baseline["R@10"]),
                    )
                )
        if self.generator is not None:
            g = self.generator
            after = (g.after.topk_hits, g.after.top1_hits)
            before = (g.before.topk_hits, g.before.top1_hits)
            better = after > before  # more top-k hits, or as many and more top-1 hits
            found.append(
                Comparison(
                    subject="trained generator",
                    baseline=f"the untrained {g.model}",
                    metric=f"top-{g.after.k} accuracy",
                    value=g.after.topk,
                    baseline_value=g.before.topk,
                    shown=share(g.after.topk_hits, g.after.steps, "test step"),
                    baseline_shown=share(g.before.topk_hits, g.before.steps),
                    better=better,
                    reasons=[] if better else self._generator_reasons(),
                )
            )
        if self.search is not None:
            m, d = self.search.model, self.search.diagnostic
            model_found, diagnostic_found = found_proofs(m), found_proofs(d)
            value = model_found / m.theorems if m.theorems else 0.0
            baseline_value = diagnostic_found / d.theorems if d.theorems else 0.0
            better = value >= baseline_value
            found.append(
                Comparison(
                    subject="trained generator's search",
                    baseline="the recorded diagnostic",
                    metric="recorded proofs found (replay)",
                    value=value,
                    baseline_value=baseline_value,
                    shown=share(model_found, m.theorems, "theorem"),
                    baseline_shown=share(diagnostic_found, d.theorems),
                    goal="reach",
                    better=better,
                    reasons=[] if better else self._search_reasons(),
                )
            )
        return found

    def _retriever_reasons(self, baseline: float) -> list[str]:
        r = self.retriever
        assert r is not None
        reasons = []
        where = "a CPU" if r.device in (None, "cpu") else r.device
        training = f"{r.train_seconds:.0f} s on {where}"
        if r.optimizer_steps is not None:
            training += f", {plural(r.optimizer_steps, 'optimizer step')}"
        if r.epochs is not None:
            training += (
                f" ({plural(r.epochs, 'epoch')} over {plural(r.train_steps, 'training step')})"
            )
        short = r.epochs is None or r.epochs < FEW_EPOCHS
        reasons.append(f"{'short ' if short else ''}training: {training}")
        if r.optimizer_steps is not None and r.best_val_r10 is None:
            reasons.append(
                "no validation finished within the time, so the last weights were kept rather "
                "than the best"
            )
        if r.reachable_steps is not None and r.reachable_steps < r.test_steps:
            limit = (
                ""
                if r.best_possible_r10 is None
                else f", so no ranker can score above {percent(r.best_possible_r10)} R@10"
            )
            source = (
                " (the train split's premises: the data has no corpus.jsonl)"
                if r.pool == "train split"
                else ""
            )
            reasons.append(
                f"only {count_of(r.reachable_steps, r.test_steps, 'test step')} use a premise "
                f"among the candidates{source}{limit}"
            )
        if r.test_steps < SMALL_SAMPLE:
            gap = abs(r.trained["R@10"] - baseline) * r.test_steps
            difference = (
                ""
                if gap < 1e-9
                else f"; the gap is about {plural(max(1, round(gap)), 'test step')}"
            )
            reasons.append(
                f"a small test sample: {plural(r.test_steps, 'step')}, each worth up to "
                f"{100 / r.test_steps:.1f} points of R@10{difference}"
            )
        return reasons

    def _generator_reasons(self) -> list[str]:
        g = self.generator
        assert g is not None
        reasons = []
        where = "a CPU" if g.device in (None, "cpu") else g.device
        training = (
            f"{plural(g.train_steps, 'optimizer step')} in {g.train_seconds:.0f} s on {where}"
        )
        if g.batch_size and g.train_examples:
            epochs = g.train_steps * g.batch_size / g.train_examples
            training += f", {epochs:.2f} of an epoch over {plural(g.train_examples, 'example')}"
        reasons.append(f"short training: {training}")
        if self.config.get("quick"):
            reasons.append(f"the base model is {g.model}, a tiny model for a first look (--quick)")
        if g.after.steps < SMALL_SAMPLE:
            reasons.append(f"a small test sample: {plural(g.after.steps, 'step')}")
        if g.before.topk_hits == 0 and g.after.topk_hits == 0:
            reasons.append(
                f"neither model proposed the recorded tactic among its top {g.after.k} on any "
                "test step"
            )
        return reasons

    def _search_reasons(self) -> list[str]:
        reasons = [
            "the recorded diagnostic replays each recorded proof, so it finds every one it "
            "tries; the trained generator must propose the recorded tactic at every step"
        ]
        g = self.generator
        if g is not None:
            reasons.append(
                f"the trained generator proposes it among its top {g.after.k} on "
                f"{count_of(g.after.topk_hits, g.after.steps, 'test step')}"
            )
        expansions, seconds = (
            self.config.get("search_expansions"),
            self.config.get("search_seconds"),
        )
        if expansions is not None and seconds is not None:
            reasons.append(
                f"a small search budget: {plural(expansions, 'expansion')} and {seconds:g} s "
                "per theorem"
            )
        return reasons

    # -- writing --------------------------------------------------------------------------

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, result, compared with) for the summary table and the Markdown report."""
        rows: list[tuple[str, str, str]] = []
        relations = {(c.subject, c.baseline): c.relation() for c in self.comparisons}

        def relation(subject: str, baseline: str) -> str:
            return relations[subject, baseline]

        if self.data is not None:
            splits = ", ".join(f"{k} {v}" for k, v in self.data.splits.items())
            rows.append(
                (
                    "data",
                    f"{plural(self.data.theorems, 'theorem')} from "
                    f"{plural(len(self.data.repositories), 'repository')} ({splits})",
                    self.data.dataset,
                )
            )
        if self.retriever is not None:
            r = self.retriever
            among = (
                "" if r.pool is None else f", {plural(r.pool_premises or 0, 'candidate')}: {r.pool}"
            )
            rows.append(
                (
                    f"retriever R@10 ({plural(r.test_steps, 'test step')}{among})",
                    f"{percent(r.trained['R@10'])} trained",
                    f"BM25 {percent(r.bm25['R@10'])}, untrained {percent(r.untrained['R@10'])}: "
                    f"trained is {relation('trained retriever', 'BM25')}, "
                    f"{relation('trained retriever', 'the untrained encoder')}",
                )
            )
        if self.generator is not None:
            g = self.generator
            rows.append(
                (
                    f"tactic accuracy ({plural(g.after.steps, 'test step')}, k={g.after.k})",
                    f"top-1 {share(g.after.top1_hits, g.after.steps)}, top-{g.after.k} "
                    f"{share(g.after.topk_hits, g.after.steps)} trained",
                    f"untrained {g.model}: top-1 {share(g.before.top1_hits, g.before.steps)}, "
                    f"top-{g.before.k} {share(g.before.topk_hits, g.before.steps)}: trained is "
                    f"{relation('trained generator', f'the untrained {g.model}')}",
                )
            )
        if self.search is not None:
            m, d = self.search.model, self.search.diagnostic
            rows.append(
                (
                    "search, replay environment (no Lean)",
                    f"recorded proofs found for {count_of(found_proofs(m), m.theorems, 'theorem')}"
                    " (trained generator)",
                    f"recorded diagnostic: {count_of(found_proofs(d), d.theorems)}: trained is "
                    + relation("trained generator's search", "the recorded diagnostic"),
                )
            )
        if self.lean is not None:
            text = (
                f"{count_of(self.lean.proved, self.lean.tried, 'sorry')} proved and written"
                if self.lean.status == "done"
                else self.lean.status
            )
            rows.append(("Lean: example project", text, self.lean.reason.split(":")[0]))
        rows.append(("time", f"{self.seconds:.0f} s", f"expected ~{self.expected_seconds:.0f} s"))
        return rows

    def findings(self) -> list[str]:
        """One sentence per comparison, for the console: did each trained model beat its
        baseline, and if not, the likely reasons."""
        return [c.sentence() for c in self.comparisons]

    def markdown(self) -> str:
        lines = [
            "# leanloop run",
            "",
            "| step | result | compared with |",
            "|---|---|---|",
            *(f"| {a} | {b} | {c} |" for a, b, c in self.rows()),
            "",
            *self._comparison_lines(),
            *self._pool_lines(),
            "Found proofs in the replay environment are recorded proofs found again by the "
            "search over recorded transitions: no Lean checked them, so they are not called "
            "proved.",
            "",
        ]
        if self.timings:
            lines += [
                "Timings (seconds): "
                + ", ".join(f"{step} {seconds:.0f}" for step, seconds in self.timings.items()),
                "",
            ]
        return "\n".join(lines)

    def _comparison_lines(self) -> list[str]:
        comparisons = self.comparisons
        if not comparisons:
            return []
        lines = ["## Trained models against their baselines", ""]
        for c in comparisons:
            reasons = ". Likely why: " + "; ".join(c.reasons) if c.reasons else ""
            lines.append(
                f"- **{_capital(c.verdict())}**: {c.metric} {c.shown} against "
                f"{c.baseline_shown}{reasons}."
            )
        return [*lines, ""]

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
        write_figure_atomic(path, self.figure())
        return path

    def figure(self):
        """The report's figure (a matplotlib ``Figure``): the retriever's R@10 against its
        baselines, tactic accuracy before and after training as counts of test steps, and the
        replayed searches' theorems by outcome."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(15, 4.8))
        axes = figure.subplots(1, 3)
        if self.retriever is not None:
            relations = [c.relation() for c in self.comparisons if c.subject == "trained retriever"]
            _retriever_panel(axes[0], self.retriever, relations)
        else:
            _empty(axes[0], "retriever: not run")
        if self.generator is not None:
            _generator_panel(axes[1], self.generator)
        else:
            _empty(axes[1], "tactic generator: not run")
        if self.search is not None:
            _search_panel(axes[2], self.search)
        else:
            _empty(axes[2], "search: not run")
        figure.tight_layout()
        return figure


def found_proofs(report: EvaluationReport) -> int:
    """Theorems of ``report`` whose proof was found (proved, replayed or recorded)."""
    return sum(
        count for status, count in report.status_counts.items() if AttemptStatus(status).found_proof
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _empty(axes, title: str) -> None:
    axes.set_title(title)
    axes.set_axis_off()


def _retriever_panel(axes, r: RetrieverResults, relations: list[str]) -> None:
    names = ["BM25", "untrained", "trained"]
    values = [100 * r.bm25["R@10"], 100 * r.untrained["R@10"], 100 * r.trained["R@10"]]
    colours = ["#aaaaaa", "#aaaaaa", "#3366cc"]
    bars = axes.bar(names, values, color=colours, label=["baseline", "baseline", "trained"])
    axes.bar_label(bars, labels=[f"{v:.1f} %" for v in values])
    if r.best_possible_r10 is not None:
        axes.axhline(
            100 * r.best_possible_r10,
            color="#cc3333",
            linestyle="--",
            label=f"highest possible ({percent(r.best_possible_r10)})",
        )
    axes.set_ylim(0, max(1.0, *values, 100 * (r.best_possible_r10 or 0)) * 1.25)
    axes.set_xlabel("ranker")
    axes.set_ylabel("R@10 (%)")
    title = f"retriever R@10 on {plural(r.test_steps, 'test step')}"
    if relations:
        title += f"\ntrained is {', '.join(relations)}"
    axes.set_title(title)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes.legend(unique.values(), unique.keys(), loc="upper left", fontsize=8)


def _generator_panel(axes, g: GeneratorResults) -> None:
    labels = ["top-1", f"top-{g.after.k}"]
    steps = max(g.after.steps, g.before.steps)
    groups = (
        (f"untrained {g.model}", g.before, -0.2, "#bbbbbb"),
        ("trained", g.after, 0.2, "#3366cc"),
    )
    for name, accuracy, offset, colour in groups:
        hits = [accuracy.top1_hits, accuracy.topk_hits]
        bars = axes.bar(
            [i + offset for i in range(len(labels))], hits, 0.4, label=name, color=colour
        )
        axes.bar_label(bars, labels=[count_of(h, accuracy.steps) for h in hits])
    axes.set_xticks(range(len(labels)), labels)
    axes.set_ylim(0, max(1, steps) * 1.25)
    axes.set_xlabel("recorded tactic among the model's first k candidates")
    axes.set_ylabel("test steps")
    axes.set_title(f"tactic accuracy on {plural(steps, 'test step')}")
    axes.legend(loc="upper left", fontsize=8)


#: Colours of attempt outcomes in the search panel.
_OUTCOME_COLOURS = {
    "proved": "#2a9d4b",
    "replayed": "#3366cc",
    "recorded": "#6a5acd",
    "failed": "#bbbbbb",
    "timeout": "#e0a030",
    "budget": "#d07030",
    "refused": "#aa3333",
    "error": "#333333",
}


def _search_panel(axes, search: SearchSummary) -> None:
    provers = (("trained generator", search.model), ("recorded diagnostic", search.diagnostic))
    statuses = [
        s.value for s in AttemptStatus if any(s.value in r.status_counts for _, r in provers)
    ]
    x = list(range(len(provers)))
    bottoms = [0] * len(provers)
    for status in statuses:
        counts = [report.status_counts.get(status, 0) for _, report in provers]
        axes.bar(
            x,
            counts,
            0.6,
            bottom=bottoms,
            label=status,
            color=_OUTCOME_COLOURS.get(status, "#777777"),
        )
        bottoms = [b + c for b, c in zip(bottoms, counts, strict=True)]
    for i, (_, report) in enumerate(provers):
        axes.text(
            i,
            bottoms[i],
            f"{count_of(found_proofs(report), report.theorems)} replayed",
            ha="center",
            va="bottom",
        )
    axes.set_xticks(x, [f"{name}\n({plural(r.theorems, 'theorem')})" for name, r in provers])
    axes.set_ylim(0, max(1, *bottoms) * 1.25)
    axes.set_ylabel("test theorems")
    axes.set_title("replayed search (no Lean): theorems by outcome")
    if statuses:
        axes.legend(title="outcome", loc="upper left", fontsize=8)
