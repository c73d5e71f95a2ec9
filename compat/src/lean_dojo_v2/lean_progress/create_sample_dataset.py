"""``python -m lean_dojo_v2.lean_progress.create_sample_dataset [--output FILE]``: a small
LeanProgress dataset, one JSON object a line with the goal, the proof so far (``prefix``), the
candidate tactic and the steps remaining after it, each row checked as leanloop's
``ProgressRow`` and the file written atomically."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: The rows written (hand-made: a first look at the format, not training data).
SAMPLE_DATA = [
    {"goal": "n : ℕ\n⊢ n + 0 = n", "prefix": "", "tactic": "simp", "steps_remaining": 0},
    {
        "goal": "⊢ ∀ (p q : Prop), p ∧ q → q ∧ p",
        "prefix": "",
        "tactic": "intro p q h",
        "steps_remaining": 1,
    },
    {
        "goal": "p q : Prop\nh : p ∧ q\n⊢ q ∧ p",
        "prefix": "intro p q h",
        "tactic": "exact ⟨h.2, h.1⟩",
        "steps_remaining": 0,
    },
    {
        "goal": "a b c : ℕ\n⊢ a + b + c = a + (b + c)",
        "prefix": "",
        "tactic": "sorry",
        "steps_remaining": 4,
    },
]

#: Where the file goes without ``--output`` (LeanDojo-v2's place).
DEFAULT_OUTPUT = Path("raid/data/sample_leanprogress_dataset.jsonl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: ``--output`` (a ``Path``).

    Args:
        argv: The arguments (None: the process's).

    Returns:
        The parsed arguments.
    """
    parser = argparse.ArgumentParser(
        prog="python -m lean_dojo_v2.lean_progress.create_sample_dataset",
        description="Write a small LeanProgress dataset (JSONL: goal, prefix, tactic, "
        "steps_remaining).",
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help=f"The JSONL file [{DEFAULT_OUTPUT}]."
    )
    return parser.parse_args(argv)


def main() -> None:
    """Write ``SAMPLE_DATA`` to ``--output`` (its directory made when missing)."""
    from leanloop.atomic import write_text_atomic
    from leanloop.trainer.progress_data import ProgressRow

    args = parse_args()
    for row in SAMPLE_DATA:
        ProgressRow.model_validate(row)  # what ProgressTrainer reads
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in SAMPLE_DATA)
    write_text_atomic(Path(args.output), lines)
    print(f"wrote {len(SAMPLE_DATA)} LeanProgress rows to {Path(args.output).resolve()}")


if __name__ == "__main__":
    main()
