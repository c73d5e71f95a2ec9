"""Builders for test data derived from the real LeanDojo sample (renamed copies, datasets), and
the command line run in-process."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from leanloop.data.leandojo import LeanDojoDataset, theorem_to_leandojo
from leanloop.data.records import ProofAttempt, Theorem, TracedTactic


def sample_theorems(sample_dir: Path) -> list[Theorem]:
    return list(LeanDojoDataset(sample_dir).iter_theorems())


def renamed(
    theorem: Theorem, suffix: str, *, url: str | None = None, commit: str | None = None
) -> Theorem:
    """A copy of a real theorem under another name (and repository/commit if given)."""
    return theorem.model_copy(
        update={
            "full_name": theorem.full_name + suffix,
            "url": url or theorem.url,
            "commit": commit or theorem.commit,
        }
    )


def moved(theorem: Theorem, *, url: str, commit: str) -> Theorem:
    return theorem.model_copy(update={"url": url, "commit": commit})


def with_sorry(theorem: Theorem) -> Theorem:
    """The theorem with its proof replaced by one ``sorry`` step (state kept from the real one)."""
    state = theorem.traced_tactics[0].state_before if theorem.traced_tactics else "⊢ True"
    step = TracedTactic.model_validate(
        {
            "tactic": "sorry",
            "annotated_tactic": ["sorry", []],
            "state_before": state,
            "state_after": "no goals",
        }
    )
    from leanloop.data.records import TheoremStatus

    return theorem.model_copy(update={"traced_tactics": (step,), "status": TheoremStatus.SORRY})


def write_split(path: Path, theorems: Iterable[Theorem]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([theorem_to_leandojo(t) for t in theorems]))
    return path


def write_dataset(
    root: Path,
    splits: Mapping[str, Iterable[Theorem]],
    *,
    corpus: Iterable[dict] = (),
    traced: Iterable[str] = (),
    metadata: dict | None = None,
) -> Path:
    """A LeanDojo-format directory: ``splits`` maps 'random/train' etc. to theorems."""
    for name, theorems in splits.items():
        write_split(root / f"{name}.json", theorems)
    corpus = list(corpus)
    if corpus:
        (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus))
    traced = list(traced)
    if traced:
        (root / "traced_files.jsonl").write_text(
            "".join(json.dumps({"traced_file_path": p}) + "\n" for p in traced)
        )
    if metadata is not None:
        (root / "metadata.json").write_text(json.dumps(metadata))
    return root


def corpus_from_theorems(theorems: Iterable[Theorem]) -> list[dict]:
    """A corpus.jsonl built from the premise definitions the real tactics refer to."""
    files: dict[str, dict[str, dict]] = {}
    for theorem in theorems:
        files.setdefault(theorem.file_path, {})
        for tactic in theorem.traced_tactics:
            for ref in tactic.premises:
                files.setdefault(ref.def_path, {})[ref.full_name] = {
                    "full_name": ref.full_name,
                    "code": f"theorem {ref.full_name.split('.')[-1]} : ...",
                    "start": list(ref.def_pos),
                    "end": list(ref.def_end_pos),
                    "kind": "commanddeclaration",
                }
    return [
        {"path": path, "imports": [], "premises": list(premises.values())}
        for path, premises in sorted(files.items())
    ]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """Run ``leanloop ARGV`` in this process: exit code, standard output, standard error."""
    from leanloop.cli.app import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    """A failure told in one ``error:`` line (and at most a hint) that names ``words``."""
    assert code != 0 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error:"), err
    assert len(lines) <= 2, err  # the error and possibly a hint
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"


def attempt(theorem, status, *, run="r1", number=0, proof=None, error=None) -> ProofAttempt:
    """A proof attempt at ``theorem`` with fixed figures."""
    return ProofAttempt(
        run=run,
        url=theorem.url,
        commit=theorem.commit,
        file_path=theorem.file_path,
        full_name=theorem.full_name,
        attempt=number,
        status=status,
        proof=proof,
        prover="test",
        expansions=3,
        tree_size=7,
        seconds=1.5,
        lean_seconds=1.0,
        model_seconds=0.25,
        error=error,
    )


STANDINS = Path(__file__).parent / "standins"


def executable(path: Path, *command: str) -> Path:
    """An executable script that runs ``command`` with its own arguments appended."""
    import shlex

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec {" ".join(map(shlex.quote, command))} "$@"\n')
    path.chmod(0o755)
    return path


def lean_standins(tmp_path: Path, monkeypatch, lake: Path | None = None) -> dict[str, Path]:
    """A Lean project and a stand-in installation for it, found as ``leanloop.lean.toolchain``
    looks: elan's home with ``elan``, ``lean`` (programs that only exist) and ``lake`` (the
    given one, default the Lake stand-in), the toolchain the project pins, and the REPL and
    Pantograph stand-ins (tests/standins) named by $LEANLOOP_REPL and $LEANLOOP_PANTOGRAPH.
    For process handling only: none of them is Lean."""
    import os
    import sys

    python = os.path.realpath(sys.executable)
    home = tmp_path / "elan"
    (home / "toolchains" / "leanprover--lean4---v4.9.0").mkdir(parents=True)
    for name in ("elan", "lean"):
        executable(home / "bin" / name, "true")
    lake = lake or executable(home / "bin" / "lake", python, str(STANDINS / "lake_standin.py"))
    if lake != home / "bin" / "lake":
        executable(home / "bin" / "lake", str(lake))
    project = tmp_path / "project"
    project.mkdir()
    (project / "lakefile.lean").write_text("import Lake\nopen Lake DSL\npackage project\n")
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    repl = executable(tmp_path / "bin" / "repl", python, str(STANDINS / "repl_standin.py"))
    pantograph = executable(
        tmp_path / "bin" / "pantograph", python, str(STANDINS / "pantograph_standin.py")
    )
    monkeypatch.setenv("ELAN_HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("LEANLOOP_REPL", str(repl))
    monkeypatch.setenv("LEANLOOP_PANTOGRAPH", str(pantograph))
    lake = home / "bin" / "lake"
    return {"project": project, "lake": lake, "repl": repl, "pantograph": pantograph}


def share_converted_models(cache_dir: Path, converted: Path) -> None:
    """Make ``cache_dir``'s ``models`` folder the run's shared one (see conftest's
    ``converted_models``)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "models").symlink_to(converted, target_is_directory=True)
