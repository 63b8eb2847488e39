"""Shared round-trip harness for the 2.1 / 2.2 codec (modelled on Lance's ``testing.rs``).

:func:`round_trip` encodes an array into pages with
:func:`lance_ops.encoding.field_encoder.make_field_encoder` (one ``encode`` call per page of
``page_sizes`` rows), lays the page buffers out in one in-memory "file", then decodes
everything, the given slices and the given take indices through
:func:`lance_ops.encoding.field_decoder.make_field_decoder` with a recording :data:`Fetch`, and
compares with the input. It can also assert which layout / compression the strategy chose.

:func:`pylance_pages` parses the pages of a file written by pylance (test oracle only).
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops._proto import file2_pb2
from lance_ops.encoding.api import FileVersion, PageInfo
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.encoding.field_encoder import make_field_encoder

ALIGN = 64


@dataclass
class MemoryFile:
    """Page buffers laid out back to back (64-byte aligned) plus the pages that describe them."""

    data: bytearray = field(default_factory=bytearray)
    columns: list[list[PageInfo]] = field(default_factory=list)
    fetched: list[tuple[int, int]] = field(default_factory=list)

    def add(self, buffer: bytes | memoryview | np.ndarray) -> tuple[int, int]:
        self.data += b"\0" * (-len(self.data) % ALIGN)
        raw = buffer.tobytes() if isinstance(buffer, np.ndarray) else bytes(buffer)
        pos = len(self.data)
        self.data += raw
        return pos, len(raw)

    def add_external(self, buffers: Sequence[memoryview]) -> list[int]:
        """The codec's :data:`~lance_ops.encoding.api.WriteExternal`: blob bytes, one buffer each."""
        return [self.add(buffer)[0] for buffer in buffers]

    def fetch(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        view = memoryview(bytes(self.data))
        out = []
        for pos, size in ranges:
            if pos < 0 or size < 0 or pos + size > len(view):
                raise AssertionError(f"fetch of ({pos}, {size}) is outside the {len(view)}-byte file")
            self.fetched.append((pos, size))
            out.append(view[pos : pos + size])
        return out


def encode_to_memory(
    field_: pa.Field, pages: Iterable[pa.Array], version: FileVersion
) -> tuple[MemoryFile, list[list[pb.PageLayout]]]:
    encoder = make_field_encoder(field_, version)
    mem = MemoryFile(columns=[[] for _ in range(encoder.num_columns)])
    layouts: list[list[pb.PageLayout]] = [[] for _ in range(encoder.num_columns)]
    first_row = 0
    for page in pages:
        for col, encoded in enumerate(encoder.encode(page, mem.add_external)):
            for ep in encoded:
                bufs = tuple(mem.add(b) for b in ep.buffers)
                mem.columns[col].append(PageInfo(ep.layout, bufs, ep.num_rows, first_row))
                layouts[col].append(ep.layout)
        first_row += len(page)
    return mem, layouts


def split_pages(array: pa.Array, page_sizes: Sequence[int] | None) -> list[pa.Array]:
    if not page_sizes:
        return [array]
    out, pos = [], 0
    for size in page_sizes:
        out.append(array.slice(pos, size))
        pos += size
    if pos < len(array):
        out.append(array.slice(pos))
    return out


def assert_same(actual: pa.Array, expected: pa.Array, what: str) -> None:
    if isinstance(expected, pa.ChunkedArray):
        expected = expected.combine_chunks()
    assert actual.type == expected.type, f"{what}: type {actual.type} != {expected.type}"
    assert len(actual) == len(expected), f"{what}: {len(actual)} rows != {len(expected)}"
    actual.validate(full=True)
    if not actual.equals(expected):
        assert actual.to_pylist() == expected.to_pylist(), f"{what}: values differ"


def describe(layout: pb.PageLayout) -> str:
    """``"<layout>/<value compression path>"``, e.g. ``mini_block_layout/general/inline_bitpacking``."""
    kind = layout.WhichOneof("layout")
    inner = getattr(layout, kind)
    parts = [kind]
    if kind == "mini_block_layout" and inner.HasField("dictionary"):
        parts.append("dictionary")
    enc = getattr(inner, "value_compression", None)
    while enc is not None and enc.WhichOneof("compression"):
        name = enc.WhichOneof("compression")
        parts.append(name)
        msg = getattr(enc, name)
        enc = getattr(msg, "values", None) if name != "variable" else None
        if enc is not None and not isinstance(enc, pb.CompressiveEncoding):
            enc = None
    if kind == "constant_layout":
        parts.append("inline" if inner.HasField("inline_value") else "no-inline")
    return "/".join(parts)


@dataclass
class RoundTrip:
    layouts: list[list[pb.PageLayout]]
    memory: MemoryFile

    def descriptions(self) -> list[str]:
        return [describe(layout) for col in self.layouts for layout in col]


def round_trip(
    array: pa.Array,
    version: FileVersion | str = FileVersion.V2_2,
    *,
    metadata: Mapping[str, str] | None = None,
    page_sizes: Sequence[int] | None = None,
    slices: Sequence[tuple[int, int]] = (),
    takes: Sequence[Sequence[int]] = (),
    expect: str | Callable[[str], bool] | None = None,
    nullable: bool = True,
    field: pa.Field | None = None,
) -> RoundTrip:
    """Encode, decode (whole, slices, takes), compare; optionally check the chosen encoding.

    ``expect`` is matched against every page's :func:`describe` string: a plain string must
    be a prefix of it, a callable must return true. ``field`` overrides the column's field
    (metadata of nested leaves).
    """
    version = FileVersion.parse(version)
    field_ = field or pa.field("c", array.type, nullable=nullable, metadata=metadata)
    mem, layouts = encode_to_memory(field_, split_pages(array, page_sizes), version)
    result = RoundTrip(layouts, mem)
    if expect is not None:
        for desc in result.descriptions():
            ok = expect(desc) if callable(expect) else desc.startswith(expect)
            assert ok, f"unexpected encoding {desc!r} (wanted {expect!r})"
    decoder = make_field_decoder(field_, mem.columns, version)
    n = len(array)
    assert_same(decoder.read(mem.fetch, range(n)), array, "full read")
    for start, stop in slices:
        start, stop = max(0, min(start, n)), max(0, min(stop, n))
        if start < stop:
            assert_same(
                decoder.read(mem.fetch, range(start, stop)),
                array.slice(start, stop - start),
                f"slice {start}:{stop}",
            )
    for take in takes:
        idx = np.unique(np.asarray([i for i in take if 0 <= i < n], dtype=np.int64))
        if len(idx):
            assert_same(decoder.read(mem.fetch, idx), array.take(pa.array(idx)), f"take {idx[:8]}...")
    return result


FIXED_TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    pa.timestamp("s"),
    pa.timestamp("ms", tz="UTC"),
    pa.timestamp("us", tz="America/New_York"),
    pa.timestamp("ns"),
    pa.duration("s"),
    pa.duration("ns"),
    pa.decimal128(10, 2),
    pa.decimal256(40, 2),
    pa.binary(3),
    pa.binary(16),
    pa.binary(300),
]
VARIABLE_TYPES = [pa.string(), pa.binary(), pa.large_string(), pa.large_binary()]


def make_array(
    dtype: pa.DataType, n: int, null_rate: float, rng: np.random.Generator, distinct: int = 0
) -> pa.Array:
    """Random values of ``dtype``; ``distinct > 0`` draws from that many values (runs, dictionaries)."""
    mask = rng.random(n) < null_rate if null_rate else None
    pool = n if distinct == 0 else distinct
    pick = rng.integers(0, max(pool, 1), n)
    if pa.types.is_boolean(dtype):
        return pa.array(pick % 2 == 1, dtype, mask=mask)
    if pa.types.is_decimal(dtype):
        vals = [decimal.Decimal(int(x) - pool // 2).scaleb(-dtype.scale) for x in pick]
        return pa.array(vals, dtype, mask=mask)
    if pa.types.is_fixed_size_binary(dtype):
        table = rng.integers(0, 256, (max(pool, 1), dtype.byte_width), dtype=np.uint8)
        return pa.array([bytes(table[i]) for i in pick], dtype, mask=mask)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return pa.array([f"v{i}-{'x' * (i % 7)}" for i in pick], dtype, mask=mask)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return pa.array([bytes([i % 256]) * (i % 9) for i in pick], dtype, mask=mask)
    width = dtype.bit_width // 8
    raw = rng.integers(0, 256, (max(pool, 1), width), dtype=np.uint8)[pick].reshape(-1)
    if pa.types.is_floating(dtype):
        raw = rng.normal(size=max(pool, 1)).astype(f"f{width}")[pick].view(np.uint8)
    elif pa.types.is_date64(dtype):
        raw = (rng.integers(-(10**5), 10**5, max(pool, 1)) * 86_400_000)[pick].view(np.uint8)
    elif pa.types.is_time(dtype):
        day = 86_400 * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[dtype.unit]
        raw = rng.integers(0, day, max(pool, 1)).astype(f"i{width}")[pick].view(np.uint8)
    return _with_mask(pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(raw.tobytes())]), mask)


def _with_mask(arr: pa.Array, mask: np.ndarray | None) -> pa.Array:
    if mask is None or not mask.any():
        return arr
    bitmap = pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])


@st.composite
def flat_arrays(draw: st.DrawFn) -> pa.Array:
    """A (sliced) array of a random fixed- or variable-width type, null density and length."""
    dtype = draw(st.sampled_from(FIXED_TYPES + VARIABLE_TYPES))
    n = draw(st.sampled_from([0, 1, 7, 100, 1023, 1024, 1025, 3000]))
    null_rate = draw(st.sampled_from([0.0, 0.01, 0.5, 1.0]))
    distinct = draw(st.sampled_from([0, 1, 3, 300]))
    arr = make_array(dtype, n, null_rate, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), distinct)
    start = draw(st.integers(0, n))
    return arr.slice(start, draw(st.integers(0, n - start)))


# --- hypothesis strategies -----------------------------------------------------------------------

LEAF_TYPES = [pa.int32(), pa.string(), pa.bool_(), pa.large_binary()]


def _nested_types(depth: int) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(LEAF_TYPES)
    if depth == 0:
        return leaf
    inner = _nested_types(depth - 1)
    return st.one_of(
        leaf,
        inner.map(pa.list_),
        inner.map(pa.large_list),
        st.lists(inner, min_size=1, max_size=3).map(
            lambda ts: pa.struct([(f"f{i}", t) for i, t in enumerate(ts)])
        ),
    )


def _values(dtype: pa.DataType, draw: st.DrawFn, null_rate: float) -> object:
    if draw(st.floats(0, 1)) < null_rate:
        return None
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [_values(dtype.value_type, draw, null_rate) for _ in range(draw(st.integers(0, 3)))]
    if pa.types.is_struct(dtype):
        return {
            dtype.field(i).name: _values(dtype.field(i).type, draw, null_rate)
            for i in range(dtype.num_fields)
        }
    if pa.types.is_int32(dtype):
        return draw(st.integers(-(2**31), 2**31 - 1))
    if pa.types.is_boolean(dtype):
        return draw(st.booleans())
    if pa.types.is_string(dtype):
        return draw(st.text(max_size=5))
    return draw(st.binary(max_size=5))


@st.composite
def nested_arrays(draw: st.DrawFn) -> pa.Array:
    dtype = draw(_nested_types(3))
    null_rate = draw(st.sampled_from([0.0, 0.2, 0.9]))
    rows = [_values(dtype, draw, null_rate) for _ in range(draw(st.integers(0, 12)))]
    arr = pa.array(rows, dtype)
    start = draw(st.integers(0, len(arr)))
    return arr.slice(start, draw(st.integers(0, len(arr) - start)))


# --- pylance oracle -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PylancePage:
    layout: pb.PageLayout
    buffers: list[bytes]
    length: int
    priority: int


def pylance_page_infos(
    path: str,
) -> tuple[list[list[PageInfo]], Callable[[Sequence[tuple[int, int]]], list[memoryview]]]:
    """Pages of a pylance file as :class:`PageInfo` with absolute positions, and a Fetch over the file."""
    with open(path, "rb") as f:
        data = memoryview(f.read())
    _, cmo, _, _, n_cols, _, _, _ = struct.unpack("<QQQIIHH4s", data[-40:])
    columns = []
    for i in range(n_cols):
        pos, size = struct.unpack_from("<QQ", data, cmo + 16 * i)
        meta = file2_pb2.ColumnMetadata.FromString(data[pos : pos + size])
        col = []
        for page in meta.pages:
            layout = pb.PageLayout.FromString(any_pb2.Any.FromString(page.encoding.direct.encoding).value)
            bufs = tuple(zip(page.buffer_offsets, page.buffer_sizes, strict=True))
            col.append(PageInfo(layout, bufs, page.length, page.priority))
        columns.append(col)

    def fetch(ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        return [data[p : p + s] for p, s in ranges]

    return columns, fetch


def pylance_pages(path: str) -> list[list[PylancePage]]:
    """Every page of every column of a pylance-written 2.1 / 2.2 file."""
    with open(path, "rb") as f:
        data = f.read()
    _, cmo, _, _, n_cols, _, _, magic = struct.unpack("<QQQIIHH4s", data[-40:])
    assert magic == b"LANC"
    out = []
    for i in range(n_cols):
        pos, size = struct.unpack_from("<QQ", data, cmo + 16 * i)
        meta = file2_pb2.ColumnMetadata.FromString(data[pos : pos + size])
        col = []
        for page in meta.pages:
            wrapped = any_pb2.Any.FromString(page.encoding.direct.encoding)
            layout = pb.PageLayout.FromString(wrapped.value)
            bufs = [data[o : o + s] for o, s in zip(page.buffer_offsets, page.buffer_sizes, strict=True)]
            col.append(PylancePage(layout, bufs, page.length, page.priority))
        out.append(col)
    return out


def pylance_write(
    path: str,
    array: pa.Array,
    version: str,
    metadata: Mapping[str, str] | None = None,
    field: pa.Field | None = None,
) -> None:
    """Write ``array`` as column ``c`` with pylance (``field`` overrides the column's field)."""
    from lance.file import LanceFileWriter

    field_ = field or pa.field("c", array.type, metadata=metadata)
    with LanceFileWriter(path, version=version) as writer:
        writer.write_batch(pa.table({"c": array}, schema=pa.schema([field_])))


def pylance_read(path: str) -> pa.Array:
    from lance.file import LanceFileReader

    return LanceFileReader(path).read_all().to_table().column("c").combine_chunks()
