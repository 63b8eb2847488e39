"""A take on S3 (the moto server, through the counting proxy): its files' tails read together, then
every page it needs of every column and fragment in one batch of concurrent requests, and no more
requests than pylance's take of the same rows."""

from __future__ import annotations

from collections.abc import Iterator

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from tests.s3.conftest import S3Location, storage_options
from tests.s3.proxy import FaultProxy, running_proxy

pytestmark = [pytest.mark.s3, pytest.mark.interop]


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    with running_proxy(s3_endpoint, max_seconds=120) as running:
        yield running


def test_s3_take_costs_one_request_per_fragment(s3: S3Location, proxy: FaultProxy) -> None:
    uri = s3.uri()
    rng = np.random.default_rng(5)
    n, fragments = 12_000, 4
    words = rng.integers(0, 2**62, (n, 4), dtype=np.int64)
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "text": [w.tobytes().hex() for w in words],
            "tags": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        }
    )
    lance.write_dataset(table, uri, max_rows_per_file=n // fragments, storage_options=s3.storage_options)
    lance.dataset(uri, storage_options=s3.storage_options).delete("id % 7 = 0")
    counted = storage_options(proxy.endpoint)
    rows = [1, 2000, 2999, 3000, 6500, 9000, 10_283]
    columns = ["tags", "id", "text"]

    ours = lance_ops.dataset(uri, storage_options=counted)
    proxy.reset_counts()
    got = ours.take(rows, columns=columns)
    opening = proxy.total()
    theirs = lance.dataset(uri, storage_options=counted)
    expected = theirs.take(rows, columns=columns)
    assert got.equals(expected)

    # Warm handles: the files are open; the pages of the four fragments, one request each.
    proxy.reset_counts()
    assert ours.take(rows, columns=columns).equals(expected)
    assert proxy.snapshot() == {"GET range": fragments}
    proxy.reset_counts()
    theirs.take(rows, columns=columns)
    assert fragments <= proxy.total()
    # Cold: the deletion files, the tails and the pages, one request per file each.
    assert opening == 3 * fragments, opening
