"""The trace cache: each file's trace on disk, found by project, commit, toolchain, path and
content (a damaged or outdated entry is a miss, and the file is traced again)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from leanloop.atomic import write_text_atomic
from leanloop.lean.project import LeanProject
from leanloop.tracing.file_trace import TRACE_FORMAT, FileTrace


class TraceCache:
    """The cached traces of one project's files under ``directory/traces``."""

    def __init__(self, directory: Path, project: LeanProject) -> None:
        self.directory = directory
        self.project = project

    def path(self, path: str, source: str) -> Path:
        digest = hashlib.sha256(
            "\0".join(
                [
                    str(TRACE_FORMAT),
                    self.project.identity,
                    self.project.commit or "",
                    self.project.toolchain or "",
                    path,
                    hashlib.sha256(source.encode("utf-8")).hexdigest(),
                ]
            ).encode()
        ).hexdigest()
        return self.directory / "traces" / digest[:2] / f"{digest}.json"

    def load(self, path: str, source: str) -> FileTrace | None:
        cache = self.path(path, source)
        if not cache.is_file():
            return None
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("format") != TRACE_FORMAT:
                return None
            return FileTrace.from_json(data, source)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # a damaged cache entry is traced again

    def store(self, trace: FileTrace) -> None:
        write_text_atomic(
            self.path(trace.path, trace.source), json.dumps(trace.to_json(), ensure_ascii=False)
        )
