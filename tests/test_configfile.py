from __future__ import annotations

import pytest

from leanloop.configfile import read_config_file
from leanloop.errors import DataFormatError


def test_yaml_json_and_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("lr: 0.001\nsplits:\n  val: 5\n")
    (tmp_path / "a.json").write_text('{"lr": 0.001, "splits": {"val": 5}}')
    assert read_config_file(tmp_path / "a.yaml") == read_config_file(tmp_path / "a.json")
    (tmp_path / "empty.yaml").write_text("")
    assert read_config_file(tmp_path / "empty.yaml") is None
    (tmp_path / "bad.yaml").write_text("lr: 1\nsplits: [1, 2\n")
    with pytest.raises(DataFormatError) as err:
        read_config_file(tmp_path / "bad.yaml")
    assert err.value.path.endswith("bad.yaml") and err.value.line is not None
    with pytest.raises(DataFormatError, match="does not exist"):
        read_config_file(tmp_path / "absent.yaml")
