"""``lean_dojo_v2.lean_dojo.data_extraction.dataset``: ``generate_benchmark``, leanloop's
(``leanloop.generate_benchmark``): ``generate_benchmark(repos=[(url, commit), ...],
build_deps=True, output_dir=DIR)`` and LeanDojo-v2's ``generate_benchmark(repo, dst_dir,
build_deps)`` trace what the database does not hold (that needs Lean) and write the
LeanDojo-format dataset."""

from __future__ import annotations

from leanloop.database.generate import generate_benchmark

__all__ = ["generate_benchmark"]
