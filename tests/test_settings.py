"""Settings: every environment variable leanloop reads, read in one place."""

from __future__ import annotations

from pathlib import Path

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
