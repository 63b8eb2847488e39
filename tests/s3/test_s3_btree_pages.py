"""L18 (btreecold): BTREE point and range queries on S3 (the moto server fixture), where a cold
page's two columns are read together, equal a full scan and pylance, cold and warm, whichever
system built the index."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from tests.s3.conftest import S3Location


@pytest.mark.parametrize("builder", ["lance_ops", "pylance"])
def test_btree_pages_on_s3_equal_full_scan_and_pylance(s3: S3Location, builder: str) -> None:
    uri, options = s3.uri(), s3.storage_options
    rng = np.random.default_rng(8)
    n = 10_000  # three 4096-row pages
    table = pa.table(
        {"id": pa.array(np.arange(n), pa.int64()), "k": pa.array(rng.integers(0, 900, n), pa.int64())}
    )
    lance.write_dataset(table, uri, storage_options=options, max_rows_per_file=4000)
    system = lance_ops if builder == "lance_ops" else lance
    system.dataset(uri, storage_options=options).create_scalar_index("k", "BTREE")
    ours = lance_ops.dataset(uri, storage_options=options)
    theirs = lance.dataset(uri, storage_options=options)
    for flt in ("k = 17", "k IN (3, 450, 899)", "k > 880", "k <= 2", "k = 17"):  # the last: warm pages
        got = sorted(ours.to_table(columns=["id"], filter=flt)["id"].to_pylist())
        assert got, flt
        assert got == sorted(
            ours.to_table(columns=["id"], filter=flt, use_scalar_index=False)["id"].to_pylist()
        )
        assert got == sorted(theirs.to_table(columns=["id"], filter=flt)["id"].to_pylist())
    assert "k_idx" in ours.scanner(filter="k = 17").explain_plan()
    assert "parts_loaded=0" in ours.scanner(columns=["id"], filter="k = 17").analyze_plan()
