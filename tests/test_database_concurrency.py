"""Two processes writing to one SQLite database take turns instead of failing."""

from __future__ import annotations

import subprocess
import sys

from leanloop.database import DynamicDatabase
from tests.helpers import renamed, sample_theorems, write_dataset

WRITER = """
import sys
from leanloop.database import DynamicDatabase
db = DynamicDatabase(sys.argv[1])
for path in sys.argv[2:]:
    db.import_leandojo(path)
"""


def test_concurrent_imports_wait_for_each_other(sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)[:40]
    files = {}
    for writer in ("a", "b"):
        files[writer] = []
        for batch in range(6):
            url = f"https://example.org/{writer}{batch}"
            copies = [renamed(t, f"_{writer}{batch}", url=url, commit="0" * 40) for t in theorems]
            root = write_dataset(tmp_path / f"{writer}{batch}", {"random/test": copies})
            files[writer].append(str(root / "random" / "test.json"))
    database = tmp_path / "shared.db"
    DynamicDatabase(database).import_leandojo(files["a"].pop())  # the schema exists first
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(database), *files[writer]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in ("a", "b")
    ]
    for run in runs:
        _, err = run.communicate(timeout=240)
        assert run.returncode == 0, err.strip().splitlines()[-1:]
    assert len(DynamicDatabase(database).get_repositories()) == 12
