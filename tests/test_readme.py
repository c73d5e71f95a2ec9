"""The README is a contract: its shell and Python blocks run, in order, as they are written.

Each fenced block of a language that runs (``sh``, ``bash``, ``python``, ``yaml``) is preceded by
a marker, an HTML comment GitHub does not show, that says what the block is:

- ``<!-- readme: run -->``: run it (shell blocks with ``bash -e``, Python blocks with this
  interpreter), in the directory the previous shell block ended in;
- ``<!-- readme: file NAME -->``: a file the text gives; it is written to NAME there;
- ``<!-- readme: background URL -->``: a server started in the background; the next blocks run
  once URL answers, and the server is stopped (SIGTERM) at the end;
- ``<!-- readme: skip REASON -->``: not run here, for the reason given (it needs Lean, the
  network, or it is this very command).

The blocks run in a temporary home directory with the models packaged on PyPI; every file a
block uses is made by an earlier block or shipped in the repository.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers import share_converted_models

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUNNABLE = {"sh", "bash", "python", "yaml"}
MARKER = re.compile(r"<!--\s*readme:\s*(run|file|background|skip)\b\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
# every block together may take this long on a slow machine (the steps are small on purpose)
BLOCK_TIMEOUT = 600


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    kind: str | None  # run, file, background, skip; None when unmarked
    argument: str
    text: str


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` with the marker on the line before each (if any)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None or lines[index].startswith("````"):
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index].rstrip() != "```":
            body.append(lines[index])
            index += 1
        index += 1
        previous = lines[start - 1] if start > 0 else ""
        marker = MARKER.search(previous)
        blocks.append(
            Block(
                line=start + 1,
                language=opening.group(1),
                kind=marker.group(1) if marker else None,
                argument=marker.group(2) if marker else "",
                text="\n".join(body) + "\n",
            )
        )
    return blocks


def test_every_runnable_block_says_what_it_is() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has no code blocks"
    unmarked = [b.line for b in blocks if b.language in RUNNABLE and b.kind is None]
    assert not unmarked, f"README.md blocks without a <!-- readme: ... --> marker: lines {unmarked}"
    for block in blocks:
        if block.kind == "skip":
            assert block.argument, f"README.md:{block.line}: a skipped block gives its reason"
        if block.kind in ("file", "background"):
            assert block.argument, f"README.md:{block.line}: {block.kind} needs its argument"
        if block.kind == "file":
            assert block.language == "yaml", f"README.md:{block.line}: files are YAML here"
    assert sum(b.kind == "run" for b in blocks) >= 5, "the README's walkthrough is not tested"


def test_the_marker_parser_sees_markers_and_fences() -> None:
    text = (
        "intro\n<!-- readme: skip needs Lean -->\n```sh\nlake build\n```\n\n```python\nx = 1\n```\n"
    )
    first, second = readme_blocks(text)
    assert (first.line, first.language, first.kind) == (3, "sh", "skip")
    assert first.argument == "needs Lean"
    assert first.text == "lake build\n"
    assert (second.kind, second.language, second.text) == (None, "python", "x = 1\n")


def _wait_until_up(url: str, process: subprocess.Popen, log: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stopped = f"the background block stopped (exit {process.returncode})"
            pytest.fail(f"{stopped}:\n{log.read_text()}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {limit:.0f} s:\n{log.read_text()}")


def run_blocks(page: Path, tmp_path: Path, converted: Path) -> list[int]:
    """Run ``page``'s marked blocks in order, as written, from the repository's root in a fresh
    home directory with the packaged models (skipped without the checkout's .venv or the
    LeanDojo sample); the lines of the blocks that ran. The home's cache has the run's
    ``converted`` models folder (conftest's ``converted_models``), its one shared part."""
    venv_bin = Path(sys.executable).parent
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.skip(f"{page.name}'s blocks start from the .venv made by make run / test")
    fixtures = os.environ.get("LEANLOOP_FIXTURES")
    sample = Path(fixtures) / "leandojo_benchmark_4" if fixtures else None
    if sample is None or not sample.is_dir():
        pytest.skip("no LeanDojo sample under $LEANLOOP_FIXTURES")
    home = tmp_path / "home"
    home.mkdir()
    share_converted_models(home / ".cache" / "leanloop", converted)
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
        for block in readme_blocks(page.read_text(encoding="utf-8")):
            context = f"{page.name}:{block.line} ({block.language})"
            started = time.monotonic()
            if block.kind == "file":
                (cwd / block.argument).write_text(block.text, encoding="utf-8")
            elif block.kind == "background":
                log = tmp_path / f"background-{block.line}.log"
                with log.open("w") as out:
                    process = subprocess.Popen(
                        ["bash", "-e", "-c", block.text],
                        cwd=cwd,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                background.append(process)
                _wait_until_up(block.argument, process, log, limit=180)
            elif block.kind == "run" and block.language in ("sh", "bash", "python"):
                shell = block.language != "python"
                if shell:
                    argv = ["bash", "-e", "-o", "pipefail", "-c", f"{block.text}\npwd > {where}\n"]
                else:
                    argv = [sys.executable, "-c", block.text]
                done = subprocess.run(
                    argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
                )
                assert done.returncode == 0, f"{context} failed:\n{done.stdout}\n{done.stderr}"
                assert "Traceback" not in done.stderr, f"{context}:\n{done.stderr}"
                if shell:
                    cwd = Path(where.read_text().strip())
            else:
                continue
            ran.append(block.line)
            print(f"{context}: {block.kind} in {time.monotonic() - started:.1f} s")
    finally:
        for process in background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
    return ran


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_blocks_run_as_written(tmp_path: Path, converted_models: Path) -> None:
    ran = run_blocks(README, tmp_path, converted_models)
    assert len(ran) >= 5, f"only README blocks {ran} ran"
