"""The main job's figure: on the top row the retriever (MRR and mean rank on the test steps it
can reach, R@10 on all, its training loss), on the bottom row the tactic generator (held-out
loss, token and top-k accuracy before and after training, its training loss) and the replayed
search. Every panel names its axes with their units and says, under the noise rule, how the
trained model stands against its baselines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.words import count_of, percent, plural

if TYPE_CHECKING:
    from leanloop.agent.run_report import (
        GeneratorResults,
        RetrieverResults,
        RunReport,
        SearchSummary,
        TrainingCurve,
    )

BASELINE, TRAINED, LIMIT = "#aaaaaa", "#3366cc", "#cc3333"

#: Colours of attempt outcomes in the search panel.
OUTCOME_COLOURS = {
    "proved": "#2a9d4b",
    "replayed": "#3366cc",
    "recorded": "#6a5acd",
    "failed": "#bbbbbb",
    "timeout": "#e0a030",
    "budget": "#d07030",
    "refused": "#aa3333",
    "error": "#333333",
}


def report_figure(report: RunReport):
    """The figure of ``report``: a 2 × 4 grid of labelled panels (a matplotlib ``Figure``)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(22, 9.6))
    axes = figure.subplots(2, 4)
    r, g = report.retriever, report.generator
    if r is not None and r.ranks is not None:
        _mrr_panel(axes[0][0], r, report.short_verdicts("trained retriever", "MRR"))
        _rank_panel(axes[0][1], r, report.short_verdicts("trained retriever", "mean rank"))
    else:
        _empty(axes[0][0], "retriever MRR: not measured")
        _empty(axes[0][1], "retriever mean rank: not measured")
    if r is not None:
        _recall_panel(axes[0][2], r, report.short_verdicts("trained retriever", "R@10"))
    else:
        _empty(axes[0][2], "retriever: not run")
    _curve_panel(axes[0][3], "retriever", None if r is None else r.curve)
    if g is not None and g.loss_before is not None and g.loss_after is not None:
        _loss_panel(axes[1][0], g, report.short_verdicts("trained generator", "held-out"))
    else:
        _empty(axes[1][0], "held-out loss: not measured")
    if g is not None:
        relations = (
            report.short_verdicts("trained generator", "token"),
            report.short_verdicts("trained generator", "top-"),
        )
        _accuracy_panel(axes[1][1], g, relations)
    else:
        _empty(axes[1][1], "tactic generator: not run")
    if report.search is not None:
        _search_panel(axes[1][2], report.search)
    else:
        _empty(axes[1][2], "search: not run")
    _curve_panel(axes[1][3], "tactic generator (SFT)", None if g is None else g.curve)
    figure.tight_layout()
    return figure


def _empty(axes, title: str) -> None:
    axes.set_title(title)
    axes.set_axis_off()


def _bars(axes, names: list[str], values: list[float], labels: list[str]) -> None:
    colours = [TRAINED if name == "trained" else BASELINE for name in names]
    kinds = ["trained" if name == "trained" else "baseline" for name in names]
    bars = axes.bar(names, values, color=colours, label=kinds)
    axes.bar_label(bars, labels=labels)


def _legend(axes) -> None:
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes.legend(unique.values(), unique.keys(), loc="upper left", fontsize=8)


def _mrr_panel(axes, r: RetrieverResults, relations: str) -> None:
    names = ["BM25", "untrained", "trained"]
    values = [r.mrr_reachable(key) for key in ("bm25", "untrained", "trained")]
    _bars(axes, names, values, [f"{v:.3f}" for v in values])
    axes.set_ylim(0, max(0.1, *values) * 1.3)
    axes.set_xlabel("ranker")
    axes.set_ylabel("MRR (1 / rank of the first premise)")
    reachable = len(r.reachable_ranks("trained"))
    axes.set_title(
        f"retriever MRR on the {count_of(reachable, r.test_steps, 'test step')}\n"
        f"with a premise among the candidates\n{relations}",
        fontsize=10,
    )
    _legend(axes)


def _rank_panel(axes, r: RetrieverResults, relations: str) -> None:
    names = ["BM25", "untrained", "trained"]
    values = [r.mean_rank(key) for key in ("bm25", "untrained", "trained")]
    _bars(axes, names, values, [f"{v:.1f}" for v in values])
    axes.set_ylim(0, max(1.0, *values) * 1.3)
    axes.set_xlabel("ranker")
    axes.set_ylabel("mean rank of the first premise (lower is better)")
    axes.set_title(
        f"retriever mean rank of the first premise, same steps\n{relations}", fontsize=10
    )
    _legend(axes)


def _recall_panel(axes, r: RetrieverResults, relations: str) -> None:
    names = ["BM25", "untrained", "trained"]
    values = [100 * r.bm25["R@10"], 100 * r.untrained["R@10"], 100 * r.trained["R@10"]]
    _bars(axes, names, values, [f"{v:.1f} %" for v in values])
    if r.best_possible_r10 is not None:
        axes.axhline(
            100 * r.best_possible_r10,
            color=LIMIT,
            linestyle="--",
            label=f"highest possible ({percent(r.best_possible_r10)})",
        )
    axes.set_ylim(0, max(1.0, *values, 100 * (r.best_possible_r10 or 0)) * 1.25)
    axes.set_xlabel("ranker")
    axes.set_ylabel("R@10 (%)")
    axes.set_title(
        f"retriever R@10 on all {plural(r.test_steps, 'test step')}\n{relations}",
        fontsize=10,
    )
    _legend(axes)


def _curve_panel(axes, name: str, curve: TrainingCurve | None) -> None:
    if curve is None or not curve.steps:
        _empty(axes, f"{name}: no training curve")
        return
    axes.plot(curve.steps, curve.values, marker="." if len(curve.steps) < 60 else None)
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("optimizer step")
    axes.set_ylabel(f"training loss ({curve.unit})")
    axes.set_title(
        f"{name}: training loss per step\n(each point is one batch of the train split)",
        fontsize=10,
    )
    axes.grid(alpha=0.3)


def _loss_panel(axes, g: GeneratorResults, relations: str) -> None:
    assert g.loss_before is not None and g.loss_after is not None
    steps = min(g.loss_before.steps, g.loss_after.steps)
    before, after = g.loss_before.first(steps), g.loss_after.first(steps)
    names = [f"untrained\n{g.model}", "trained"]
    values = [before.loss, after.loss]
    bars = axes.bar(names, values, color=[BASELINE, TRAINED])
    axes.bar_label(
        bars, labels=[f"{x.loss:.2f} (perplexity {x.perplexity:.1f})" for x in (before, after)]
    )
    axes.set_ylim(0, max(0.1, *values) * 1.3)
    axes.set_ylabel("held-out loss (nats per completion token)")
    axes.set_title(
        f"tactic generator: held-out loss of the recorded tactic\non "
        f"{plural(steps, 'test step')} ({plural(after.tokens, 'token')})\n{relations}",
        fontsize=10,
    )


def _accuracy_panel(axes, g: GeneratorResults, relations: tuple[str, str]) -> None:
    groups: list[str] = []
    before: list[float] = []
    after: list[float] = []
    labels_before: list[str] = []
    labels_after: list[str] = []
    if g.loss_before is not None and g.loss_after is not None:
        steps = min(g.loss_before.steps, g.loss_after.steps)
        b, a = g.loss_before.first(steps), g.loss_after.first(steps)
        groups.append("token accuracy")
        before.append(100 * b.token_accuracy)
        after.append(100 * a.token_accuracy)
        labels_before.append(f"{100 * b.token_accuracy:.1f} %")
        labels_after.append(f"{100 * a.token_accuracy:.1f} %")
    for accuracy, values, labels in (
        (g.before, before, labels_before),
        (g.after, after, labels_after),
    ):
        values.append(100 * accuracy.topk)
        labels.append(count_of(accuracy.topk_hits, accuracy.steps))
    groups.append(f"top-{g.after.k} accuracy\n(test steps)")
    x = list(range(len(groups)))
    first = axes.bar(
        [i - 0.2 for i in x], before, 0.4, color=BASELINE, label=f"untrained {g.model}"
    )
    second = axes.bar([i + 0.2 for i in x], after, 0.4, color=TRAINED, label="trained")
    axes.bar_label(first, labels=labels_before)
    axes.bar_label(second, labels=labels_after)
    axes.set_xticks(x, groups)
    axes.set_ylim(0, max(10.0, *before, *after) * 1.3)
    axes.set_ylabel("accuracy (%)")
    title = f"tactic generator before and after training\ntop-{g.after.k}: {relations[1]}"
    if len(groups) > 1:
        title = (
            f"tactic generator before and after training\ntoken accuracy, {relations[0]}"
            f"\ntop-{g.after.k}, {relations[1]}"
        )
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", fontsize=8)


def _search_panel(axes, search: SearchSummary) -> None:
    from leanloop.agent.run_report import found_proofs
    from leanloop.data.records import AttemptStatus

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
            color=OUTCOME_COLOURS.get(status, "#777777"),
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
    axes.set_title("replayed search (no Lean): theorems by outcome", fontsize=10)
    if statuses:
        axes.legend(title="outcome", loc="upper left", fontsize=8)
