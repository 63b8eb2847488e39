"""``max_bytes_per_file`` as pylance applies it: a file is closed after the batch with which the
bytes it has flushed reach the cap (columns flush in ~8 MiB pages), in writes and compactions."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.optimize import Compaction as PylanceCompaction

import lance_ops
from lance_ops.optimize import Compaction

# 4096 rows of 8 KiB (32 MiB): pylance's own test_optimize_max_bytes data.
WIDE = pa.table(
    {"a": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4 * 1024 * 1024, dtype=np.int64)), 1024)}
)


def _rows(ds) -> list[int]:  # type: ignore[no-untyped-def]
    return [f.count_rows() for f in ds.get_fragments()]


@pytest.fixture
def twins(tmp_path: Path) -> tuple[str, str]:
    """The same two-fragment dataset for each library (written by pylance)."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(WIDE, theirs, max_rows_per_file=2048, data_storage_version="stable")
    shutil.copytree(theirs, ours)
    return ours, theirs


@pytest.mark.interop
@pytest.mark.parametrize("batch_size", [100, 128, 2048])
def test_compaction_cuts_files_as_pylance(twins: tuple[str, str], batch_size: int) -> None:
    ours, theirs = twins
    options = {"target_rows_per_fragment": 100 * 1024, "materialize_deletions": False}
    options |= {"max_bytes_per_file": 1000, "batch_size": batch_size}
    got = lance_ops.dataset(ours).optimize.compact_files(**options)
    want = lance.dataset(theirs).optimize.compact_files(**options)
    assert (got.fragments_added, got.files_added) == (want.fragments_added, want.files_added)
    assert _rows(lance_ops.dataset(ours)) == _rows(lance.dataset(theirs))
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())


@pytest.mark.interop
def test_distributed_compaction_as_pylance(twins: tuple[str, str]) -> None:
    """Plan, execute each task separately, commit (pylance's example): the same fragments."""
    ours, theirs = twins
    options = {"target_rows_per_fragment": 100 * 1024, "max_bytes_per_file": 1000, "batch_size": 128}
    ds = lance_ops.dataset(ours)
    plan = Compaction.plan(ds, options=options)
    got = Compaction.commit(ds, [task.execute(ds) for task in plan.tasks])
    pds = lance.dataset(theirs)
    pplan = PylanceCompaction.plan(pds, options=options)
    want = PylanceCompaction.commit(pds, [task.execute(pds) for task in pplan.tasks])
    assert (got.fragments_removed, got.fragments_added) == (want.fragments_removed, want.fragments_added)
    assert _rows(lance_ops.dataset(ours)) == _rows(lance.dataset(theirs)) == [1024] * 4


@pytest.mark.interop
def test_write_cuts_files_as_pylance(tmp_path: Path) -> None:
    """Batches of their own buffers (pylance flushes slices of one buffer at once: it counts the
    whole buffer a slice holds; docs/compatibility.md)."""
    batches = [
        pa.record_batch({"a": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(300 * 1024) + i), 1024)})
        for i in range(14)
    ]
    schema = batches[0].schema
    ours = lance_ops.write_dataset(batches, str(tmp_path / "ours"), schema, max_bytes_per_file=5 << 20)
    theirs = lance.write_dataset(batches, str(tmp_path / "theirs"), schema, max_bytes_per_file=5 << 20)
    assert _rows(ours) == _rows(theirs)
    assert len(_rows(ours)) > 1
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(pa.Table.from_batches(batches))
    # small data never reaches a flush: one file, however small the cap
    small = lance_ops.write_dataset(
        pa.table({"a": range(1000)}), str(tmp_path / "small"), max_bytes_per_file=10
    )
    assert _rows(small) == [1000]
