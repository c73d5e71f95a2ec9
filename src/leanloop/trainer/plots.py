"""Training curves as a PNG next to a checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from leanloop.atomic import write_figure_atomic


def plot_curves(history: Iterable[Mapping[str, float]], path: str | Path, title: str = "") -> Path:
    """Plot every numeric metric of ``history`` (dicts with a ``step`` key, as in a Hugging Face
    ``log_history``) against the step; one panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(series) or ["(no metrics logged)"]
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.4 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        if name in series:
            ax.plot(*series[name], marker="." if len(series[name][0]) < 50 else None)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    write_figure_atomic(path, fig)
    plt.close(fig)
    return path
