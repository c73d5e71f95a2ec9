"""The main job's report: what each step gave (data, retriever against BM25 and the untrained
encoder, generator against its base model, replayed search, the Lean part), whether each trained
model did measurably better than its baseline under one noise rule for wins and losses
(``run_compare``) and, where it did not, the likely reasons the job knows; the training curves;
written as JSON, Markdown and a figure (``run_figure``), and summed up in a table for the
terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, computed_field

from leanloop.agent.run_compare import Comparison, Interval, paired_interval, rule_text
from leanloop.agent.run_results import (
    RANKERS,
    DataSummary,
    GeneratorResults,
    LeanResults,
    RetrieverResults,
    SearchSummary,
    TrainingCurve,
)
from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus
from leanloop.prover.report import EvaluationReport
from leanloop.words import count_of, percent, plural, share

__all__ = [
    "DataSummary",
    "GeneratorResults",
    "LeanResults",
    "RetrieverResults",
    "RunReport",
    "SearchSummary",
    "TrainingCurve",
    "found_proofs",
]

#: Below this many test steps one step moves a figure by more than a point.
SMALL_SAMPLE = 100
#: Below this many passes over the training data, training is called short.
FEW_EPOCHS = 3


class RunReport(BaseModel):
    config: dict[str, Any]
    expected_seconds: float
    seconds: float = 0.0
    timings: dict[str, float] = Field(default_factory=dict)
    steps: dict[str, str] = Field(
        default_factory=dict,
        description="Each step of the job: done, reused from an earlier run, or redone (why).",
    )
    data: DataSummary | None = None
    retriever: RetrieverResults | None = None
    generator: GeneratorResults | None = None
    search: SearchSummary | None = None
    lean: LeanResults | None = None

    # -- trained models against their baselines ------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def comparisons(self) -> list[Comparison]:
        """Each trained model against each of its baselines on the same test items, in the
        order of the report."""
        found: list[Comparison] = []
        if self.retriever is not None:
            found += self._retriever_comparisons(self.retriever)
        if self.generator is not None:
            found += self._generator_comparisons(self.generator)
        if self.search is not None:
            found.append(self._search_comparison(self.search))
        return found

    def _retriever_comparisons(self, r: RetrieverResults) -> list[Comparison]:
        subject = "trained retriever"
        found = []
        for key in ("bm25", "untrained"):
            baseline = RANKERS[key]
            if r.ranks is not None:
                reachable = len(r.reachable_ranks("trained"))
                on = (
                    f"on the {count_of(reachable, r.test_steps, 'test step')} with a premise "
                    "among the candidates"
                )
                mrr, rank = [], []
                for name in ("trained", key):
                    ranks = r.reachable_ranks(name)
                    mrr.append([1 / x for x in ranks])
                    rank.append([float(x) for x in ranks])
                found.append(
                    Comparison.of(
                        paired_interval(*mrr),
                        subject=subject,
                        baseline=baseline,
                        metric=f"MRR {on}",
                        value=r.mrr_reachable("trained"),
                        baseline_value=r.mrr_reachable(key),
                        shown=f"{r.mrr_reachable('trained'):.3f}",
                        baseline_shown=f"{r.mrr_reachable(key):.3f}",
                        digits=3,
                    )
                )
                found.append(
                    Comparison.of(
                        paired_interval(*rank),
                        subject=subject,
                        baseline=baseline,
                        metric=f"mean rank of the first premise {on}",
                        value=r.mean_rank("trained"),
                        baseline_value=r.mean_rank(key),
                        shown=f"{r.mean_rank('trained'):.1f}",
                        baseline_shown=f"{r.mean_rank(key):.1f}",
                        higher_is_better=False,
                        digits=1,
                    )
                )
            interval = (
                None
                if r.recall10 is None
                else paired_interval(r.recall10["trained"], r.recall10[key])
            )
            found.append(
                Comparison.of(
                    interval,
                    subject=subject,
                    baseline=baseline,
                    metric=f"R@10 on all {plural(r.test_steps, 'test step')}",
                    value=r.trained["R@10"],
                    baseline_value=r.bm25["R@10"] if key == "bm25" else r.untrained["R@10"],
                    shown=percent(r.trained["R@10"]),
                    baseline_shown=percent(
                        r.bm25["R@10"] if key == "bm25" else r.untrained["R@10"]
                    ),
                    scale=100,
                    unit=" points",
                    digits=1,
                )
            )
        for comparison in found:
            if not comparison.better:
                comparison.reasons = self._retriever_reasons()
        return found

    def _generator_comparisons(self, g: GeneratorResults) -> list[Comparison]:
        subject, baseline = "trained generator", f"the untrained {g.model}"
        found = []
        if g.loss_before is not None and g.loss_after is not None:
            n = min(g.loss_before.steps, g.loss_after.steps)
            before, after = g.loss_before.first(n), g.loss_after.first(n)
            tokens = [s.tokens for s in after.per_step]
            found.append(
                Comparison.of(
                    paired_interval(
                        [s.nll for s in after.per_step],
                        [s.nll for s in before.per_step],
                        subject_weights=tokens,
                        baseline_weights=[s.tokens for s in before.per_step],
                    ),
                    subject=subject,
                    baseline=baseline,
                    metric=f"held-out loss of the recorded tactic on {plural(n, 'test step')} "
                    f"({plural(after.tokens, 'token')})",
                    value=after.loss,
                    baseline_value=before.loss,
                    shown=f"{after.loss:.2f} nats/token (perplexity {after.perplexity:.1f})",
                    baseline_shown=f"{before.loss:.2f} ({before.perplexity:.1f})",
                    higher_is_better=False,
                    unit=" nats/token",
                )
            )
            found.append(
                Comparison.of(
                    paired_interval(
                        [s.correct for s in after.per_step],
                        [s.correct for s in before.per_step],
                        subject_weights=tokens,
                        baseline_weights=[s.tokens for s in before.per_step],
                    ),
                    subject=subject,
                    baseline=baseline,
                    metric="token accuracy on those steps",
                    value=after.token_accuracy,
                    baseline_value=before.token_accuracy,
                    shown=percent(after.token_accuracy),
                    baseline_shown=percent(before.token_accuracy),
                    scale=100,
                    unit=" points",
                    digits=1,
                )
            )
        steps = min(g.before.steps, g.after.steps)
        interval = None
        before_k, after_k = g.before, g.after
        if g.before.per_step is not None and g.after.per_step is not None:
            before_k, after_k = g.before.first(steps), g.after.first(steps)
            assert before_k.per_step is not None and after_k.per_step is not None
            interval = paired_interval(
                [float(hit) for _, hit in after_k.per_step],
                [float(hit) for _, hit in before_k.per_step],
            )
        found.append(
            Comparison.of(
                interval,
                subject=subject,
                baseline=baseline,
                metric=f"top-{after_k.k} accuracy",
                value=after_k.topk,
                baseline_value=before_k.topk,
                shown=share(after_k.topk_hits, after_k.steps, "test step"),
                baseline_shown=share(before_k.topk_hits, before_k.steps),
                scale=100,
                unit=" points",
                digits=0,
            )
        )
        for comparison in found:
            if not comparison.better:
                comparison.reasons = self._generator_reasons(comparison.metric.startswith("top-"))
        return found

    def _search_comparison(self, search: SearchSummary) -> Comparison:
        m, d = search.model, search.diagnostic
        diagnostic = {(a.key, a.commit): a.status.found_proof for a in d.attempts}
        pairs = [
            (float(a.status.found_proof), float(diagnostic[a.key, a.commit]))
            for a in m.attempts
            if (a.key, a.commit) in diagnostic
        ]
        interval = (
            paired_interval([p[0] for p in pairs], [p[1] for p in pairs])
            if pairs
            else Interval(items=0, difference=0.0, low=0.0, high=0.0)
        )
        model_found, diagnostic_found = found_proofs(m), sum(int(p[1]) for p in pairs)
        comparison = Comparison.of(
            interval,
            goal="reach",
            subject="trained generator's search",
            baseline="the recorded diagnostic",
            metric="recorded proofs found (replay)",
            value=model_found / m.theorems if m.theorems else 0.0,
            baseline_value=diagnostic_found / len(pairs) if pairs else 0.0,
            shown=share(model_found, m.theorems, "theorem"),
            baseline_shown=f"{share(diagnostic_found, len(pairs))} of the same theorems",
            scale=100,
            unit=" points",
            digits=0,
        )
        if not comparison.better:
            comparison.reasons = self._search_reasons()
        return comparison

    def _retriever_reasons(self) -> list[str]:
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
            reasons.append(
                f"a small test sample: {plural(r.test_steps, 'step')}, each worth up to "
                f"{100 / r.test_steps:.1f} points of R@10"
            )
        return reasons

    def _generator_reasons(self, exact_match: bool) -> list[str]:
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
        steps = g.after.steps if exact_match or g.loss_after is None else g.loss_after.steps
        if steps < SMALL_SAMPLE:
            reasons.append(f"a small test sample: {plural(steps, 'step')}")
        if exact_match and g.before.topk_hits == 0 and g.after.topk_hits == 0:
            reasons.append(
                f"neither model proposed the recorded tactic among its top {g.after.k} on any "
                "test step: a few minutes of training move the loss long before whole tactics"
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

    def relations(self, subject: str, metric_start: str) -> str:
        """How the subject's figure stands against each baseline, for one metric."""
        return ", ".join(
            c.relation()
            for c in self.comparisons
            if c.subject == subject and c.metric.startswith(metric_start)
        )

    def short_verdicts(self, subject: str, metric_start: str) -> str:
        """'trained vs BM25: better', 'trained vs untrained: no measurable difference', one
        line for each baseline of one metric."""
        return "\n".join(
            f"trained vs {c.baseline.removeprefix('the ').split(' ')[0]}: {c.outcome}"
            for c in self.comparisons
            if c.subject == subject and c.metric.startswith(metric_start)
        )

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, result, compared with) for the summary table and the Markdown report."""
        rows: list[tuple[str, str, str]] = []
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
            rows += self._retriever_rows(self.retriever)
        if self.generator is not None:
            rows += self._generator_rows(self.generator)
        if self.search is not None:
            m, d = self.search.model, self.search.diagnostic
            rows.append(
                (
                    "search, replay environment (no Lean)",
                    f"recorded proofs found for {count_of(found_proofs(m), m.theorems, 'theorem')}"
                    " (trained generator)",
                    f"recorded diagnostic: {count_of(found_proofs(d), d.theorems)}: trained: "
                    + self.relations("trained generator's search", "recorded"),
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

    def _retriever_rows(self, r: RetrieverResults) -> list[tuple[str, str, str]]:
        rows = []
        among = "" if r.pool is None else f", {plural(r.pool_premises or 0, 'candidate')}: {r.pool}"
        if r.ranks is not None:
            reachable = len(r.reachable_ranks("trained"))
            rows.append(
                (
                    f"retriever MRR (mean rank) on the "
                    f"{count_of(reachable, r.test_steps, 'test step')} with a premise among "
                    "the candidates",
                    f"{r.mrr_reachable('trained'):.3f} ({r.mean_rank('trained'):.1f}) trained",
                    f"BM25 {r.mrr_reachable('bm25'):.3f} ({r.mean_rank('bm25'):.1f}), untrained "
                    f"{r.mrr_reachable('untrained'):.3f} ({r.mean_rank('untrained'):.1f}): "
                    f"trained's MRR {self.relations('trained retriever', 'MRR')}; mean rank "
                    f"{self.relations('trained retriever', 'mean rank')}",
                )
            )
        rows.append(
            (
                f"retriever R@10 ({plural(r.test_steps, 'test step')}{among})",
                f"{percent(r.trained['R@10'])} trained",
                f"BM25 {percent(r.bm25['R@10'])}, untrained {percent(r.untrained['R@10'])}: "
                f"trained: {self.relations('trained retriever', 'R@10')}",
            )
        )
        return rows

    def _generator_rows(self, g: GeneratorResults) -> list[tuple[str, str, str]]:
        rows = []
        if g.loss_before is not None and g.loss_after is not None:
            n = min(g.loss_before.steps, g.loss_after.steps)
            before, after = g.loss_before.first(n), g.loss_after.first(n)
            rows.append(
                (
                    f"held-out loss, perplexity, token accuracy ({plural(n, 'test step')})",
                    f"{after.loss:.2f} nats/token, {after.perplexity:.1f}, "
                    f"{percent(after.token_accuracy)} trained",
                    f"untrained {g.model}: {before.loss:.2f}, {before.perplexity:.1f}, "
                    f"{percent(before.token_accuracy)}: trained's loss "
                    f"{self.relations('trained generator', 'held-out')}; token accuracy "
                    f"{self.relations('trained generator', 'token')}",
                )
            )
        rows.append(
            (
                f"tactic accuracy ({plural(g.after.steps, 'test step')}, k={g.after.k})",
                f"top-1 {share(g.after.top1_hits, g.after.steps)}, top-{g.after.k} "
                f"{share(g.after.topk_hits, g.after.steps)} trained",
                f"untrained {g.model}: top-1 {share(g.before.top1_hits, g.before.steps)}, "
                f"top-{g.before.k} {share(g.before.topk_hits, g.before.steps)}: trained: "
                f"{self.relations('trained generator', 'top-')}",
            )
        )
        return rows

    def findings(self) -> list[str]:
        """One sentence per comparison, for the console: did each trained model do measurably
        better than its baseline, and if not, the likely reasons."""
        return [c.sentence() for c in self.comparisons]

    def summary_lines(self) -> list[str]:
        """The comparisons for the console: one line each, and the likely reasons once per
        model that did not do measurably better somewhere."""
        lines: list[str] = []
        comparisons = self.comparisons
        for index, c in enumerate(comparisons):
            lines.append(f"  - {c.sentence(with_reasons=False)}")
            last = index + 1 == len(comparisons) or comparisons[index + 1].subject != c.subject
            reasons = list(
                dict.fromkeys(r for x in comparisons if x.subject == c.subject for r in x.reasons)
            )
            if last and reasons:
                lines.append(f"    Likely why (the {c.subject}): " + "; ".join(reasons) + ".")
        return lines

    def markdown(self) -> str:
        lines = [
            "# leanloop run",
            "",
            "| step | result | compared with |",
            "|---|---|---|",
            *(f"| {a} | {b} | {c} |" for a, b, c in self.rows()),
            "",
            *self._comparison_lines(),
            *self._model_lines(),
            *self._pool_lines(),
            "Found proofs in the replay environment are recorded proofs found again by the "
            "search over recorded transitions: no Lean checked them, so they are not called "
            "proved.",
            "",
        ]
        if self.steps:
            lines += ["Steps: " + "; ".join(f"{k}: {v}" for k, v in self.steps.items()), ""]
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
        lines = ["## Trained models against their baselines", "", rule_text(), ""]
        for c in comparisons:
            reasons = ". Likely why: " + "; ".join(c.reasons) if c.reasons else ""
            difference = f" ({c.difference_text()})" if c.difference_text() else ""
            lines.append(
                f"- **{_capital(c.verdict())}**: {c.metric} {c.shown} against "
                f"{c.baseline_shown}{difference}{reasons}."
            )
        return [*lines, ""]

    def _model_lines(self) -> list[str]:
        lines = []
        if self.generator is not None and self.generator.model_description:
            lines.append(f"Tactic generator: {self.generator.model_description}.")
        if self.retriever is not None and self.retriever.model:
            lines.append(f"Premise retriever: {self.retriever.model}.")
        return [*lines, ""] if lines else []

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
        """The report's figure (a matplotlib ``Figure``, see ``run_figure.report_figure``)."""
        from leanloop.agent.run_figure import report_figure

        return report_figure(self)


def found_proofs(report: EvaluationReport) -> int:
    """Theorems of ``report`` whose proof was found (proved, replayed or recorded)."""
    return sum(
        count for status, count in report.status_counts.items() if AttemptStatus(status).found_proof
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
