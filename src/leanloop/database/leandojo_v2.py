"""LeanDojo-v2's own files, read whole: its database (``DynamicDatabase.to_json``: repositories
with their theorems, premise files and traced files, positions written as ``"(line, column)"``),
the ``repositories`` list its ``export_merged_data`` writes into ``metadata.json`` in place of one
``from_repo``, and which format a file or directory given to ``import`` is in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

from leanloop.data.leandojo.format import (
    SchemaError,
    source_file_from_corpus,
    theorem_from_leandojo,
)
from leanloop.data.records import Repository, SourceFile, Theorem, TheoremStatus
from leanloop.database.ingest import Ingest, IngestCounts
from leanloop.errors import DataFormatError

Progress = Callable[[int, int | None], None]

#: How the formats are named to users.
LEANDOJO_V2_DATABASE = "a LeanDojo-v2 database (DynamicDatabase.to_json)"
LEANDOJO_V2_EXPORT = "a LeanDojo-v2 export (export_merged_data: metadata.json lists repositories)"
LEANDOJO_DATASET = "a LeanDojo dataset"
LEANDOJO_SPLIT_FILE = "a LeanDojo split file (a JSON array of theorems)"

#: The theorem lists of a LeanDojo-v2 repository and the status their theorems have here.
THEOREM_LISTS = {
    "proven_theorems": TheoremStatus.PROVEN,
    "sorry_theorems_unproved": TheoremStatus.SORRY,
    "sorry_theorems_proved": TheoremStatus.SORRY_PROVED,
}
_DATABASE_START = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"repositories"\s*:')
_POSITION = re.compile(r"\A\s*(?:Pos)?\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*\Z")


def _head(path: Path, size: int = 4096) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


def is_leandojo_v2_database(path: str | Path) -> bool:
    """Whether ``path`` is a file LeanDojo-v2's ``DynamicDatabase.to_json`` wrote (a JSON
    object whose first key is ``repositories``; only the file's start is read)."""
    path = Path(path)
    return path.is_file() and _DATABASE_START.match(_head(path)) is not None


def dataset_format(path: str | Path) -> str:
    """What ``path`` is, as named to users: a LeanDojo-v2 database or export, a LeanDojo
    dataset or split file, or another format ``leanloop.data.open_dataset`` reads.

    Args:
        path: A file or directory given to ``DynamicDatabase.import_dataset``.

    Returns:
        The format's name (e.g. ``a LeanDojo-v2 database (DynamicDatabase.to_json)``).

    Raises:
        DataFormatError: ``path`` is a ``.json`` file holding a JSON object that is neither a
            LeanDojo-v2 database nor LeanDojo metadata.
    """
    path = Path(path)
    if path.is_dir():
        metadata = path / "metadata.json"
        if metadata.is_file():
            data = _read_small_json(metadata)
            if isinstance(data, dict) and "repositories" in data and "from_repo" not in data:
                return LEANDOJO_V2_EXPORT
        return LEANDOJO_DATASET
    if path.suffix == ".json" and path.name != "metadata.json":
        if is_leandojo_v2_database(path):
            return LEANDOJO_V2_DATABASE
        if _head(path, 64).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            raise DataFormatError(
                path,
                "a JSON object, which is neither a LeanDojo split file (a JSON array of "
                "theorems) nor a LeanDojo-v2 database (an object whose first key is "
                "'repositories')",
                hint="give a LeanDojo dataset directory, one of its split files, or "
                "LeanDojo-v2's dynamic_database.json",
            )
        return LEANDOJO_SPLIT_FILE
    if path.name in ("corpus.jsonl", "traced_files.jsonl", "metadata.json"):
        return f"a LeanDojo dataset's {path.name}"
    if path.suffix == ".jsonl":
        return "a benchmark of statements (JSONL)"
    if path.suffix == ".lean":
        return "a Lean file of sorry theorems"
    return "a file of no format leanloop reads"


def _read_small_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


# -- the database file ---------------------------------------------------------------------------


@dataclass
class LeanDojoV2Repository:
    """One repository of a LeanDojo-v2 database, as leanloop's records."""

    repository: Repository
    theorems: list[Theorem] = field(default_factory=list)
    source_files: list[SourceFile] = field(default_factory=list)
    traced_files: list[str] = field(default_factory=list)


def read_leandojo_v2_database(path: str | Path) -> Iterator[LeanDojoV2Repository]:
    """The repositories of a LeanDojo-v2 database file, each with every theorem of its three
    lists (``proven_theorems``: proven; ``sorry_theorems_unproved``: open sorries;
    ``sorry_theorems_proved``: sorries proved since), its premise files and traced files. The
    file is read whole, as LeanDojo-v2 reads it; what leanloop does not keep (a theorem's
    ``difficulty_rating``, which leanloop computes from the proof, and a repository's
    ``metadata``, ``lean_dojo_version`` and ``pr_url``) is left out.

    Args:
        path: The JSON file (``dynamic_database.json``).

    Yields:
        Each repository with its records, in the file's order.

    Raises:
        DataFormatError: The file is not valid JSON or not a LeanDojo-v2 database, or a field
            is wrong (the message names the file, line or field).
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = json.load(handle)  # LeanDojo-v2 writes Infinity for a sorry's difficulty
    except OSError as exc:
        raise DataFormatError(path, f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, f"not valid UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path, f"malformed JSON ({exc.msg})", line=exc.lineno, column=exc.colno
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("repositories"), list):
        raise DataFormatError(
            path,
            "expected LeanDojo-v2's database: an object with a list 'repositories'",
            field="repositories",
        )
    for index, raw in enumerate(data["repositories"]):
        yield _repository(path, raw, f"repositories.{index}")


def _repository(path: Path, raw: Any, where: str) -> LeanDojoV2Repository:
    if not isinstance(raw, dict):
        raise DataFormatError(path, "expected a repository object", field=where)
    repository = repository_from_v2(raw, path, where)
    result = LeanDojoV2Repository(repository)
    for name, status in THEOREM_LISTS.items():
        for index, theorem in enumerate(_list(path, raw, name, where)):
            result.theorems.append(
                _theorem(path, theorem, repository, status, f"{where}.{name}.{index}")
            )
    for index, source in enumerate(_list(path, raw, "premise_files", where)):
        result.source_files.append(_source_file(path, source, f"{where}.premise_files.{index}"))
    for index, traced in enumerate(_list(path, raw, "files_traced", where)):
        if not isinstance(traced, str):
            raise DataFormatError(
                path, "expected a file path", field=f"{where}.files_traced.{index}"
            )
        result.traced_files.append(traced)
    return result


def repository_from_v2(raw: Mapping[str, Any], path: Path, where: str) -> Repository:
    """A repository as LeanDojo-v2 lists it (``url``, ``commit``, ``name``, ``lean_version``).

    Args:
        raw: The object.
        path: The file it is in (for errors).
        where: Its place in the file (for errors).

    Returns:
        The repository, its Lean version and name kept.

    Raises:
        DataFormatError: ``url`` or ``commit`` is missing or empty, or a field is not a string.
    """
    for name in ("url", "commit"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise DataFormatError(path, "expected a non-empty string", field=f"{where}.{name}")
    for name in ("name", "lean_version"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise DataFormatError(path, "expected a string", field=f"{where}.{name}")
    return Repository(
        url=raw["url"],
        commit=raw["commit"],
        lean_version=raw.get("lean_version") or None,
        name=raw.get("name") or "",
    )


def _list(path: Path, raw: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = raw.get(name, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataFormatError(path, "expected a list", field=f"{where}.{name}")
    return value


def position(value: Any) -> Any:
    """A position as LeanDojo-v2 writes it (``"(12, 3)"``, ``"Pos(12, 3)"``) as ``[12, 3]``;
    anything else is returned as it is (for the record's own check)."""
    if isinstance(value, str):
        found = _POSITION.match(value)
        if found is not None:
            return [int(found.group(1)), int(found.group(2))]
    return value


def _ref(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    return {
        **raw,
        "def_pos": position(raw.get("def_pos")),
        "def_end_pos": position(raw.get("def_end_pos")),
    }


def _tactic(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    annotated = raw.get("annotated_tactic")
    if isinstance(annotated, list) and len(annotated) == 2 and isinstance(annotated[1], list):
        raw = {**raw, "annotated_tactic": [annotated[0], [_ref(r) for r in annotated[1]]]}
    return raw


def _theorem(
    path: Path, raw: Any, repository: Repository, status: TheoremStatus, where: str
) -> Theorem:
    if not isinstance(raw, dict):
        raise DataFormatError(path, "expected a theorem object", field=where)
    tactics = raw.get("traced_tactics") or []
    data = {
        **raw,
        # LeanDojo-v2 files a theorem under its repository's url and commit, whatever it says
        "url": repository.url,
        "commit": repository.commit,
        "start": position(raw.get("start")),
        "end": position(raw.get("end")),
        "traced_tactics": [_tactic(t) for t in tactics] if isinstance(tactics, list) else tactics,
        "status": status,
    }
    data.pop("difficulty_rating", None)
    try:
        return theorem_from_leandojo(data)
    except SchemaError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise DataFormatError(path, exc.problem, field=field) from None


def _source_file(path: Path, raw: Any, where: str) -> SourceFile:
    if isinstance(raw, dict) and isinstance(raw.get("premises"), list):
        premises = [
            {**p, "start": position(p.get("start")), "end": position(p.get("end"))}
            if isinstance(p, dict)
            else p
            for p in raw["premises"]
        ]
        raw = {**raw, "premises": premises}
    try:
        return source_file_from_corpus(raw)
    except SchemaError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise DataFormatError(path, exc.problem, field=field) from None


def import_leandojo_v2_database(
    conn: Connection,
    path: str | Path,
    *,
    progress: Progress | None = None,
    batch_size: int = 1000,
) -> IngestCounts:
    """Add every repository of a LeanDojo-v2 database file with its theorems, premise files and
    traced files, inside the caller's transaction (what is stored already is skipped).

    Args:
        conn: The connection of the caller's write transaction.
        path: The JSON file.
        progress: Called as ``progress(done, None)`` as theorems are stored.
        batch_size: Rows written per statement.

    Returns:
        What was added and what was there already.

    Raises:
        DataFormatError: The file is malformed (naming the file, line or field).
    """
    from leanloop.database.loader import add_records

    ingest = Ingest(conn, batch_size=batch_size)
    source = f"leandojo-v2:{path}"
    done = 0
    for entry in read_leandojo_v2_database(path):
        add_records(
            conn,
            entry.repository,
            entry.theorems,
            entry.source_files,
            entry.traced_files,
            source=source,
            batch_size=batch_size,
            ingest=ingest,
        )
        done += len(entry.theorems)
        if progress is not None:
            progress(done, None)
    return ingest.counts


# -- an export's metadata ------------------------------------------------------------------------


def metadata_repositories(metadata: Mapping[str, Any], path: Path | None) -> list[Repository]:
    """The repositories an export's ``metadata.json`` lists under ``repositories`` (as
    LeanDojo-v2's ``export_merged_data`` and leanloop's export write it), with their Lean
    versions and names; none when it lists none.

    Args:
        metadata: The content of ``metadata.json``.
        path: The file (for errors).

    Returns:
        The repositories, in the order listed.

    Raises:
        DataFormatError: ``repositories`` is not a list of repository objects.
    """
    listed = metadata.get("repositories")
    if listed is None:
        return []
    where = path or Path("metadata.json")
    if not isinstance(listed, list):
        raise DataFormatError(where, "expected a list of repositories", field="repositories")
    found = []
    for index, raw in enumerate(listed):
        if not isinstance(raw, dict):
            raise DataFormatError(
                where, "expected a repository object", field=f"repositories.{index}"
            )
        found.append(repository_from_v2(raw, where, f"repositories.{index}"))
    return found
