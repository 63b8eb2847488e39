"""analyze_plan's I/O metrics on S3 (the moto server fixture)."""

from __future__ import annotations

import re

import lance
import pyarrow as pa

import lance_ops
from tests.s3.conftest import S3Location
from tests.test_io_metrics import PYLANCE_LINE, metrics_of


def test_s3_scan_counts(s3: S3Location) -> None:
    uri = s3.uri()
    table = pa.table({"a": pa.array(range(50_000), pa.int64())})
    lance_ops.write_dataset(table, uri, storage_options=s3.storage_options)
    assert lance.dataset(uri, storage_options=s3.storage_options).count_rows() == 50_000
    ds = lance_ops.dataset(uri, storage_options=s3.storage_options)
    plan = ds.scanner(columns=["a"]).analyze_plan()
    assert PYLANCE_LINE.search(plan), plan
    rows, _, nbytes, iops, requests = metrics_of(plan)
    assert rows == 50_000 and iops >= 1 and requests >= 1
    # pylance's count for the same scan of the same objects: the same order of magnitude.
    theirs = lance.dataset(uri, storage_options=s3.storage_options).scanner(columns=["a"]).analyze_plan()
    assert PYLANCE_LINE.search(theirs), theirs
    their_bytes = float(re.search(r"bytes_read=([\d.]+) K", theirs).group(1)) * 1024  # type: ignore[union-attr]
    assert their_bytes / 2 <= nbytes <= their_bytes * 2, (nbytes, theirs)
    # The same handle scanned again counts again (not zero, not the sum of both runs).
    again = metrics_of(ds.scanner(columns=["a"]).analyze_plan())
    assert 0 < again[2] <= nbytes
