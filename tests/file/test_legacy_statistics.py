"""Page statistics pylance writes into legacy (0.1) files: read, and equal to the format's rules."""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_ops.encoding.statistics import page_statistics
from lance_ops.file import LanceFileReader


def _signed(value: Any) -> Any:
    """Floats with their sign of zero, so -0.0 and +0.0 compare unequal; "" as null (legacy string
    pages have no validity: an empty bound reads back as null)."""
    if value == "":
        return None
    return (value, math.copysign(1, value)) if isinstance(value, float) else value


def _rows(array: pa.Array) -> list[Any]:
    return [{k: _signed(v) for k, v in row.items()} for row in array.to_pylist()]


@pytest.mark.interop
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ints=st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=60),
    floats=st.lists(
        st.none() | st.floats() | st.sampled_from([0.0, -0.0, math.nan]), min_size=1, max_size=60
    ),
    texts=st.lists(st.none() | st.text(max_size=90), min_size=1, max_size=60),
    group=st.integers(1, 25),
)
def test_pylance_legacy_statistics_follow_the_rules(
    tmp_path_factory: pytest.TempPathFactory,
    ints: list[int | None],
    floats: list[float | None],
    texts: list[str | None],
    group: int,
) -> None:
    lance = pytest.importorskip("lance")
    n = min(len(ints), len(floats), len(texts))
    table = pa.table(
        {
            "i": pa.array(ints[:n], pa.int64()),
            "f": pa.array(floats[:n], pa.float64()),
            "s": pa.array(texts[:n], pa.string()),
            "b": pa.array([i % 3 == 0 for i in range(n)]),
        }
    )
    uri = tmp_path_factory.mktemp("legacy_stats") / "ds"
    lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=group)
    (path,) = glob.glob(str(Path(uri) / "data" / "*.lance"))
    found = LanceFileReader(path).page_statistics()
    assert found is not None
    stats, page_rows = found
    assert page_rows.sum() == n and (page_rows <= group).all()
    assert stats.num_rows == len(page_rows)
    assert stats.column_names == ["0", "1", "2", "3"]
    for index, name in enumerate(table.column_names):
        # the format's rules to the letter (NaN ignored in min and max): pylance's bounds exactly
        ours = _rows(page_statistics(table.column(name), page_rows))
        assert _rows(stats.column(str(index)).combine_chunks()) == ours, name


def test_golden_legacy_files_statistics() -> None:
    """Every golden 0.1 file pylance wrote: statistics (if any) have one row per page, typed as the column."""
    paths = sorted(glob.glob(str(Path(__file__).parent.parent / "data" / "files" / "0.1" / "*.lance")))
    assert paths
    for path in paths:
        reader = LanceFileReader(path)
        found = reader.page_statistics()
        if found is None:
            continue
        stats, page_rows = found
        assert stats.num_rows == len(page_rows) and page_rows.sum() == reader.num_rows
        for name in stats.column_names:
            assert stats.schema.field(name).type.field("null_count").type == pa.int64()
