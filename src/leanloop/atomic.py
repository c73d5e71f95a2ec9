"""Write files and directories so that a reader sees either the old version or the complete new
one, never a half-written result."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from leanloop.errors import LeanloopError


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes_atomic(path, text.encode(encoding))


@contextlib.contextmanager
def replace_directory(
    target: str | Path, *, may_replace: Callable[[Path], bool] | None = None
) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target``; on success it takes ``target``'s place.

    If the block raises, the temporary directory is removed and ``target`` is left untouched. An
    existing non-empty ``target`` is only replaced when ``may_replace(target)`` says so.
    """
    target = Path(target).absolute()
    if target.exists():
        if not target.is_dir():
            raise LeanloopError(f"{target} exists and is not a directory")
        if any(target.iterdir()) and (may_replace is None or not may_replace(target)):
            raise LeanloopError(
                f"refusing to replace {target}: it is not empty and does not look like "
                "output of this command",
                hint="choose a new or empty directory",
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{secrets.token_hex(6)}.new")
    staging.mkdir()  # unlike mkdtemp, honours the umask: the result gets normal permissions
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    backup = None
    if target.exists():
        backup = target.with_name(f".{target.name}.{os.getpid()}.old")
        os.replace(target, backup)
    try:
        os.replace(staging, target)
    except BaseException:
        if backup is not None:
            os.replace(backup, target)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)
