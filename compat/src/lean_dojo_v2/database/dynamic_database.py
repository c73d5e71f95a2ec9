"""``lean_dojo_v2.database.dynamic_database``: LeanDojo-v2's ``DynamicDatabase`` on leanloop's
(``leanloop.database.DynamicDatabase``)."""

from __future__ import annotations

import os

from lean_dojo_v2._notice import note_differences
from leanloop.database import DynamicDatabase as _LeanloopDatabase
from leanloop.database.leandojo_v2 import is_leandojo_v2_database

#: LeanDojo-v2's default database file.
DEFAULT_JSON_PATH = "dynamic_database.json"


class DynamicDatabase(_LeanloopDatabase):
    """``DynamicDatabase(json_path="dynamic_database.json")`` as in LeanDojo-v2: leanloop's
    database (``url``, by default leanloop's default database) with the repositories of the
    LeanDojo-v2 database file ``json_path`` imported, when it exists. The file is read, never
    written or emptied; what is stored already is skipped, so making the database again adds
    nothing. Everything else is leanloop's ``DynamicDatabase``.

    Args:
        json_path: LeanDojo-v2's database file.
        url: Where leanloop stores the data: a SQLite file or a ``postgresql://`` URL (None:
            leanloop's default database).
    """

    def __init__(
        self,
        json_path: str | os.PathLike[str] | None = DEFAULT_JSON_PATH,
        url: str | os.PathLike[str] | None = None,
    ) -> None:
        note_differences()
        super().__init__(url, json_path=json_path)


def database_for(database_path: object) -> _LeanloopDatabase | str | os.PathLike[str] | None:
    """What LeanDojo-v2's ``database_path`` argument of the agents is on leanloop: an open
    database as it is, a LeanDojo-v2 database file (``.json``) imported into leanloop's default
    database, anything else (a SQLite file, a ``postgresql://`` URL, None) as leanloop reads it.

    Args:
        database_path: The agent's argument.

    Returns:
        The ``database_path`` to give a leanloop agent.
    """
    if isinstance(database_path, _LeanloopDatabase) or database_path is None:
        return database_path
    text = os.fspath(database_path)  # type: ignore[call-overload]
    if text.endswith(".json") or is_leandojo_v2_database(text):
        return DynamicDatabase(json_path=text)
    return text
