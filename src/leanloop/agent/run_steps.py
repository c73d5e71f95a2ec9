"""What the main job keeps between runs: a record of each finished step (its settings, the
records of the steps it used, what it wrote, what it measured), written once the step's outputs
are in place, so that a run started again — after Ctrl-C, or with other settings — reuses each
step whose settings and inputs are the same and redoes the others, and can say which and why.
Earlier reports of a run with other settings are kept under a new name, never overwritten."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from leanloop.atomic import write_text_atomic

#: Where the records are, inside the job's output directory.
STEPS_DIR = "steps"

#: The steps in the order the job takes them, and what each leaves, in words.
STEP_WORDS = {
    "data": "the data (imported, split and exported to export/)",
    "generator-before": "the untrained generator's held-out loss and accuracy",
    "retriever": "the trained retriever (retriever/) and its evaluation",
    "generator": "the trained generator (generator/)",
    "generator-after": "the trained generator's held-out loss and accuracy",
}


class StepRecord(BaseModel):
    """One finished step: the settings it ran with, the fingerprints of the steps and data it
    used (``inputs``), the entries of the output directory it wrote (``outputs``), what it
    measured (``result``), when it finished and how long it took."""

    step: str
    settings: dict[str, Any]
    inputs: dict[str, str]
    outputs: list[str]
    fingerprint: str
    finished: str
    seconds: float
    result: dict[str, Any] = {}


@dataclass(frozen=True)
class Decision:
    """Whether a step is reused (``record``: its earlier record) and why, in words."""

    step: str
    record: StepRecord | None
    why: str
    fingerprint: str

    @property
    def reused(self) -> bool:
        return self.record is not None


def fingerprint(settings: dict[str, Any], inputs: dict[str, str]) -> str:
    """A digest of a step's settings and of the fingerprints of what it used."""
    text = json.dumps({"settings": settings, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def files_signature(root: Path) -> dict[str, list[int]]:
    """Each file under ``root`` (a file or a directory), by its path relative to ``root``:
    its size and modification time (what tells a changed dataset or export apart cheaply)."""
    root = Path(root)
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    signature = {}
    for path in paths:
        stat = path.stat()
        name = "." if path == root else path.relative_to(root).as_posix()
        signature[name] = [stat.st_size, stat.st_mtime_ns]
    return signature


class RunSteps:
    """The step records of one output directory."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.directory = self.out / STEPS_DIR

    def path(self, step: str) -> Path:
        return self.directory / f"{step}.json"

    def load(self, step: str) -> StepRecord | None:
        """The record of ``step`` (None: none, or one that cannot be read)."""
        path = self.path(step)
        if not path.is_file():
            return None
        try:
            return StepRecord.model_validate_json(path.read_text())
        except (OSError, ValueError, ValidationError):
            return None

    def decide(
        self, step: str, settings: dict[str, Any], inputs: dict[str, str], outputs: list[str]
    ) -> Decision:
        """Reuse ``step`` when its record has the same settings and inputs and its outputs are
        there; otherwise say why it is done (again)."""
        digest = fingerprint(settings, inputs)
        record = self.load(step)
        if record is None:
            return Decision(step, None, "not done before", digest)
        missing = [name for name in record.outputs if not (self.out / name).exists()]
        if record.fingerprint == digest and not missing:
            return Decision(step, record, "reused: same settings and inputs", digest)
        changed = [
            f"{key} {_shown(record.settings.get(key))} → {_shown(settings.get(key))}"
            for key in sorted(set(record.settings) | set(settings))
            if record.settings.get(key) != settings.get(key)
        ]
        if changed:
            why = "redone: settings changed (" + ", ".join(changed) + ")"
        elif record.inputs != inputs:
            names = [k for k in inputs if record.inputs.get(k) != inputs[k]]
            why = "redone: " + " and ".join(names or ["its inputs"]) + " changed"
        else:
            why = "redone: " + ", ".join(f"{name}/ is missing" for name in missing)
        return Decision(step, None, why, digest)

    def finish(
        self,
        decision: Decision,
        settings: dict[str, Any],
        inputs: dict[str, str],
        outputs: list[str],
        result: dict[str, Any],
        started: float,
    ) -> StepRecord:
        """Write the record of a step whose outputs are in place (one atomic write)."""
        record = StepRecord(
            step=decision.step,
            settings=settings,
            inputs=inputs,
            outputs=outputs,
            fingerprint=decision.fingerprint,
            finished=datetime.now(UTC).isoformat(timespec="seconds"),
            seconds=round(time.perf_counter() - started, 1),
            result=result,
        )
        write_text_atomic(self.path(decision.step), record.model_dump_json(indent=1) + "\n")
        return record

    def kept(self) -> list[StepRecord]:
        """The records whose outputs are all there, in the job's order."""
        found = []
        for step in STEP_WORDS:
            record = self.load(step)
            if record is not None and all((self.out / n).exists() for n in record.outputs):
                found.append(record)
        return found

    def kept_note(self) -> str:
        """What Ctrl-C left, in one line: the finished steps kept and where, and what a run
        started again does."""
        kept = [record.step for record in self.kept()]
        if not kept:
            return (
                f"no step had finished: nothing of this run is kept in {self.out}; running "
                "the same command again starts over"
            )
        unfinished = [step for step in STEP_WORDS if step not in kept]
        text = f"kept in {self.out}: " + "; ".join(STEP_WORDS[step] for step in kept)
        if unfinished:
            text += (
                " (not finished, nothing of them left: "
                + ", ".join(step for step in unfinished)
                + ")"
            )
        return text + "; running the same command again reuses what was kept"


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def keep_earlier_report(out: Path, config: dict[str, Any]) -> Path | None:
    """Move the report in ``out`` aside when a run with other settings wrote it: report.json,
    report.md and report.png become report-<when it was written>.* (nothing is overwritten).
    Returns where its Markdown went (None: no report, or one of the same settings)."""
    current = out / "report.json"
    if not current.is_file():
        return None
    try:
        earlier = json.loads(current.read_text()).get("config")
    except (OSError, ValueError):
        earlier = None
    if earlier == config:
        return None
    stamp = datetime.fromtimestamp(current.stat().st_mtime).strftime("%Y%m%d-%H%M%S")
    name = f"report-{stamp}"
    suffix = 1
    while any((out / f"{name}{ext}").exists() for ext in (".json", ".md", ".png")):
        suffix += 1
        name = f"report-{stamp}-{suffix}"
    for ext in (".json", ".md", ".png"):
        if (out / f"report{ext}").exists():
            os.replace(out / f"report{ext}", out / f"{name}{ext}")
    return out / f"{name}.md"


def settings_differ(out: Path, config: dict[str, Any]) -> list[str]:
    """The settings in which the run whose report is in ``out`` differs from ``config``
    (empty: no report, or the same settings)."""
    current = out / "report.json"
    if not current.is_file():
        return []
    try:
        earlier = json.loads(current.read_text()).get("config") or {}
    except (OSError, ValueError):
        return ["(its report cannot be read)"]
    return [
        f"{key} {_shown(earlier.get(key))}"
        for key in sorted(set(earlier) | set(config))
        if earlier.get(key) != config.get(key)
    ]
