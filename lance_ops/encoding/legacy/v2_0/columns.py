"""2.0 fields over columns: every Lance field owns a column, parents included, in pre-order.

* a one-column field (primitive, fixed-size list, string/binary, dictionary, packed struct,
  blob) stores its values, one page per flush (:mod:`.strategy`);
* a struct owns a header column holding a single ``struct{}`` page written when the file is
  closed (``length`` = number of struct values, no buffers), then its children's columns; 2.0
  has no struct validity;
* a list / large list owns an offsets column (``List{offsets, null_offset_adjustment,
  num_items}``, see :mod:`.offsets`), then the columns of its items. Offsets page ``k`` owns the
  ``num_items`` items following those of pages ``0 .. k - 1``; item pages are cut on their own.

Each encode call (one writer flush) gives one page per column, except that a flush of a single
array is cut like pylance cuts it: every values column whose values exceed ``max_page_bytes``
is split on its own into ``ceil(nbytes / max_page_bytes)`` pages of equal row counts (a list's
offsets column never is, its items column may be).

Page lengths count values at the column's level (rows, lists, items), and every read works on
sorted, unique value indices at that level: a list turns its row indices into item indices
for its child. Decoded pages are cached one per column, so reading batch after batch decodes
each page once.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.api import (
    EncodedPage,
    Fetch,
    FieldDecoder,
    FieldEncoder,
    PageInfo,
    WriteExternal,
)
from lance_ops.encoding.compression import dictionary
from lance_ops.encoding.legacy.v2_0 import blob
from lance_ops.encoding.legacy.v2_0.flat import encode_flat
from lance_ops.encoding.legacy.v2_0.nullable import encode_nullable
from lance_ops.encoding.legacy.v2_0.offsets import decode_offsets, encode_offsets
from lance_ops.encoding.legacy.v2_0.page import BufferSink, PageBuffers, corrupt, decode, validity
from lance_ops.encoding.legacy.v2_0.strategy import encode_values
from lance_ops.encoding.options import EncodingOptions, flag_set, is_blob_field
from lance_ops.encoding.structural.repdef import is_packed_struct
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedFeatureError

Decoded = TypeVar("Decoded")
LEGACY_PACKED_KEY = b"packed"


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype)


def is_packed(field: pa.Field) -> bool:
    """A struct stored row-major in one column (metadata ``packed: true`` or ``lance-encoding:packed``)."""
    legacy_flag = (field.metadata or {}).get(LEGACY_PACKED_KEY, b"").strip().lower()
    return is_packed_struct(field) or (pa.types.is_struct(field.type) and legacy_flag == b"true")


def _is_header_struct(field: pa.Field) -> bool:
    return pa.types.is_struct(field.type) and not is_packed(field)


def num_columns(field: pa.Field) -> int:
    """Columns a field owns in a 2.0 file."""
    dtype = field.type
    if _is_header_struct(field):
        return 1 + sum(num_columns(dtype.field(i)) for i in range(dtype.num_fields))
    if _is_list(dtype):
        return 1 + num_columns(dtype.value_field)
    return 1


# --------------------------------------------------------------------------- writing

Pages = list[list[EncodedPage]]


@dataclass(frozen=True)
class WriteOptions:
    """What the file writer lends an encode call: the out-of-line writer and the page size cap."""

    external: WriteExternal | None
    max_page_bytes: int | None

    def pieces(self, array: pa.Array) -> list[pa.Array]:
        """``array`` cut into ``ceil(nbytes / max_page_bytes)`` slices of equal row counts."""
        if self.max_page_bytes is None or array.nbytes <= self.max_page_bytes:
            return [array]
        rows = math.ceil(len(array) / math.ceil(array.nbytes / self.max_page_bytes))
        return [array.slice(start, rows) for start in range(0, len(array), rows)]


class _Node(ABC):
    num_columns: int

    @abstractmethod
    def encode(self, array: pa.Array, write: WriteOptions) -> Pages: ...

    def finish(self) -> Pages:
        return [[] for _ in range(self.num_columns)]

    def column_encodings(self) -> list[pb.ColumnEncoding]:
        encoding = pb.ColumnEncoding()
        encoding.values.SetInParent()
        return [encoding] * self.num_columns


class _ValuesNode(_Node):
    num_columns = 1

    def __init__(self, field: pa.Field) -> None:
        self.options = EncodingOptions.from_metadata(field.metadata, field.type)

    def encode(self, array: pa.Array, write: WriteOptions) -> Pages:
        return [[self._page(piece) for piece in write.pieces(array)]]

    def _page(self, array: pa.Array) -> EncodedPage:
        sink = BufferSink()
        encoding = encode_values(array, sink, self.options)
        return EncodedPage(tuple(sink.buffers), encoding, len(array))


class _BlobNode(_Node):
    num_columns = 1

    def __init__(self, field: pa.Field) -> None:
        # Checked once values arrive: pylance's 2.0 writer accepts (and reads back) such a
        # field in a file without rows.
        self.refusal = (
            None
            if pa.types.is_large_binary(field.type)
            else SchemaError(f"blob field {field.name!r} must be large_binary, not {field.type}")
        )

    def encode(self, array: pa.Array, write: WriteOptions) -> Pages:
        if self.refusal is not None and len(array):
            raise self.refusal
        if write.external is None:
            raise UnsupportedFeatureError("blob values need a file writer to store them out of line")
        sink = BufferSink()
        encoding = blob.encode_blob(array, sink, write.external)
        return [[EncodedPage(tuple(sink.buffers), encoding, len(array))]]

    def column_encodings(self) -> list[pb.ColumnEncoding]:
        return [blob.blob_column_encoding()]


class _StructNode(_Node):
    def __init__(self, field: pa.Field) -> None:
        self.children = [_node(field.type.field(i)) for i in range(field.type.num_fields)]
        self.num_columns = 1 + sum(child.num_columns for child in self.children)
        self.num_values = 0
        self.refusal = _unreadable_marker(field, "blob")

    def encode(self, array: pa.Array, write: WriteOptions) -> Pages:
        if self.refusal is not None and len(array):
            raise self.refusal
        if array.null_count:
            raise UnsupportedFeatureError("Lance file version 2.0 does not encode struct validity")
        self.num_values += len(array)
        out: Pages = [[]]
        for i, child in enumerate(self.children):
            out.extend(child.encode(array.field(i), write))
        return out

    def finish(self) -> Pages:
        header = EncodedPage((), pb.ArrayEncoding(struct=pb.SimpleStruct()), self.num_values)
        return [[header], *(pages for child in self.children for pages in child.finish())]

    def column_encodings(self) -> list[pb.ColumnEncoding]:
        return super().column_encodings()[:1] + [e for c in self.children for e in c.column_encodings()]


class _ListNode(_Node):
    def __init__(self, field: pa.Field) -> None:
        self.child = _node(field.type.value_field)
        self.num_columns = 1 + self.child.num_columns
        self.refusal = _unreadable_marker(field, "packed", "blob")

    def encode(self, array: pa.Array, write: WriteOptions) -> Pages:
        if self.refusal is not None and len(array):
            raise self.refusal
        valid = validity(array)
        lengths = np.where(valid, np.diff(array.offsets.to_numpy(zero_copy_only=False)), 0)
        stored, adjustment = encode_offsets(lengths, valid)
        sink = BufferSink()
        encoding = pb.ArrayEncoding()
        encoding.list.offsets.CopyFrom(encode_nullable(pa.array(stored, pa.uint64()), sink, encode_flat))
        encoding.list.null_offset_adjustment = adjustment
        encoding.list.num_items = int(lengths.sum())
        offsets_page = EncodedPage(tuple(sink.buffers), encoding, len(array))
        return [[offsets_page], *self.child.encode(array.flatten(), write)]

    def finish(self) -> Pages:
        return [[], *self.child.finish()]

    def column_encodings(self) -> list[pb.ColumnEncoding]:
        return super().column_encodings()[:1] + self.child.column_encodings()


def _unreadable_marker(field: pa.Field, *keys: str) -> UnsupportedFeatureError | None:
    """The refusal for a list (``packed`` / ``blob``) or struct (``blob``) marker: pylance 14
    writes such a field but cannot read the file back once it holds rows (its 2.0 reader then
    expects fewer columns than the field owns), so we refuse to write rows into it."""
    marked = [key for key in keys if flag_set(field.metadata, key)]
    if not marked:
        return None
    return UnsupportedFeatureError(
        f"{'list' if _is_list(field.type) else 'struct'} field {field.name!r} marked "
        f"lance-encoding:{marked[0]}: Lance 2.0 files cannot hold it readably"
    )


def _node(field: pa.Field) -> _Node:
    if _is_header_struct(field):
        return _StructNode(field)
    if _is_list(field.type):
        return _ListNode(field)
    # pylance's 2.0 writer stores a dictionary column marked blob as a plain dictionary.
    if is_blob_field(field.metadata, field.type) and not pa.types.is_dictionary(field.type):
        return _BlobNode(field)
    return _ValuesNode(field)


class LegacyFieldEncoder(FieldEncoder):
    """Encodes one top-level field into its 2.0 columns."""

    def __init__(self, field: pa.Field) -> None:
        self.field = field
        self.root = _node(field)
        self.num_columns = self.root.num_columns
        self._column_encodings = self.root.column_encodings()

    def encode(self, array: pa.Array, external: WriteExternal | None = None) -> Pages:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        return self.root.encode(array, WriteOptions(external, self.max_page_bytes))

    def finish(self) -> Pages:
        return self.root.finish()

    def column_encoding(self, column: int) -> pb.ColumnEncoding:
        return self._column_encodings[column]


# --------------------------------------------------------------------------- reading


class _Reader(ABC):
    """Values of one field at its level, addressed by sorted unique indices."""

    @abstractmethod
    def read(self, fetch: Fetch, idx: np.ndarray) -> pa.Array: ...


class _PagedReader(_Reader, Generic[Decoded]):
    """A column whose pages are decoded whole; the last decoded page is kept."""

    def __init__(self, pages: Sequence[PageInfo]) -> None:
        self.pages = list(pages)
        lengths = np.array([p.num_rows for p in self.pages], dtype=np.int64)
        self.ends = np.cumsum(lengths)
        self.starts = self.ends - lengths
        self._cached: tuple[int, Decoded] | None = None

    def _locate(self, idx: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(page, local indices)`` for each page holding some of ``idx``, in order."""
        if not len(idx):
            return
        if idx[-1] >= (self.ends[-1] if len(self.ends) else 0):
            raise CorruptFileError("<file>", f"value {idx[-1]} is beyond the column's pages")
        which = np.searchsorted(self.ends, idx, side="right")
        cuts = (np.flatnonzero(np.diff(which)) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(idx)], strict=True):
            page = int(which[lo])
            yield page, idx[lo:hi] - self.starts[page]

    def _page(self, fetch: Fetch, page: int) -> Decoded:
        if self._cached is None or self._cached[0] != page:
            info = self.pages[page]
            self._cached = (page, self._decode(info, PageBuffers(fetch(list(info.buffers)))))
        return self._cached[1]

    @abstractmethod
    def _decode(self, info: PageInfo, buffers: PageBuffers) -> Decoded: ...


def _select(array: pa.Array, local: np.ndarray) -> pa.Array:
    if local[-1] - local[0] + 1 == len(local):
        return array.slice(int(local[0]), len(local))
    return array.take(pa.array(local))


class _ValuesReader(_PagedReader[pa.Array]):
    def __init__(self, pages: Sequence[PageInfo], dtype: pa.DataType) -> None:
        super().__init__(pages)
        self.dtype = dtype

    def _decode(self, info: PageInfo, buffers: PageBuffers) -> pa.Array:
        return decode(info.layout, buffers, info.num_rows, self.dtype)

    def read(self, fetch: Fetch, idx: np.ndarray) -> pa.Array:
        parts = [_select(self._page(fetch, page), local) for page, local in self._locate(idx)]
        if not parts:
            return pa.array([], self.dtype)
        # Each page of a dictionary column has its own dictionary: joined as on write.
        return parts[0] if len(parts) == 1 else dictionary.concat(parts)


class _BlobReader(_Reader):
    """Blob columns: (position, size) descriptions, values fetched from anywhere in the file."""

    def __init__(self, pages: Sequence[PageInfo], dtype: pa.DataType) -> None:
        self.descriptions = _ValuesReader(pages, blob.DESCRIPTION)
        self.dtype = dtype

    def read(self, fetch: Fetch, idx: np.ndarray) -> pa.Array:
        return blob.read_blobs(self.descriptions.read(fetch, idx), fetch, self.dtype)


class _ListReader(_PagedReader[tuple[np.ndarray, np.ndarray]]):
    def __init__(self, pages: Sequence[PageInfo], dtype: pa.DataType, child: _Reader) -> None:
        super().__init__(pages)
        self.dtype = dtype
        self.child = child
        items = np.array([self._list(p).num_items for p in self.pages], dtype=np.int64)
        self.item_bases = np.cumsum(items) - items

    @staticmethod
    def _list(info: PageInfo) -> pb.List:
        if info.layout.WhichOneof("array_encoding") != "list":
            raise corrupt("a list column page is not a List encoding")
        return info.layout.list

    def _decode(self, info: PageInfo, buffers: PageBuffers) -> tuple[np.ndarray, np.ndarray]:
        message = self._list(info)
        stored = decode(message.offsets, buffers, info.num_rows, pa.uint64())
        offsets, valid = decode_offsets(
            stored.to_numpy(zero_copy_only=False), int(message.null_offset_adjustment)
        )
        if offsets[-1] > message.num_items:
            raise corrupt(f"list offsets reach item {offsets[-1]}, the page owns {message.num_items}")
        return offsets, valid

    def read(self, fetch: Fetch, idx: np.ndarray) -> pa.Array:
        starts, ends, valid = [], [], []
        for page, local in self._locate(idx):
            offsets, page_valid = self._page(fetch, page)
            base = self.item_bases[page]
            starts.append(offsets[local] + base)
            ends.append(offsets[local + 1] + base)
            valid.append(page_valid[local])
        lo = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        lengths = (np.concatenate(ends) if ends else lo) - lo
        total = int(lengths.sum())
        new_offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
        item_idx = np.repeat(lo - new_offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
        items = self.child.read(fetch, item_idx)
        mask = pa.array(~np.concatenate(valid)) if valid else None
        offset_type = pa.int32() if pa.types.is_list(self.dtype) else pa.int64()
        array_type = pa.ListArray if pa.types.is_list(self.dtype) else pa.LargeListArray
        return array_type.from_arrays(pa.array(new_offsets, offset_type), items, type=self.dtype, mask=mask)


class _StructReader(_Reader):
    def __init__(self, dtype: pa.DataType, children: list[_Reader]) -> None:
        self.dtype = dtype
        self.children = children

    def read(self, fetch: Fetch, idx: np.ndarray) -> pa.Array:
        children = [child.read(fetch, idx) for child in self.children]
        if not children:
            return pa.Array.from_buffers(self.dtype, len(idx), [None], children=[])
        return pa.StructArray.from_arrays(children, fields=list(self.dtype))


def _reader(field: pa.Field, columns: Iterator[Sequence[PageInfo]]) -> _Reader:
    pages = next(columns)
    dtype = field.type
    if _is_header_struct(field):
        return _StructReader(dtype, [_reader(dtype.field(i), columns) for i in range(dtype.num_fields)])
    if _is_list(dtype):
        return _ListReader(pages, dtype, _reader(dtype.value_field, columns))
    if is_blob_field(field.metadata, dtype) and not pa.types.is_dictionary(dtype):
        return _BlobReader(pages, dtype)
    return _ValuesReader(pages, dtype)


class LegacyFieldDecoder(FieldDecoder):
    """Reads rows of one top-level field from its 2.0 columns."""

    def __init__(self, field: pa.Field, columns: Sequence[Sequence[PageInfo]]) -> None:
        if len(columns) != num_columns(field):
            raise CorruptFileError(
                "<file>", f"field {field.name!r} needs {num_columns(field)} columns, got {len(columns)}"
            )
        self.field = field
        self.root = _reader(field, iter(columns))

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        if isinstance(rows, range):
            idx = np.arange(rows.start, rows.stop, rows.step or 1, dtype=np.int64)
        else:
            idx = np.asarray(rows, dtype=np.int64)
        order = None
        if len(idx) > 1 and np.any(np.diff(idx) <= 0):
            idx, order = np.unique(idx, return_inverse=True)
        out = self.root.read(fetch, idx)
        return out if order is None else out.take(pa.array(order.reshape(-1)))
