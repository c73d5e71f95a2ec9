"""The LeanDojo Benchmark format: reading, writing and downloading datasets."""

from leanloop.data.leandojo.format import (
    SCHEMES,
    SPLITS,
    theorem_from_leandojo,
    theorem_to_leandojo,
)
from leanloop.data.leandojo.reader import LeanDojoDataset, SplitFile, TheoremItem
from leanloop.data.leandojo.writer import LeanDojoWriter

__all__ = [
    "SCHEMES",
    "SPLITS",
    "LeanDojoDataset",
    "LeanDojoWriter",
    "SplitFile",
    "TheoremItem",
    "theorem_from_leandojo",
    "theorem_to_leandojo",
]
