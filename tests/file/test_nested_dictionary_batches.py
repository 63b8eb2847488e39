"""Batches of nested dictionary columns whose dictionaries hold null entries (as pylance's 2.0
reader gives them back), written in one file: joined as pylance joins them, read back by
pylance 14 and by us in 2.0 / 2.1 / 2.2. Arrow's own concatenation refuses such batches."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")


def _batch(i: int, kind: str) -> pa.Table:
    words = pa.array([f"v{i}", None, f"w{i}"])
    d = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 0], pa.int32()), words)
    if kind == "list":
        column = pa.ListArray.from_arrays(pa.array([0, 2, 2, 3, 4], pa.int32()), d)
    elif kind == "large_list":
        mask = pa.array([False, True, False, False])
        column = pa.LargeListArray.from_arrays(pa.array([0, 2, 2, 3, 4], pa.int64()), d, mask=mask)
    else:
        column = pa.StructArray.from_arrays([d, pa.array([1, 2, 3, 4])], ["d", "n"])
    return pa.table({"c": column})


@pytest.mark.parametrize("kind", ["list", "large_list", "struct"])
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_nested_dictionary_batches_both_ways(tmp_path: Path, version: str, kind: str) -> None:
    batches = [_batch(i, kind) for i in range(3)]
    expected = [row for b in batches for row in b.to_pylist()]
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        pa.concat_tables(batches).combine_chunks()
    ours, theirs = tmp_path / "o.lance", tmp_path / "p.lance"
    with LanceFileWriter(ours, version=version) as writer:
        for batch in batches:
            writer.write_batch(batch)
    with lance_file.LanceFileWriter(str(theirs), version=version) as writer:
        for batch in batches:
            writer.write_batch(batch)
    assert lance_file.LanceFileReader(str(ours)).read_all().to_table().to_pylist() == expected
    assert lance_file.LanceFileReader(str(theirs)).read_all().to_table().to_pylist() == expected
    for path in (ours, theirs):
        reader = LanceFileReader(path)
        assert reader.read_all().to_table().to_pylist() == expected
        assert reader.take_rows([11, 0, 5]).to_table().to_pylist() == [expected[i] for i in (11, 0, 5)]
