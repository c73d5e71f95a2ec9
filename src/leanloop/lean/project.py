"""Lean projects: a git URL at a commit (cloned once into a cache, under a lock), a local
directory (as it is, or at a given commit), or a single ``.lean`` file; with the toolchain the
project pins and the packages of its Lake manifest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from leanloop.lean.errors import CloneFailed, MissingToolchainFile, NotALeanProject

LAKEFILES = ("lakefile.lean", "lakefile.toml")
_SKIP_DIRS = frozenset({".lake", "lake-packages", "build", ".git", ".github", "node_modules"})
_URL = re.compile(r"^(https?://|git@|ssh://|file://)")


@dataclass(frozen=True)
class LakePackage:
    """A dependency from ``lake-manifest.json``."""

    name: str
    kind: str = "git"  # git | path
    url: str | None = None
    rev: str | None = None
    input_rev: str | None = None
    directory: str | None = None


@dataclass(frozen=True)
class LeanProject:
    """A Lean project on disk (see ``open_project``).

    Attributes:
        root: The project's directory (a checkout in the cache for a URL or a commit).
        kind: ``git`` (cloned from a URL), ``local`` (a directory) or ``file`` (one
            ``.lean`` file).
        url: The git URL, for a cloned project.
        commit: The commit checked out (a local directory's HEAD, when it is a repository).
        toolchain: The toolchain the project pins (``leanprover/lean4:v4.9.0``).
        packages: The dependencies of its Lake manifest.
        single_file: The file, for a project of one ``.lean`` file.
        name: A short name.
    """

    root: Path
    kind: str  # "git" (cloned from a URL), "local" (a directory), "file" (one .lean file)
    url: str | None = None
    commit: str | None = None
    toolchain: str | None = None
    packages: tuple[LakePackage, ...] = ()
    single_file: Path | None = None
    name: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    source: Path | None = None  # the directory named by the user, when ``root`` is a checkout of it

    @property
    def identity(self) -> str:
        """The URL for a cloned project, else the absolute path the user gave (the same for
        every commit of a local directory)."""
        return self.url or str(self.single_file or self.source or self.root)

    @property
    def lean_version(self) -> str | None:
        """``v4.9.0`` from ``leanprover/lean4:v4.9.0``."""
        if self.toolchain is None:
            return None
        return self.toolchain.split(":", 1)[-1]

    def require_toolchain(self) -> str:
        """The toolchain the project pins.

        Returns:
            The toolchain, e.g. ``leanprover/lean4:v4.9.0``.

        Raises:
            MissingToolchainFile: The project has no ``lean-toolchain`` file.
        """
        if self.toolchain is None:
            raise MissingToolchainFile(
                f"{self.root} has no lean-toolchain file: the Lean version is unknown",
                hint="add a lean-toolchain file (e.g. 'leanprover/lean4:v4.9.0'), as "
                "'lake new' creates",
            )
        return self.toolchain

    def lean_files(self) -> list[str]:
        """The project's own ``.lean`` files (not its packages', nor build output).

        Returns:
            Their paths relative to the root, sorted.
        """
        if self.single_file is not None:
            return [self.single_file.name]
        found = []
        for directory, subdirs, files in os.walk(self.root):
            subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS and not d.startswith("."))
            for name in files:
                if name.endswith(".lean") and name not in LAKEFILES:
                    found.append(str((Path(directory) / name).relative_to(self.root)))
        return sorted(found)

    def package_roots(self) -> list[tuple[str, Path]]:
        """Where the project's dependencies are checked out.

        Returns:
            (package name, directory) of each dependency present on disk.
        """
        packages_dir = self.root / ".lake" / "packages"
        roots = []
        for package in self.packages:
            path = (
                self.root / package.directory
                if package.kind == "path" and package.directory
                else packages_dir / package.name
            )
            if path.is_dir():
                roots.append((package.name, path))
        return roots

    def module_path(self, module: str) -> str | None:
        """The file of a module, looked for in the project and then in its packages.

        Args:
            module: A module name (``A.B`` is the file ``A/B.lean``).

        Returns:
            The file relative to the project root; None when it is not there.
        """
        relative = Path(*module.split(".")).with_suffix(".lean")
        if (self.root / relative).is_file():
            return str(relative)
        for _, root in self.package_roots():
            if (root / relative).is_file():
                return str((root / relative).relative_to(self.root))
        return None


def is_remote(spec: str | os.PathLike) -> bool:
    """Whether ``spec`` is a git URL (cloned), not a local directory or file."""
    return bool(_URL.match(os.fspath(spec)))


def open_project(
    spec: str | os.PathLike,
    *,
    commit: str | None = None,
    cache_dir: Path | None = None,
) -> LeanProject:
    """A Lean project: a git URL, a local directory or a single ``.lean`` file.

    A URL is cloned once into the cache (under a lock, so that processes share the clone); a
    local directory is used as it is, or checked out into the cache at ``commit`` when one is
    given. Opening does not need a Lean toolchain.

    Args:
        spec: A git URL (``https://``, ``git@``, ``ssh://``, ``file://``), a directory or a
            ``.lean`` file.
        commit: The commit to check out (default: the remote's HEAD for a URL, the directory
            as it is for a local one).
        cache_dir: Where clones go (default: ``Settings.cache_dir``/``repos``).

    Returns:
        The project, with the toolchain it pins and its Lake packages.

    Raises:
        NotALeanProject: ``spec`` is neither a URL, a directory nor a ``.lean`` file.
        CloneFailed: The repository could not be cloned or the commit checked out.
    """
    text = os.fspath(spec)
    if _URL.match(text):
        return _from_url(text, commit, _cache(cache_dir))
    path = Path(text).expanduser()
    if path.is_file():
        if path.suffix != ".lean":
            raise NotALeanProject(f"{path} is not a .lean file or a Lean project directory")
        return _from_file(path.absolute())
    if not path.is_dir():
        raise NotALeanProject(f"{path}: no such file or directory")
    if commit is not None:
        return _from_url(str(path.absolute()), commit, _cache(cache_dir), local=True)
    return _describe(path.absolute(), kind="local", commit=_head(path))


def _cache(cache_dir: Path | None) -> Path:
    if cache_dir is None:
        from leanloop.settings import Settings

        cache_dir = Settings.from_env().cache_dir
    return cache_dir / "repos"


def _from_file(path: Path) -> LeanProject:
    root = path.parent
    project_root = next(
        (p for p in (root, *root.parents) if any((p / f).is_file() for f in LAKEFILES)), None
    )
    toolchain_root = project_root or root
    toolchain = _read_toolchain(toolchain_root)
    return LeanProject(
        root=root,
        kind="file",
        toolchain=toolchain,
        single_file=path,
        name=path.stem,
        commit=_head(root),
    )


def _describe(
    root: Path,
    *,
    kind: str,
    url: str | None = None,
    commit: str | None,
    source: Path | None = None,
) -> LeanProject:
    has_lakefile = any((root / f).is_file() for f in LAKEFILES)
    toolchain = _read_toolchain(root)
    if not has_lakefile and toolchain is None:
        raise NotALeanProject(
            f"{root} is not a Lean project: it has no lakefile.lean, lakefile.toml or "
            "lean-toolchain",
            hint="point at the project's root directory, or at a single .lean file",
        )
    notes = []
    if not has_lakefile:
        notes.append("no lakefile: dependencies cannot be built with lake")
    packages, manifest_note = _read_manifest(root)
    if manifest_note:
        notes.append(manifest_note)
    name = url.rstrip("/").removesuffix(".git").split("/")[-1] if url else (source or root).name
    return LeanProject(
        root=root,
        kind=kind,
        url=url,
        commit=commit,
        toolchain=toolchain,
        packages=packages,
        name=name,
        notes=tuple(notes),
        source=source,
    )


def _read_toolchain(root: Path) -> str | None:
    path = root / "lean-toolchain"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8").strip()
    return text or None


def _read_manifest(root: Path) -> tuple[tuple[LakePackage, ...], str | None]:
    path = root / "lake-manifest.json"
    if not path.is_file():
        return (), None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return (), f"lake-manifest.json is unreadable ({exc})"
    packages = []
    for entry in data.get("packages", []) if isinstance(data, dict) else []:
        if not isinstance(entry, dict) or "name" not in entry:
            continue
        packages.append(
            LakePackage(
                name=str(entry["name"]),
                kind=str(entry.get("type", "git")),
                url=entry.get("url"),
                rev=entry.get("rev"),
                input_rev=entry.get("inputRev"),
                directory=entry.get("dir"),
            )
        )
    return tuple(packages), None


# -- git ------------------------------------------------------------------------------------------


def _git(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    if result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, args, result.stdout, result.stderr)
    return result.stdout.strip()


def _head(path: Path) -> str | None:
    try:
        return _git("rev-parse", "HEAD", cwd=path, timeout=30)
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
        return None


def _slug(url: str) -> str:
    cleaned = url.rstrip("/").removesuffix(".git")
    parts = [p for p in re.split(r"[/:]", cleaned) if p][-2:]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(parts)) or "repo"


def _auth_args(url: str) -> list[str]:
    """Extra git arguments carrying a GitHub token, only for github.com URLs and only if set."""
    from leanloop.settings import Settings

    token = Settings.from_env().github_token
    if not token or "github.com" not in url:
        return []
    return ["-c", f"http.extraHeader=Authorization: Bearer {token}"]


def _from_url(url: str, commit: str | None, cache: Path, *, local: bool = False) -> LeanProject:
    from filelock import FileLock

    if shutil.which("git") is None:
        raise CloneFailed("git is not installed", hint="install git to work on repositories")
    cache.mkdir(parents=True, exist_ok=True)
    slug = _slug(url)
    lock = FileLock(str(cache / f"{slug}.lock"), timeout=3600)
    with lock:
        resolved = commit if commit and re.fullmatch(r"[0-9a-f]{40}", commit) else None
        if resolved is not None:
            target = cache / f"{slug}-{resolved[:12]}"
            if (target / ".git").exists() and _head(target) == resolved:
                return _describe_checkout(target, url, resolved, local=local)
        staging = cache / f".{slug}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            resolved = _checkout(url, commit, staging)
            target = cache / f"{slug}-{resolved[:12]}"
            if (target / ".git").exists() and _head(target) == resolved:
                shutil.rmtree(staging, ignore_errors=True)
            else:
                shutil.rmtree(target, ignore_errors=True)
                os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return _describe_checkout(target, url, resolved, local=local)


def _describe_checkout(target: Path, url: str, commit: str, *, local: bool) -> LeanProject:
    """A checkout in the cache: of a remote (identified by its URL) or of a local directory
    (identified by the directory)."""
    if local:
        return _describe(target, kind="local", commit=commit, source=Path(url))
    return _describe(target, kind="git", url=url, commit=commit)


def _checkout(url: str, commit: str | None, staging: Path) -> str:
    """Fetch ``commit`` of ``url`` into ``staging`` (shallow when the server allows) and return
    the full commit hash."""
    auth = _auth_args(url)
    try:
        staging.mkdir(parents=True)
        _git("init", "--quiet", cwd=staging)
        _git("remote", "add", "origin", url, cwd=staging)
        try:
            _git(*auth, "fetch", "--quiet", "--depth", "1", "origin", commit or "HEAD", cwd=staging)
            _git("checkout", "--quiet", "FETCH_HEAD", cwd=staging)
        except subprocess.CalledProcessError:
            if commit is None:
                raise
            # servers that refuse to fetch a commit by hash: fetch everything, then check out
            _git(*auth, "fetch", "--quiet", "origin", cwd=staging)
            _git("checkout", "--quiet", commit, cwd=staging)
        return _git("rev-parse", "HEAD", cwd=staging)
    except subprocess.CalledProcessError as exc:
        reason = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise CloneFailed(
            f"cannot get {url} at {commit or 'HEAD'}: {reason[-1] if reason else 'git failed'}",
            hint="check the URL and the commit; for a private GitHub repository set GITHUB_TOKEN",
        ) from None
    except subprocess.TimeoutExpired:
        raise CloneFailed(f"cloning {url} timed out") from None
