"""MkDocs hook of the documentation site: a guide's link to a file of the repository outside
docs/ (such as ``../examples/copilot/LeanloopCopilot.lean``, which GitHub shows beside the
guide) points at that file in the repository on the site, where it is not copied."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

_LINK = re.compile(r"\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):
    repo_url = (config.get("repo_url") or "").rstrip("/")
    docs_dir = Path(config["docs_dir"]).resolve()
    root = docs_dir.parent

    def rewrite(match: re.Match) -> str:
        page_dir = posixpath.dirname(page.file.src_uri)
        target = (docs_dir / page_dir / match.group(1)).resolve()
        if not repo_url or target.is_relative_to(docs_dir) or not target.exists():
            return match.group(0)  # inside the site, or missing: MkDocs judges it
        relative = target.relative_to(root).as_posix()
        return f"]({repo_url}/blob/main/{relative}{match.group(2) or ''})"

    return _LINK.sub(rewrite, markdown)
