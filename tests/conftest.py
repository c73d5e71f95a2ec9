"""Shared test fixtures: the recorded fixture set, databases on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tests.helpers import share_converted_models
from tests.pgcluster import Cluster, find_bindir

REPO_ROOT = Path(__file__).resolve().parents[1]

# Tests never reach the Hugging Face hub, and use one thread (two cores, shared).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` run first, so that on several processes (``-n 2``) the long ones
    do not start last and leave one process working alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def fixtures_root() -> Path:
    """``$LEANLOOP_FIXTURES``, by default ``../shared/fixtures`` beside the repository."""
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO_ROOT.parent / "shared" / "fixtures")


@pytest.fixture(scope="session")
def fixtures() -> Path:
    root = fixtures_root()
    if not root.is_dir():
        pytest.fail(f"fixture set not found at {root}: set LEANLOOP_FIXTURES")
    return root


@pytest.fixture(scope="session")
def sample_dir(fixtures: Path) -> Path:
    return fixtures / "leandojo_benchmark_4"


@pytest.fixture(scope="session")
def transcripts(fixtures: Path) -> dict[str, dict]:
    """The recorded Lean REPL transcripts by name (each: requests and Lean's responses)."""
    path = fixtures / "repl_transcripts" / "transcripts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {t["name"]: t for t in rows}


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory, sample_dir: Path) -> Path:
    """A tiny BERT encoder with a word-piece vocabulary of the real sample, built once."""
    from tests.helpers import sample_theorems
    from tests.tiny_encoder import build_tiny_encoder, sample_texts

    texts = sample_texts(sample_theorems(sample_dir))
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder", texts)


@pytest.fixture(scope="session")
def converted_models(tmp_path_factory) -> Path:
    """One ``models`` folder of the cache for the whole run, shared by the processes of ``-n``:
    a packaged GGUF model (``tinycoder``) is converted the first time a test asks for it (15 s
    here) and reused by the others, under the lock the conversion takes. Nothing else of the
    cache is shared; ``test_ml_models`` converts into a cache of its own to test the
    conversion."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "converted-models"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch, converted_models):
    """Keep tests away from the user's data, cache and database (a cache of their own, but for
    the packaged models converted once for the run)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("LEANLOOP_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("LEANLOOP_CACHE_DIR", str(home / "cache"))
    share_converted_models(home / "cache", converted_models)
    monkeypatch.delenv("LEANLOOP_DB", raising=False)


@pytest.fixture(scope="session")
def pg_cluster():
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed ('make test' installs it)")
    cluster = Cluster(bindir)
    try:
        cluster.start()
    except Exception as exc:  # report why the cluster could not start
        cluster.stop()
        pytest.fail(f"could not start a PostgreSQL cluster: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "leanloop.db")
    cluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database(f"test_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def db(db_url):
    from leanloop.database import DynamicDatabase

    database = DynamicDatabase(db_url)
    yield database
    database.close()
