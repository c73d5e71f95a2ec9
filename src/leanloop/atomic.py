"""Write files and directories so that a reader sees either the old version or the complete new
one, never a half-written result, and clean up what a killed writer left behind."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from leanloop.errors import LeanloopError

#: Staging names: ``.<name>.<pid>-<host>-<hex>.new`` (host: a hash of the machine's name);
#: ``.<name>.<pid>-<hex>.new`` and ``.<name>.<hex>.new`` from older versions.
_STAGING = re.compile(
    r"^\.(?P<name>.+)\.(?:(?P<pid>\d+)-(?:(?P<host>[0-9a-f]{8})-)?)?[0-9a-f]{12}\.new$"
)
#: A staging directory whose writer cannot be asked (another machine sharing the file system,
#: or an older version that did not name its process) counts as abandoned once it has not
#: changed for this long.
_UNOWNED_STALE_SECONDS = 3600.0


def write_figure_atomic(path: str | Path, figure, dpi: int = 100) -> Path:
    """Render a matplotlib figure as a PNG and replace ``path`` with it in one step."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    write_bytes_atomic(path, buffer.getvalue())
    return Path(path)


def _new_file_mode() -> int:
    """The mode a new file gets here: 0666 less the process's umask (as ``open`` would make
    it; a temporary file is made 0600). The umask is read without changing it where the system
    tells it (Linux), since setting it is not safe while other threads create files."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temporary file, fsync, rename); the file keeps
    the mode it had, and a new one gets the mode the umask gives."""
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
        else:
            os.chmod(tmp, _new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes_atomic(path, text.encode(encoding))


def owner_tag() -> str:
    """``<pid> <host>``: this process on this machine, for marking what it owns."""
    return f"{os.getpid()} {_host()}"


def owner_gone(tag: str) -> bool:
    """Whether the process an ``owner_tag`` names has ended (a process of another machine, or
    a tag that cannot be read, is not known to have)."""
    pid, _, host = tag.strip().partition(" ")
    if not pid.isdigit() or host != _host():
        return False
    return not _process_alive(int(pid))


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


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def staging_path(directory: Path, name: str) -> Path:
    """A fresh staging name for ``name`` in ``directory``, owned by this process."""
    return directory / f".{name}.{os.getpid()}-{_host()}-{secrets.token_hex(6)}.new"


def remove_stale_staging(directory: Path, name: str | None = None) -> list[Path]:
    """Remove staging directories in ``directory`` (for ``name``, or any) that a writer which is
    gone left behind: a process of this machine that no longer runs, or (for another machine's
    or an older version's, whose writer cannot be asked) one that has not changed for an hour.
    Returns what was removed."""
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    now = time.time()
    here = _host()
    for entry in directory.iterdir():
        match = _STAGING.match(entry.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        pid, host = match["pid"], match["host"]
        try:
            if pid is not None and host in (None, here):
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

    ``check(existing_entry)`` runs for every entry that will be replaced, before anything is
    written and again just before the renames (the block may take long); it raises to refuse.
    If the block or a rename fails, every entry already moved is put back, the staging
    directory is removed and ``directory`` is left as it was. Staging directories of writers
    that were killed are removed first.
    """
    directory = Path(directory).expanduser().absolute()
    names = list(names)
    if directory.exists() and not directory.is_dir():
        raise LeanloopError(f"{directory} exists and is not a directory")

    def check_all() -> None:
        if check is not None:
            for name in names:
                if _present(directory / name):
                    check(directory / name)

    check_all()
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(directory, "leanloop")
    staging = staging_path(directory, "leanloop")
    staging.mkdir()
    keep = False
    try:
        yield staging
        check_all()
        keep = _move_in(directory, staging, names)
    finally:
        if not keep:
            shutil.rmtree(staging, ignore_errors=True)


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _move_in(directory: Path, staging: Path, names: list[str]) -> bool:
    """Move each of ``names`` written in ``staging`` into ``directory``, the entries they
    replace set aside until all are in; on a failure put everything back as it was and raise.
    Returns True only when putting back failed too (the staging directory, which then holds the
    entries set aside, must be kept)."""
    aside = staging / ".replaced"
    aside.mkdir()
    moved: list[tuple[str, bool]] = []  # (name, whether an entry it replaces was set aside)
    try:
        for name in names:
            if not _present(staging / name):
                continue
            existing = directory / name
            had = _present(existing)
            if had:
                os.replace(existing, aside / name)
            moved.append((name, had))
            os.replace(staging / name, existing)
        return False
    except BaseException as failure:
        try:
            for name, had in reversed(moved):
                if not _present(staging / name):  # the new entry went in: take it out
                    os.replace(directory / name, staging / name)
                if had:
                    os.replace(aside / name, directory / name)
        except OSError as exc:
            raise LeanloopError(
                f"replacing entries of {directory} failed ({failure}) and so did putting "
                f"them back ({exc})",
                hint=f"the entries that were replaced are kept in {aside}",
            ) from failure
        raise
