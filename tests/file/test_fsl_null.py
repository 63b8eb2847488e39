"""``fixed_size_list<null>`` columns, both ways against pylance 14, in 2.0 / 2.1 / 2.2.

pylance stores 2.1 / 2.2 ``FSL<null>`` full-zip: ``FixedSizeList { has_validity, Constant {} }``,
each row only its item-validity bytes (all zero). It panics when mini-block is forced, which we
refuse with a typed error instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import SchemaError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")

VERSIONS = ["2.0", "2.1", "2.2"]


def _fsl(n: int, dim: int, null_rows: list[int] | None = None) -> pa.Array:
    mask = None
    if null_rows is not None:
        flags = np.zeros(n, bool)
        flags[null_rows] = True
        mask = pa.array(flags)
    return pa.FixedSizeListArray.from_arrays(pa.nulls(n * dim), dim, mask=mask)


def _tables() -> dict[str, pa.Table]:
    return {
        "plain": pa.table({"a": _fsl(3, 3), "i": pa.array([1, 2, 3])}),
        "null_rows": pa.table({"a": _fsl(1000, 20, list(range(1, 1000, 3)))}),
        "all_null": pa.table({"a": _fsl(4, 2, [0, 1, 2, 3])}),
        "dim1": pa.table({"a": _fsl(5, 1, [1, 4])}),
        "nested": pa.table(
            {"a": pa.FixedSizeListArray.from_arrays(_fsl(6, 2), 3, mask=pa.array([False, True]))}
        ),
        "in_struct": pa.table(
            {"s": pa.StructArray.from_arrays([_fsl(2, 3, [1]), pa.array([1, 2])], ["f", "g"])}
        ),
        "in_list": pa.table(
            {
                "l": pa.ListArray.from_arrays(
                    pa.array([0, 1, 1, 3], pa.int32()), _fsl(3, 3, [1]), mask=pa.array([False, True, False])
                )
            }
        ),
    }


CASES = [(name, v) for name in _tables() for v in VERSIONS]


def _pylance_reads(path: Path) -> pa.Table:
    return lance_file.LanceFileReader(str(path)).read_all().to_table()


@pytest.mark.parametrize(("name", "version"), CASES)
def test_we_read_pylance_fsl_null(tmp_path: Path, name: str, version: str) -> None:
    table = _tables()[name]
    path = tmp_path / "p.lance"
    with lance_file.LanceFileWriter(str(path), version=version) as writer:
        writer.write_batch(table)
    expected = _pylance_reads(path)
    assert expected.to_pylist() == table.to_pylist()
    reader = LanceFileReader(path)
    got = reader.read_all().to_table()
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    n = table.num_rows
    assert reader.read_range(1, n - 1).to_table().to_pylist() == expected.slice(1, n - 1).to_pylist()
    rows = [n - 1, 0]
    assert reader.take_rows(rows).to_table().to_pylist() == expected.take(rows).to_pylist()


@pytest.mark.parametrize(("name", "version"), CASES)
def test_pylance_reads_our_fsl_null(tmp_path: Path, name: str, version: str) -> None:
    table = _tables()[name]
    path = tmp_path / "o.lance"
    with LanceFileWriter(path, version=version) as writer:
        writer.write_batch(table)
    got = _pylance_reads(path)
    assert got.schema == table.schema
    assert got.to_pylist() == table.to_pylist()
    assert LanceFileReader(path).read_all().to_table().to_pylist() == table.to_pylist()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fsl_null_page_matches_pylance(tmp_path: Path, version: str) -> None:
    """Same page bytes as pylance's: full-zip rows of validity bytes (3 per FSL<null, 20> row)."""
    table = _tables()["null_rows"]
    ours, theirs = tmp_path / "o.lance", tmp_path / "p.lance"
    with LanceFileWriter(ours, version=version) as writer:
        writer.write_batch(table)
    with lance_file.LanceFileWriter(str(theirs), version=version) as writer:
        writer.write_batch(table)
    pages = [LanceFileReader(p).metadata().columns[0].pages for p in (ours, theirs)]
    assert [(pg.encoding, [b.size for b in pg.buffers]) for pg in pages[0]] == [
        (pg.encoding, [b.size for b in pg.buffers]) for pg in pages[1]
    ]
    assert pages[0][0].encoding.startswith("full_zip_layout { bits_def: 1 bits_per_value: 24 ")
    assert "values { constant { } } has_validity: true" in pages[0][0].encoding


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fsl_null_forced_miniblock_is_refused(tmp_path: Path, version: str) -> None:
    metadata = {"lance-encoding:structural-encoding": "miniblock"}
    field = pa.field("a", pa.list_(pa.null(), 3), metadata=metadata)
    table = pa.table([_fsl(2, 3)], schema=pa.schema([field]))
    path = tmp_path / "o.lance"
    with pytest.raises(UnsupportedFeatureError, match="fixed_size_list of nulls"):
        with LanceFileWriter(path, version=version) as writer:
            writer.write_batch(table)


@pytest.mark.parametrize("version", VERSIONS)
def test_we_read_pylance_fsl_null_dataset(tmp_path: Path, version: str) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    for i in range(2):
        table = pa.table({"id": pa.array([3 * i, 3 * i + 1, 3 * i + 2]), "a": _fsl(3, 3, [i])})
        lance.write_dataset(table, uri, mode="append" if i else "create", data_storage_version=version)
    theirs, ours = lance.dataset(uri), lance_ops.dataset(uri)
    assert ours.to_table().to_pylist() == theirs.to_table().to_pylist()
    assert ours.take([5, 0, 3]).to_pylist() == theirs.take([5, 0, 3]).to_pylist()


@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_our_fsl_null_dataset(tmp_path: Path, version: str) -> None:
    """Our dataset writer (create, then append) stores fsl<null> columns pylance reads back."""
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    tables = [pa.table({"id": pa.array([3 * i, 3 * i + 1, 3 * i + 2]), "a": _fsl(3, 3, [i])}) for i in (0, 1)]
    for i, table in enumerate(tables):
        lance_ops.write_dataset(table, uri, mode="append" if i else "create", data_storage_version=version)
    assert lance.dataset(uri).to_table().equals(pa.concat_tables(tables))


def test_nulls_in_a_non_nullable_column_are_refused_and_nothing_committed(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False)])
    lance_ops.write_dataset(pa.table({"a": [1]}, schema=schema), uri)
    with pytest.raises(SchemaError, match="'a' is not nullable"):
        lance_ops.write_dataset(pa.table({"a": pa.array([None, 2], pa.int64())}), uri, mode="append")
    assert lance_ops.dataset(uri).version == 1
    assert len(list((tmp_path / "ds" / "data").iterdir())) == 1  # no data file left behind
