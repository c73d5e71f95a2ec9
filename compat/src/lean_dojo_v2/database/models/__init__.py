"""``lean_dojo_v2.database.models``: LeanDojo-v2's record classes, as leanloop's records
(``leanloop.data.records``): ``Repository``, ``Theorem``, ``Premise``; ``PremiseFile`` is
leanloop's ``SourceFile``, ``AnnotatedTactic`` its ``TracedTactic`` and ``Annotation`` its
``PremiseRef``. Their fields are leanloop's (see ``docs/migrating.md``)."""

from __future__ import annotations

from leanloop.data.records import Premise, PremiseRef, Repository, SourceFile, Theorem, TracedTactic

AnnotatedTactic = TracedTactic
Annotation = PremiseRef
PremiseFile = SourceFile

__all__ = ["AnnotatedTactic", "Annotation", "Premise", "PremiseFile", "Repository", "Theorem"]
