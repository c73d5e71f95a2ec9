"""Typed records of traced Lean projects and the LeanDojo Benchmark format."""

from leanloop.data.records import (
    NO_GOALS,
    AnnotatedTactic,
    AttemptStatus,
    Pos,
    Premise,
    PremiseRef,
    ProofAttempt,
    Repository,
    SourceFile,
    Theorem,
    TheoremKey,
    TheoremStatus,
    TracedTactic,
)

__all__ = [
    "NO_GOALS",
    "AnnotatedTactic",
    "AttemptStatus",
    "Pos",
    "Premise",
    "PremiseRef",
    "ProofAttempt",
    "Repository",
    "SourceFile",
    "Theorem",
    "TheoremKey",
    "TheoremStatus",
    "TracedTactic",
]
