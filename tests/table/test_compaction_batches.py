"""L19: what the compaction of many small fragments hands the writer (the filtered rows of several
fragments gathered into one batch), the writer's distinct sketch fed a flush of many buffered
batches at once, and readers of files of one schema sharing its conversion and column mapping;
each checked against the general path and against pylance."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.ops import compaction
from lance_ops.ops.compaction import _coalesced

BOUNDARY_ROWS = [0, 1, 2, 1023, 1024, 1025]


def _table(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"n{i}" if i % 7 else None for i in ids.tolist()], pa.string()),
        }
    )


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(st.sampled_from(BOUNDARY_ROWS + [2047, 2048, 2049, 4100]), max_size=8),
    batch_size=st.sampled_from([1, 1000, 1024, 4096]),
    byte_cap=st.sampled_from([1 << 10, 1 << 14, 1 << 30]),
)
def test_coalesced_batches_keep_every_row_in_order_within_the_caps(
    sizes: list[int], batch_size: int, byte_cap: int
) -> None:
    rows_cap = max(batch_size, 2048)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compaction, "COALESCE_ROWS", 2048)
        patch.setattr(compaction, "COALESCE_BYTES", byte_cap)
        tables, start = [], 0
        for rows in sizes:
            tables.append(_table(start, rows))
            start += rows
        batches = list(_coalesced(iter(tables), batch_size))
    assert all(b.num_rows for b in batches)
    assert all(b.num_rows <= rows_cap for b in batches)
    expected = pa.concat_tables([_table(0, 0), *tables])
    assert pa.Table.from_batches(batches, expected.schema).equals(expected)
    small = [t for t in tables if t.num_rows and t.num_rows < rows_cap and t.nbytes < byte_cap]
    if len(small) == len([t for t in tables if t.num_rows]) and sum(t.num_rows for t in small) <= rows_cap:
        if sum(t.nbytes for t in small) <= byte_cap:  # everything fits one batch: it is one
            assert len(batches) == min(1, len(small))


def test_coalesced_passes_large_tables_in_batch_size_pieces() -> None:
    tables = [_table(0, 10), _table(10, 70_000), _table(70_010, 5)]
    batches = list(_coalesced(iter(tables), 8192))
    assert [b.num_rows for b in batches] == [10, *([8192] * 8), 70_000 - 8 * 8192, 5]
    assert pa.Table.from_batches(batches).equals(pa.concat_tables(tables))


@pytest.mark.parametrize("slice_rows", [None, 5_000, 700, 699])
def test_sketch_of_a_flush_of_many_batches_is_the_sketch_of_the_whole_column(
    tmp_path: Path, slice_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small batches buffered into one flush reach the distinct sketch in updates of up to
    ``UPDATE_SLICE_ROWS`` rows (one when they are fewer): the sketch equals one fed the whole
    column (its bytes, estimate and bounds) and pylance reads the file."""
    from lance.file import LanceFileReader as PylanceReader

    from lance_ops.encoding.sketch import DistinctSketch
    from lance_ops.file import LanceFileReader, LanceFileWriter, page_statistics

    if slice_rows is not None:
        monkeypatch.setattr(page_statistics, "UPDATE_SLICE_ROWS", slice_rows)

    rng = np.random.default_rng(5)
    batches = []
    for n in range(60):
        values = rng.integers(0, 5_000, 700)
        batches.append(
            pa.record_batch(
                {
                    "id": pa.array(np.arange(n * 700, (n + 1) * 700, dtype=np.int64)),
                    "value": pa.array(values, mask=values % 11 == 0),
                    "label": pa.array([f"v{v}" for v in values.tolist()]),
                    "score": pa.array(values / 7.0),
                }
            )
        )
    path = tmp_path / "many.lance"
    with LanceFileWriter(path, batches[0].schema, version="2.2") as writer:
        for batch in batches:
            writer.write_batch(batch)
    expected = pa.Table.from_batches(batches)
    sketches = LanceFileReader(path).column_sketches()
    assert set(sketches) == set(expected.column_names)
    for name, sketch in sketches.items():
        whole = DistinctSketch().update(expected.column(name))
        assert sketch.to_bytes() == whole.to_bytes(), name
        assert sketch.estimate() == whole.estimate(), name
        assert sketch.bounds() == whole.bounds(), name
    assert PylanceReader(str(path)).read_all().to_table().equals(expected)


def _mixed(start: int, rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + rows, dtype=np.int64)
    words = np.array(["alpha", "beta", "gamma", "delta", ""])
    return pa.table(
        {
            "id": ids,
            "text": pa.array(rng.choice(words, rows), mask=rng.random(rows) < 0.1),
            "tags": pa.array(
                [list(range(int(k))) if k % 5 else None for k in rng.integers(0, 4, rows)],
                pa.list_(pa.int32()),
            ),
            "amount": pa.array(rng.normal(size=rows), mask=rng.random(rows) < 0.05),
        }
    )


@pytest.mark.parametrize("stable_row_ids", [True, False])
def test_compaction_of_many_small_fragments_and_an_added_column_matches_pylance(
    tmp_path: Path, stable_row_ids: bool
) -> None:
    """Small pylance fragments (1,023 / 1,024 / 1,025 rows, strings, lists, nulls) with deletions,
    some written before a column was added (two data files of two file schemas), some after: our
    compaction gathers their rows into large batches and gives pylance's rows, row ids and
    fragment layout; pylance reads our result and compacts it again (nothing to do)."""
    source = str(tmp_path / "source")
    start = 0
    for n, rows in enumerate([1023, 1024, 1025, 1, 1024]):
        lance.write_dataset(
            _mixed(start, rows, n),
            source,
            mode="append" if n else "create",
            enable_stable_row_ids=stable_row_ids,
            data_storage_version="2.2",
        )
        start += rows
    lance.dataset(source).add_columns({"twice": "id * 2"})
    for n, rows in enumerate([1025, 3]):
        table = _mixed(start, rows, 10 + n)
        table = table.append_column("twice", pa.array(table.column("id").to_numpy() * 2))
        lance.write_dataset(table, source, mode="append")
        start += rows
    lance.dataset(source).delete("id % 9 = 4 OR id = 1023 OR id = 4097")
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(source, ours)
    shutil.copytree(source, theirs)

    metrics = lance_ops.dataset(ours).optimize.compact_files()
    expected_metrics = lance.dataset(theirs).optimize.compact_files()
    assert metrics.fragments_removed == expected_metrics.fragments_removed
    assert metrics.fragments_added == expected_metrics.fragments_added

    got = lance.dataset(ours).to_table(with_row_id=True)
    want = lance.dataset(theirs).to_table(with_row_id=True)
    assert got.equals(want)
    assert got.num_rows == lance.dataset(source).count_rows()
    assert [f.physical_rows for f in lance.dataset(ours).get_fragments()] == [
        f.physical_rows for f in lance.dataset(theirs).get_fragments()
    ]
    assert lance_ops.dataset(ours).to_table().equals(want.drop_columns(["_rowid"]))
    assert lance.dataset(ours).optimize.compact_files().fragments_removed == 0


def _fragmented(path: str, stable_row_ids: bool) -> None:
    """Small pylance fragments, some of two data files (written before a column was added), with
    deletions (every row of one fragment but one)."""
    start = 0
    for n, rows in enumerate([1023, 1024, 1025, 1, 2048]):
        lance.write_dataset(
            _mixed(start, rows, n),
            path,
            mode="append" if n else "create",
            enable_stable_row_ids=stable_row_ids,
            data_storage_version="2.2",
        )
        start += rows
    lance.dataset(path).add_columns({"twice": "id * 2"})
    for n, rows in enumerate([1025, 3, 700, 1024]):
        table = _mixed(start, rows, 10 + n)
        table = table.append_column("twice", pa.array(table.column("id").to_numpy() * 2))
        lance.write_dataset(table, path, mode="append")
        start += rows
    lance.dataset(path).delete("id % 9 = 4 OR id = 1023 OR (id >= 6149 AND id < 6848) OR id IN (6849, 6850)")


@settings(max_examples=15, deadline=None)
@given(
    window_rows=st.sampled_from([1, 1024, 1025, 2048, 3000, 1 << 16]),
    window_bytes=st.sampled_from([1, 20_000, 1 << 24]),
)
def test_scan_reading_fragments_together_gives_the_rows_of_each_fragment_read_alone(
    tmp_path_factory: pytest.TempPathFactory, window_rows: int, window_bytes: int
) -> None:
    """The compaction scan reads single-file fragments together (windows of up to
    ``COALESCE_ROWS`` rows and ``WINDOW_FILE_BYTES`` of files, each column decoded across their
    files) and two-file fragments alone: its rows are those of every fragment read on its own
    with its deleted rows dropped, in order, whatever the window size."""
    from lance_ops.fragment.reader import FragmentReader

    path = str(tmp_path_factory.mktemp("scan") / "ds")
    _fragmented(path, stable_row_ids=False)
    files = lance_ops.dataset(path)._files
    readers = [FragmentReader(files, f) for f in files.manifest.fragments]
    columns = tuple(files.schema.names)
    whole = [compaction._whole_file(r, columns) for r in readers]
    assert [w is not None for w in whole] == [len(r.metadata.files) == 1 for r in readers]
    assert sum(w is not None for w in whole) == 4
    expected = pa.concat_tables(r.read(columns, r.live_offsets()) for r in readers)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compaction, "COALESCE_ROWS", window_rows)
        patch.setattr(compaction, "WINDOW_FILE_BYTES", window_bytes)
        got = pa.Table.from_batches(list(compaction._scan(readers, files.schema, 1000)), files.schema)
    assert got.equals(expected)
    assert got.num_rows == lance.dataset(path).count_rows()
