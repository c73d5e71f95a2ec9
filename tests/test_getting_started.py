"""docs/getting-started.md is a contract like the README: its blocks say what they are (the
README's markers: ``run``, ``file``, ``background``, ``skip`` with the reason), and those marked
to run do, in order, as written, from the repository's root in a fresh home directory, with the
models packaged on PyPI; the links of its last section and the reference lead to pages of the
site."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_readme import RUNNABLE, readme_blocks, run_blocks

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"


def test_every_runnable_block_says_what_it_is() -> None:
    blocks = readme_blocks(PAGE.read_text(encoding="utf-8"))
    unmarked = [b.line for b in blocks if b.language in RUNNABLE and b.kind is None]
    assert not unmarked, f"getting-started.md blocks without a marker: lines {unmarked}"
    for block in blocks:
        if block.kind == "skip":
            assert block.argument, f"getting-started.md:{block.line}: a skip gives its reason"
    kinds = [b.kind for b in blocks]
    assert kinds.count("run") >= 6 and "background" in kinds and "file" in kinds
    # the commands a newcomer is told about are among those that run
    ran = "".join(b.text for b in blocks if b.kind == "run")
    for command in ("db import", "db stats", "db check", "db export", "train sft", "evaluate",
                    "prove --dataset", "doctor", "/generate", "stream=True"):  # fmt: skip
        assert command in ran, command


def test_the_page_is_in_the_sites_navigation() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    pages = {value for entry in nav for value in entry.values() if isinstance(value, str)}
    assert {"getting-started.md", "cli.md"} <= pages


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_blocks_run_as_written(tmp_path: Path, converted_models: Path) -> None:
    ran = run_blocks(PAGE, tmp_path, converted_models)
    assert len(ran) >= 8, f"only blocks {ran} ran"
