"""A fragment with no deleted rows is scanned as a range of rows (no array of every offset): the
same rows, row ids and addresses as pylance's scan, with and without deletions, offsets and limits."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.fragment.reader import offsets_array

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("deleted", [False, True])
@pytest.mark.parametrize(("offset", "limit"), [(None, None), (1023, None), (5, 1025), (2999, 7)])
def test_scan_of_live_rows_matches_pylance(
    tmp_path: Path, deleted: bool, offset: int | None, limit: int | None
) -> None:
    uri = str(tmp_path / "ds.lance")
    table = pa.table({"id": pa.array(np.arange(3000), pa.int64()), "v": pa.array(np.arange(3000) * 0.5)})
    lance_ops.write_dataset(table, uri, max_rows_per_file=1024)
    if deleted:
        lance_ops.dataset(uri).delete("id % 7 = 3")
    ours = lance_ops.dataset(uri)
    files = ours._files
    for metadata in files.manifest.fragments:
        fragment = files.fragment(metadata)
        live = fragment.live_rows()
        assert isinstance(live, range) != deleted
        assert np.array_equal(offsets_array(live), fragment.live_offsets())
    kwargs = {"with_row_id": True, "with_row_address": True, "offset": offset, "limit": limit}
    got = ours.to_table(**kwargs)
    expected = lance.dataset(uri).to_table(**kwargs)
    assert got.equals(expected)
