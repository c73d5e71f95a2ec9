from __future__ import annotations

import json

import pytest

from leanloop.data.jsonstream import iter_json_array, iter_jsonl, read_json
from leanloop.errors import DataFormatError


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_array_streams_real_sample_at_any_chunk_size(sample_dir, chunk):
    path = sample_dir / "random" / "test.json"
    items = list(iter_json_array(path, chunk_size=chunk))
    assert [i.value for i in items] == json.loads(path.read_text())
    assert [i.index for i in items] == list(range(177))


def test_array_positions_are_exact(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('[\n  {"a": 1},\n  {"b": [2, 3]}, 45\n]\n')
    items = [(i.value, i.line, i.column) for i in iter_json_array(path, chunk_size=3)]
    assert items == [({"a": 1}, 2, 3), ({"b": [2, 3]}, 3, 3), (45, 3, 18)]


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("[1, 2, 3", 1, 9, "truncated"),
        ('[{"a": "unterminated', 1, 8, "truncated"),
        ("[1,\n 2 3]", 2, 4, "expected ','"),
        ("[1, 2] trailing", 1, 8, "after the end"),
        ('{"a": 1}', 1, 1, "JSON array"),
        ("[1, {bad}]", 1, 6, "property name"),
    ],
)
def test_array_errors_say_where(tmp_path, text, line, column, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DataFormatError) as err:
        list(iter_json_array(path, chunk_size=2))
    assert err.value.path == str(path)
    assert (err.value.line, err.value.column) == (line, column)
    assert words in str(err.value)


def test_truncated_real_file_names_the_element(sample_dir, tmp_path):
    text = (sample_dir / "random" / "test.json").read_text()
    path = tmp_path / "test.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(DataFormatError) as err:
        list(iter_json_array(path))
    assert err.value.item is not None and 0 < err.value.item < 177
    assert "truncated" in str(err.value)


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"path": "A.lean"}\n\n{"path": "B.lean"\n{"path": "C.lean"}\n')
    with pytest.raises(DataFormatError) as err:
        list(iter_jsonl(path))
    assert err.value.line == 3 and "corpus.jsonl, line 3" in str(err.value)


def test_jsonl_truncated_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"a": ')
    with pytest.raises(DataFormatError, match="truncated"):
        list(iter_jsonl(path))


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(DataFormatError, match="cannot open"):
        list(iter_json_array(tmp_path / "absent.json"))
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'["caf\xe9"]')
    with pytest.raises(DataFormatError, match="UTF-8"):
        list(iter_json_array(bad))
    broken = tmp_path / "m.json"
    broken.write_text('{"a": }')
    with pytest.raises(DataFormatError, match="line 1"):
        read_json(broken)


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_bytes_that_are_not_utf8_are_reported_with_their_line(tmp_path, chunk):
    path = tmp_path / "a.json"
    path.write_bytes(b'[\n{"a": "\xe2\x88\x80 x"},\n\n{"b": "\xff"}]')
    with pytest.raises(DataFormatError, match=r"line 4.*not valid UTF-8 text \(byte 0xff"):
        list(iter_json_array(path, chunk_size=chunk))
    cut = tmp_path / "cut.json"
    cut.write_bytes(b'["\xe2\x88')  # the file ends inside a character
    with pytest.raises(DataFormatError, match=r"line 1.*not valid UTF-8"):
        list(iter_json_array(cut, chunk_size=chunk))


def test_jsonl_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(DataFormatError, match=r"line 2.*not valid UTF-8"):
        list(iter_jsonl(path))


def test_nesting_too_deep_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[1, " + "[" * 200_000 + "]" * 200_000 + "]")
    with pytest.raises(DataFormatError, match=r"item #1.*nested too deeply"):
        list(iter_json_array(path))
    lines = tmp_path / "deep.jsonl"
    lines.write_text("[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(DataFormatError, match="line 1"):
        list(iter_jsonl(lines))


@pytest.mark.parametrize(
    ("escape", "words"), [("\\ud800", "lone surrogate"), ("a\\u0000b", "NUL character")]
)
def test_text_no_database_can_store_names_item_and_field(tmp_path, escape, words):
    path = tmp_path / "a.json"
    path.write_text('[{"x": "ok \\ud835\\udcdd"},\n {"x": {"y": ["fine", "' + escape + '"]}}]')
    with pytest.raises(DataFormatError, match=rf"line 2.*item #1.*field 'x\.y\.1'.*{words}"):
        list(iter_json_array(path))
    lines = tmp_path / "a.jsonl"
    lines.write_text('{"x": "a\\u0000"}\n')
    with pytest.raises(DataFormatError, match=r"line 1.*field 'x'.*NUL"):
        list(iter_jsonl(lines))


def test_a_truncated_json_document_says_so(tmp_path):
    path = tmp_path / "metadata.json"
    path.write_text('{"from_repo": {"url": "x", ')
    with pytest.raises(DataFormatError, match="truncated"):
        read_json(path)
