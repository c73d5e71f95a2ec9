"""The error types leanloop raises for problems a user can act on."""

from __future__ import annotations

from os import PathLike


class LeanloopError(Exception):
    """A problem the user can fix: one line saying what went wrong, optionally a next step.

    ``str(error)`` is the message followed by the hint in parentheses; the command line
    prints it as it is, without a traceback.

    Args:
        message: What went wrong, in one line.
        hint: What to do next.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


class DataFormatError(LeanloopError):
    """Input data does not follow the expected format; names the file, place and field.

    The message reads ``PATH, line L, column C, item #I, field 'F': PROBLEM`` (the parts that
    are known).

    Args:
        path: The file.
        problem: What is wrong, and what was expected.
        line: The line (1-based).
        column: The column.
        item: The item of a JSON array.
        field: The field (dotted for a nested one).
        hint: What to do next.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        problem: str,
        *,
        line: int | None = None,
        column: int | None = None,
        item: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = str(path)
        if line is not None:
            where += f", line {line}"
            if column is not None:
                where += f", column {column}"
        if item is not None:
            where += f", item #{item}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}", hint=hint)
        self.path = str(path)
        self.line = line
        self.column = column
        self.item = item
        self.field = field
        self.problem = problem


class DatabaseError(LeanloopError):
    """The database cannot be reached, opened or written."""


class DownloadError(LeanloopError):
    """A dataset could not be downloaded or verified."""
