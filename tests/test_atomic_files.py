"""Files written in one step (``leanloop.atomic``) get the permissions an ordinary write would
give: a new file follows the umask (not the 0600 of a temporary file), a replaced one keeps its
own mode."""

from __future__ import annotations

import os
import stat

from leanloop.atomic import write_text_atomic


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_follows_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path):
    before = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "report.md", "# report\n")
        assert _mode(tmp_path / "report.md") == 0o640
        os.umask(0o022)
        write_text_atomic(tmp_path / "other.json", "{}\n")
        assert _mode(tmp_path / "other.json") == 0o644
        (tmp_path / "report.md").chmod(0o600)  # the user's choice stays
        write_text_atomic(tmp_path / "report.md", "# again\n")
        assert _mode(tmp_path / "report.md") == 0o600
        assert (tmp_path / "report.md").read_text() == "# again\n"
    finally:
        os.umask(before)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
