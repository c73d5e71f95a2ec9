"""Training curves as a PNG next to a checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from leanloop.atomic import write_figure_atomic

#: What the metrics trainers log are, in words (the others keep their names).
METRIC_NAMES = {
    "loss": "training loss",
    "loss_train": "training loss",
    "loss_total": "training loss with the EWC penalty",
    "ewc_penalty": "EWC penalty",
    "eval_loss": "validation loss",
    "learning_rate": "learning rate",
    "grad_norm": "gradient norm",
    "reward": "mean reward",
    "Recall@1_val": "R@1 on the val split",
    "Recall@10_val": "R@10 on the val split",
    "MRR_val": "MRR on the val split",
}


_COLUMNS = 3
_PANEL_WIDTH = 3.6  # inches
_PANEL_HEIGHT = 2.6


def plot_curves(history: Iterable[Mapping[str, float]], path: str | Path, title: str = "") -> Path:
    """Plot every numeric metric of ``history`` (dicts with a ``step`` key, as in a Hugging Face
    ``log_history``) against the step; one panel per metric (see :func:`curves_figure`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_figure_atomic(path, curves_figure(history, title))


def curves_figure(history: Iterable[Mapping[str, float]], title: str = ""):
    """The training curves as a matplotlib ``Figure``: one titled panel per metric, three to a
    row, the optimizer step on every x axis, the metric's name on its y axis. The panels are
    placed by fixed margins rather than a layout engine, which would draw the figure once more
    to measure it (trainers log a dozen metrics or more; each save plots them)."""
    from matplotlib.figure import Figure

    series: dict[str, tuple[list[float], list[float]]] = {}
    for entry in history:
        step = entry.get("step")
        if step is None:
            continue
        for key, value in entry.items():
            if key in ("step", "epoch") or not isinstance(value, int | float):
                continue
            xs, ys = series.setdefault(key, ([], []))
            xs.append(step)
            ys.append(float(value))
    names = sorted(series) or ["(no metrics logged)"]
    columns = min(_COLUMNS, len(names))
    rows = -(-len(names) // columns)
    figure = Figure(figsize=(_PANEL_WIDTH * columns, _PANEL_HEIGHT * rows + 0.5))
    grid = figure.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(grid.flat):
        if index >= len(names):
            figure.delaxes(ax)  # the last row's empty places
            continue
        name = names[index]
        if name in series:
            ax.plot(*series[name], marker="." if len(series[name][0]) < 50 else None)
        ax.set_title(METRIC_NAMES.get(name, name), fontsize=9, pad=12)
        ax.set_ylabel(name, fontsize=8)
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if title:
        figure.suptitle(f"training curves: {title}")
    height = _PANEL_HEIGHT * rows + 0.5  # inches: the panels and the title's band
    figure.subplots_adjust(
        left=0.09, right=0.98, bottom=0.55 / height, top=1 - 0.85 / height, wspace=0.45, hspace=0.8
    )
    return figure
