"""Give every theorem an export takes a split in every scheme, in a short write before the files:
stored splits are kept, new theorems are placed by the seeded rules with the settings that made
the stored splits, copies of a theorem in several repositories share one split and are exported
once, and the novel-premises promise is checked again."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leanloop.data.leandojo.format import SCHEMES
from leanloop.data.records import TheoremStatus
from leanloop.database.raw import insert_many, iter_rows
from leanloop.database.rows import stream
from leanloop.database.schema import meta, split_assignments, tactic_premises, theorems
from leanloop.database.splits import SplitConfig, assign_novel_premises, assign_random
from leanloop.errors import LeanloopError
from leanloop.words import plural

_CHUNK = 5000
#: What produced a scheme's stored splits: the settings, or the labels of an imported dataset.
SplitOrigin = SplitConfig | Literal["imported"]
_META_PREFIX = "splits."


# -- the settings that made the stored splits ---------------------------------------------------


def stored_split_settings(conn: Connection) -> dict[str, SplitOrigin]:
    """Scheme -> what produced its stored splits (schemes with none recorded are left out)."""
    rows = conn.execute(sa.select(meta).where(meta.c.key.like(_META_PREFIX + "%")))
    found: dict[str, SplitOrigin] = {}
    for key, value in rows:
        scheme = key.removeprefix(_META_PREFIX)
        found[scheme] = "imported" if value == "imported" else SplitConfig(**orjson.loads(value))
    return found


def record_split_settings(conn: Connection, scheme: str, origin: SplitOrigin) -> None:
    value = origin if origin == "imported" else orjson.dumps(origin.model_dump()).decode()
    key = _META_PREFIX + scheme
    conn.execute(meta.delete().where(meta.c.key == key))
    conn.execute(meta.insert().values(key=key, value=value))


def forget_split_settings(conn: Connection, scheme: str | None = None) -> None:
    pattern = _META_PREFIX + (scheme if scheme is not None else "%")
    conn.execute(meta.delete().where(meta.c.key.like(pattern)))


def describe_origin(origin: SplitOrigin | None) -> str:
    if origin is None:
        return "not recorded"
    if origin == "imported":
        return "the labels of an imported dataset"
    return f"val={origin.val}, test={origin.test}, seed={origin.seed}"


# -- which theorems an export takes -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Candidate:
    key: str  # digest of (repository identity, file, name)
    theorem_id: int
    repository_id: int
    full_name: str
    copy_key: tuple  # (file path, name, start, end): what copies in other repositories share


def _candidates(conn: Connection, repo_ids: Sequence[int]) -> dict[str, _Candidate]:
    """Key -> the proven theorem exported for it. A key names a theorem of one repository, so
    only commits of the same repository compete: the commit added to the database last wins,
    whatever order the commits are listed in (a curriculum may list an older commit last)."""
    best: dict[str, _Candidate] = {}
    t = theorems.c
    query = sa.select(
        t.id,
        t.key,
        t.repository_id,
        t.file_path,
        t.full_name,
        t.start_line,
        t.start_column,
        t.end_line,
        t.end_column,
    ).where(t.repository_id.in_(list(repo_ids)), t.status == TheoremStatus.PROVEN.value)
    for row in stream(conn, query, 20000):
        current = best.get(row.key)
        if current is None or row.repository_id > current.repository_id:  # ids grow
            best[row.key] = _Candidate(
                row.key,
                row.id,
                row.repository_id,
                row.full_name,
                (
                    row.file_path,
                    row.full_name,
                    row.start_line,
                    row.start_column,
                    row.end_line,
                    row.end_column,
                ),
            )
    return best


def _existing_splits(conn: Connection, keys: list[str]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        query = sa.select(split_assignments).where(split_assignments.c.theorem_key.in_(chunk))
        for row in stream(conn, query):
            found[row.scheme][row.theorem_key] = row.split
    return found


def _premises_used(conn: Connection, repo_ids: Sequence[int], theorem_ids: dict[int, str]):
    """Split key -> names of the premises the exported theorem's proof uses."""
    used: dict[str, set[str]] = {key: set() for key in theorem_ids.values()}
    matching = sa.select(theorems.c.id).where(theorems.c.repository_id.in_(list(repo_ids)))
    query = sa.select(tactic_premises.c.theorem_id, tactic_premises.c.full_name).where(
        tactic_premises.c.theorem_id.in_(matching)
    )
    for theorem_id, name in iter_rows(conn, query, 20000, named=False):
        key = theorem_ids.get(theorem_id)
        if key is not None:
            used[key].add(name)
    return used


@dataclass
class Assignment:
    """The theorems to export and the split of each."""

    #: theorem id -> the key its split is stored under (one theorem per group of copies)
    exported: dict[int, str]
    #: scheme -> split key -> split
    splits: dict[str, dict[str, str]]
    new_assignments: int = 0
    #: copies of a theorem in other repositories, exported once in the theorem's place
    copies: int = 0
    #: scheme -> what produced its splits (as recorded after this export)
    settings: dict[str, SplitOrigin | None] = field(default_factory=dict)
    #: held-out theorems of ``novel_premises`` whose premises are all used in train too
    novel_premises_violations: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _check_sizes(
    scheme: str, assigned: dict[str, str], config: SplitConfig, *, given: bool = True
) -> str | None:
    """Refuse settings that leave train, or a split asked for, without theorems; for
    ``novel_premises`` an empty val/test (too few premises to hold out) is only a warning, and
    so it is when no settings were ``given`` and the default fractions of a few theorems round
    to none (a trainer's first repository may be that small; LeanDojo-v2 left them empty)."""
    counts = Counter(assigned.values())
    total = len(assigned)
    empty = [
        name
        for name, asked in (("train", True), ("val", config.val > 0), ("test", config.test > 0))
        if asked and counts[name] == 0 and total
    ]
    if empty and scheme == "novel_premises" and "train" not in empty:
        return (
            f"{scheme}: {' and '.join(empty)} got no theorem: too few theorems use premises "
            "that no other theorem uses"
        )
    held_out = empty and "train" not in empty
    if held_out and not given and all(isinstance(getattr(config, n), float) for n in empty):
        return (
            f"{scheme}: {' and '.join(empty)} got no theorem: {plural(total, 'theorem')} are too "
            f"few for val={config.val}, test={config.test} (theorems added later fill them)"
        )
    if empty:
        raise LeanloopError(
            f"the split settings (val={config.val}, test={config.test}) leave {' and '.join(empty)}"
            f" of '{scheme}' empty: {plural(total, 'theorem')} would give train {counts['train']}, "
            f"val {counts['val']}, test {counts['test']}; nothing was stored",
            hint="give val/test as fractions (e.g. 0.1) or counts that fit the theorems",
        )
    return None


def assign_splits(
    conn: Connection, repo_ids: Sequence[int], config: SplitConfig | None
) -> Assignment:
    """Give every exported theorem a split in every scheme, storing the new assignments.

    New theorems are placed with the settings that made a scheme's stored splits; ``config``
    (default ``SplitConfig()``) applies to schemes without any, and a ``config`` that differs
    from the stored settings is reported in the warnings, not silently applied or ignored.
    """
    candidates = _candidates(conn, repo_ids)
    existing = _existing_splits(conn, sorted(candidates))

    # copies in several repositories form one group: exported once (the copy added last),
    # under one split (the one a member already has, the earliest repository's first)
    groups: dict[tuple, list[_Candidate]] = defaultdict(list)
    for candidate in candidates.values():
        groups[candidate.copy_key].append(candidate)
    copies_of: dict[str, list[str]] = {}  # split key -> keys of the other copies
    exported: dict[int, str] = {}  # theorem id -> split key
    for members in groups.values():
        if len(members) == 1:  # the usual case
            exported[members[0].theorem_id] = members[0].key
            continue
        members.sort(key=lambda c: c.repository_id)
        labelled = [m for m in members if any(m.key in existing[s] for s in SCHEMES)]
        split_key = (labelled[0] if labelled else members[-1]).key
        exported[members[-1].theorem_id] = split_key
        copies_of[split_key] = [m.key for m in members if m.key != split_key]
    keys = sorted(exported.values())

    stored = stored_split_settings(conn)
    result = Assignment(exported=exported, splits={}, copies=len(candidates) - len(groups))
    premises = None
    fresh_rows: list[tuple[str, str, str]] = []
    for scheme in SCHEMES:
        have = existing[scheme]
        old = {k: have[k] for k in keys if k in have}
        for key, copies in copies_of.items():  # a copy's split stands for its group
            if key not in old:
                found = next((have[m] for m in copies if m in have), None)
                if found is not None:
                    old[key] = found
        origin = stored.get(scheme)
        effective = config or SplitConfig()
        if isinstance(origin, SplitConfig):
            effective = origin
            if config is not None and origin != config:
                result.warnings.append(
                    f"{scheme}: the stored splits were made with {describe_origin(origin)}; "
                    f"val={config.val}, test={config.test}, seed={config.seed} are ignored "
                    "(theorems keep their splits, new ones are placed with the stored settings;"
                    f" 'leanloop db reset-splits --scheme {scheme}' assigns afresh)"
                )
        if scheme == "random":
            new = assign_random(keys, old, effective)
        else:
            if premises is None:
                premises = _premises_used(conn, repo_ids, exported)
            new = assign_novel_premises(premises, old, effective)
        assigned = {**old, **new}
        if new:
            warning = _check_sizes(scheme, assigned, effective, given=config is not None)
            if warning:
                result.warnings.append(warning)
            if origin is None:
                record_split_settings(conn, scheme, effective)
                origin = effective
        fresh_rows.extend((key, scheme, assigned[key]) for key in keys if key not in have)
        for key, copies in copies_of.items():
            fresh_rows.extend((m, scheme, assigned[key]) for m in copies if m not in have)
        result.new_assignments += len(new)
        result.splits[scheme] = assigned
        result.settings[scheme] = origin
    insert_many(conn, split_assignments, ("theorem_key", "scheme", "split"), fresh_rows)

    if premises is not None:
        names = {c.key: c.full_name for c in candidates.values()}
        result.novel_premises_violations = novel_premises_violations(
            premises, result.splits["novel_premises"], names
        )
    return result


def novel_premises_violations(
    premises: dict[str, set[str]], splits: dict[str, str], names: dict[str, str]
) -> list[str]:
    """Names of the val/test theorems that use no premise unused in train (sorted)."""
    train_used: set[str] = set()
    for key, split in splits.items():
        if split == "train":
            train_used.update(premises.get(key, ()))
    return sorted(
        names.get(key, key)
        for key, split in splits.items()
        if split != "train" and not (premises.get(key, set()) - train_used)
    )
