"""``lean_dojo_v2.database``: ``DynamicDatabase`` and the record classes."""

from __future__ import annotations

from lean_dojo_v2.database.dynamic_database import DynamicDatabase
from lean_dojo_v2.database.models import (
    AnnotatedTactic,
    Annotation,
    Premise,
    PremiseFile,
    Repository,
    Theorem,
)

__all__ = [
    "AnnotatedTactic",
    "Annotation",
    "DynamicDatabase",
    "Premise",
    "PremiseFile",
    "Repository",
    "Theorem",
]
