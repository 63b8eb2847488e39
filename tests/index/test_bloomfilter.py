"""L18: BLOOMFILTER indices, built by lance_ops or by pylance 14, used by both.

Our ``bloomfilter.lance`` equals pylance's build of the same rows (zones, null flags, the filters'
bytes, metadata, null rows); pylance's plan names our index and returns its full scan's rows; our
scans use pylance's index and ours, with the rows of a full scan.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import IndexColumnTypeError, InvalidArgumentError
from lance_ops.file import LanceFileReader
from lance_ops.index import sbbf
from lance_ops.index.treemap import decode_row_address_map
from lance_ops.index.types import uuid_text

N = 20000


def _table(n: int = N, start: int = 0) -> pa.Table:
    k = np.arange(start, start + n)
    long_text = [None if i % 11 == 0 else f"{'x' * (i % 70)}-{i % 301}" for i in k.tolist()]
    return pa.table(
        {
            "id": pa.array(k, pa.int64()),
            "i8": pa.array(k % 100 - 50, pa.int8()),
            "u16": pa.array([None if i % 13 == 0 else i % 1000 for i in k.tolist()], pa.uint16()),
            "i32": pa.array(k % 4000, pa.int32()),
            "u64": pa.array(k * 7919, pa.uint64()),
            "f32": pa.array((k % 300) / 4, pa.float32()),
            "f64": pa.array([None if i % 17 == 0 else (i % 500) / 3 - 20 for i in k.tolist()], pa.float64()),
            "s": pa.array(long_text, pa.string()),
            "lb": pa.array([t.encode() if t is not None else None for t in long_text], pa.large_binary()),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i % 90)) for i in k], pa.date32()),
            "ts": pa.array(k * 1_000_003, pa.timestamp("ns", tz="UTC")),
            "t64": pa.array(k % 5000, pa.time64("us")),
            "t32": pa.array((k % 600).astype(np.int32), pa.time32("s")),
        }
    )


COLUMNS = ["id", "i8", "u16", "i32", "u64", "f32", "f64", "s", "lb", "d", "ts", "t64", "t32"]


def _index_file(path: Path | str, name: str) -> tuple[pa.Table, dict[bytes, bytes], np.ndarray]:
    ds = lance_ops.dataset(str(path))
    (index,) = [i for i in ds.manifest.indices if i.name == name]
    reader = LanceFileReader(f"{path}/_indices/{uuid_text(index)}/bloomfilter.lance")
    table = reader.read_all().to_table()
    metadata = dict(reader.schema.metadata or {})
    nulls = decode_row_address_map(reader.read_global_buffer(int(metadata[b"null_bitmap"])))
    return table, metadata, nulls


def _two_copies(tmp_path: Path, table: pa.Table, **write: object) -> tuple[Path, Path]:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance_ops.write_dataset(table, str(ours), **write)
    lance_ops.dataset(str(ours)).delete("id % 97 = 5 or (id >= 3000 and id < 3500) or id >= 19990")
    shutil.copytree(ours, theirs)
    return ours, theirs


def test_xxh64_reference_values() -> None:
    empty = sbbf.xxh64(np.zeros(0, np.uint8), np.array([0]), np.array([0]))
    assert int(empty[0]) == 0xEF46DB3751D8E999  # xxHash64 of no bytes, seed 0
    assert sbbf.filter_bytes(8192, 0.00057) == 32768
    assert sbbf.filter_bytes(1000, 0.01) == 2048
    assert sbbf.filter_bytes(1, 0.5) == 32  # the smallest filter, one block


def test_filters_built_a_group_of_zones_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64)
    zone = np.sort(rng.integers(0, 70, 5000))
    whole = sbbf.set_bits(hashes, zone, 71, 64)
    monkeypatch.setattr(sbbf, "_FLAG_BUDGET", 64 * 8 * 3)  # three zones at a time
    assert sbbf.set_bits(hashes, zone, 71, 64) == whole
    assert whole[70] == bytes(64)  # a zone with no value: an empty filter
    for z in (0, 33, 69):
        assert sbbf.may_contain([whole[z]], hashes[zone == z]).all()


def test_files_equal_pylance_build(tmp_path: Path) -> None:
    ours, theirs = _two_copies(tmp_path, _table(), max_rows_per_file=12000)
    mine, pylance_ds = lance_ops.dataset(str(ours)), lance.dataset(str(theirs))
    for column in COLUMNS:
        mine.create_scalar_index(column, "BLOOMFILTER")
        pylance_ds.create_scalar_index(column, "BLOOMFILTER")
    for column in COLUMNS:
        got, got_meta, got_nulls = _index_file(ours, f"{column}_idx")
        want, want_meta, want_nulls = _index_file(theirs, f"{column}_idx")
        assert got.to_pydict() == want.to_pydict(), column
        assert got_meta == want_meta, column
        assert np.array_equal(got_nulls, want_nulls), column
    assert got.num_rows == 3  # zones: 8192 live rows of fragment 0, its rest, fragment 1


def test_pylance_uses_ours(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    ds = lance_ops.write_dataset(_table(), str(path), max_rows_per_file=7000)
    for column in ("id", "s", "f64", "ts"):
        ds.create_scalar_index(column, "BLOOMFILTER")
    theirs = lance.dataset(str(path))
    assert theirs.stats.index_stats("id_idx")["indices"] == [
        {"type": "BloomFilter", "num_blocks": 3, "number_of_items": 8192, "probability": 0.00057}
    ]
    for flt, name in [
        ("id = 1234", "id_idx"),
        ("id IN (5, 15000, 123456)", "id_idx"),
        ("s = 'xxx-3'", "s_idx"),
        ("s IS NULL", "s_idx"),
        ("f64 = 0.0", "f64_idx"),
        ("ts = arrow_cast(1000003000, 'Timestamp(Nanosecond, Some(\"UTC\"))')", "ts_idx"),
    ]:
        plan = theirs.scanner(filter=flt).explain_plan()
        assert f"@{name}(BloomFilter)" in plan, (flt, plan)
        want = theirs.to_table(filter=flt, use_scalar_index=False)
        assert theirs.to_table(filter=flt).equals(want), flt
        assert lance_ops.dataset(str(path)).to_table(filter=flt).equals(want), flt
        assert want.num_rows > 0, flt


def test_we_use_pylance_index(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    lance.write_dataset(_table(), path, max_rows_per_file=7000)
    theirs = lance.dataset(str(path))
    theirs.delete("id % 10 = 1")
    for column in ("id", "s", "i32"):
        theirs.create_scalar_index(column, "BLOOMFILTER")
    ds = lance_ops.dataset(str(path))
    for flt in ["id = 1234", "id = 1231", "id IN (2, 19999, 40000)", "s = 'xxxx-4'", "s IS NULL", "i32 = 77"]:
        plan = ds.scanner(filter=flt).explain_plan()
        assert "(BloomFilter)" in plan, (flt, plan)
        assert ds.to_table(filter=flt).equals(ds.to_table(filter=flt, use_scalar_index=False)), flt
    # the index prunes: one fragment of three read (its one zone) for a point lookup
    assert "fragments=1/3" in ds.scanner(filter="id = 1234").explain_plan()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.sampled_from([0, 1, 1023, 1024, 1025, 2500]),
    items=st.sampled_from([1, 100, 1024]),
    probe=st.lists(st.integers(-5, 60), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_rows_equal_full_scan(
    tmp_path_factory: pytest.TempPathFactory, n: int, items: int, probe: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, n)
    table = pa.table(
        {
            "v": pa.array(values, pa.int32(), mask=rng.random(n) < 0.1),
            "f": pa.array(values / 2 - 3, pa.float64()),
            "s": pa.array([f"k{x}" for x in values.tolist()], pa.string()),
        }
    )
    path = tmp_path_factory.mktemp("bf")
    ds = lance_ops.write_dataset(table, str(path), max_rows_per_file=1000)
    if n:
        ds.delete("v = 7")
    for column in ("v", "f", "s"):
        ds.create_scalar_index(column, "BLOOMFILTER", number_of_items=items, probability=0.01)
    ds = lance_ops.dataset(str(path))
    listed = ", ".join(str(p) for p in probe)
    strings = ", ".join(f"'k{p}'" for p in probe)
    for flt in [
        f"v = {probe[0]}",
        f"v IN ({listed})",
        "v IS NULL",
        f"f = {probe[0] / 2 - 3}",
        f"s IN ({strings})",
        f"v IN ({listed}) AND s = 'k{probe[-1]}'",
    ]:
        assert ds.to_table(filter=flt).equals(ds.to_table(filter=flt, use_scalar_index=False)), flt
    theirs = lance.dataset(str(path))
    assert theirs.to_table(filter=f"v = {probe[0]}").equals(
        theirs.to_table(filter=f"v = {probe[0]}", use_scalar_index=False)
    )


def test_parameters_as_pylance(tmp_path: Path) -> None:
    from lance_ops.indices import IndexConfig

    path = tmp_path / "ds"
    ds = lance_ops.write_dataset(pa.table({"x": pa.array(range(3000))}), str(path))
    ds.create_scalar_index("x", IndexConfig("bloomfilter", {"number_of_items": 1000, "probability": 0.01}))
    stats = lance.dataset(str(path)).stats.index_stats("x_idx")["indices"]
    assert stats == [{"type": "BloomFilter", "num_blocks": 3, "number_of_items": 1000, "probability": 0.01}]
    table, metadata, _ = _index_file(path, "x_idx")
    assert metadata[b"bloomfilter_probability"] == b"0.01"
    assert [len(b) for b in table.column("bloom_filter_data").to_pylist()] == [2048] * 3
    assert lance.dataset(str(path)).to_table(filter="x = 2500").num_rows == 1


@pytest.mark.parametrize(
    ("column", "params", "error"),
    [
        ("b", {}, IndexColumnTypeError),
        ("fsb", {}, IndexColumnTypeError),
        ("l", {}, IndexColumnTypeError),
        ("x", {"number_of_items": 0}, InvalidArgumentError),
        ("x", {"probability": 1.5}, InvalidArgumentError),
        ("x", {"probability": 0}, InvalidArgumentError),
        ("x", {"rows_per_zone": 10}, InvalidArgumentError),
    ],
)
def test_bad_input_commits_nothing(tmp_path: Path, column: str, params: dict, error: type) -> None:
    table = pa.table(
        {
            "x": pa.array(range(10)),
            "b": pa.array([True, False] * 5),
            "fsb": pa.array([b"abcd"] * 10, pa.binary(4)),
            "l": pa.array([[1]] * 10),
        }
    )
    ds = lance_ops.write_dataset(table, str(tmp_path / "ds"))
    with pytest.raises(error, match=column if error is IndexColumnTypeError else "."):
        ds.create_scalar_index(column, "BLOOMFILTER", **params)
    after = lance_ops.dataset(str(tmp_path / "ds"))
    assert after.version == 1 and not after.list_indices()
    assert lance.dataset(str(tmp_path / "ds")).version == 1


def test_days_append_optimize_compact(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    ds = lance_ops.write_dataset(_table(5000), str(path), max_rows_per_file=1000)
    ds.create_scalar_index("id", "BLOOMFILTER")
    # day 2: new rows, then optimize (twice: the second has nothing to do)
    lance_ops.write_dataset(_table(1500, start=5000), str(path), mode="append")
    ds = lance_ops.dataset(str(path))
    ds.optimize.optimize_indices()
    version = lance_ops.dataset(str(path)).version
    lance_ops.dataset(str(path)).optimize.optimize_indices()
    assert lance_ops.dataset(str(path)).version == version
    theirs = lance.dataset(str(path))
    stats = theirs.stats.index_stats("id_idx")
    assert stats["num_unindexed_rows"] == 0 and stats["indices"][0]["num_blocks"] == 6
    for flt in ["id = 5200", "id IN (3, 6499)"]:
        assert "(BloomFilter)" in theirs.scanner(filter=flt).explain_plan()
        assert theirs.to_table(filter=flt).num_rows == len(flt.split(",")), flt
        assert lance_ops.dataset(str(path)).to_table(filter=flt).equals(theirs.to_table(filter=flt))
    # day 3: compaction leaves the index as pylance does; scans still answer right
    lance_ops.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=3000)
    ds = lance_ops.dataset(str(path))
    theirs = lance.dataset(str(path))
    for flt in ["id = 5200", "id = 17"]:
        assert ds.to_table(filter=flt).equals(ds.to_table(filter=flt, use_scalar_index=False))
        assert theirs.to_table(filter=flt).equals(ds.to_table(filter=flt, use_scalar_index=False))
    # pylance extends the index we left behind
    lance.write_dataset(_table(10, start=9000), path, mode="append")
    lance.dataset(str(path)).optimize.optimize_indices()
    assert lance_ops.dataset(str(path)).to_table(filter="id = 9003").num_rows == 1


def test_float_zeros(tmp_path: Path) -> None:
    """0.0 and -0.0 hash differently; a query for either keeps the zones holding the other."""
    path = tmp_path / "ds"
    values = [-0.0 if i == 10 else 0.0 if i == 9000 else float(i) for i in range(12000)]
    ds = lance_ops.write_dataset(pa.table({"f": pa.array(values, pa.float64())}), str(path))
    ds.create_scalar_index("f", "BLOOMFILTER", number_of_items=4000)
    theirs = lance.dataset(str(path))
    for flt in ["f = 0.0", "f = -0.0", "f IN (0.0, 5.0)"]:
        want = theirs.to_table(filter=flt, use_scalar_index=False)
        assert lance_ops.dataset(str(path)).to_table(filter=flt).equals(want), flt
        assert want.num_rows >= 2, flt
