"""What the main job's console shows: its own lines, and — unless asked for with ``-v`` — none of
the libraries' warnings, notices and progress bars, which go to a log file in the run's output
directory instead; and Ctrl-C taken once, so that a second one cannot cut the cleanup short."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

#: The log of the libraries' messages, in the job's output directory.
LOG_FILE = "run.log"


@contextlib.contextmanager
def library_output(log_path: Path, *, verbose: bool) -> Iterator[None]:
    """Inside the block, everything written to standard error — Python warnings, the
    libraries' log records and notices, and what native code prints there — goes to the end
    of ``log_path``, and the libraries' progress bars are off; standard output (the job's own
    lines) is left alone. With ``verbose`` nothing changes. Processes started inside the block
    inherit the redirection."""
    if verbose:
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    bars = _progress_bars_off()
    sys.stderr.flush()
    saved = os.dup(2)
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in the finally below
    os.dup2(log.fileno(), 2)
    raw = open(log.fileno(), "wb", closefd=False)  # noqa: SIM115 - the wrapper below closes it
    text = io.TextIOWrapper(raw, line_buffering=True)
    try:
        with contextlib.redirect_stderr(text):
            yield
    finally:
        with contextlib.suppress(Exception):
            text.flush()
        os.dup2(saved, 2)
        os.close(saved)
        log.close()
        bars()


def _progress_bars_off():
    """Turn the libraries' progress bars off; returns what turns them back on."""
    undo = []
    previous = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    undo.append(lambda: _restore_env("HF_HUB_DISABLE_PROGRESS_BARS", previous))
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as transformers_logging

        if transformers_logging.is_progress_bar_enabled():
            transformers_logging.disable_progress_bar()
            undo.append(transformers_logging.enable_progress_bar)
    with contextlib.suppress(ImportError):
        import datasets

        if datasets.is_progress_bar_enabled():
            datasets.disable_progress_bars()
            undo.append(datasets.enable_progress_bars)

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def one_interrupt() -> Iterator[None]:
    """Inside the block the first Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` and later ones
    are ignored until the block has been left, so that the cleanup the first one starts (staging
    directories removed, a worker process stopped) runs to its end. Off the main thread, or
    where SIGINT is ignored (a background job), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return

    def first(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
