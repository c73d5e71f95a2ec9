"""Conversion between leanloop's records and the JSON objects of the LeanDojo Benchmark format.

Layout of a dataset directory (LeanDojo Benchmark 4):

- ``random/{train,val,test}.json`` and ``novel_premises/{train,val,test}.json``: JSON arrays of
  theorems ``{url, commit, file_path, full_name, start, end, traced_tactics}``;
- ``corpus.jsonl``: one source file a line, ``{path, imports, premises: [{full_name, code, start,
  end, kind}]}``;
- ``traced_files.jsonl``: one ``{traced_file_path}`` a line;
- ``metadata.json``: ``{dataset_name, creation_time, from_repo: {url, commit}, ...}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring_ascii as _text
from typing import Any

from pydantic import ValidationError

from leanloop.data.records import (
    Pos,
    Premise,
    SourceFile,
    Theorem,
    TheoremKey,
    TheoremStatus,
    is_sorry_tactic,
    repository_identity,
)
from leanloop.errors import DataFormatError

SCHEMES = ("random", "novel_premises")
SPLITS = ("train", "val", "test")
_THEOREM_FIELDS = ("url", "commit", "file_path", "full_name", "start", "end", "traced_tactics")


def premise_ref_dict(
    full_name: str, def_path: str, def_pos: Sequence[int], def_end_pos: Sequence[int]
) -> dict[str, Any]:
    return {
        "full_name": full_name,
        "def_path": def_path,
        "def_pos": list(def_pos),
        "def_end_pos": list(def_end_pos),
    }


def tactic_dict(
    tactic: str,
    annotated_text: str,
    premises: Iterable[dict[str, Any]],
    state_before: str,
    state_after: str,
) -> dict[str, Any]:
    return {
        "tactic": tactic,
        "annotated_tactic": [annotated_text, list(premises)],
        "state_before": state_before,
        "state_after": state_after,
    }


def theorem_dict(
    url: str,
    commit: str,
    file_path: str,
    full_name: str,
    start: Sequence[int],
    end: Sequence[int],
    traced_tactics: list[dict[str, Any]],
    statement: str | None = None,
) -> dict[str, Any]:
    """A theorem as LeanDojo writes it (key order included); the statement only when known."""
    data: dict[str, Any] = {
        "url": url,
        "commit": commit,
        "file_path": file_path,
        "full_name": full_name,
    }
    if statement is not None:
        data["theorem_statement"] = statement
    data["start"] = list(start)
    data["end"] = list(end)
    data["traced_tactics"] = traced_tactics
    return data


# -- the same objects written straight to JSON text, as LeanDojo's json.dump writes them ----------
# (ASCII escapes, ", " and ": " separators): the export writes millions of them, and formatting
# the escaped strings is faster than building dicts to encode. A test holds both forms equal.


def encode_premise_ref(
    full_name: str, def_path: str, def_pos: Sequence[int], def_end_pos: Sequence[int]
) -> str:
    return (
        f'{{"full_name": {_text(full_name)}, "def_path": {_text(def_path)}, '
        f'"def_pos": [{def_pos[0]}, {def_pos[1]}], '
        f'"def_end_pos": [{def_end_pos[0]}, {def_end_pos[1]}]}}'
    )


def encode_tactic(
    tactic: str, annotated_text: str, premises: Iterable[str], state_before: str, state_after: str
) -> str:
    """``tactic_dict`` as JSON text; ``premises`` are ``encode_premise_ref`` texts."""
    return (
        f'{{"tactic": {_text(tactic)}, "annotated_tactic": [{_text(annotated_text)}, '
        f'[{", ".join(premises)}]], "state_before": {_text(state_before)}, '
        f'"state_after": {_text(state_after)}}}'
    )


def encode_theorem(
    url: str,
    commit: str,
    file_path: str,
    full_name: str,
    start: Sequence[int],
    end: Sequence[int],
    traced_tactics: Iterable[str],
    statement: str | None = None,
) -> str:
    """``theorem_dict`` as JSON text; ``traced_tactics`` are ``encode_tactic`` texts."""
    head = (
        f'{{"url": {_text(url)}, "commit": {_text(commit)}, "file_path": {_text(file_path)}, '
        f'"full_name": {_text(full_name)}, '
    )
    if statement is not None:
        head += f'"theorem_statement": {_text(statement)}, '
    return (
        f'{head}"start": [{start[0]}, {start[1]}], "end": [{end[0]}, {end[1]}], '
        f'"traced_tactics": [{", ".join(traced_tactics)}]}}'
    )


def theorem_to_leandojo(theorem: Theorem) -> dict[str, Any]:
    tactics = [
        tactic_dict(
            t.tactic,
            t.annotated_tactic.text,
            (
                premise_ref_dict(p.full_name, p.def_path, p.def_pos, p.def_end_pos)
                for p in t.premises
            ),
            t.state_before,
            t.state_after,
        )
        for t in theorem.traced_tactics
    ]
    return theorem_dict(
        theorem.url,
        theorem.commit,
        theorem.file_path,
        theorem.full_name,
        theorem.start,
        theorem.end,
        tactics,
        theorem.statement,
    )


def theorem_key_of(obj: Any) -> TheoremKey | None:
    """The identity of a raw LeanDojo theorem object, or None when it lacks the needed fields."""
    if not isinstance(obj, dict):
        return None
    url, file_path, full_name = obj.get("url"), obj.get("file_path"), obj.get("full_name")
    if not (isinstance(url, str) and isinstance(file_path, str) and isinstance(full_name, str)):
        return None
    return TheoremKey(repository_identity(url), file_path, full_name)


def theorem_from_leandojo(obj: Any) -> Theorem:
    """Validate a raw LeanDojo theorem object; raises ``SchemaError`` naming the bad field."""
    if not isinstance(obj, dict):
        raise SchemaError(None, f"expected a JSON object, got {_json_type(obj)}")
    for name in _THEOREM_FIELDS:
        if name not in obj:
            raise SchemaError(name, "missing field")
    data = dict(obj)
    if "theorem_statement" in data:
        data["statement"] = data.pop("theorem_statement")
    tactics = data["traced_tactics"]
    has_sorry = isinstance(tactics, list) and any(
        isinstance(t, dict) and is_sorry_tactic(str(t.get("tactic", ""))) for t in tactics
    )
    if has_sorry and "status" not in data:
        data["status"] = TheoremStatus.SORRY
    return _validate(Theorem, data)


def corpus_line(
    path: str, imports: Iterable[str], premises: list[dict[str, Any]]
) -> dict[str, Any]:
    """One line of ``corpus.jsonl``: a file, what it imports and the premises it defines."""
    return {"path": path, "imports": list(imports), "premises": premises}


def corpus_premise(
    full_name: str, code: str, start: Sequence[int], end: Sequence[int], kind: str
) -> dict[str, Any]:
    """A premise as ``corpus.jsonl`` lists it."""
    return {
        "full_name": full_name,
        "code": code,
        "start": list(start),
        "end": list(end),
        "kind": kind,
    }


def source_file_to_corpus(source: SourceFile) -> dict[str, Any]:
    return corpus_line(source.path, source.imports, [premise_dict(p) for p in source.premises])


def premise_dict(premise: Premise) -> dict[str, Any]:
    return corpus_premise(premise.full_name, premise.code, premise.start, premise.end, premise.kind)


def source_file_from_corpus(obj: Any) -> SourceFile:
    """Validate one line of ``corpus.jsonl``."""
    if not isinstance(obj, dict):
        raise SchemaError(None, f"expected a JSON object, got {_json_type(obj)}")
    path = obj.get("path")
    if not isinstance(path, str):
        raise SchemaError("path", "missing field" if path is None else "expected a string")
    premises = obj.get("premises", [])
    if not isinstance(premises, list):
        raise SchemaError("premises", f"expected a list, got {_json_type(premises)}")
    data = {
        "path": path,
        "imports": obj.get("imports", []),
        "premises": [{**p, "file_path": path} if isinstance(p, dict) else p for p in premises],
    }
    return _validate(SourceFile, data)


def traced_file_from_line(obj: Any) -> str:
    if isinstance(obj, dict) and isinstance(obj.get("traced_file_path"), str):
        return obj["traced_file_path"]
    raise SchemaError("traced_file_path", "expected an object with a string 'traced_file_path'")


def position(value: Pos | Sequence[int]) -> Pos:
    return value if isinstance(value, Pos) else Pos(*value)


class SchemaError(ValueError):
    """A JSON value does not have the expected shape; ``field`` is a dotted path into it."""

    def __init__(self, field: str | None, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem

    def located(self, path: str, *, line: int | None, item: int | None) -> DataFormatError:
        return DataFormatError(path, self.problem, line=line, item=item, field=self.field)


def _validate(model, data):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        if error["type"] == "missing":
            problem = "missing field"
        else:
            message = error["msg"].removeprefix("Value error, ")
            problem = f"{message[0].lower()}{message[1:]}"
            if "input" in error and error["type"] != "value_error":
                problem += f", got {_json_type(error['input'])}"
        raise SchemaError(field, problem) from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
