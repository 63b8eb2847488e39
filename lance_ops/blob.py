"""``LanceDataset.take_blobs``: blob values of some rows as file-like :class:`BlobFile` objects.

A blob column is a ``large_binary`` field marked ``lance-encoding:blob`` (2.0 / 2.1 datasets) or a
``lance.blob.v2`` field (2.2 datasets, :mod:`lance_ops.table.blob`). The rows are chosen as in
pylance 14, by exactly one of row ``ids``, row ``addresses`` or positional ``indices``; a null
value gives ``None``, an empty one a :class:`BlobFile` of size 0.

This version reads each selected blob's bytes when ``take_blobs`` runs (through the dataset's
``take``, which reads only the selected rows' bytes) and serves the file-like calls from memory;
pylance opens the bytes lazily. The answers are the same; a caller taking many multi-GiB blobs at
once holds them all in memory here.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_ops.encoding.options import is_blob_field
from lance_ops.errors import FieldNotFoundError, InvalidArgumentError, UnsupportedFeatureError
from lance_ops.table.blob import is_blob_v2


class BlobFile(io.RawIOBase):
    """One blob as a read-only, seekable binary file (pylance's ``lance.BlobFile`` calls:
    ``read``, ``readall``, ``readinto``, ``seek``, ``tell``, ``size``, ``close``, ``with``)."""

    def __init__(self, data: bytes | memoryview) -> None:
        super().__init__()
        self._data = memoryview(data).cast("B")
        self._pos = 0

    def __repr__(self) -> str:
        return f"<BlobFile size={len(self._data)}>"

    def size(self) -> int:
        """The blob's size in bytes."""
        return len(self._data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise ValueError(f"{what} of closed file")

    def tell(self) -> int:
        self._check_open("tell")
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open("seek")
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = len(self._data) + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        self._pos = target
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        self._check_open("readinto")
        view = memoryview(buffer).cast("B")
        chunk = self._data[self._pos : self._pos + len(view)]
        view[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)

    def read(self, size: int | None = -1) -> bytes:
        self._check_open("read")
        end = len(self._data) if size is None or size < 0 else self._pos + size
        chunk = bytes(self._data[self._pos : end])
        self._pos += len(chunk)
        return chunk

    def readall(self) -> bytes:
        return self.read(-1)


def _is_blob_field(field: pa.Field) -> bool:
    if is_blob_v2(field):
        return True
    return pa.types.is_large_binary(field.type) and is_blob_field(field.metadata, field.type)


def blob_selection(
    ids: Sequence[int] | pa.Array | None,
    addresses: Sequence[int] | pa.Array | None,
    indices: Sequence[int] | pa.Array | None,
) -> tuple[str, np.ndarray]:
    given = [
        (name, v)
        for name, v in (("ids", ids), ("addresses", addresses), ("indices", indices))
        if v is not None
    ]
    if len(given) != 1:
        raise InvalidArgumentError("Exactly one of ids, indices, or addresses must be specified")
    name, values = given[0]
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    array = values.to_numpy(zero_copy_only=False) if isinstance(values, pa.Array) else np.asarray(values)
    if array.size and (array.dtype.kind not in "iu" or (array.dtype.kind == "i" and array.min() < 0)):
        raise InvalidArgumentError(f"take_blobs {name} must be non-negative integers")
    return name, array.astype(np.uint64 if name != "indices" else np.int64, copy=False)


def check_blob_column(schema: pa.Schema, blob_column: str) -> None:
    """Refuse a name that is not a blob column of ``schema``, in pylance's words."""
    if schema.get_field_index(blob_column) < 0:
        raise FieldNotFoundError(f"Field '{blob_column}' not found")
    if not _is_blob_field(schema.field(blob_column)):
        raise InvalidArgumentError(f"the column '{blob_column}' is not a blob column")


def blob_files(column: pa.Array | pa.ChunkedArray) -> list[BlobFile | None]:
    """One :class:`BlobFile` (``None`` for a null value) per row of a taken blob column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    if pa.types.is_struct(column.type):
        if _any_external(column, column.field("uri")):
            raise UnsupportedFeatureError("take_blobs of external blobs (a uri, no stored bytes)")
        values = column.field("data")
    else:
        values = column
    valid = column.is_valid().to_pylist()
    return [BlobFile(_bytes_of(value)) if ok else None for value, ok in zip(values, valid, strict=True)]


def _bytes_of(value: pa.Scalar) -> bytes | memoryview:
    buffer = value.as_buffer() if value.is_valid else None
    return b"" if buffer is None else memoryview(buffer)


def _any_external(column: pa.StructArray, uris: pa.Array) -> bool:
    """Whether a valid row of a blob v2 struct names an external object (a non-null ``uri``)."""
    return bool(
        np.any(
            column.is_valid().to_numpy(zero_copy_only=False) & uris.is_valid().to_numpy(zero_copy_only=False)
        )
    )
