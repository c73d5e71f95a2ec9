"""Statement-only benchmarks (miniF2F, ProofNet, ...): the problem record, the two formats they
come in — JSON Lines as DeepSeek-Prover ships them (``name``, ``split``, ``header``,
``informal_prefix``, ``formal_statement``, ...) and a plain ``.lean`` file whose theorems end in
``sorry`` — and the theorem records a benchmark is stored as (a repository of its own)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from leanloop.data.records import Pos, Repository, SourceFile, Theorem, TheoremStatus
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.lean.server import TheoremSource
from leanloop.words import plural

Split = Literal["test", "valid", "all"]
#: The URL scheme of a benchmark stored as a repository: ``benchmark:<name>``.
BENCHMARK_SCHEME = "benchmark:"


class BenchmarkProblem(BaseModel):
    """One statement to prove. The code Lean checks for a proof is ``header + informal_prefix +
    formal_statement + proof``, concatenated exactly as given (so that a verdict recorded on that
    code applies to it)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, description="The theorem's name, unique in the benchmark.")
    split: str = Field(default="test", description="valid or test (a .lean file's problems: test).")
    header: str = Field(default="", description="Imports and options before the statement.")
    informal_prefix: str = Field(default="", description="The statement in words, as a comment.")
    formal_statement: str = Field(
        min_length=1, description="The Lean statement, ending with ':= by' (or ':=')."
    )
    goal: str | None = Field(default=None, description="The first goal as Lean prints it.")
    formal_proof: str | None = Field(default=None, description="A known proof (few-shot files).")
    line: int = Field(default=0, description="Where the problem is in its file (1-based line).")
    id: str = Field(
        default="",
        description="The problem's key in its benchmark: its name, or, for a name used again "
        "further down the file (ProofNet repeats some across textbooks), name@L<line>.",
    )

    @field_validator("formal_statement")
    @classmethod
    def _opens_a_proof(cls, statement: str) -> str:
        if not opens_a_proof(statement):
            raise ValueError("expected a statement ending in ':=' or ':= by'")
        return statement

    @property
    def source(self) -> str:
        """The problem's source for breakdowns: its name up to the first ``_`` followed by a
        digit or ``p`` and a digit (``mathd_algebra_10`` → ``mathd_algebra``,
        ``amc12a_2019_p21`` → ``amc12a``, ``imo_1959_p1`` → ``imo``)."""
        return source_of_name(self.name)

    def code(self, proof: str) -> str:
        """The code Lean checks for a proof.

        Args:
            proof: The text that follows ``formal_statement``.

        Returns:
            ``header + informal_prefix + formal_statement + proof``.
        """
        return self.header + self.informal_prefix + self.formal_statement + proof

    @property
    def prefix(self) -> str:
        """Everything before ``formal_statement`` in the checked code."""
        return self.header + self.informal_prefix

    def theorem_source(self, file_path: str = "Benchmark.lean") -> TheoremSource:
        """Where a proof search starts: the statement in the context of its prefix.

        Args:
            file_path: The file the statement is said to be in.

        Returns:
            The theorem's source.

        Raises:
            LeanloopError: ``formal_statement`` states no theorem of the problem's name.
        """
        from leanloop.lean.scanner import scan

        code = self.code(" sorry" if self.formal_statement.rstrip().endswith("by") else " by sorry")
        scanned = scan(code)
        found = [d for d in scanned.declarations if d.full_name == self.name]
        if not found:
            raise LeanloopError(
                f"{self.id}: its formal_statement states no theorem {self.name}",
                hint="the statement must read 'theorem NAME ... :='",
            )
        return TheoremSource.from_scan(scanned, found[-1], file_path)


def opens_a_proof(statement: str) -> bool:
    """Whether ``statement`` ends in ``:=`` or ``:= by`` (comments after them aside), so that
    the text after it is its proof; a string or comment left open in it never does."""
    from leanloop.lean.lexer import Kind, tokenize

    tokens = tokenize(statement)
    if any(t.flaw is not None for t in tokens):
        return False
    code = [t.text for t in tokens if t.kind not in (Kind.COMMENT, Kind.DOC, Kind.MODDOC)]
    return code[-1:] == [":="] or code[-2:] == [":=", "by"]


def source_of_name(name: str) -> str:
    parts = name.split("_")
    kept: list[str] = []
    for part in parts:
        if part[:1].isdigit() or (part[:1] == "p" and part[1:2].isdigit()):
            break
        kept.append(part)
    return "_".join(kept) or name


class BenchmarkFile:
    """A benchmark file, JSON Lines (``.jsonl``) or Lean (``.lean``), read into problems; a
    malformed line is a ``DataFormatError`` naming the file, line and field."""

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise LeanloopError(
                f"{self.path}: no such benchmark file",
                hint="give a .jsonl file (name, split, header, informal_prefix, "
                "formal_statement per line) or a .lean file whose theorems end in sorry",
            )
        if self.path.suffix not in (".jsonl", ".lean"):
            raise LeanloopError(
                f"{self.path}: a benchmark is a .jsonl or a .lean file, not {self.path.suffix!r}"
            )
        self.name = name or self.path.stem
        self._problems: list[BenchmarkProblem] | None = None

    @property
    def format(self) -> str:
        return "benchmark-jsonl" if self.path.suffix == ".jsonl" else "lean-file"

    def problems(self, split: Split | str = "all") -> list[BenchmarkProblem]:
        """The problems of ``split`` (``all``: every one), in file order."""
        if self._problems is None:
            read = _read_jsonl if self.path.suffix == ".jsonl" else _read_lean
            self._problems = _unique(self.path, list(read(self.path)))
        if split == "all":
            return list(self._problems)
        chosen = [p for p in self._problems if p.split == split]
        if not chosen:
            splits = sorted({p.split for p in self._problems})
            raise LeanloopError(
                f"{self.path}: no problem of split {split!r} (it has {', '.join(splits)})"
            )
        return chosen

    @cached_property
    def commit(self) -> str:
        """The benchmark's version: a hash of the file's bytes (what a rerun is compared to)."""
        return hashlib.sha1(self.path.read_bytes()).hexdigest()

    @property
    def url(self) -> str:
        return f"{BENCHMARK_SCHEME}{self.name}"

    def repository(self) -> Repository:
        return Repository(url=self.url, commit=self.commit, name=self.name)

    def theorem(self, problem: BenchmarkProblem) -> Theorem:
        """The theorem record a problem is stored as (its statement is ``formal_statement``)."""
        lines = problem.formal_statement.count("\n")
        return Theorem(
            url=self.url,
            commit=self.commit,
            file_path=self.path.name,
            full_name=problem.id or problem.name,
            start=Pos(max(problem.line, 1), 1),
            end=Pos(max(problem.line, 1) + lines, 1),
            statement=problem.formal_statement,
            status=TheoremStatus.SORRY,
        )

    def iter_theorems(self, split: Split | str = "all") -> Iterator[Theorem]:
        for problem in self.problems(split):
            yield self.theorem(problem)

    def iter_source_files(self) -> Iterator[SourceFile]:
        """A benchmark has no corpus: no source files."""
        return iter(())

    def describe(self) -> str:
        problems = self.problems()
        splits = {
            s: sum(p.split == s for p in problems) for s in sorted({p.split for p in problems})
        }
        counts = ", ".join(f"{n} {s}" for s, n in splits.items())
        problems_text = plural(len(problems), "problem")
        return f"benchmark {self.name} ({self.path.name}): {problems_text} ({counts})"


def _unique(path: Path, problems: list[BenchmarkProblem]) -> list[BenchmarkProblem]:
    """The problems with their ids: a name seen before gets its line as well."""
    seen: set[str] = set()
    out = []
    for problem in problems:
        key = problem.name if problem.name not in seen else f"{problem.name}@L{problem.line}"
        if key in seen:
            raise DataFormatError(
                str(path), f"the problem {key!r} is given twice", line=problem.line, field="name"
            )
        seen.update((problem.name, key))
        out.append(problem.model_copy(update={"id": key}))
    return out


_TEXT_FIELDS = ("name", "formal_statement")
_OPTIONAL_TEXT = ("split", "header", "informal_prefix", "goal", "formal_proof")


def _read_jsonl(path: Path) -> Iterator[BenchmarkProblem]:
    import orjson

    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataFormatError(str(path), f"not JSON ({exc})", line=number) from None
            if not isinstance(row, dict):
                raise DataFormatError(str(path), "expected a JSON object", line=number)
            for key in _TEXT_FIELDS:
                value = row.get(key)
                if not isinstance(value, str) or not value.strip():
                    raise DataFormatError(
                        str(path), "expected a non-empty string", line=number, field=key
                    )
            for key in _OPTIONAL_TEXT:
                if row.get(key) is not None and not isinstance(row[key], str):
                    raise DataFormatError(
                        str(path),
                        f"expected a string, not {type(row[key]).__name__}",
                        line=number,
                        field=key,
                    )
            if not opens_a_proof(row["formal_statement"]):
                tail = " ".join(row["formal_statement"].split())[-40:]
                raise DataFormatError(
                    str(path),
                    f"expected a statement ending in ':=' or ':= by', not ...{tail!r}",
                    line=number,
                    field="formal_statement",
                )
            split = row.get("split") or "test"
            if split not in ("test", "valid"):
                raise DataFormatError(
                    str(path),
                    f"expected 'valid' or 'test', not {split!r}",
                    line=number,
                    field="split",
                )
            yield BenchmarkProblem(
                name=row["name"],
                split=split,
                header=row.get("header") or "",
                informal_prefix=row.get("informal_prefix") or "",
                formal_statement=row["formal_statement"],
                goal=row.get("goal"),
                formal_proof=row.get("formal_proof"),
                line=number,
            )


def _read_lean(path: Path) -> Iterator[BenchmarkProblem]:
    """Each theorem (or lemma) of the file whose proof is ``sorry`` (``:= by sorry`` or
    ``:= sorry``) is a problem; the file's text before the first of them is every problem's
    header (definitions a theorem uses go there)."""
    from leanloop.lean.scanner import scan

    try:
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError) as exc:
        raise LeanloopError(f"{path}: cannot read the Lean file ({exc})") from None
    scanned = scan(text)
    targets = []
    for declaration in scanned.declarations:
        span = declaration.proof_span
        if not declaration.is_theorem or span is None or declaration.full_name is None:
            continue
        body = text[span[0] : span[1]].removeprefix(":=").split()
        if body in (["sorry"], ["by", "sorry"]):
            targets.append(declaration)
    if not targets:
        raise LeanloopError(
            f"{path}: no theorem ends in sorry",
            hint="a .lean benchmark states each problem as 'theorem name ... := by sorry'",
        )
    header = text[: targets[0].code_start.offset]
    for declaration in targets:
        start, _ = declaration.proof_span  # type: ignore[misc]
        after = text[start + 2 :].lstrip()
        statement = text[declaration.start.offset : start + 2]
        if after.startswith("by"):
            statement += " by"
        informal = ""
        if declaration.code_start.offset < declaration.start.offset:
            informal = text[declaration.code_start.offset : declaration.start.offset]
        yield BenchmarkProblem(
            name=declaration.full_name,
            split="test",
            header=header,
            informal_prefix=informal,
            formal_statement=statement + "\n",
            line=declaration.start.line,
        )


#: The benchmarks known by name, and where their official files are published (DeepSeek-Prover
#: V1.5's datasets, MIT).
KNOWN_BENCHMARKS = {
    "minif2f": "https://raw.githubusercontent.com/deepseek-ai/DeepSeek-Prover-V1.5/main/datasets/minif2f.jsonl",
    "proofnet": "https://raw.githubusercontent.com/deepseek-ai/DeepSeek-Prover-V1.5/main/datasets/proofnet.jsonl",
}


def resolve_benchmark(
    spec: str,
    *,
    directories: list[Path] | tuple[Path, ...] = (),
    cache_dir: Path | None = None,
    download: bool = True,
    urls: dict[str, str] | None = None,
) -> Path:
    """The file of benchmark ``spec``: a path to a ``.jsonl``/``.lean`` file, or a known name
    (``minif2f``, ``proofnet``) found as ``NAME.jsonl`` in ``directories`` or ``cache_dir``, or
    downloaded from its official address into ``cache_dir``; a one-line error says what to
    provide otherwise."""
    path = Path(spec).expanduser()
    if path.suffix in (".jsonl", ".lean") or path.exists():
        return path
    urls = urls or KNOWN_BENCHMARKS
    if spec not in urls:
        raise LeanloopError(
            f"--benchmark {spec}: no such file, and not a known benchmark ({', '.join(urls)})",
            hint="give a .jsonl or .lean file",
        )
    places = [*directories, *([cache_dir] if cache_dir is not None else [])]
    for directory in places:
        candidate = directory / f"{spec}.jsonl"
        if candidate.is_file():
            return candidate
    where = ", ".join(str(d) for d in places) or "no directory"
    hint = (
        f"download {urls[spec]} and give --benchmark PATH, or put {spec}.jsonl in the "
        "directory LEANLOOP_BENCHMARKS names"
    )
    if not download or cache_dir is None:
        raise LeanloopError(f"{spec}: {spec}.jsonl is not in {where}", hint=hint)
    return _download(spec, urls[spec], cache_dir / f"{spec}.jsonl", hint)


def _download(name: str, url: str, dest: Path, hint: str) -> Path:
    import httpx

    from leanloop.atomic import write_bytes_atomic

    try:
        response = httpx.get(url, follow_redirects=True, timeout=30.0)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LeanloopError(f"{name}: downloading {url} failed ({reason})", hint=hint) from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    staged = dest.parent / f".{dest.stem}.download.jsonl"
    write_bytes_atomic(staged, response.content)
    try:
        BenchmarkFile(staged).problems()  # what is kept must read as a benchmark
    except LeanloopError:
        staged.unlink(missing_ok=True)
        raise
    staged.replace(dest)
    return dest
