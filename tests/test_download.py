from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import replace

import pytest

from leanloop.data.leandojo import download as dl
from leanloop.errors import DownloadError


def build_archive(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def release(tmp_path):
    archive = tmp_path / "leandojo_benchmark_4.tar.gz"
    md5 = build_archive(
        archive,
        {
            "leandojo_benchmark_4/metadata.json": '{"dataset_name": "x"}',
            "leandojo_benchmark_4/random/test.json": "[]",
        },
    )
    return replace(dl.LEANDOJO_BENCHMARK_4, md5=md5), archive


def test_official_release_facts():
    assert dl.LEANDOJO_BENCHMARK_4.md5 == "25e1ee60cd8925b9d2e8673ddcc34b4c"
    assert "zenodo.org/records/12740403" in dl.LEANDOJO_BENCHMARK_4.url
    assert dl.LEANDOJO_BENCHMARK_4.filename == "leandojo_benchmark_4.tar.gz"


def test_install_verifies_and_unpacks(release, tmp_path):
    rel, archive = release
    target = dl.install_archive(rel, archive, tmp_path / "cache")
    assert target == tmp_path / "cache" / "leandojo_benchmark_4"
    assert (target / "random" / "test.json").read_text() == "[]"
    assert (target / "metadata.json").is_file()


def test_checksum_mismatch_is_refused(release, tmp_path):
    rel, archive = release
    with pytest.raises(DownloadError, match="checksum mismatch"):
        dl.install_archive(replace(rel, md5="0" * 32), archive, tmp_path / "cache")
    assert not (tmp_path / "cache" / "leandojo_benchmark_4").exists()


def test_cache_is_reused(release, tmp_path, monkeypatch):
    rel, archive = release
    monkeypatch.setitem(dl.RELEASES, rel.name, rel)
    target = dl.download_dataset(rel.name, tmp_path / "cache", archive=archive)
    archive.unlink()  # a second call must not need the archive again
    assert dl.download_dataset(rel.name, tmp_path / "cache") == target


def test_unreachable_network_gives_clear_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rel = replace(dl.LEANDOJO_BENCHMARK_4, url=f"http://127.0.0.1:{port}/records/1/files/x.tar.gz")
    with pytest.raises(DownloadError) as err:
        dl.fetch_archive(rel, tmp_path, progress=False)
    assert "cannot download leandojo-benchmark-4" in str(err.value)
    assert "--archive" in err.value.hint
    assert not list(tmp_path.iterdir())


def test_unknown_dataset(tmp_path):
    with pytest.raises(DownloadError, match="unknown dataset"):
        dl.download_dataset("nope", tmp_path)
