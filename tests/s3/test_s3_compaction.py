"""Compaction of a dataset on S3 (moto's server) shared with pylance, over several days: fragments
larger than a remote store reads whole on open, deleted rows, a second run with nothing to do, and
another writer's appends in between; a data file larger than one upload part."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.io.fsspec_store import UPLOAD_PART_SIZE, FsspecOutput, FsspecStore
from tests.s3.conftest import S3Location

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def _table(start: int, n: int, seed: int) -> pa.Table:
    words = np.random.default_rng(seed).integers(0, 2**62, (n, 4), dtype=np.int64)
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "text": [w.tobytes().hex() for w in words]}
    )


def _ids(ds: lance.LanceDataset) -> list[int]:
    return sorted(ds.to_table(columns=["id"]).column("id").to_pylist())


def test_compaction_day_after_day_with_pylance(s3: S3Location) -> None:
    uri, options = s3.uri(), s3.storage_options
    lance.write_dataset(_table(0, 12_000, 1), uri, storage_options=options, max_rows_per_file=2_000)
    lance.dataset(uri, storage_options=options).delete("id % 5 = 0 AND id < 6000")
    expected = [i for i in range(12_000) if not (i % 5 == 0 and i < 6000)]

    ours = lance_ops.dataset(uri, storage_options=options)
    assert all(f.files[0].file_size_bytes > 64 * 1024 for f in ours.manifest.fragments)
    metrics = ours.optimize.compact_files(target_rows_per_fragment=1 << 20)
    assert (metrics.fragments_removed, metrics.fragments_added) == (6, 1)
    theirs = lance.dataset(uri, storage_options=options)
    # As pylance's: a ReserveFragments commit (version 3), then the Rewrite (4).
    assert theirs.version == 4 and _ids(theirs) == expected
    assert theirs.to_table().sort_by("id").column("text").to_pylist() == [
        _table(0, 12_000, 1).column("text")[i].as_py() for i in expected
    ]

    # Run again: nothing to do, nothing committed.
    again = lance_ops.dataset(uri, storage_options=options).optimize.compact_files(
        target_rows_per_fragment=1 << 20
    )
    assert (again.fragments_removed, again.fragments_added) == (0, 0)
    assert lance.dataset(uri, storage_options=options).version == 4

    # The next day pylance appends small fragments and deletes; we compact those with ours.
    lance.write_dataset(
        _table(12_000, 3_000, 2), uri, storage_options=options, mode="append", max_rows_per_file=1_000
    )
    lance.dataset(uri, storage_options=options).delete("id >= 12000 AND id % 7 = 0")
    expected += [i for i in range(12_000, 15_000) if i % 7]
    lance_ops.dataset(uri, storage_options=options).optimize.compact_files(target_rows_per_fragment=1 << 20)
    theirs = lance.dataset(uri, storage_options=options)
    assert _ids(theirs) == expected and len(theirs.get_fragments()) == 1


def test_large_file_goes_out_in_parts_of_the_upload_size(s3: S3Location) -> None:
    store, path = FsspecStore.from_uri(s3.uri("big.bin"), s3.storage_options)
    data = np.random.default_rng(3).integers(0, 256, UPLOAD_PART_SIZE * 2 + 12345, dtype=np.uint8).tobytes()
    out = FsspecOutput(store.fs, path)
    for start in range(0, len(data), 1 << 20):
        out.write(data[start : start + (1 << 20)])
        if out._file is not None:  # past the single PUT: a multipart upload of bounded parts
            assert out._file.blocksize == UPLOAD_PART_SIZE
            assert out._file.buffer.tell() < UPLOAD_PART_SIZE + (1 << 20)
    out.close()
    assert store.read(path) == data
