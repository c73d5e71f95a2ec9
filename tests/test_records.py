from __future__ import annotations

import pytest
from pydantic import ValidationError

from leanloop.data.records import (
    AnnotatedTactic,
    Pos,
    Repository,
    TheoremStatus,
    TracedTactic,
    is_sorry_tactic,
    repository_identity,
    repository_name,
    strip_premise_marks,
)
from tests.helpers import sample_theorems


def test_positions_are_typed(sample_dir):
    theorem = sample_theorems(sample_dir)[0]
    assert isinstance(theorem.start, Pos)
    assert theorem.start == Pos(419, 1) and theorem.start.line == 419
    ref = next(p for t in sample_theorems(sample_dir) for s in t.traced_tactics for p in s.premises)
    assert isinstance(ref.def_pos, Pos) and isinstance(ref.def_end_pos, Pos)


def test_annotated_tactic_accepts_leandojo_pair():
    ann = AnnotatedTactic.model_validate(
        [
            "rw [<a>foo</a>]",
            [
                {
                    "full_name": "X.foo",
                    "def_path": "X.lean",
                    "def_pos": [3, 9],
                    "def_end_pos": [3, 12],
                }
            ],
        ]
    )
    assert ann.plain_text == "rw [foo]"
    assert ann.premises[0].def_pos == Pos(3, 9)
    with pytest.raises(ValidationError):
        AnnotatedTactic.model_validate(["only text"])


def test_premise_names_in_order_of_first_use(sample_dir):
    theorem = max(sample_theorems(sample_dir), key=lambda t: t.num_steps)
    names = [p.full_name for s in theorem.traced_tactics for p in s.premises]
    assert list(theorem.premise_names) == list(dict.fromkeys(names))
    assert len(theorem.premise_names) == len(set(names))


def test_traced_tactic_without_annotation_gets_plain_one():
    step = TracedTactic.model_validate(
        {"tactic": "simp", "state_before": "⊢ a = a", "state_after": "no goals"}
    )
    assert step.annotated_tactic.text == "simp" and step.premises == ()
    assert step.closes_goal


@pytest.mark.parametrize(
    ("tactic", "expected"),
    [
        ("sorry", True),
        ("exact sorry", True),
        ("· admit", True),
        ("simp [sorry_lemma]", False),
        ("exact foo.sorry'", False),
        ("norm_num", False),
        ("refine ⟨sorry, ?_⟩", True),
    ],
)
def test_sorry_detection(tactic, expected):
    assert is_sorry_tactic(tactic) is expected


def test_repository_identity_and_name():
    assert (
        repository_identity("https://GitHub.com/Owner/Repo.git/") == "https://github.com/Owner/Repo"
    )
    assert repository_name("https://github.com/leanprover-community/mathlib4") == (
        "leanprover-community/mathlib4"
    )
    assert repository_name("/home/me/projects/MyLean") == "MyLean"
    repo = Repository(url="https://github.com/a/b.git", commit="abc")
    assert repo.name == "a/b" and repo.identity == "https://github.com/a/b"


def test_strip_marks():
    assert (
        strip_premise_marks("simp [<a>Nat.add_comm</a>, <a>foo</a>]") == "simp [Nat.add_comm, foo]"
    )


def test_status_values():
    assert [s.value for s in TheoremStatus] == ["proven", "sorry", "sorry_proved"]
