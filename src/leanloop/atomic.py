"""Write files and directories so that a reader sees either the old version or the complete new
one, never a half-written result, and clean up what a killed writer left behind."""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from leanloop.errors import LeanloopError

#: Staging names: ``.<name>.<pid>-<hex>.new``; ``.<name>.<hex>.new`` from older versions.
_STAGING = re.compile(r"^\.(?P<name>.+)\.(?:(?P<pid>\d+)-)?[0-9a-f]{12}\.new$")
#: A staging directory of an older version (no process id in its name) counts as abandoned
#: once it has not changed for this long.
_UNOWNED_STALE_SECONDS = 3600.0


def write_figure_atomic(path: str | Path, figure, dpi: int = 100) -> Path:
    """Render a matplotlib figure as a PNG and replace ``path`` with it in one step."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    write_bytes_atomic(path, buffer.getvalue())
    return Path(path)


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


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists, owned by someone else
    return True


def staging_path(directory: Path, name: str) -> Path:
    """A fresh staging name for ``name`` in ``directory``, owned by this process."""
    return directory / f".{name}.{os.getpid()}-{secrets.token_hex(6)}.new"


def remove_stale_staging(directory: Path, name: str | None = None) -> list[Path]:
    """Remove staging directories in ``directory`` (for ``name``, or any) that a writer which is
    gone left behind: its process no longer runs (or, for older unnamed ones, it has not changed
    for an hour). Returns what was removed."""
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    now = time.time()
    for entry in directory.iterdir():
        match = _STAGING.match(entry.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        pid = match["pid"]
        try:
            if pid is not None:
                stale = not _process_alive(int(pid))
            else:
                stale = now - entry.stat().st_mtime > _UNOWNED_STALE_SECONDS
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def replace_directory(
    target: str | Path, *, may_replace: Callable[[Path], bool] | None = None
) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target``; on success it takes ``target``'s place.

    If the block raises, the temporary directory is removed and ``target`` is left untouched. An
    existing non-empty ``target`` is only replaced when ``may_replace(target)`` says so. Staging
    directories that killed writers left beside ``target`` are removed first.
    """
    target = Path(target).expanduser().absolute()
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
    remove_stale_staging(target.parent, target.name)
    staging = staging_path(target.parent, target.name)
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


@contextlib.contextmanager
def replace_entries(
    directory: str | Path, names: Iterable[str], *, check: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """Yield a staging directory inside ``directory``; on success each of ``names`` written
    there replaces the entry of that name in ``directory``, one rename each, and nothing else in
    ``directory`` is touched (the directory itself is never moved).

    ``check(existing_entry)`` runs before anything is written for every entry that will be
    replaced; it raises to refuse. If the block raises, the staging directory is removed and
    ``directory`` is left as it was. Staging directories of writers that were killed are
    removed first.
    """
    directory = Path(directory).expanduser().absolute()
    names = list(names)
    if directory.exists() and not directory.is_dir():
        raise LeanloopError(f"{directory} exists and is not a directory")
    if check is not None:
        for name in names:
            if (directory / name).exists() or (directory / name).is_symlink():
                check(directory / name)
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(directory)
    staging = staging_path(directory, "leanloop")
    staging.mkdir()
    try:
        yield staging
        old = staging / ".replaced"
        old.mkdir()
        for name in names:
            if not (staging / name).exists():
                continue
            existing = directory / name
            if existing.exists() or existing.is_symlink():
                os.replace(existing, old / name)
            os.replace(staging / name, existing)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
