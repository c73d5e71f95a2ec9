"""How a :class:`~leanloop.prover.run_report.RunReport` is shown: console lines, Markdown and a
matplotlib figure. Each says where the verdicts came from, and never counts a recorded
verdict's check time as time spent in the run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.words import count_of, plural, plural_of

if TYPE_CHECKING:
    from leanloop.prover.run_report import GroupFigures, RunReport

#: The columns a report's theorem table starts with.
THEOREM_COLUMNS = ["theorem", "split", "status", "attempts", "with proof", "why"]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _rate(report: RunReport, k: int) -> str:
    return f"{report.rate_name}@{k}"


def _values(report: RunReport, group: GroupFigures) -> list[str]:
    return [f"{100 * group.pass_at[k]:.1f} %" if k in group.pass_at else "–" for k in report.ks()]


def summary_lines(report: RunReport) -> list[str]:
    """One line per split (theorems with a proof, pass@k), then why the others have none."""
    lines = []
    for name, group in report.splits.items():
        values = ", ".join(
            f"{_rate(report, k)} {100 * v:.1f} %" for k, v in sorted(group.pass_at.items())
        )
        found = count_of(group.verified, group.problems, report.unit)
        lines.append(
            f"{name}: {found} {report.found_word}"
            + (f"; {values}" if values else f"; no {report.unit} has an attempt counted by pass@k")
        )
    missing = report.why_not()
    if missing:
        lines.append("without a proof: " + "; ".join(missing))
    return lines


def times_line(report: RunReport) -> str:
    """The times, each with what it is: generation and Lean measured in this run, a recorded
    verdict's time as recorded (not spent here), the wall-clock time."""
    parts = [f"generation {report.generation_seconds:.1f} s"]
    if report.verification_seconds or report.environment != "recorded":
        parts.append(f"Lean {report.verification_seconds:.1f} s")
    line = "Time measured in this run: " + ", ".join(parts) + " (summed over attempts)"
    if report.wall_seconds is not None:
        line += f", wall {report.wall_seconds:.1f} s"
    if report.environment == "recorded":
        line += "; no Lean check ran now (recorded verdicts)"
    if report.recorded_verification_seconds:
        line += (
            f"; the recorded verdicts say Lean took {report.recorded_verification_seconds:.1f} s "
            "when they were recorded (not spent in this run)"
        )
    return line


def markdown(report: RunReport, extra: list[tuple[str, list[str]]] | None = None) -> str:
    """The report as Markdown: what ran and where the verdicts came from, pass@k by split,
    theorems by source and file, attempts and times, each theorem's status and why, notes.
    ``extra`` adds columns to the theorem table (a header and one cell per row)."""
    title = f"{report.target}: run {report.run}" if report.target else f"run {report.run}"
    audited = "; axioms audited" if report.axioms_audited else "; axioms not audited"
    audited = "" if report.environment == "replay" else audited
    lines = [
        f"# {title}",
        "",
        f"- Generator: {report.generator or 'unknown'}; checker: {report.checker or 'unknown'} "
        f"({report.verdicts}{audited})",
        f"- Attempts per {report.unit}: {report.samples}"
        + (" (stopping at the first proof)" if report.stop_at_first else ""),
        f"- {plural_of(report.unit).capitalize()} {report.found_word}: "
        + count_of(sum(r.proved for r in report.rows), len(report.rows)),
        "",
        f"| split | {plural_of(report.unit)} | with proof | "
        + " | ".join(_rate(report, k) for k in report.ks())
        + " |",
        "|---|---:|---:|" + "---:|" * len(report.ks()),
    ]
    for name, group in report.splits.items():
        lines.append(
            f"| {_cell(name)} | {group.problems} | {group.verified} | "
            + " | ".join(_values(report, group))
            + " |"
        )
    for title, groups in (("source", report.sources), ("file", report.files)):
        if groups:
            lines += [
                "",
                f"## By {title}",
                "",
                f"| {title} | {plural_of(report.unit)} | with proof |",
            ]
            lines.append("|---|---:|---:|")
            lines += [f"| {_cell(n)} | {g.problems} | {g.verified} |" for n, g in groups.items()]
    lines += ["", "## Attempts", ""]
    made = plural(report.samples_made, "attempt")
    counts = ", ".join(f"{n} {status}" for status, n in report.statuses.items())
    lines.append(f"- {made}: {counts}" if counts else f"- {made} (none was made)")
    lines.append(f"- {times_line(report)}")
    if report.tokens is not None:
        lines.append(f"- Tokens generated: {report.tokens}")
    if report.axioms_used:
        used = ", ".join(f"{name} ({n})" for name, n in report.axioms_used.items())
        lines.append(f"- Axioms of the accepted proofs ({plural_of(report.unit)}): {used}")
    lines += _theorem_table(report, extra or [])
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def _theorem_table(report: RunReport, extra: list[tuple[str, list[str]]]) -> list[str]:
    """One line per theorem: its name, the ``extra`` columns, its split (when any has one),
    status, attempts, attempts with a proof, and why it ended so."""
    splits = any(row.split for row in report.rows)
    headers = [report.unit, *(header for header, _ in extra)]
    headers += [c for c in THEOREM_COLUMNS[1:] if splits or c != "split"]
    title = plural_of(report.unit).capitalize()
    lines = ["", f"## {title}", "", "| " + " | ".join(headers) + " |"]
    lines.append("|" + "---|" * len(headers))
    for index, row in enumerate(report.rows):
        why = (row.reason or "").strip().splitlines()
        cells = [f"`{row.full_name}`", *(cells[index] for _, cells in extra)]
        cells += [row.split or ""] if splits else []
        cells += [row.status, str(sum(row.attempts.values())), str(row.found)]
        cells.append(why[0][:200] if why else "")
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def figure(report: RunReport, outcomes: dict[str, int] | None = None, title: str | None = None):
    """Theorems by status (or by ``outcomes``), pass@k against k by split, and each theorem's
    time measured in this run, as a matplotlib ``Figure``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.4))
    status_axes, passk_axes, time_axes = fig.subplots(1, 3)
    _status_panel(status_axes, report, outcomes)
    _passk_panel(passk_axes, report)
    _time_panel(time_axes, report)
    found = count_of(sum(r.proved for r in report.rows), len(report.rows), report.unit)
    caveat = {
        "recorded": " (not checked now, axioms not audited)",
        "replay": " (no Lean, not proving)",
    }.get(report.environment, "")
    fig.suptitle(title or f"{report.run}: {found} {report.found_word}{caveat}")
    fig.tight_layout()
    return fig


def _status_panel(axes, report: RunReport, outcomes: dict[str, int] | None) -> None:
    counts = outcomes if outcomes is not None else report.theorem_statuses
    bars = axes.bar(list(counts), list(counts.values()), color="tab:blue")
    axes.bar_label(bars, labels=[count_of(n, len(report.rows)) for n in counts.values()])
    axes.set_ylim(0, max([1, *counts.values()]) * 1.2)
    axes.set_xlabel("outcome" if outcomes is not None else "status")
    axes.set_ylabel(plural_of(report.unit))
    by = "outcome" if outcomes is not None else "status"
    axes.set_title(f"{plural(len(report.rows), report.unit)} by {by}")
    axes.tick_params(axis="x", rotation=30)
    if not counts:
        axes.text(0.5, 0.5, f"no {report.unit}", ha="center", va="center", transform=axes.transAxes)


def _passk_panel(axes, report: RunReport) -> None:
    drawn = 0
    for name, group in report.splits.items():
        ks = sorted(group.pass_at)
        if not ks:
            continue
        values = [100 * group.pass_at[k] for k in ks]
        label = f"{name} ({count_of(group.verified, group.problems, report.unit)} "
        label += f"{report.found_word})"
        (line,) = axes.plot(ks, values, marker="o", label=label)
        axes.annotate(
            f"{values[-1]:.1f} %",
            (ks[-1], values[-1]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            color=line.get_color(),
        )
        drawn += 1
    if drawn:
        axes.legend(title="split", fontsize=8)
    else:
        axes.text(
            0.5,
            0.5,
            f"no {report.unit} has an attempt\ncounted by pass@k\n(the report's table says why)",
            ha="center",
            va="center",
            transform=axes.transAxes,
        )
    if len(report.ks()) > 1:
        axes.set_xscale("log", base=2)
    axes.set_xticks(report.ks(), [str(k) for k in report.ks()])
    axes.set_xlabel(f"k (attempts per {report.unit})")
    axes.set_ylabel(f"{report.rate_name}@k (%)")
    axes.set_ylim(0, 105)
    title = f"{report.rate_name}@k by split: {report.verdicts}"
    if report.stop_at_first:
        title += " (early stop: pass@n only)"
    axes.set_title(title, fontsize=9)
    axes.grid(alpha=0.3)


def _time_panel(axes, report: RunReport) -> None:
    rows = sorted(report.rows, key=lambda r: r.seconds)
    positions = range(len(rows))
    model = [r.model_seconds for r in rows]
    lean = [r.lean_seconds for r in rows]
    rest = [max(r.seconds - r.model_seconds - r.lean_seconds, 0.0) for r in rows]
    axes.bar(positions, model, label="generation")
    if any(lean) or report.environment != "recorded":
        checker = "replay server" if report.environment == "replay" else "Lean"
        axes.bar(positions, lean, bottom=model, label=checker)
    if any(rest):
        below = [m + v for m, v in zip(model, lean, strict=True)]
        axes.bar(positions, rest, bottom=below, label="search, other")
    axes.set_xlabel(f"{plural_of(report.unit)}, fastest first")
    axes.set_ylabel("seconds (measured in this run)")
    title = f"time per {report.unit}"
    if report.recorded_verification_seconds:
        title += " (recorded verdicts' times not counted)"
    axes.set_title(title, fontsize=9)
    if not any(r.seconds for r in rows):
        axes.set_ylim(0, 1)
        axes.text(
            0.5,
            0.5,
            "no time measured in this run"
            + (
                "\n(recorded verdicts: no Lean check ran)"
                if report.environment == "recorded"
                else ""
            ),
            ha="center",
            va="center",
            transform=axes.transAxes,
        )
    elif rows:
        axes.legend(title="time spent on", fontsize=8)
