"""Column statistics of every temporal type, at the edges of what the type (and Python) can hold.

``ds.stats.column_summary`` / ``column_stats`` must answer for date32 / date64 / timestamp columns
holding the type's min or max, time-zone-aware timestamps with nulls and with the value pandas
calls NaT (-2**63), and durations (Arrow has no min / max kernel for them). Bounds are Python
values where Python can hold them and Arrow scalars where it cannot; either way they must equal
the column's true bounds, computed on its integers. Every dataset is read back by pylance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops

I32, I64 = np.iinfo(np.int32), np.iinfo(np.int64)

TYPES = [
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time64("ns"),
    pa.duration("s"),
    pa.duration("ns"),
    pa.timestamp("s"),
    pa.timestamp("ms"),
    pa.timestamp("us"),
    pa.timestamp("ns"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="America/New_York"),
    pa.timestamp("s", tz="+05:30"),
]


def _storage(type_: pa.DataType) -> pa.DataType:
    return pa.int32() if type_.bit_width == 32 else pa.int64()


def _extremes(type_: pa.DataType) -> tuple[int, int]:
    """The type's smallest and largest value, as its integer."""
    if pa.types.is_time(type_):  # times hold one day
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[type_.unit]
        return 0, 86_400 * per_second - 1
    info = I32 if type_.bit_width == 32 else I64
    return int(info.min), int(info.max)


def _unknown(type_: pa.DataType) -> tuple[int, int]:
    """The format's bounds of no value: the storage integer's extremes."""
    info = I32 if type_.bit_width == 32 else I64
    return int(info.min), int(info.max)


def _as_int(value: Any, type_: pa.DataType) -> int | None:
    """A summary's bound (a Python value or an Arrow scalar) as the type's integer."""
    if value is None:
        return None
    scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value, type_)
    assert scalar.type == type_
    return pa.array([scalar], type_).view(_storage(type_))[0].as_py()


def _column(ints: list[int | None], type_: pa.DataType) -> pa.Array:
    return pa.array(ints, _storage(type_)).view(type_)


def _bounds(ints: list[int | None], type_: pa.DataType) -> tuple[int, int]:
    present = [v for v in ints if v is not None]
    return (min(present), max(present)) if present else _unknown(type_)


def _check_bounds(ds: lance_ops.LanceDataset, name: str, ints: list[int | None], rows_per_file: int) -> None:
    """The summary bounds the whole column, ``column_stats`` each fragment of ``rows_per_file`` rows."""
    type_ = ds.schema.field(name).type
    summary = ds.stats.column_summary(name)
    assert summary["null_count"] == sum(v is None for v in ints)
    got = (_as_int(summary["min_value"], type_), _as_int(summary["max_value"], type_))
    assert got == _bounds(ints, type_)
    stats = ds.stats.column_stats(name)
    assert stats.schema.field("min_value").type == type_
    lows = stats.column("min_value").combine_chunks().view(_storage(type_)).to_pylist()
    highs = stats.column("max_value").combine_chunks().view(_storage(type_)).to_pylist()
    pieces = [ints[k : k + rows_per_file] for k in range(0, len(ints), rows_per_file)]
    assert list(zip(lows, highs, strict=True)) == [_bounds(piece, type_) for piece in pieces]


@pytest.mark.interop
@pytest.mark.parametrize("type_", TYPES, ids=str)
def test_summary_of_the_types_extremes(tmp_path: Path, type_: pa.DataType) -> None:
    lance = pytest.importorskip("lance")
    low, high = _extremes(type_)
    columns = {
        "both": [low, None, 0 if low <= 0 else low, high],
        "lowest": [low, low, None, low],
        "highest": [None, high, high, None],
        "nulls": [None, None, None, None],
        "near": [low + 1, high - 1, None, low + 1],
    }
    table = pa.table({name: _column(ints, type_) for name, ints in columns.items()})
    uri = str(tmp_path / "ours")
    ds = lance_ops.write_dataset(table, uri, max_rows_per_file=2)
    assert lance.dataset(uri).to_table().equals(table)
    for name, ints in columns.items():
        _check_bounds(ds, name, ints, 2)
    # the same data written by pylance, statistics rebuilt here (a statistics file, zones)
    theirs = str(tmp_path / "theirs")
    lance.write_dataset(table, theirs, max_rows_per_file=2)
    ds = lance_ops.dataset(theirs)
    assert ds.stats.rebuild().fragment_ids == (0, 1)
    assert lance.dataset(theirs).to_table().equals(table)
    for name, ints in columns.items():
        _check_bounds(ds, name, ints, 2)


def test_values_python_cannot_hold_are_arrow_scalars(tmp_path: Path) -> None:
    ints = [int(I32.min), int(I32.max)]
    table = pa.table(
        {
            "d": _column([*ints, None], pa.date32()),
            "nat": _column([int(I64.min), None, 7], pa.timestamp("ns", tz="UTC")),
            "dur": _column([int(I64.min), 5, None], pa.duration("s")),
            "ok": _column([0, 86_400 * 365, None], pa.timestamp("s", tz="UTC")),
        }
    )
    ds = lance_ops.write_dataset(table, str(tmp_path / "ds"))
    summary = ds.stats.column_summary("d")
    assert isinstance(summary["min_value"], pa.Scalar) and isinstance(summary["max_value"], pa.Scalar)
    nat = ds.stats.column_summary("nat")  # -2**63 is a bound here, not pandas' NaT
    assert (
        isinstance(nat["min_value"], pa.Scalar)
        and _as_int(nat["min_value"], nat["min_value"].type) == I64.min
    )
    assert _as_int(nat["max_value"], pa.timestamp("ns", tz="UTC")) == 7
    dur = ds.stats.column_summary("dur")
    assert isinstance(dur["min_value"], pa.Scalar) and dur["max_value"].total_seconds() == 5
    ok = ds.stats.column_summary("ok")  # representable values stay Python values, time zone kept
    assert ok["min_value"].year == 1970 and ok["max_value"].year == 1971
    assert ok["min_value"].tzinfo is not None


_VALUES = st.one_of(
    st.none(),
    st.integers(int(I64.min), int(I64.max)),
    st.sampled_from([int(I64.min), int(I64.min) + 1, -1, 0, 1, int(I64.max) - 1, int(I64.max)]),
)


@pytest.mark.interop
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ints=st.lists(_VALUES, min_size=0, max_size=12),
    type_=st.sampled_from([t for t in TYPES if t.bit_width == 64 and not pa.types.is_time(t)]),
    rows_per_file=st.sampled_from([1, 3, 1024]),
)
def test_summary_bounds_equal_the_true_bounds(
    tmp_path_factory: pytest.TempPathFactory, ints: list[int | None], type_: pa.DataType, rows_per_file: int
) -> None:
    lance = pytest.importorskip("lance")
    table = pa.table({"v": _column(ints, type_)})
    uri = str(tmp_path_factory.mktemp("extremes") / "ds")
    ds = lance_ops.write_dataset(table, uri, max_rows_per_file=rows_per_file)
    assert lance.dataset(uri).to_table().equals(table)
    if ints:
        _check_bounds(ds, "v", ints, rows_per_file)
