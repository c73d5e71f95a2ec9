"""docs/getting-started.md is a contract like the README: its blocks say what they are (the
README's markers: ``run``, ``file``, ``background``, ``skip`` with the reason), and those marked
to run do, in order, as written, from the repository's root in a fresh home directory, with the
models packaged on PyPI; the links of its last section and the reference lead to pages of the
site."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_readme import BLOCK_TIMEOUT, RUNNABLE, _wait_until_up, readme_blocks

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
def test_the_blocks_run_as_written(tmp_path: Path) -> None:
    venv_bin = Path(sys.executable).parent
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.skip("the page's blocks start from the checkout's .venv (made by make run / test)")
    fixtures = os.environ.get("LEANLOOP_FIXTURES")
    if not fixtures or not (Path(fixtures) / "leandojo_benchmark_4").is_dir():
        pytest.skip("no LeanDojo sample under $LEANLOOP_FIXTURES")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "LEANLOOP_DATA_DIR": str(home / ".local" / "share" / "leanloop"),
        "LEANLOOP_CACHE_DIR": str(home / ".cache" / "leanloop"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("LEANLOOP_DB", None)
    cwd = ROOT
    where = tmp_path / "cwd"
    background: list[subprocess.Popen] = []
    ran: list[int] = []
    try:
        for block in readme_blocks(PAGE.read_text(encoding="utf-8")):
            context = f"getting-started.md:{block.line} ({block.language})"
            if block.kind == "file":
                (cwd / block.argument).write_text(block.text, encoding="utf-8")
            elif block.kind == "background":
                log = tmp_path / f"background-{block.line}.log"
                with log.open("w") as out:
                    background.append(
                        subprocess.Popen(
                            ["bash", "-e", "-c", block.text],
                            cwd=cwd,
                            env=env,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
                _wait_until_up(block.argument, background[-1], log, limit=180)
            elif block.kind == "run":
                if block.language in ("sh", "bash"):
                    argv = ["bash", "-e", "-o", "pipefail", "-c", f"{block.text}\npwd > {where}\n"]
                else:
                    argv = [sys.executable, "-c", block.text]
                started = time.monotonic()
                done = subprocess.run(
                    argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
                )
                assert done.returncode == 0, f"{context} failed:\n{done.stdout}\n{done.stderr}"
                assert "Traceback" not in done.stderr, f"{context}:\n{done.stderr}"
                if block.language in ("sh", "bash"):
                    cwd = Path(where.read_text().strip())
                print(f"{context}: ran in {time.monotonic() - started:.1f} s")
            else:
                continue
            ran.append(block.line)
    finally:
        for process in background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
    assert len(ran) >= 8, f"only blocks {ran} ran"
