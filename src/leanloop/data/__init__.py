"""Typed records of traced Lean projects and the dataset formats, read through one interface
(``DatasetReader``, ``open_dataset``)."""

from leanloop.data.formats import DatasetReader, open_dataset
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
    "DatasetReader",
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
    "open_dataset",
]
