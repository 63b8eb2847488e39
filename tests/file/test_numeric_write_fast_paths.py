"""The writer's numeric fast paths (L19: InlineBitpacking in one compiled pass, distinct sketches
hashed as they reduce, float page bounds and NaN counts in one pass) write the same bytes as the
general forms they replace, page statistics equal to the general functions' values, and files
pylance reads back exactly (2.1 and 2.2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding import kernels, sketch, statistics
from lance_ops.encoding.compression import bitpacking
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file import page_statistics as file_page_statistics

ROWS = 150_000  # past COMPILED_FROM (65,536): the compiled kernels run


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(19)
    ids = np.arange(rows, dtype=np.int64)
    floats = (ids % 100_003).astype(np.float64) / 100_003
    floats[rng.integers(0, rows, rows // 100)] = np.nan
    floats[rng.integers(0, rows, rows // 100)] = -np.nan
    floats[rng.integers(0, rows, rows // 100)] = -0.0
    nulls = rng.random(rows) < 0.05
    return pa.table(
        {
            "id": ids,
            "a": (ids * 7919) % 1000,
            "b": ((ids * 2654435761) % 2199023255552) - 1099511627776,
            "c": floats,
            "c_null": pa.array(floats, mask=nulls),
            "f32": pa.array(rng.normal(0, 1, rows).astype(np.float32), mask=nulls),
            "i32": pa.array(rng.integers(-(2**31), 2**31, rows, dtype=np.int64).astype(np.int32), mask=nulls),
            "u64": pa.array(rng.integers(0, 2**64, rows, dtype=np.uint64)),
            "ts": pa.array(rng.integers(0, 2**50, rows)).view(pa.timestamp("us")),
            "all_null": pa.nulls(rows, pa.int64()),
        }
    )


def _write(path: Path, table: pa.Table, version: str) -> bytes:
    with LanceFileWriter(str(path), table.schema, version=version) as writer:
        for batch in table.to_batches(max_chunksize=len(table) // 3 + 1):
            writer.write_batch(batch)
    return path.read_bytes()


def _bits(table: pa.Table) -> pa.Table:
    """Floats as their bits (NaN payloads and signs compared exactly)."""
    columns = []
    for column in table.columns:
        column = column.combine_chunks()
        if pa.types.is_floating(column.type):
            width = {32: pa.int32(), 64: pa.int64()}[column.type.bit_width]
            column = column.view(width)
        columns.append(column)
    return pa.table(columns, names=table.column_names)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_fast_paths_write_the_general_forms_bytes(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lance.file import LanceFileReader as TheirReader

    table = _table(ROWS)
    kernels._compiled(True)  # the compiled kernels from the first call on, whatever the size
    fast = _write(tmp_path / "fast.lance", table, version)

    with monkeypatch.context() as patch:
        patch.setattr(bitpacking, "chunk_widths", kernels._numpy_chunk_widths)
        patch.setattr(bitpacking, "inline_pack", kernels._numpy_inline_pack)
        patch.setattr(sketch, "_representatives", sketch._hashed_representatives)
        patch.setattr(
            file_page_statistics,
            "float_page_summary",
            lambda array, rows: (
                statistics.page_statistics(array, rows),
                statistics.page_nan_counts(array, rows),
            ),
        )
        general = _write(tmp_path / "general.lance", table, version)
    assert fast == general

    theirs = TheirReader(str(tmp_path / "fast.lance")).read_all().to_table()
    assert _bits(theirs).equals(_bits(table))

    found = LanceFileReader(str(tmp_path / "fast.lance")).column_statistics()
    assert found is not None
    assert set(found.columns) == set(table.column_names)
    for name, column in found.columns.items():
        values = table.column(name)
        expected = statistics.page_statistics(values, column.page_rows)
        assert column.statistics.field("null_count").equals(expected.field("null_count")), name
        for bound in ("min_value", "max_value"):
            ours, reference = column.statistics.field(bound), expected.field(bound)
            if pa.types.is_floating(values.type):
                width = {32: pa.int32(), 64: pa.int64()}[values.type.bit_width]
                ours, reference = ours.view(width), reference.view(width)
            assert ours.equals(reference), (name, bound)
        if pa.types.is_floating(values.type):
            assert column.nan_counts is not None
            assert column.nan_counts.tolist() == statistics.page_nan_counts(values, column.page_rows).tolist()
    sketches = LanceFileReader(str(tmp_path / "fast.lance")).column_sketches()
    assert abs(sketches["a"].estimate() - 1000) < 50  # HLL at lg_k 12: ~1.6 % standard error
    assert sketches["all_null"].estimate() == 0
