"""What the Spark jobs' tasks send back to the driver (L19: whole-array encodings, no value-at-a-time
conversion of a per-row array on either side)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lance_ops
from jobs.compact import landed, shipped
from lance_ops.ops.compaction import CompactionMetrics, CompactionOptions, RewriteResult, open_version, plan


def _result(row_addrs: np.ndarray | None) -> RewriteResult:
    return RewriteResult(4, (), (), CompactionMetrics(1, 1, 2, 1), row_addrs, False)


@given(
    hnp.arrays(
        np.uint64,
        st.sampled_from([0, 1, 1023, 1024, 1025]) | st.integers(0, 3000),
        elements=st.integers(0, 2**64 - 1),
    )
)
def test_row_addresses_round_trip_in_any_order(addrs: np.ndarray) -> None:
    back = landed(*shipped(_result(addrs)))
    assert back == _result(addrs)
    assert back.row_addrs is not None and back.row_addrs.dtype == np.uint64


def test_no_row_addresses_travel_as_none() -> None:
    text, packed = shipped(_result(None))
    assert packed is None and landed(text, packed) == _result(None)


@pytest.mark.interop
@pytest.mark.parametrize("stable", [False, True])
def test_executed_tasks_land_as_they_were(tmp_path: Path, stable: bool) -> None:
    """Real tasks (deleted rows, several fragments a task) come back equal: new fragments, metrics
    and every surviving row's old address, in order."""
    uri = str(tmp_path / "ds.lance")
    ids = np.arange(5000, dtype=np.int64)
    lance.write_dataset(
        pa.table({"id": ids, "x": ids * 3}), uri, max_rows_per_file=700, enable_stable_row_ids=stable
    )
    lance.dataset(uri).delete("id % 7 = 2")
    files = open_version(uri, lance_ops.dataset(uri).version, None)
    the_plan = plan(files.manifest, CompactionOptions.resolve({}, target_rows_per_fragment=2000))
    assert the_plan.tasks and all(len(t.fragments) > 1 for t in the_plan.tasks)
    for task in the_plan.tasks:
        result = task.execute(uri, {})
        assert landed(*shipped(result)) == result
        if not stable:
            assert result.row_addrs is not None and len(result.row_addrs) == sum(
                f.physical_rows for f in result.new_fragments
            )
