"""``fragment.merge_columns(values)``: the new columns' values themselves (a reader, batches, a
table), one row per live row of the fragment, as pylance 14 takes them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import RowCountMismatchError

_NEW = pa.schema([pa.field("c", pa.int64()), pa.field("d", pa.string())])


def _values(rows: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, rows, 3):
        stop = min(rows, start + 3)
        yield pa.record_batch(
            [pa.array(range(100 + start, 100 + stop)), pa.array([f"v{i}" for i in range(start, stop)])],
            schema=_NEW,
        )


@pytest.mark.parametrize("as_table", [False, True])
def test_merge_columns_from_values_as_pylance(tmp_path: Path, as_table: bool) -> None:
    table = pa.table({"a": range(20)})
    results = []
    for module, name in ((lance_ops, "ours"), (lance, "theirs")):
        uri = str(tmp_path / name)
        ds = module.write_dataset(table, uri, max_rows_per_file=10)
        ds.delete("a < 3 OR a = 15")
        merged, schema = [], None
        for fragment in ds.get_fragments():
            live = fragment.count_rows()
            values = pa.Table.from_batches(list(_values(live)), _NEW) if as_table else _values(live)
            metadata, schema = fragment.merge_columns(values, reader_schema=_NEW)
            merged.append(metadata)
        committed = module.LanceDataset.commit(
            uri, module.LanceOperation.Merge(merged, schema), read_version=ds.version
        )
        results.append(committed.to_table())
    assert results[0] == results[1]
    assert results[0].column("c").to_pylist() == [*range(100, 107), *range(100, 109)]
    # pylance reads ours
    assert lance.dataset(str(tmp_path / "ours")).to_table() == results[1]


@pytest.mark.parametrize(("rows", "words"), [(8, "Stream produced more values"), (6, "Stream ended before")])
def test_merge_columns_values_must_match_the_live_rows(tmp_path: Path, rows: int, words: str) -> None:
    uri = str(tmp_path / "d")
    ds = lance_ops.write_dataset(pa.table({"a": range(10)}), uri)
    ds.delete("a < 3")
    theirs = lance.dataset(uri).get_fragments()[0]
    with pytest.raises(ValueError, match=words):
        theirs.merge_columns(_values(rows), reader_schema=_NEW)
    files_before = sorted(p.name for p in (tmp_path / "d" / "data").iterdir())
    with pytest.raises(RowCountMismatchError, match=words):
        ds.get_fragments()[0].merge_columns(_values(rows), reader_schema=_NEW)
    # nothing of ours left behind (pylance may leave its refused file)
    ours_after = {p.name for p in (tmp_path / "d" / "data").iterdir()} - set(files_before)
    assert not ours_after
    assert lance.dataset(uri).version == ds.version == 2
