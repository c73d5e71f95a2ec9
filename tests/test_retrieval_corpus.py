from __future__ import annotations

import json

import pytest

from leanloop.data.records import Pos, Premise, SourceFile
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus, premise_text
from leanloop.retrieval.examples import load_split, retrieval_steps, split_file
from tests.helpers import corpus_from_theorems, sample_theorems, write_dataset


def premise(name: str, path: str, line: int, code: str = "") -> Premise:
    return Premise(full_name=name, file_path=path, start=Pos(line, 1), end=Pos(line, 30), code=code)


@pytest.fixture
def graph_corpus() -> Corpus:
    """A imports B, B imports C; D is imported by nobody."""
    return Corpus(
        [
            SourceFile(
                path="A.lean",
                imports=("B.lean",),
                premises=(premise("a_early", "A.lean", 5), premise("a_late", "A.lean", 50)),
            ),
            SourceFile(path="B.lean", imports=("C.lean",), premises=(premise("b1", "B.lean", 3),)),
            SourceFile(path="C.lean", premises=(premise("c1", "C.lean", 7),)),
            SourceFile(path="D.lean", premises=(premise("d1", "D.lean", 2),)),
        ]
    )


def names(corpus: Corpus, indices) -> set[str]:
    return {corpus[i].full_name for i in indices}


def test_accessibility_follows_imports_transitively(graph_corpus):
    assert graph_corpus.has_import_graph
    assert graph_corpus.imported_files("A.lean") == {"B.lean", "C.lean"}
    # at line 20 of A: a_early (ends line 5) is visible, a_late (line 50) is not yet defined
    assert names(graph_corpus, graph_corpus.accessible("A.lean", Pos(20, 1))) == {
        "a_early",
        "b1",
        "c1",
    }
    assert names(graph_corpus, graph_corpus.accessible("A.lean", Pos(60, 1))) == {
        "a_early",
        "a_late",
        "b1",
        "c1",
    }
    # B sees C only; D sees only what it defined before the position
    assert names(graph_corpus, graph_corpus.accessible("B.lean", Pos(100, 1))) == {"b1", "c1"}
    assert names(graph_corpus, graph_corpus.accessible("D.lean", Pos(1, 1))) == set()
    d1 = graph_corpus.index_of("d1")
    assert not graph_corpus.is_accessible(d1, "A.lean", Pos(99, 1))
    assert graph_corpus.is_accessible(d1, "D.lean", Pos(3, 1))


def test_a_premise_ending_exactly_at_the_position_is_accessible(graph_corpus):
    early = graph_corpus.index_of("a_early")
    assert graph_corpus.is_accessible(early, "A.lean", Pos(5, 30))
    assert not graph_corpus.is_accessible(early, "A.lean", Pos(5, 29))


def test_without_import_graph_every_other_file_is_accessible():
    corpus = Corpus(
        [
            SourceFile(path="A.lean", premises=(premise("a1", "A.lean", 5),)),
            SourceFile(path="B.lean", premises=(premise("b1", "B.lean", 3),)),
            SourceFile(path="C.lean", premises=(premise("c1", "C.lean", 900),)),
        ]
    )
    assert not corpus.has_import_graph
    assert corpus.imported_files("A.lean") is None
    assert names(corpus, corpus.accessible("A.lean", Pos(1, 1))) == {"b1", "c1"}
    assert names(corpus, corpus.accessible("A.lean", Pos(10, 1))) == {"a1", "b1", "c1"}
    # a file the corpus does not know: everything is from another file
    assert names(corpus, corpus.accessible("Z.lean", Pos(1, 1))) == {"a1", "b1", "c1"}


def test_unknown_file_in_a_corpus_with_imports_falls_back_to_every_file(graph_corpus):
    assert names(graph_corpus, graph_corpus.accessible("New.lean", Pos(1, 1))) == {
        "a_early",
        "a_late",
        "b1",
        "c1",
        "d1",
    }


def test_mask_matches_is_accessible(graph_corpus):
    for path in ("A.lean", "B.lean", "C.lean", "D.lean", "X.lean"):
        for pos in (Pos(1, 1), Pos(6, 1), Pos(51, 1)):
            mask = graph_corpus.accessible_mask(path, pos)
            expected = [graph_corpus.is_accessible(i, path, pos) for i in range(len(graph_corpus))]
            assert mask.tolist() == expected


def test_premise_text_is_name_then_code():
    assert premise_text(premise("foo", "A.lean", 1)) == "foo"
    assert premise_text(premise("foo", "A.lean", 1, code="theorem foo : 1 = 1")) == (
        "foo\ntheorem foo : 1 = 1"
    )


def test_corpus_from_the_real_sample_premise_references(sample_dir):
    theorems = sample_theorems(sample_dir)
    corpus = Corpus.from_theorems(theorems)
    referenced = {p.full_name for t in theorems for s in t.traced_tactics for p in s.premises}
    assert {p.full_name for p in corpus} == referenced
    assert len(corpus) == 377
    ref = next(p for t in theorems for s in t.traced_tactics for p in s.premises)
    found = corpus[corpus.index_of(ref.full_name)]
    assert (found.file_path, found.start, found.end, found.code) == (
        ref.def_path,
        ref.def_pos,
        ref.def_end_pos,
        "",
    )


def test_from_dataset_prefers_corpus_jsonl_and_completes_it(tmp_path, sample_dir):
    theorems = sample_theorems(sample_dir)[:40]
    corpus_rows = corpus_from_theorems(theorems[:20])
    corpus_rows[0]["imports"] = [corpus_rows[1]["path"]]
    root = write_dataset(tmp_path / "ds", {"random/train": theorems}, corpus=corpus_rows)
    corpus = Corpus.from_dataset(root, theorems)
    in_jsonl = {p["full_name"] for row in corpus_rows for p in row["premises"]}
    referenced = {p.full_name for t in theorems for s in t.traced_tactics for p in s.premises}
    assert {p.full_name for p in corpus} == in_jsonl | referenced
    some = next(iter(in_jsonl))
    assert corpus[corpus.index_of(some)].code.startswith("theorem ")  # code from corpus.jsonl
    assert corpus.has_import_graph


def test_empty_corpus_jsonl_means_premises_from_tactics(tmp_path, sample_dir):
    theorems = sample_theorems(sample_dir)[:30]
    root = write_dataset(tmp_path / "ds", {"random/train": theorems})
    (root / "corpus.jsonl").write_text("")
    corpus = Corpus.from_dataset(root, theorems)
    assert len(corpus) == len(
        {p.full_name for t in theorems for s in t.traced_tactics for p in s.premises}
    )
    assert not corpus.has_import_graph


def test_retrieval_steps_keep_steps_with_positives(sample_dir):
    theorems = sample_theorems(sample_dir)
    corpus = Corpus.from_theorems(theorems)
    steps = retrieval_steps(theorems, corpus)
    assert len(steps) == 256  # tactic steps of the sample that use at least one premise
    first = next(t for t in theorems if t.traced_tactics and t.traced_tactics[0].premises)
    step = next(s for s in steps if s.theorem == first.full_name and s.index == 0)
    assert step.context == first.traced_tactics[0].state_before
    assert step.position == first.start and step.file_path == first.file_path
    assert step.positives == tuple(
        dict.fromkeys(p.full_name for p in first.traced_tactics[0].premises)
    )
    # premises missing from the corpus are not positives
    smaller = Corpus.from_theorems(theorems[:10])
    assert all(all(p in smaller for p in s.positives) for s in retrieval_steps(theorems, smaller))


def test_missing_split_and_directory_errors(tmp_path, sample_dir):
    with pytest.raises(LeanloopError, match="does not exist"):
        split_file(tmp_path / "nope", "random", "test")
    root = write_dataset(tmp_path / "ds", {"random/train": sample_theorems(sample_dir)[:3]})
    with pytest.raises(LeanloopError, match=r"no random/test\.json"):
        load_split(root, "random", "test")
    with pytest.raises(LeanloopError, match="unknown split"):
        split_file(root, "random", "dev")
    assert len(load_split(root, "random", "train")) == 3
    json.loads((root / "random" / "train.json").read_text())
