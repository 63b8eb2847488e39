"""The codec corpus: every type family × forced ``lance-encoding:*`` options × 2.1 / 2.2.

Each case is checked in both directions against pylance 14:

* ``test_pylance_writes_we_read``: pylance writes the case; we read it whole, as a range
  crossing the 1 024-row boundary and by ``take_rows``, and compare with the input;
* ``test_we_write_pylance_reads``: we write the case; pylance reads it whole and by
  ``take_rows`` and must see the input.

A case pylance itself refuses to write (e.g. mini-block values too large for a 2.1 chunk)
is skipped in the first direction, and in the second must be refused by us too with a typed
:class:`~lance_ops.errors.LanceOpsError` rather than produce a file pylance cannot open.

Out of scope here (owned elsewhere): dictionary-typed Arrow columns, ``lance-encoding:blob``
columns and 2.0 / 0.1 files — none of them is generated.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.errors import LanceOpsError
from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop
lance_file = pytest.importorskip("lance.file")

N = 1500
VERSIONS = ("2.1", "2.2")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _with_nulls(values: list[object], every: int = 7) -> list[object]:
    return [None if i % every == 3 else v for i, v in enumerate(values)]


def _ints(dtype: str) -> pa.Array:
    info = np.iinfo(dtype)
    values = _rng(1).integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    return pa.array(_with_nulls(values.tolist()), pa.from_numpy_dtype(np.dtype(dtype)))


def _runs() -> pa.Array:
    return pa.array(np.repeat(np.arange(5, dtype=np.int32), [300, 1, 700, 256, 243]))


def _floats(dtype: str) -> pa.Array:
    values = _rng(2).normal(size=N).astype(dtype)
    return pa.array(_with_nulls(values.tolist()), pa.from_numpy_dtype(np.dtype(dtype)))


def _temporal(data_type: pa.DataType, high: int) -> pa.Array:
    values = _rng(3).integers(0, high, N).tolist()
    storage = pa.int32() if data_type.bit_width == 32 else pa.int64()
    return pa.array(_with_nulls(values), storage).cast(data_type)


def _decimals(data_type: pa.DataType) -> pa.Array:
    values = [decimal.Decimal(int(x)) / 100 for x in _rng(4).integers(-(10**8), 10**8, N)]
    return pa.array(_with_nulls(values), data_type)


def _words(distinct: int, length: int, seed: int = 5) -> list[str]:
    rng = _rng(seed)
    pool = [
        "".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(0, length + 1)))
        for _ in range(distinct)
    ]
    return [pool[i] for i in rng.integers(0, distinct, N)]


def _strings(data_type: pa.DataType, distinct: int = N, length: int = 20) -> pa.Array:
    words = _words(distinct, length)
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return pa.array(_with_nulls([w.encode() for w in words]), data_type)
    return pa.array(_with_nulls(list(words)), data_type)


def _big_binary() -> pa.Array:
    rng = _rng(6)
    return pa.array([None if i % 4 == 1 else rng.bytes(40_000) for i in range(12)], pa.large_binary())


def _over_256_bytes(n: int) -> pa.Array:
    data = _rng(15).bytes(300 * n)
    return pa.array([data[i * 300 : (i + 1) * 300] for i in range(n)], pa.large_binary())


def _fixed_binary(width: int) -> pa.Array:
    rng = _rng(7)
    return pa.array(_with_nulls([rng.bytes(width) for _ in range(N)]), pa.binary(width))


def _lists(list_type: Callable[[pa.DataType], pa.DataType], item: pa.Array) -> pa.Array:
    rng = _rng(8)
    lengths = rng.integers(0, 5, N)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    items = item.slice(0, int(offsets[-1])) if len(item) >= offsets[-1] else pa.concat_arrays([item] * 4)
    items = items.slice(0, int(offsets[-1]))
    mask = pa.array([i % 9 == 4 for i in range(N)])
    cls = pa.LargeListArray if list_type is pa.large_list else pa.ListArray
    offs = pa.array(offsets, pa.int64() if list_type is pa.large_list else pa.int32())
    return cls.from_arrays(offs, items, mask=mask)


def _fixed_lists(item: pa.Array, size: int) -> pa.Array:
    values = (
        item.slice(0, N * size)
        if len(item) >= N * size
        else pa.concat_arrays([item] * (N * size // len(item) + 1))
    )
    return pa.FixedSizeListArray.from_arrays(
        values.slice(0, N * size), size, mask=pa.array([i % 11 == 5 for i in range(N)])
    )


def _struct() -> pa.Array:
    return pa.StructArray.from_arrays(
        [_ints("int32"), _strings(pa.string())],
        names=["a", "b"],
        mask=pa.array([i % 13 == 6 for i in range(N)]),
    )


def _map() -> pa.Array:
    rng = _rng(9)
    lengths = rng.integers(0, 4, N)
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))), pa.int32())
    total = int(lengths.sum())
    keys = pa.array(_words(50, 6, seed=10)[:total] * 3).slice(0, total)
    values = pa.array(rng.integers(0, 1000, total), pa.int32())
    return pa.MapArray.from_arrays(offsets, keys, values)


def _nested() -> pa.Array:
    inner = _lists(pa.list_, pa.array(np.arange(8 * N), pa.int64()))
    struct = pa.StructArray.from_arrays([inner, _strings(pa.string())], names=["xs", "s"])
    return _lists(pa.list_, struct)


FAMILIES: dict[str, Callable[[], pa.Array]] = {
    **{
        t: (lambda t=t: _ints(t))
        for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    },
    "int32 runs": _runs,
    **{t: (lambda t=t: _floats(t)) for t in ("float16", "float32", "float64")},
    "bool": lambda: pa.array(_with_nulls([bool(x) for x in _rng(11).integers(0, 2, N)])),
    "decimal128": lambda: _decimals(pa.decimal128(12, 2)),
    "decimal256": lambda: _decimals(pa.decimal256(40, 2)),
    "date32": lambda: _temporal(pa.date32(), 30_000),
    "timestamp us UTC": lambda: _temporal(pa.timestamp("us", tz="UTC"), 2**50),
    "timestamp ns": lambda: _temporal(pa.timestamp("ns"), 2**60),
    "time64 us": lambda: _temporal(pa.time64("us"), 86_400_000_000),
    "all-null int32": lambda: pa.nulls(N, pa.int32()),
    "string": lambda: _strings(pa.string()),
    "string low-cardinality": lambda: _strings(pa.string(), distinct=20),
    "large_string": lambda: _strings(pa.large_string(), length=60),
    "binary": lambda: _strings(pa.binary()),
    "large_binary": lambda: _strings(pa.large_binary()),
    "large_binary 40 KB": _big_binary,
    "fixed_size_binary 16": lambda: _fixed_binary(16),
    "fixed_size_binary 300": lambda: _fixed_binary(300),
    "list<int32>": lambda: _lists(pa.list_, pa.array(np.arange(4 * N), pa.int32())),
    "large_list<string>": lambda: _lists(pa.large_list, _strings(pa.string())),
    "fixed_size_list<float32, 4>": lambda: _fixed_lists(_floats("float32"), 4),
    "struct<int32, string>": _struct,
    "struct<int32, float64> valid children": lambda: pa.StructArray.from_arrays(
        [pa.array(np.arange(N, dtype=np.int32)), pa.array(_rng(16).normal(size=N))],
        names=["a", "b"],
        mask=pa.array([i % 13 == 6 for i in range(N)]),
    ),
    "list<struct<list<int32>>> null structs": lambda: pa.array(
        [[None], [], None, [{"f0": [1, 2]}, None]] * (N // 4),
        pa.list_(pa.struct([("f0", pa.list_(pa.int32()))])),
    ),
    "map<string, int32>": _map,
    "string 10 KB": lambda: pa.array(_with_nulls(["s" * (10_000 + i) for i in range(40)], every=5)),
    "date64": lambda: pa.array(
        _with_nulls([int(x) * 86_400_000 for x in _rng(12).integers(0, 20_000, N)]), pa.date64()
    ),
    "time32 ms": lambda: _temporal(pa.time32("ms"), 86_400_000),
    "duration ns": lambda: _temporal(pa.duration("ns"), 2**60),
    "list<bool>": lambda: _lists(pa.list_, pa.array([bool(x) for x in _rng(13).integers(0, 2, 4 * N)])),
    "fixed_size_list<bool, 3>": lambda: _fixed_lists(
        pa.array([bool(x) for x in _rng(14).integers(0, 2, 3 * N)]), 3
    ),
    "list<large_binary 300 B>": lambda: _lists(pa.list_, _over_256_bytes(4 * N)),
    "list<fixed_size_list<float32, 2>>": lambda: _lists(pa.list_, _fixed_lists(_floats("float32"), 2)),
    "list<struct<list<int64>, string>>": _nested,
}

STRUCTURAL = ({"structural-encoding": "miniblock"}, {"structural-encoding": "fullzip"})
GENERAL = ({"compression": "none"}, {"compression": "zstd"}, {"compression": "lz4"})
COMMON: tuple[dict[str, str], ...] = (
    {},
    *STRUCTURAL,
    *GENERAL,
    {"structural-encoding": "fullzip", "compression": "zstd"},
    {"structural-encoding": "miniblock", "compression": "zstd", "compression-level": "9"},
    {"general": "on"},
)
NUMERIC = (
    {"bss": "on"},
    {"bss": "off"},
    {"rle-threshold": "0.9"},
    {"rle-threshold": "0.9", "compression": "lz4"},
)
TEXT = (
    {"compression": "fsst"},
    {"structural-encoding": "fullzip", "compression": "fsst"},
    {"dict-divisor": "1", "dict-size-ratio": "1.0"},
    {"dict-divisor": "1", "dict-size-ratio": "1.0", "dict-values-compression": "zstd"},
    {"minichunk-size": "65536"},
)


def _options_for(family: str) -> tuple[dict[str, str], ...]:
    if family.startswith("struct"):
        return (*COMMON, {"packed": "true"}, {"packed": "true", "structural-encoding": "fullzip"})
    if family.startswith(("int", "uint", "float", "date", "timestamp", "time64", "decimal")):
        return COMMON + NUMERIC
    if "string" in family or family in ("binary", "large_binary"):
        return COMMON + TEXT
    return COMMON


@dataclass(frozen=True)
class Case:
    """One corpus entry; ``paged`` writes the rows as three batches into pages of at most
    ``PAGE_BYTES`` (flushed at ``PAGE_BYTES`` of buffered data), so reads cross pages."""

    family: str
    options: Mapping[str, str]
    version: str
    paged: bool = False

    @property
    def id(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items()) or "default"
        return f"{self.version}|{self.family}|{opts}" + ("|paged" if self.paged else "")

    def write(self, writer_class: Any, path: str, table: pa.Table) -> None:
        sizes = {"max_page_bytes": PAGE_BYTES, "data_cache_bytes": PAGE_BYTES} if self.paged else {}
        with writer_class(path, table.schema, version=self.version, **sizes) as writer:
            if not self.paged:
                writer.write_batch(table)
                return
            third = -(-table.num_rows // 3)
            for start in range(0, table.num_rows, third):
                writer.write_batch(table.slice(start, third))

    def table(self) -> pa.Table:
        array = FAMILIES[self.family]()
        metadata = {f"lance-encoding:{k}": v for k, v in self.options.items()}
        field = pa.field("c", array.type, metadata=metadata or None)
        return pa.table({"c": array}, schema=pa.schema([field]))


PAGE_BYTES = 8192
PAGED_OPTIONS: tuple[dict[str, str], ...] = ({}, *STRUCTURAL)
CASES = [
    Case(family, options, version, paged)
    for version in VERSIONS
    for family in FAMILIES
    for paged, choices in ((False, _options_for(family)), (True, PAGED_OPTIONS))
    for options in choices
    if not (family.startswith("map") and version == "2.1")  # maps need 2.2
]


def _take_indices(n: int) -> list[int]:
    picks = {0, n - 1, n // 2, 1023, 1024, 1025, 7, 8, 100}
    return sorted(i for i in picks if 0 <= i < n)


def _assert_same(got: pa.Table, expected: pa.Table, what: str) -> None:
    got = got.cast(expected.schema) if got.schema != expected.schema else got
    assert got.equals(expected), f"{what}: read back differs"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pylance_writes_we_read(case: Case, tmp_path: Path) -> None:
    table = case.table()
    path = str(tmp_path / "p.lance")
    try:
        case.write(lance_file.LanceFileWriter, path, table)
    except (OSError, ValueError, RuntimeError) as exc:
        pytest.skip(f"pylance refuses to write this case: {exc}")
    reader = LanceFileReader(path)
    n = table.num_rows
    _assert_same(reader.read_all().to_table(), table, "read_all")
    start = min(1000, max(n - 1, 0))
    _assert_same(reader.read_range(start, n - start).to_table(), table.slice(start), "read_range")
    indices = _take_indices(n)
    _assert_same(reader.take_rows(indices).to_table(), table.take(indices), "take_rows")


def _pylance_accepts(case: Case, table: pa.Table, tmp_path: Path) -> bool:
    try:
        case.write(lance_file.LanceFileWriter, str(tmp_path / "probe.lance"), table)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # pylance's Rust panics surface as a BaseException
        return False
    return True


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_we_write_pylance_reads(case: Case, tmp_path: Path) -> None:
    table = case.table()
    path = str(tmp_path / "o.lance")
    try:
        case.write(LanceFileWriter, path, table)
    except LanceOpsError:
        if _pylance_accepts(case, table, tmp_path):
            raise
        return  # both refuse: no file is the right outcome
    reader = lance_file.LanceFileReader(path)
    _assert_same(reader.read_all().to_table(), table, "pylance read_all")
    indices = _take_indices(table.num_rows)
    _assert_same(reader.take_rows(indices).to_table(), table.take(indices), "pylance take_rows")
