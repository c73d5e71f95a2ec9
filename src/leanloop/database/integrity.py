"""Whether a database is whole, and what to do when it is not (``leanloop db check``): on SQLite,
SQLite's own check of the file (``PRAGMA integrity_check``, or the faster ``quick_check``) run on
a read-only connection; on both engines, the structure leanloop needs (its tables and columns,
the schema version) and the references between rows that must hold (a theorem's repository, a
tactic's theorem, a premise use's tactic). Nothing is written: a damaged file is only read."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection

import leanloop.database.engine as engines
from leanloop.database.schema import (
    ADDED_IN,
    COLUMNS_ADDED_IN,
    SCHEMA_VERSION,
    files,
    meta,
    metadata,
    premises,
    repositories,
    tactic_premises,
    tactics,
    theorems,
)
from leanloop.words import plural

#: Problems SQLite's check lists at most.
MAX_SQLITE_PROBLEMS = 20

#: SQLite's words for a file whose pages are damaged.
DAMAGED = ("malformed", "not a database", "corrupt", "disk i/o error")

Kind = Literal["damaged", "schema", "references", "missing"]


@dataclass(frozen=True)
class Finding:
    """One thing wrong: what kind (``damaged``: the file's pages; ``schema``: tables, columns
    or version; ``references``: rows that point at nothing; ``missing``: no database), in one
    line."""

    kind: Kind
    text: str


@dataclass
class IntegrityReport:
    """What ``check_integrity`` found: the database, what was checked, each problem and what
    to do about them, each in one line."""

    database: str
    engine: str
    checked: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.findings

    def to_dict(self) -> dict[str, object]:
        return {
            "database": self.database,
            "engine": self.engine,
            "ok": self.ok,
            "checked": self.checked,
            "problems": [{"kind": f.kind, "text": f.text} for f in self.findings],
            "advice": self.advice,
        }


def is_damaged(reason: str) -> bool:
    """Whether SQLite's message says the file's pages are damaged."""
    return any(word in reason.lower() for word in DAMAGED)


def check_integrity(url: URL, *, quick: bool = False) -> IntegrityReport:
    """Check the database at ``url`` without writing to it.

    Args:
        url: The database (``engine.resolve_url`` of a path or URL).
        quick: On SQLite, ``quick_check`` (the pages and records, not that indexes match their
            tables) instead of ``integrity_check``.

    Returns:
        The report: empty ``findings`` when the database is whole.
    """
    report = IntegrityReport(engines.describe(url), url.get_backend_name())
    if engines.is_sqlite(url):
        path = Path(url.database or "")
        if not path.is_file():
            report.findings.append(Finding("missing", f"no database at {path}"))
            report.advice.append(
                "make one with 'leanloop db import DATASET --db FILE', or pass the right --db"
            )
            return report
        if not _sqlite_pages(path, quick, report):
            _advise(report, path)
            return report
        target = URL.create(
            "sqlite", database=f"file:{quote(str(path))}", query={"mode": "ro", "uri": "true"}
        )
    else:
        target = url
    engine = engines.create(target)
    try:
        with engine.connect() as conn:
            if _schema(conn, report):
                _references(conn, report)
    except sa.exc.DBAPIError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        kind: Kind = "damaged" if is_damaged(reason) else "schema"
        report.findings.append(Finding(kind, f"the database cannot be read: {reason}"))
    finally:
        engine.dispose()
    _advise(report, Path(url.database or "") if engines.is_sqlite(url) else None)
    return report


def _sqlite_pages(path: Path, quick: bool, report: IntegrityReport) -> bool:
    """SQLite's own check of every page (read-only); False when the file is damaged."""
    pragma = "quick_check" if quick else "integrity_check"
    report.checked.append(f"SQLite's {pragma} of every page")
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.DatabaseError as exc:
        report.findings.append(Finding("damaged", f"SQLite cannot open the file: {exc}"))
        return False
    try:
        rows = conn.execute(f"PRAGMA {pragma}({MAX_SQLITE_PROBLEMS})").fetchall()
    except sqlite3.DatabaseError as exc:  # the check itself stopped: which tables are hit?
        report.findings.append(Finding("damaged", f"SQLite cannot read the file: {exc}"))
        for table, reason in _damaged_tables(conn, pragma):
            report.findings.append(Finding("damaged", f"table '{table}': {reason}"))
        return False
    finally:
        conn.close()
    problems = [str(row[0]) for row in rows if str(row[0]) != "ok"]
    for problem in problems:
        report.findings.append(Finding("damaged", f"SQLite: {problem}"))
    if len(problems) >= MAX_SQLITE_PROBLEMS:
        report.findings.append(
            Finding("damaged", f"(SQLite stops listing after {MAX_SQLITE_PROBLEMS} problems)")
        )
    return not problems


def _damaged_tables(conn: sqlite3.Connection, pragma: str) -> list[tuple[str, str]]:
    """The tables (and their indexes) SQLite's check finds damaged, one by one."""
    try:
        names = [
            str(row[0])
            for row in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
        ]
    except sqlite3.DatabaseError:
        return []
    damaged = []
    for name in names:
        try:
            rows = conn.execute(f'PRAGMA {pragma}("{name}")').fetchall()
            problems = [str(row[0]) for row in rows if str(row[0]) != "ok"]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems:
            damaged.append((name, problems[0]))
    return damaged


def _schema(conn: Connection, report: IntegrityReport) -> bool:
    """The tables, columns and version leanloop needs; False when the references cannot be
    checked (not a leanloop database, or one of another version)."""
    report.checked.append("leanloop's tables, columns and schema version")
    inspector = sa.inspect(conn)
    present = set(inspector.get_table_names())
    if meta.name not in present:
        what = "it has no tables" if not present else "it has other tables"
        report.findings.append(Finding("schema", f"not a leanloop database: {what}"))
        return False
    found = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
    if found is None or not found.isdigit():
        report.findings.append(Finding("schema", f"the schema version is not recorded ({found!r})"))
        return False
    version = int(found)
    if version > SCHEMA_VERSION:
        report.findings.append(
            Finding(
                "schema",
                f"schema version {version} is newer than this leanloop's ({SCHEMA_VERSION})",
            )
        )
        return False
    later = {t.name for v, ts in ADDED_IN.items() if v > version for t in ts}
    for table in metadata.sorted_tables:
        if table.name in later:
            continue  # the next write adds it
        if table.name not in present:
            report.findings.append(Finding("schema", f"table '{table.name}' is missing"))
            continue
        added = {
            name
            for v, changes in COLUMNS_ADDED_IN.items()
            if v > version
            for t, names in changes
            if t is table
            for name in names
        }
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in columns and column.name not in added:
                report.findings.append(
                    Finding("schema", f"table '{table.name}' has no column '{column.name}'")
                )
    if version < SCHEMA_VERSION:
        report.checked.append(
            f"schema version {version}: the next write upgrades it to {SCHEMA_VERSION}"
        )
    return not report.findings


#: Rows that must point at a row of another table: (what, the table, its columns, the table
#: pointed at, the columns pointed at).
REFERENCES = (
    ("files", files, ("repository_id",), repositories, ("id",)),
    ("premises", premises, ("repository_id",), repositories, ("id",)),
    ("theorems", theorems, ("repository_id",), repositories, ("id",)),
    ("tactics", tactics, ("theorem_id",), theorems, ("id",)),
    ("premise uses", tactic_premises, ("theorem_id", "tactic_idx"), tactics, ("theorem_id", "idx")),
)


def _references(conn: Connection, report: IntegrityReport) -> None:
    report.checked.append("the references between rows (repositories, theorems, tactics)")
    for what, table, columns, parent, keys in REFERENCES:
        matches = sa.and_(
            *(parent.c[key] == table.c[col] for col, key in zip(columns, keys, strict=True))
        )
        orphans = sa.select(sa.func.count()).select_from(table)
        orphans = orphans.where(~sa.exists().where(matches))
        count = conn.execute(orphans).scalar_one()
        if count:
            report.findings.append(
                Finding(
                    "references",
                    f"{what}: {plural(count, 'row')} of table '{table.name}' point at no row of "
                    f"'{parent.name}'",
                )
            )
    steps = (
        sa.select(sa.func.count())
        .select_from(tactics)
        .where(tactics.c.theorem_id == theorems.c.id)
        .scalar_subquery()
    )
    incomplete = (
        sa.select(sa.func.count()).select_from(theorems).where(theorems.c.num_steps != steps)
    )
    count = conn.execute(incomplete).scalar_one()
    if count:
        report.findings.append(
            Finding(
                "references",
                f"{plural(count, 'theorem')} of table 'theorems' have another number of tactics "
                "than their num_steps",
            )
        )


def _advise(report: IntegrityReport, path: Path | None) -> None:
    """What to do about the findings, in plain lines."""
    kinds = {finding.kind for finding in report.findings}
    if "damaged" in kinds and path is not None:
        recovered = path.with_name(f"{path.stem}-recovered{path.suffix or '.db'}")
        report.advice += [
            "the file itself is damaged, and leanloop keeps no copy of its database: if you have "
            f"a backup of {path}, restore it",
            "else copy what can still be read, whole theorems only, into a new database: "
            f"leanloop db check --db {path} --recover-into {recovered}",
            f"then use the new one (leanloop db stats --db {recovered}); the theorems left out "
            "come back when their dataset is imported again (leanloop db import DATASET --db "
            f"{recovered}), with the splits they had",
        ]
    if "schema" in kinds:
        report.advice.append(
            "open a newer database with the leanloop version that made it; a file that is not "
            "a complete leanloop database cannot be used: import your datasets into a new one"
        )
    if "references" in kinds:
        report.advice.append(
            "rows point at rows that are gone (the file was changed outside leanloop, or "
            "damaged): export what is whole with 'leanloop db export', or re-import the "
            "repository's dataset into a new database"
        )
