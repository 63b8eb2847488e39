"""Golden files with Arrow dictionary-typed columns written by pylance 14.0.2
(``tests/data/datagen_dictionary.py``), read by us; no pylance needed.

* ``read_all`` / ``read_range`` / ``take_rows`` give pylance's rows with pylance's types; where a
  column is one page, the dictionary (unused entries included) and the keys are pylance's too.
* Re-writing the same rows with our writer picks pylance's layouts and compressions page by page.
* The pylance dataset (create + append) reads back through ``lance_ops.dataset``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops.cli import describe_layout
from lance_ops.file import LanceFileReader, LanceFileWriter
from tests.data.golden import FILE_VERSIONS

DICT_DIR = Path(__file__).resolve().parents[1] / "data" / "dictionary"
NAMES = sorted(path.stem for path in (DICT_DIR / "expected").glob("*.arrows"))
CASES = [(version, name) for version in FILE_VERSIONS for name in NAMES]
SINGLE_PAGE = [name for name in NAMES if name != "multipage"]


def _read_ipc(path: Path) -> pa.Table:
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def _expected(name: str) -> pa.Table:
    return _read_ipc(DICT_DIR / "expected" / f"{name}.arrows")


def _reader(version: str, name: str) -> LanceFileReader:
    return LanceFileReader(str(DICT_DIR / version / f"{name}.lance"))


def _assert_rows(got: pa.Table, want: pa.Table) -> None:
    """Same schema and the same rows (dictionaries may differ where pylance re-encodes)."""
    assert got.schema.equals(want.schema)
    assert got.num_rows == want.num_rows
    for g, w in zip(got.columns, want.columns, strict=True):
        assert g.to_pylist() == w.to_pylist()


def test_golden_present() -> None:
    assert set(NAMES) >= {"keys", "values", "options", "edges", "one_row", "nested", "batches", "empty"}
    for version in FILE_VERSIONS:
        assert {p.stem for p in (DICT_DIR / version).glob("*.lance")} == set(NAMES)


@pytest.mark.parametrize(("version", "name"), CASES)
def test_read_all(version: str, name: str) -> None:
    got = _reader(version, name).read_all().to_table()
    want = _expected(name)
    _assert_rows(got, want)
    if name in SINGLE_PAGE:
        assert got.combine_chunks().equals(want.combine_chunks())


@pytest.mark.parametrize(("version", "name"), CASES)
def test_read_range_and_take(version: str, name: str) -> None:
    reader = _reader(version, name)
    want = _expected(name)
    n = want.num_rows
    for start, count in [(0, n), (n // 3, n // 2), (max(n - 1, 0), min(n, 1))]:
        _assert_rows(reader.read_range(start, count).to_table(), want.slice(start, count))
    rows = np.array([n - 1, 0, n // 2, n // 2, 1], np.int64) if n else np.zeros(0, np.int64)
    rows = rows[rows < n]
    _assert_rows(reader.take_rows(rows).to_table(), want.take(pa.array(rows)))


@given(st.data())
def test_any_range_and_take_across_pages(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(FILE_VERSIONS))
    reader = _reader(version, "multipage")
    want = _expected("multipage")
    n = want.num_rows
    start = data.draw(st.integers(0, n - 1))
    count = data.draw(st.integers(0, n - start))
    _assert_rows(reader.read_range(start, count).to_table(), want.slice(start, count))
    rows = data.draw(st.lists(st.integers(0, n - 1), max_size=40))
    _assert_rows(reader.take_rows(rows).to_table(), want.take(pa.array(rows, pa.int64())))


def _layouts(path: Path) -> list[list[str]]:
    reader = LanceFileReader(str(path))
    return [[describe_layout(page.layout) for page in column] for column in reader._pages]


@pytest.mark.parametrize(("version", "name"), [(v, n) for v, n in CASES if n in SINGLE_PAGE])
def test_we_choose_pylance_layouts(version: str, name: str, tmp_path: Path) -> None:
    table = _expected(name).combine_chunks()
    golden_schema = _reader(version, name).schema
    path = tmp_path / "ours.lance"
    with LanceFileWriter(str(path), golden_schema, version=version) as writer:
        writer.write_batch(table.cast(golden_schema))
    assert _layouts(path) == _layouts(DICT_DIR / version / f"{name}.lance")
    assert LanceFileReader(str(path)).read_all().to_table().combine_chunks().equals(table)


def test_encodings_json_tags_dictionary_pages() -> None:
    for version in FILE_VERSIONS:
        pages = json.loads((DICT_DIR / version / "encodings.json").read_text())
        for name in NAMES:
            for column in pages[name]:
                for features in column:
                    assert features == ["constant_layout"] or "dictionary" in features


def test_pylance_dataset_reads() -> None:
    ds = lance_ops.dataset(str(DICT_DIR / "datasets" / "dict.lance"))
    want = _read_ipc(DICT_DIR / "datasets" / "dict.expected.arrows")
    assert ds.version == 2
    _assert_rows(ds.to_table(), want)
    _assert_rows(ds.checkout_version(1).to_table(), want.slice(0, 50))
    assert pa.types.is_dictionary(ds.schema.field("d").type)
