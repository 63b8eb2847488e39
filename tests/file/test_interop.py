"""Two-way interop with pylance 14 through the real codec (2.1 and 2.2).

Files we write are read by ``lance.file.LanceFileReader`` (read_all, read_range, take_rows),
and files pylance writes are read by us, for every primitive type with and without nulls,
all-null, at lengths 0, 1, 1023, 1024, 1025 and across several pages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")

VERSIONS = ["2.1", "2.2"]
LENGTHS = [0, 1, 1023, 1024, 1025]
NULLS = {"none": 0.0, "some": 0.3, "all": 1.0}

Generator = Callable[[np.random.Generator, int], pa.Array]


def _ints(dtype: str) -> Generator:
    info = np.iinfo(dtype)
    return lambda rng, n: pa.array(rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True))


def _within(data_type: pa.DataType, low: int, high: int) -> Generator:
    def make(rng: np.random.Generator, n: int) -> pa.Array:
        values = pa.array(rng.integers(low, high, n, dtype=np.int64))
        if pa.types.is_decimal(data_type):
            return values.cast(data_type)
        return values.cast(pa.int32() if data_type.bit_width == 32 else pa.int64()).view(data_type)

    return make


def _strings(data_type: pa.DataType) -> Generator:
    def make(rng: np.random.Generator, n: int) -> pa.Array:
        lengths = rng.integers(0, 24, n)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        data = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8).tobytes()
        large = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))
        return large.cast(data_type)

    return make


def _fixed_binary(width: int) -> Generator:
    def make(rng: np.random.Generator, n: int) -> pa.Array:
        data = rng.integers(0, 256, n * width, dtype=np.uint8).tobytes()
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(data)])

    return make


DAY_MS = 86_400_000
TYPES: dict[str, Generator] = {
    **{
        name: _ints(name)
        for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    },
    "float16": lambda rng, n: pa.array(rng.standard_normal(n).astype(np.float16)),
    "float32": lambda rng, n: pa.array(rng.standard_normal(n).astype(np.float32) * 1e3),
    "float64": lambda rng, n: pa.array(rng.standard_normal(n) * 1e9),
    "bool": lambda rng, n: pa.array(rng.random(n) < 0.5),
    "date32": _within(pa.date32(), -100_000, 100_000),
    "date64": lambda rng, n: pa.array(rng.integers(-1000, 1000, n) * DAY_MS).view(pa.date64()),
    "time32s": _within(pa.time32("s"), 0, 86_400),
    "time32ms": _within(pa.time32("ms"), 0, DAY_MS),
    "time64us": _within(pa.time64("us"), 0, DAY_MS * 1000),
    "time64ns": _within(pa.time64("ns"), 0, DAY_MS * 1_000_000),
    "ts_s": _within(pa.timestamp("s"), -(10**10), 10**10),
    "ts_ms_utc": _within(pa.timestamp("ms", "UTC"), -(10**13), 10**13),
    "ts_us_ny": _within(pa.timestamp("us", "America/New_York"), -(10**16), 10**16),
    "ts_ns_offset": _within(pa.timestamp("ns", "+05:30"), -(10**18), 10**18),
    "dur_s": _within(pa.duration("s"), -(10**12), 10**12),
    "dur_ms": _within(pa.duration("ms"), -(10**12), 10**12),
    "dur_us": _within(pa.duration("us"), -(10**12), 10**12),
    "dur_ns": _within(pa.duration("ns"), -(10**18), 10**18),
    "dec128": _within(pa.decimal128(24, 2), -(10**15), 10**15),
    "dec256": _within(pa.decimal256(40, 5), -(10**17), 10**17),
    "fsb3": _fixed_binary(3),
    "fsb16": _fixed_binary(16),
    "string": _strings(pa.string()),
    "binary": _strings(pa.binary()),
    "large_string": _strings(pa.large_string()),
    "large_binary": _strings(pa.large_binary()),
}


def _column(name: str, n: int, null_fraction: float, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    values = TYPES[name](rng, n)
    if null_fraction == 0.0:
        return values
    valid = rng.random(n) >= null_fraction
    return pa.compute.if_else(pa.array(valid, pa.bool_()), values, pa.nulls(n, values.type))


def _table(n: int, null_fraction: float, seed: int = 0, names: list[str] | None = None) -> pa.Table:
    names = names or list(TYPES)
    return pa.table({name: _column(name, n, null_fraction, seed + i) for i, name in enumerate(names)})


def _assert_tables_equal(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema.names == expected.schema.names
    for name in expected.schema.names:
        got, want = actual.column(name), expected.column(name)
        assert got.type == want.type, name
        assert got.combine_chunks().equals(want.combine_chunks()), name


def _take_indices(n: int) -> list[int]:
    if n == 0:
        return []
    picks = [0, n - 1, n // 2, 1023, 1024, 5, n // 3, 0]
    return [i for i in picks if i < n]


def _check_reads(reader, expected: pa.Table, num_rows: Callable[[], int]) -> None:
    """read_all, a read_range crossing the middle, and take_rows against ``expected``."""
    n = expected.num_rows
    assert num_rows() == n
    _assert_tables_equal(reader.read_all().to_table(), expected)
    start, count = n // 3, n - n // 3 - n // 5
    _assert_tables_equal(reader.read_range(start, count).to_table(), expected.slice(start, count))
    indices = _take_indices(n)
    _assert_tables_equal(reader.take_rows(indices).to_table(), expected.take(pa.array(indices, pa.int64())))


def _pylance_take_indices(indices: list[int]) -> list[int]:
    return sorted(set(indices))


def _write_ours(path: Path, table: pa.Table, version: str, batch_rows: int | None = None, **kwargs) -> str:
    with LanceFileWriter(str(path), table.schema, version=version, **kwargs) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return str(path)


def _write_theirs(path: Path, table: pa.Table, version: str, batch_rows: int | None = None, **kwargs) -> str:
    """Write with pylance; it cuts 2.1+ pages only between batches, so ``batch_rows`` sets page sizes."""
    with lance_file.LanceFileWriter(str(path), table.schema, version=version, **kwargs) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return str(path)


def _pylance_reads(path: str, expected: pa.Table) -> None:
    reader = lance_file.LanceFileReader(path)
    n = expected.num_rows
    assert reader.num_rows() == n
    _assert_tables_equal(reader.read_all().to_table(), expected)
    start, count = n // 3, n - n // 3 - n // 5
    _assert_tables_equal(reader.read_range(start, count).to_table(), expected.slice(start, count))
    indices = _pylance_take_indices(_take_indices(n))  # pylance wants sorted, unique indices
    _assert_tables_equal(reader.take_rows(indices).to_table(), expected.take(pa.array(indices, pa.int64())))


def _we_read(path: str, expected: pa.Table) -> None:
    reader = LanceFileReader(path)
    _check_reads(reader, expected, lambda: reader.num_rows)


@pytest.mark.parametrize("nulls", list(NULLS))
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_reads_ours(tmp_path: Path, version: str, n: int, nulls: str) -> None:
    table = _table(n, NULLS[nulls])
    _pylance_reads(_write_ours(tmp_path / "ours.lance", table, version), table)


@pytest.mark.parametrize("nulls", list(NULLS))
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("version", VERSIONS)
def test_we_read_pylance(tmp_path: Path, version: str, n: int, nulls: str) -> None:
    table = _table(n, NULLS[nulls])
    _we_read(_write_theirs(tmp_path / "theirs.lance", table, version), table)


@pytest.mark.parametrize("version", VERSIONS)
def test_multi_page_both_ways(tmp_path: Path, version: str) -> None:
    table = _table(3000, 0.2, seed=7)
    ours = _write_ours(
        tmp_path / "ours.lance", table, version, batch_rows=1000, data_cache_bytes=128, max_page_bytes=8192
    )
    pages = [len(c.pages) for c in LanceFileReader(ours).metadata().columns]
    assert min(pages) >= 3  # one page per flush at least
    if version == "2.0":  # 2.0 also cuts a flush by max_page_bytes (2.1+ do not, as pylance)
        assert pages[table.schema.names.index("dec256")] > 3
    _pylance_reads(ours, table)
    _we_read(ours, table)
    theirs = _write_theirs(tmp_path / "theirs.lance", table, version, batch_rows=400, data_cache_bytes=512)
    assert all(len(c.pages) > 1 for c in lance_file.LanceFileReader(theirs).metadata().columns)
    _we_read(theirs, table)
    reader = LanceFileReader(theirs)
    everywhere = np.random.default_rng(3).integers(0, 3000, 700)
    _assert_tables_equal(reader.take_rows(everywhere).to_table(), table.take(pa.array(everywhere)))


@pytest.mark.parametrize("version", VERSIONS)
def test_large_values_both_ways(tmp_path: Path, version: str) -> None:
    big = ["x" * 40_000, None, "", "y" * 70_000, "z"]
    table = pa.table(
        {"s": pa.array(big), "b": pa.array([v.encode() if v else None for v in big], pa.large_binary())}
    )
    _pylance_reads(_write_ours(tmp_path / "ours.lance", table, version), table)
    _we_read(_write_theirs(tmp_path / "theirs.lance", table, version), table)


@pytest.mark.parametrize(("version", "size"), [("2.1", 340), ("2.2", 342)])
def test_worked_example_bytes_match_pylance(tmp_path: Path, version: str, size: int) -> None:
    table = pa.table({"a": pa.array([1, 2, 3], pa.int32())})
    # without page statistics (pylance writes none) our file is pylance's, byte for byte
    ours = Path(_write_ours(tmp_path / "ours.lance", table, version, page_statistics=False)).read_bytes()
    theirs = Path(_write_theirs(tmp_path / "theirs.lance", table, version)).read_bytes()
    assert len(ours) == size
    assert ours == theirs


@given(
    name=st.sampled_from(sorted(TYPES)),
    null_fraction=st.sampled_from([0.0, 0.05, 0.5, 0.95, 1.0]),
    n=st.integers(0, 3000),
    version=st.sampled_from(VERSIONS),
    seed=st.integers(0, 2**16),
)
def test_property_round_trips(
    tmp_path_factory: pytest.TempPathFactory, name: str, null_fraction: float, n: int, version: str, seed: int
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    table = _table(n, null_fraction, seed, names=[name])
    ours = _write_ours(directory / "ours.lance", table, version, data_cache_bytes=4096)
    _pylance_reads(ours, table)
    _we_read(ours, table)
    theirs = _write_theirs(directory / "theirs.lance", table, version, batch_rows=700, data_cache_bytes=1024)
    _we_read(theirs, table)


def _nested_table(n: int, with_map: bool) -> pa.Table:
    rng = np.random.default_rng(11)
    ints = pa.array(rng.integers(-50, 50, n * 3, dtype=np.int32))
    offsets = pa.array(np.arange(0, n * 3 + 1, 3, dtype=np.int32))
    valid = pa.array(rng.random(n) > 0.2)
    columns = {
        "list": pa.ListArray.from_arrays(offsets, ints, mask=pa.compute.invert(valid)),
        "large_list": pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), ints.cast(pa.string())),
        "struct": pa.StructArray.from_arrays(
            [ints.slice(0, n), _column("string", n, 0.3, 1)], names=["x", "y"], mask=pa.compute.invert(valid)
        ),
        "fsl": pa.FixedSizeListArray.from_arrays(ints.cast(pa.float32()), 3),
        "uuid": pa.ExtensionArray.from_storage(pa.uuid(), _column("fsb16", n, 0.1, 2)),
    }
    if with_map:
        keys = ints.cast(pa.string())
        columns["map"] = pa.MapArray.from_arrays(offsets, keys, ints)
    return pa.table(columns)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [0, 1, 1500])
def test_nested_and_extension_types_both_ways(tmp_path: Path, version: str, n: int) -> None:
    table = _nested_table(n, with_map=version == "2.2")
    ours = _write_ours(tmp_path / "ours.lance", table, version, batch_rows=700, data_cache_bytes=1024)
    _pylance_reads(ours, table)
    _we_read(ours, table)
    _we_read(_write_theirs(tmp_path / "theirs.lance", table, version, batch_rows=700), table)
