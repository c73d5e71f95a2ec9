"""The tables of a leanloop database (SQLAlchemy Core, portable between SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

#: Bumped whenever the tables change. A newer database is refused; an older one is read as it
#: is and upgraded by its next write when the change only adds tables (``ADDED_IN``) or
#: nullable columns (``COLUMNS_ADDED_IN``).
SCHEMA_VERSION = 4

metadata = MetaData()

meta = Table(
    "leanloop_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

repositories = Table(
    "repositories",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("url", Text, nullable=False),
    Column("identity", Text, nullable=False),  # canonical url: what commits of a repo share
    Column("commit", String(128), nullable=False),
    Column("name", Text, nullable=False),
    Column("lean_version", Text),
    Column("added_at", DateTime(timezone=True), nullable=False),
    Column("source", Text),
    UniqueConstraint("identity", "commit", name="uq_repository_commit"),
)

files = Table(
    "files",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "repository_id", Integer, ForeignKey("repositories.id", ondelete="CASCADE"), nullable=False
    ),
    Column("path", Text, nullable=False),
    Column("imports", Text, nullable=False),  # JSON list of paths
    Column("in_corpus", Integer, nullable=False, default=1),
    Column("traced", Integer, nullable=False, default=0),
    UniqueConstraint("repository_id", "path", name="uq_file_path"),
)

premises = Table(
    "premises",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "repository_id", Integer, ForeignKey("repositories.id", ondelete="CASCADE"), nullable=False
    ),
    Column("file_path", Text, nullable=False),
    Column("ordinal", Integer, nullable=False),  # position in the file's list of premises
    Column("full_name", Text, nullable=False),
    Column("start_line", Integer, nullable=False),
    Column("start_column", Integer, nullable=False),
    Column("end_line", Integer, nullable=False),
    Column("end_column", Integer, nullable=False),
    Column("code", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Index("ix_premises_file", "repository_id", "file_path", "ordinal"),
)

theorems = Table(
    "theorems",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "repository_id", Integer, ForeignKey("repositories.id", ondelete="CASCADE"), nullable=False
    ),
    Column("key", String(40), nullable=False),  # digest of (repository identity, file, name)
    Column("file_path", Text, nullable=False),
    Column("full_name", Text, nullable=False),
    Column("start_line", Integer, nullable=False),
    Column("start_column", Integer, nullable=False),
    Column("end_line", Integer, nullable=False),
    Column("end_column", Integer, nullable=False),
    Column("statement", Text),
    Column("status", String(16), nullable=False),
    Column("proof", Text),
    Column("num_steps", Integer, nullable=False),
    UniqueConstraint("repository_id", "file_path", "full_name", name="uq_theorem_name"),
    Index("ix_theorems_key", "key"),
    Index("ix_theorems_status", "repository_id", "status"),
)

tactics = Table(
    "tactics",
    metadata,
    Column(
        "theorem_id",
        Integer,
        ForeignKey("theorems.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("tactic", Text, nullable=False),
    Column("annotated", Text, nullable=False),
    Column("state_before", Text, nullable=False),
    Column("state_after", Text, nullable=False),
)

tactic_premises = Table(
    "tactic_premises",
    metadata,
    Column(
        "theorem_id",
        Integer,
        ForeignKey("theorems.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("tactic_idx", Integer, primary_key=True, autoincrement=False),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("full_name", Text, nullable=False),
    Column("def_path", Text, nullable=False),
    Column("def_line", Integer, nullable=False),
    Column("def_column", Integer, nullable=False),
    Column("def_end_line", Integer, nullable=False),
    Column("def_end_column", Integer, nullable=False),
)

split_assignments = Table(
    "split_assignments",
    metadata,
    Column("theorem_key", String(40), primary_key=True),
    Column("scheme", String(32), primary_key=True),
    Column("split", String(8), nullable=False),
)

proof_attempts = Table(
    "proof_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run", Text, nullable=False),
    Column("theorem_key", String(40), nullable=False),  # as theorems.key (no foreign key:
    Column("url", Text, nullable=False),  # a dataset can be evaluated without importing it)
    Column("commit", String(128), nullable=False),
    Column("file_path", Text, nullable=False),
    Column("full_name", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("proof", Text),  # JSON list of tactics (or one whole proof)
    Column("prover", Text, nullable=False),
    Column("expansions", Integer, nullable=False),
    Column("tree_size", Integer, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("lean_seconds", Float, nullable=False),
    Column("model_seconds", Float, nullable=False),
    Column("error", Text),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("axioms", Text),  # JSON list of the axioms Lean's audit reported (version 3)
    Column("environment", String(8)),  # lean | replay | recorded (version 3)
    Column("tokens", Integer),  # tokens generated, when known (version 4)
    Column("worker", Text),  # host[/ray node] it ran on (version 4)
    UniqueConstraint("run", "theorem_key", "commit", "attempt", name="uq_attempt"),
)

LEANLOOP_TABLES = frozenset(metadata.tables)
#: The tables each schema version added (an older database gains them on its next write).
ADDED_IN = {2: (proof_attempts,)}
#: The nullable columns each schema version added to an existing table (added by the next write
#: of an older database; readers of an older one see None there).
COLUMNS_ADDED_IN = {
    3: ((proof_attempts, ("axioms", "environment")),),
    4: ((proof_attempts, ("tokens", "worker")),),
}
