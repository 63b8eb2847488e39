"""JSON columns (``arrow.json`` in, Lance JSON / JSONB stored) both ways with pylance 14.

pylance's own file reader returns the stored JSONB bytes of a ``lance.json`` column, which makes
it the byte oracle for :mod:`lance_ops.encoding.jsonb`; its dataset reads give the JSON text it
makes of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lance.file import LanceFileReader

import lance_ops
from lance_ops.encoding import jsonb
from lance_ops.errors import InvalidJsonError

# Documents whose bytes and read-back text pin the layout: integer widths at each boundary,
# int64 / uint64 limits and beyond (float), floats in every printed form, NaN / inf, unicode,
# escapes, key order, nesting, lone scalars.
DOCUMENTS = [
    "0",
    "-0",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "-128",
    "-129",
    "-32768",
    "-32769",
    "-2147483648",
    "-2147483649",
    "-9223372036854775808",
    "-9223372036854775809",
    "12345678901234567890123",
    "0.0",
    "-0.0",
    "1.0",
    "1E2",
    "0.1",
    "0.30000000000000004",
    "1e15",
    "1e16",
    "1e21",
    "1e300",
    "1.7976931348623157e308",
    "5e-324",
    "1.5e-10",
    "0.0001",
    "0.00001",
    "1.5e-5",
    "-1.5e-5",
    "1.23e-7",
    "-5.25e-3",
    "123456789012.5",
    "1e400",
    "-1e400",
    "[NaN]",
    "Infinity",
    "true",
    "false",
    "null",
    '"str"',
    '""',
    "{}",
    "[]",
    " [ 1 , 2 ] ",
    '{"b":1,"a":2,"aa":4, "B":5}',
    '{"é":1,"z":2,"\\u00ff":3}',
    '{"a":{"a":1}}',
    '"h\\u00e9\\n\\"q\\" \\ud83d\\ude00 é \\/ \\u0001 \\t"',
    '"\\u007f\\u0000\\b\\f\\r"',
    '"\\ud800"',
    '[[1],{"k":[]}]',
    '[1,2.5,"a",true,null,{}]',
    '{"x": 7, "y": 10}',
]


def _pylance_bytes_and_text(values: list[str | None], path: Path) -> tuple[list[Any], list[Any]]:
    """What pylance stores (JSONB bytes, from its file reader) and reads back (text)."""
    shutil.rmtree(path, ignore_errors=True)
    ds = lance.write_dataset(pa.table({"j": pa.array(values, pa.json_())}), path)
    texts = ds.to_table().column("j").to_pylist()
    stored: list[Any] = []
    for fragment in ds.get_fragments():
        for data_file in fragment.data_files():
            table = LanceFileReader(str(path / "data" / data_file.path)).read_all().to_table()
            stored += table.column("j").to_pylist()
    return stored, texts


def test_jsonb_bytes_and_text_as_pylance(tmp_path: Path) -> None:
    stored, texts = _pylance_bytes_and_text([*DOCUMENTS, None], tmp_path / "p")
    assert stored[-1] is None and texts[-1] is None
    for doc, raw, text in zip(DOCUMENTS, stored, texts, strict=False):
        assert jsonb.encode(doc) == raw, doc
        assert jsonb.decode(raw) == text, doc


def test_documents_both_ways_with_pylance(tmp_path: Path) -> None:
    values = [*DOCUMENTS, None]
    table = pa.table({"j": pa.array(values, pa.json_()), "i": pa.array(range(len(values)))})
    ours = lance_ops.write_dataset(table, tmp_path / "ours")
    theirs = lance.write_dataset(table, tmp_path / "theirs")
    expected = theirs.to_table()
    assert ours.schema == theirs.schema
    assert lance.dataset(tmp_path / "ours").to_table() == expected
    assert lance_ops.dataset(tmp_path / "theirs").to_table() == expected
    assert ours.to_table() == expected


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=25)
@given(docs=st.lists(json_values, min_size=1, max_size=6), ascii_only=st.booleans())
def test_hypothesis_documents_as_pylance(
    tmp_path_factory: pytest.TempPathFactory, docs: list[Any], ascii_only: bool
) -> None:
    texts = [json.dumps(d, ensure_ascii=ascii_only) for d in docs]
    root = tmp_path_factory.mktemp("h")
    stored, pylance_texts = _pylance_bytes_and_text(texts, root / "p")
    assert [jsonb.encode(t) for t in texts] == stored
    assert [jsonb.decode(b) for b in stored] == pylance_texts
    ours = lance_ops.write_dataset(pa.table({"j": pa.array(texts, pa.json_())}), root / "o")
    assert lance.dataset(root / "o").to_table().column("j").to_pylist() == pylance_texts
    assert ours.to_table().column("j").to_pylist() == pylance_texts


@pytest.mark.parametrize("rows", [0, 1, 1025])
def test_rows_both_ways_and_appends(tmp_path: Path, rows: int) -> None:
    docs = [None if i % 7 == 3 else json.dumps({"i": i, "s": f"é{i}", "l": [i, i / 2]}) for i in range(rows)]
    table = pa.table({"j": pa.array(docs, pa.json_()), "n": pa.array(range(rows), pa.int64())})
    lance_ops.write_dataset(table, tmp_path / "ours")
    lance.write_dataset(table, tmp_path / "theirs")
    expected = lance.dataset(tmp_path / "theirs").to_table()
    assert lance.dataset(tmp_path / "ours").to_table() == expected
    # the other library continues each history
    lance.write_dataset(table, tmp_path / "ours", mode="append")
    lance_ops.write_dataset(table, tmp_path / "theirs", mode="append")
    both = pa.concat_tables([expected, expected])
    for path in ("ours", "theirs"):
        assert lance.dataset(tmp_path / path).to_table().combine_chunks() == both.combine_chunks()
        assert lance_ops.dataset(tmp_path / path).to_table().combine_chunks() == both.combine_chunks()


def test_json_inside_structs_and_lists_both_ways(tmp_path: Path) -> None:
    struct = pa.StructArray.from_arrays(
        [pa.array(['{"a":1}', None, "[1]"], pa.json_()), pa.array([1, 2, 3])],
        names=["j", "k"],
        mask=pa.array([False, False, True]),
    )
    lists = pa.ListArray.from_arrays(
        pa.array([0, 2, 2, 3]),
        pa.array(['{"b":2}', None, "3.5"], pa.json_()),
        mask=pa.array([False, True, False]),
    )
    table = pa.table({"s": struct, "l": lists})
    for sliced in (table, table.slice(1)):
        shutil.rmtree(tmp_path / "ours", ignore_errors=True)
        shutil.rmtree(tmp_path / "theirs", ignore_errors=True)
        lance_ops.write_dataset(sliced, tmp_path / "ours")
        lance.write_dataset(sliced, tmp_path / "theirs")
        expected = lance.dataset(tmp_path / "theirs").to_table()
        assert lance.dataset(tmp_path / "ours").to_table() == expected
        assert lance_ops.dataset(tmp_path / "theirs").to_table() == expected


def test_legacy_files_hold_json(tmp_path: Path) -> None:
    table = pa.table({"j": pa.array(['{"a":[1,{"b":null}]}', None, "2.5"], pa.json_())})
    lance_ops.write_dataset(table, tmp_path / "ours", data_storage_version="legacy")
    lance.write_dataset(table, tmp_path / "theirs", data_storage_version="legacy")
    expected = lance.dataset(tmp_path / "theirs").to_table()
    assert lance.dataset(tmp_path / "ours").to_table() == expected
    assert lance_ops.dataset(tmp_path / "theirs").to_table() == expected


@pytest.mark.parametrize("bad", ['{"a":1', '{"a":1}x', '{"a":1,"a":2}', "[1,]", ""])
def test_invalid_json_is_refused_and_nothing_is_lost(tmp_path: Path, bad: str) -> None:
    good = pa.table({"j": pa.array(['{"ok":true}'], pa.json_())})
    ds = lance_ops.write_dataset(good, tmp_path / "d")
    with pytest.raises(InvalidJsonError, match="Failed to encode JSON"):
        ds.insert(pa.table({"j": pa.array(['{"fine":1}', bad], pa.json_())}))
    assert lance_ops.dataset(tmp_path / "d").version == 1
    assert lance.dataset(tmp_path / "d").to_table() == lance.dataset(tmp_path / "d").to_table(
        filter="j IS NOT NULL"
    )
    assert lance.dataset(tmp_path / "d").to_table().column("j").to_pylist() == ['{"ok":true}']


def test_corrupt_jsonb_raises_typed_error() -> None:
    with pytest.raises(lance_ops.errors.CorruptFileError):
        jsonb.decode(b"\x20\x00\x00\x00\x20\x00\x00\x09\x60\x00")  # a float cut short
    with pytest.raises(lance_ops.errors.CorruptFileError):
        jsonb.decode(b"\x80\x00\x00\x05")  # entries missing
