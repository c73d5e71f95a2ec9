"""Settings: every environment variable leanloop reads, read in one place."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from leanloop.errors import LeanloopError
from leanloop.settings import Settings


def test_every_variable_is_read_from_the_given_environment(tmp_path):
    env = {
        "LEANLOOP_DATA_DIR": str(tmp_path / "data"),
        "LEANLOOP_CACHE_DIR": str(tmp_path / "cache"),
        "LEANLOOP_DB": "postgresql://u@h/db",
        "LEANLOOP_FIXTURES": str(tmp_path / "fixtures"),
        "LEANLOOP_DEVICE": "CPU",
        "LEANLOOP_REPL": str(tmp_path / "repl"),
        "LEANLOOP_PANTOGRAPH": str(tmp_path / "pantograph-repl"),
        "LEANPROGRESS_MODEL": str(tmp_path / "progress"),
        "LEANLOOP_SERVE_CONFIG": str(tmp_path / "models.yaml"),
        "ELAN_HOME": str(tmp_path / "elan"),
        "GITHUB_ACCESS_TOKEN": "token",
    }
    s = Settings.from_env(env)
    assert s.data_dir == tmp_path / "data" and s.cache_dir == tmp_path / "cache"
    assert s.database == s.default_database == "postgresql://u@h/db"
    assert s.fixtures == tmp_path / "fixtures"
    assert s.device == "cpu"
    assert s.repl == tmp_path / "repl" and s.pantograph == tmp_path / "pantograph-repl"
    assert s.progress_model == tmp_path / "progress"
    assert s.serve_config == tmp_path / "models.yaml"
    assert s.elan_home == tmp_path / "elan"
    assert s.github_token == "token"


def test_unset_and_blank_variables_fall_back_to_defaults():
    s = Settings.from_env(
        {"LEANLOOP_DB": "  ", "LEANPROGRESS_MODEL": "", "LEANLOOP_DATA_DIR": "~/x"}
    )
    assert s.database is None and s.progress_model is None and s.repl is None
    assert s.data_dir == Path.home() / "x"  # '~' expanded
    assert s.default_database == str(Path.home() / "x" / "leanloop.db")
    assert s.elan_home == Path.home() / ".elan"


def test_the_github_token_has_two_names_and_a_blank_first_one_falls_through():
    assert Settings.from_env({"GITHUB_TOKEN": "a", "GITHUB_ACCESS_TOKEN": "b"}).github_token == "a"
    assert Settings.from_env({"GITHUB_TOKEN": " ", "GITHUB_ACCESS_TOKEN": "b"}).github_token == "b"
    assert Settings.from_env({"GITHUB_TOKEN": ""}).github_token is None


def test_a_given_environment_is_the_only_one_read(monkeypatch, tmp_path):
    monkeypatch.setenv("LEANLOOP_DB", "from-the-process.db")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LEANLOOP_FIXTURES", str(tmp_path))
    assert Settings.from_env().database == "from-the-process.db"
    assert Settings.from_env().hub_offline is True
    given = Settings.from_env({"LEANLOOP_CACHE_DIR": str(tmp_path)})
    assert given.database is None and given.hub_offline is False
    assert given.fixtures != tmp_path and given.cache_dir == tmp_path


@pytest.mark.parametrize(
    ("value", "offline"),
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("no", False),
        ("2", False),
        ("", False),
    ],
)
def test_hub_offline_reads_as_the_hugging_face_libraries_read_it(value, offline):
    assert Settings.from_env({"HF_HUB_OFFLINE": value}).hub_offline is offline


def test_threads_take_the_first_entry_of_an_openmp_list():
    assert Settings.from_env({"OMP_NUM_THREADS": "3"}).threads == 3
    assert Settings.from_env({"OMP_NUM_THREADS": "4,2"}).threads == 4
    assert Settings.from_env({}).threads is None


@pytest.mark.parametrize("value", ["many", "-1", "1.5"])
def test_a_value_that_does_not_fit_is_a_one_line_error_naming_the_variable(value):
    with pytest.raises(LeanloopError) as caught:
        Settings.from_env({"OMP_NUM_THREADS": value})
    message = str(caught.value)
    assert "OMP_NUM_THREADS" in message and repr(value) in message and "\n" not in message


def test_settings_are_frozen_and_can_be_made_by_field_name(tmp_path):
    s = Settings(data_dir=tmp_path, database=None)
    assert s.data_dir == tmp_path
    assert s.default_database == str(tmp_path / "leanloop.db")
    with pytest.raises(ValidationError):
        s.data_dir = tmp_path / "other"  # type: ignore[misc]


def test_a_named_variable_is_read_stripped_or_none(monkeypatch):
    assert Settings.variable("KEY", {"KEY": "  secret \n"}) == "secret"
    assert Settings.variable("KEY", {"KEY": "   "}) is None
    assert Settings.variable("KEY", {}) is None
    monkeypatch.setenv("LEANLOOP_TEST_KEY", "x")
    assert Settings.variable("LEANLOOP_TEST_KEY") == "x"


def test_the_ml_helpers_read_their_variables_through_settings(monkeypatch):
    torch = pytest.importorskip("torch")
    from leanloop.ml.device import limit_threads
    from leanloop.ml.models import hub_offline

    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    assert hub_offline() is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert hub_offline() is False

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "2,1")
        limit_threads()
        assert torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        torch.set_num_threads(1)
        limit_threads()  # unset: torch is left as it is
        assert torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "lots")
        with pytest.raises(LeanloopError, match="OMP_NUM_THREADS"):
            limit_threads()
    finally:
        torch.set_num_threads(before)
