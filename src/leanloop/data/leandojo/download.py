"""Download, verify and unpack published LeanDojo-format datasets into a local cache."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from leanloop.atomic import replace_directory
from leanloop.errors import DownloadError


@dataclass(frozen=True)
class DatasetRelease:
    """A published dataset archive and how to check it."""

    name: str
    url: str
    filename: str
    md5: str
    top_directory: str

    @property
    def page(self) -> str:
        return self.url.split("/files/")[0]


LEANDOJO_BENCHMARK_4 = DatasetRelease(
    name="leandojo-benchmark-4",
    url="https://zenodo.org/records/12740403/files/leandojo_benchmark_4.tar.gz?download=1",
    filename="leandojo_benchmark_4.tar.gz",
    md5="25e1ee60cd8925b9d2e8673ddcc34b4c",
    top_directory="leandojo_benchmark_4",
)

RELEASES = {LEANDOJO_BENCHMARK_4.name: LEANDOJO_BENCHMARK_4}


def file_md5(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_archive(release: DatasetRelease, cache_dir: Path, *, progress: bool = True) -> Path:
    """Download the archive into ``cache_dir`` (resuming nothing: a partial file is discarded)."""
    import httpx
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    cache_dir.mkdir(parents=True, exist_ok=True)
    archive = cache_dir / release.filename
    if archive.is_file() and file_md5(archive) == release.md5:
        return archive
    partial = archive.with_suffix(archive.suffix + ".part")
    try:
        with httpx.stream("GET", release.url, follow_redirects=True, timeout=60.0) as response:
            response.raise_for_status()
            total = int(response.headers.get("content-length", 0)) or None
            with (
                partial.open("wb") as out,
                Progress(
                    "[progress.description]{task.description}",
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    TimeRemainingColumn(),
                    disable=not progress,
                ) as bar,
            ):
                task = bar.add_task(f"downloading {release.filename}", total=total)
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
                    bar.update(task, advance=len(chunk))
    except httpx.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(
            f"cannot download {release.name} from {release.url}: {exc}",
            hint=f"check the network, or download {release.filename} from {release.page} "
            "yourself and pass it with --archive",
        ) from None
    partial.replace(archive)
    return archive


def install_archive(release: DatasetRelease, archive: Path, dest: Path) -> Path:
    """Verify ``archive`` against the release checksum and unpack it to ``dest/<top directory>``."""
    if not archive.is_file():
        raise DownloadError(f"{archive}: no such file")
    actual = file_md5(archive)
    if actual != release.md5:
        raise DownloadError(
            f"{archive}: checksum mismatch (md5 {actual}, expected {release.md5})",
            hint="the file is corrupt or not the published archive; delete it and download again",
        )
    target = dest / release.top_directory
    with replace_directory(target, may_replace=lambda p: (p / ".leanloop-md5").is_file()) as tmp:
        try:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise DownloadError(f"{archive}: cannot unpack archive ({exc})") from None
        inner = tmp / release.top_directory
        if inner.is_dir():  # the archive holds one top directory: use its content
            for child in list(inner.iterdir()):
                shutil.move(str(child), tmp / child.name)
            inner.rmdir()
        (tmp / ".leanloop-md5").write_text(release.md5 + "\n")
    return target


def download_dataset(
    name: str,
    dest: Path,
    *,
    archive: Path | None = None,
    force: bool = False,
    progress: bool = True,
) -> Path:
    """The path of the unpacked dataset ``name`` under ``dest``, downloading it when needed."""
    try:
        release = RELEASES[name]
    except KeyError:
        raise DownloadError(
            f"unknown dataset {name!r}", hint=f"known datasets: {', '.join(sorted(RELEASES))}"
        ) from None
    dest = Path(dest).expanduser()
    target = dest / release.top_directory
    marker = target / ".leanloop-md5"
    if not force and marker.is_file() and marker.read_text().strip() == release.md5:
        return target
    made = _missing_parents(dest / "archives")
    try:
        if archive is None:
            archive = fetch_archive(release, dest / "archives", progress=progress)
        return install_archive(release, Path(archive).expanduser(), dest)
    except BaseException:
        for directory in made:  # a failed download leaves no empty folder behind
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise


def _missing_parents(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, innermost first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing
