"""Blob v2 columns of datasets (``lance.blob.v2``): reading and writing them.

pylance 14 stores a ``large_binary`` field marked ``lance-encoding:blob`` of a **2.2** dataset as
a ``lance.blob.v2`` field: in the manifest a struct ``<data: large_binary, uri: string>`` with
extension name ``lance.blob.v2``; in each data file one packed-struct column of *descriptions*
``<kind: u8, position: u64, size: u64, blob_id: u32, blob_uri: string>`` (a null row is a null
blob). ``kind`` says where the bytes are:

* 0 inline: ``[position, position + size)`` of the data file itself;
* 1 packed: ``[position, position + size)`` of the sidecar file ``blob_id`` (shared by many blobs);
* 2 dedicated: the whole sidecar file ``blob_id``;
* 3 external: nothing stored; ``[position, position + size)`` of the object named by
  ``blob_uri`` (the whole object when ``size`` is 0).

Sidecar ``blob_id`` of data file ``data/<stem>.lance`` is ``data/<stem>/<bits>.blob``, ``bits``
being the 32 bits of the id least significant first (id 1 → ``1000…0``, id 2 → ``0100…0``).
pylance 14 keeps blobs up to 64 KiB inline, packs mid-sized ones and gives multi-MiB blobs their
own file (field-metadata keys ``lance-encoding:blob-inline-size-threshold`` and
``…-dedicated-size-threshold`` move the limits). :func:`resolve_blob_v2` turns the descriptions
of some rows into the manifest's struct, reading only those rows' bytes. That struct is
``<data, uri>``, or ``<data, uri, position, size>`` when written from ``lance.blob_array``
(``position`` / ``size`` then give the range of an external blob).

Write side, as pylance 14 does it (2.1 datasets keep the older blob pages): :func:`blob_v2_schema`
turns each blob ``large_binary`` field of a 2.2 dataset, top-level or in structs, into a
``<data, uri>`` field (metadata kept, ``lance-encoding:blob`` dropped); :func:`as_blob_v2` shapes
input columns (bytes, or structs with ``data`` / ``uri`` / ``position`` / ``size``) to it; a
:class:`BlobV2Writer` per data file stores the bytes and returns the descriptions, written as in
:func:`file_field` (a packed struct marked blob; its children get id -1 in the file schema, and
``DataFile.fields`` lists the blob field's own id). Each blob's kind comes from its size:
inline up to the inline threshold, dedicated above the dedicated threshold, packed between; a row
with a ``uri`` is external. Inline blobs go into the data file, each 64-byte aligned (an empty one
at the aligned cursor). The data file's sidecars share one id counter starting at 1, taken in the
order blobs are stored (column by column, row by row): dedicated blobs one id each, and one packed
sidecar for the whole data file (all columns), contiguous bytes (pylance 14 packs 160 MiB into
one file without rolling over). Sidecars are not listed in the manifest: a data file owns the
directory ``data/<stem>/`` beside it, to be deleted with it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.options import EncodingOptions
from lance_ops.errors import CorruptFileError, SchemaError, UnsupportedFeatureError
from lance_ops.io import ObjectStore, OutputStream
from lance_ops.io.context import StorageContext

BLOB_V2_EXTENSION = "lance.blob.v2"
_EXTENSION_KEY = b"ARROW:extension:name"
_DATA_FILE_SUFFIX = ".lance"
_SIDECAR_ID_BITS = 32
_BLOB_KEY = b"lance-encoding:blob"
_PACKED_KEY = b"lance-encoding:packed"
INLINE_THRESHOLD_KEY = "lance-encoding:blob-inline-size-threshold"
DEDICATED_THRESHOLD_KEY = "lance-encoding:blob-dedicated-size-threshold"
DEFAULT_INLINE_THRESHOLD = 64 * 1024
DEFAULT_DEDICATED_THRESHOLD = 4 * 1024 * 1024
_ALIGNMENT = 64
_PAD_BYTE = 0x48
_LOGICAL_TYPE = pa.struct([pa.field("data", pa.large_binary()), pa.field("uri", pa.string())])
_INPUT_TYPE = pa.struct(
    [
        pa.field("data", pa.large_binary()),
        pa.field("uri", pa.string()),
        pa.field("position", pa.uint64()),
        pa.field("size", pa.uint64()),
    ]
)
DESCRIPTION_TYPE = pa.struct(
    [
        pa.field("kind", pa.uint8(), nullable=False),
        pa.field("position", pa.uint64(), nullable=False),
        pa.field("size", pa.uint64(), nullable=False),
        pa.field("blob_id", pa.uint32(), nullable=False),
        pa.field("blob_uri", pa.string(), nullable=False),
    ]
)


class BlobKind(enum.IntEnum):
    INLINE = 0
    PACKED = 1
    DEDICATED = 2
    EXTERNAL = 3


def is_blob_v2(field: pa.Field) -> bool:
    """Is ``field`` (of a dataset schema) a ``lance.blob.v2`` column?

    A plain struct with the extension name in its metadata, or, once some library (pylance)
    has registered the extension type with pyarrow, an extension type.
    """
    if isinstance(field.type, pa.BaseExtensionType):
        return field.type.extension_name == BLOB_V2_EXTENSION
    return (field.metadata or {}).get(_EXTENSION_KEY) == BLOB_V2_EXTENSION.encode()


def sidecar_uri(data_file_uri: str, blob_id: int) -> str:
    """The sidecar file ``blob_id`` of the data file at ``data_file_uri``."""
    stem = data_file_uri.removesuffix(_DATA_FILE_SUFFIX)
    return f"{stem}/{format(blob_id, f'0{_SIDECAR_ID_BITS}b')[::-1]}.blob"


def _column(descriptions: pa.StructArray, name: str, dtype: str) -> np.ndarray:
    """A numeric child of the descriptions as numpy (null rows read as 0)."""
    return np.asarray(descriptions.field(name).fill_null(0).to_numpy(zero_copy_only=False), dtype)


def _read_pieces(
    storage: StorageContext, uri: str, starts: list[int], lengths: list[int]
) -> list[bytes | memoryview]:
    """Byte ranges of one object (reached with the dataset's options); a length of -1 is the whole object."""
    store, path = storage.locate(uri)
    pieces: list[bytes | memoryview]
    if -1 in lengths:
        whole = memoryview(store.read(path))
        pieces = [
            whole if length == -1 else whole[start : start + length]
            for start, length in zip(starts, lengths, strict=True)
        ]
    else:
        pieces = list(store.read_ranges(path, list(zip(starts, lengths, strict=True))))
    for start, length, piece in zip(starts, lengths, pieces, strict=True):
        if length != -1 and len(piece) != length:
            raise CorruptFileError(path, f"blob ends past the end of the file ({start}+{length})")
    return pieces


def resolve_blob_v2(
    descriptions: pa.Array,
    field: pa.Field,
    data_file_uri: str,
    storage: StorageContext,
) -> pa.Array:
    """The ``<data, uri>`` values of ``field`` for the rows ``descriptions`` describe.

    ``data`` holds the bytes of every non-null blob, external ones included (read from their
    URI, a whole object when no range is given); ``uri`` is set for external blobs only.
    """
    if not isinstance(descriptions, pa.StructArray):
        raise CorruptFileError(
            data_file_uri, f"blob v2 column {field.name!r} is not a struct of descriptions"
        )
    n = len(descriptions)
    valid = descriptions.is_valid().to_numpy(zero_copy_only=False)
    kind = _column(descriptions, "kind", "u1")
    if np.any(valid & (kind > BlobKind.EXTERNAL)):
        raise UnsupportedFeatureError(f"blob v2 column {field.name!r}: unknown blob kind {int(kind.max())}")
    position = _column(descriptions, "position", "i8")
    size = _column(descriptions, "size", "i8")
    blob_id = _column(descriptions, "blob_id", "i8")
    external = valid & (kind == BlobKind.EXTERNAL)
    blob_uris = np.asarray(
        descriptions.field("blob_uri").fill_null("").to_numpy(zero_copy_only=False), object
    )
    # Where each row's bytes are: the data file, a sidecar or an external object.
    sources = np.full(n, data_file_uri, object)
    sidecar = valid & ((kind == BlobKind.PACKED) | (kind == BlobKind.DEDICATED))
    for blob in np.unique(blob_id[sidecar]).tolist():
        sources[sidecar & (blob_id == blob)] = sidecar_uri(data_file_uri, blob)
    sources[external] = blob_uris[external]
    lengths = np.where(external & (size == 0), -1, size)
    pieces: list[bytes | memoryview] = [b""] * n
    reading = np.flatnonzero(valid & (lengths != 0))
    for uri in np.unique(sources[reading]).tolist():
        rows = reading[sources[reading] == uri]
        got = _read_pieces(storage, uri, position[rows].tolist(), lengths[rows].tolist())
        for row, piece in zip(rows.tolist(), got, strict=True):
            pieces[row] = piece
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(piece) for piece in pieces], out=offsets[1:])
    data = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(pieces))]
    )
    ranged = external & (size > 0)
    children = {
        "data": data,
        "uri": pa.array(blob_uris, pa.string(), mask=~external),
        "position": pa.array(position, pa.uint64(), mask=~ranged),
        "size": pa.array(size, pa.uint64(), mask=~ranged),
    }
    extension = field.type if isinstance(field.type, pa.BaseExtensionType) else None
    struct = field.type.storage_type if extension is not None else field.type
    unknown = [child.name for child in struct if child.name not in children]
    if unknown:
        raise UnsupportedFeatureError(f"blob v2 column {field.name!r} has unknown children {unknown}")
    mask = None if valid.all() else pa.array(~valid)
    arrays = [children[child.name].cast(child.type) for child in struct]
    out = pa.StructArray.from_arrays(arrays, fields=list(struct), mask=mask)
    return out if extension is None else pa.ExtensionArray.from_storage(extension, out)


# --------------------------------------------------------------------------- write side


def _is_blob_input(field: pa.Field) -> bool:
    """A ``large_binary`` field marked ``lance-encoding:blob`` (what pylance stores as blob v2)."""
    return pa.types.is_large_binary(field.type) and EncodingOptions.from_metadata(field.metadata).blob


def contains_blob_v2(field: pa.Field) -> bool:
    """Is ``field`` a ``lance.blob.v2`` field or a struct with one inside?"""
    if is_blob_v2(field):
        return True
    return pa.types.is_struct(field.type) and any(contains_blob_v2(child) for child in field.type)


def _logical_field(field: pa.Field) -> pa.Field:
    """``field`` with blob ``large_binary`` fields (itself or in structs) as ``lance.blob.v2`` fields."""
    if _is_blob_input(field):
        metadata = {k: v for k, v in (field.metadata or {}).items() if k != _BLOB_KEY}
        metadata[_EXTENSION_KEY] = BLOB_V2_EXTENSION.encode()
        return pa.field(field.name, _LOGICAL_TYPE, field.nullable, metadata=metadata)
    if pa.types.is_struct(field.type):
        return field.with_type(pa.struct([_logical_field(child) for child in field.type]))
    return field


def blob_v2_schema(schema: pa.Schema, version: FileVersion) -> pa.Schema:
    """The dataset schema of new data ``schema`` in a ``version`` dataset (``schema`` if the same).

    From 2.2 on, blob ``large_binary`` fields, top-level or in structs, become ``lance.blob.v2``
    fields ``<data, uri>``.
    """
    if version.value < FileVersion.V2_2.value:
        return schema
    converted = pa.schema([_logical_field(field) for field in schema], metadata=schema.metadata)
    return schema if converted.equals(schema, check_metadata=True) else converted


def file_field(field: pa.Field) -> pa.Field:
    """The data file column of the dataset field ``field``: its ``lance.blob.v2`` fields (itself or
    in structs) as descriptions."""
    if is_blob_v2(field):
        metadata = {_PACKED_KEY: b"true", _BLOB_KEY: b"true"}
        return pa.field(field.name, DESCRIPTION_TYPE, field.nullable, metadata=metadata)
    if pa.types.is_struct(field.type) and contains_blob_v2(field):
        return field.with_type(pa.struct([file_field(child) for child in field.type]))
    return field


def _struct_values(
    array: pa.Array | pa.ChunkedArray, field: pa.Field
) -> tuple[pa.StructArray, dict[str, pa.Array]]:
    """``array`` (a struct) and its children by name, hidden under null parents (``flatten``)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not isinstance(array, pa.StructArray):
        raise SchemaError(f"column {field.name!r} needs a struct, not {array.type}")
    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    return array, dict(zip(names, array.flatten(), strict=True))


def _rebuild(array: pa.StructArray, children: list[pa.Array], fields: list[pa.Field]) -> pa.StructArray:
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def input_field(field: pa.Field) -> pa.Field:
    """What :func:`shape_blob_v2` makes of input for the dataset field ``field``: its
    ``lance.blob.v2`` fields (itself or in structs) as plain ``<data, uri, position, size>`` structs
    (an external blob's range is kept even when the dataset's struct has no ``position`` / ``size``,
    as pylance does), their metadata (thresholds) kept."""
    if is_blob_v2(field):
        metadata = {**(field.metadata or {}), _EXTENSION_KEY: BLOB_V2_EXTENSION.encode()}
        return pa.field(field.name, _INPUT_TYPE, field.nullable, metadata=metadata)
    if pa.types.is_struct(field.type) and contains_blob_v2(field):
        return field.with_type(pa.struct([input_field(child) for child in field.type]))
    return field


def shape_blob_v2(array: pa.Array | pa.ChunkedArray, field: pa.Field) -> pa.Array:
    """An input column for the dataset field ``field``, a ``lance.blob.v2`` field (see
    :func:`as_blob_v2`) or a struct with some inside (other children are left for a cast to
    :func:`input_field`)."""
    if is_blob_v2(field):
        return as_blob_v2(array, field)
    struct, values = _struct_values(array, field)
    children = {
        name: shape_blob_v2(child, field.type.field(name))
        if field.type.get_field_index(name) >= 0 and contains_blob_v2(field.type.field(name))
        else child
        for name, child in values.items()
    }
    return _rebuild(struct, list(children.values()), [pa.field(n, c.type) for n, c in children.items()])


def resolve_blob_v2_columns(
    array: pa.Array, field: pa.Field, data_file_uri: str, storage: StorageContext
) -> pa.Array:
    """The values of the dataset field ``field`` from its data file column ``array``: descriptions
    of ``lance.blob.v2`` fields (itself or in structs) resolved by :func:`resolve_blob_v2`."""
    if is_blob_v2(field):
        return resolve_blob_v2(array, field, data_file_uri, storage)
    if not contains_blob_v2(field):
        return array
    struct, values = _struct_values(array, field)
    children = [
        resolve_blob_v2_columns(values[child.name], child, data_file_uri, storage) for child in field.type
    ]
    return _rebuild(struct, children, list(field.type))


def as_blob_v2(array: pa.Array | pa.ChunkedArray, field: pa.Field) -> pa.StructArray:
    """An input column for the ``lance.blob.v2`` field ``field``, as ``<data, uri, position, size>``.

    Bytes (``binary`` / ``large_binary``) are the blobs' data; a struct gives ``data`` and / or
    ``uri`` (an external blob, optionally ranged by ``position`` / ``size``) per row.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        given = {"data": array}
    elif pa.types.is_struct(array.type):
        given = {array.type.field(i).name: array.field(i) for i in range(array.type.num_fields)}
    else:
        raise SchemaError(f"blob v2 column {field.name!r} needs bytes or a struct, not {array.type}")
    if [name for name in given if _INPUT_TYPE.get_field_index(name) < 0]:
        raise SchemaError(
            f"blob v2 column {field.name!r} takes children {[c.name for c in _INPUT_TYPE]}, got {list(given)}"
        )
    try:
        children = [
            given[child.name].cast(child.type) if child.name in given else pa.nulls(len(array), child.type)
            for child in _INPUT_TYPE
        ]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"blob v2 column {field.name!r}: {exc}") from exc
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(_INPUT_TYPE), mask=mask)


@dataclass(frozen=True)
class BlobThresholds:
    """Blobs up to ``inline`` bytes stay in the data file; above ``dedicated`` get their own file."""

    inline: int = DEFAULT_INLINE_THRESHOLD
    dedicated: int = DEFAULT_DEDICATED_THRESHOLD

    @classmethod
    def of(cls, field: pa.Field) -> BlobThresholds:
        """The thresholds of ``field`` (its metadata may lower or raise the defaults)."""
        metadata = field.metadata or {}

        def value(key: str, default: int) -> int:
            raw = metadata.get(key.encode())
            if raw is None:
                return default
            try:
                number = int(raw)
            except ValueError as exc:
                raise SchemaError(f"{key} of {field.name!r} must be an integer, got {raw!r}") from exc
            if number < 0:
                raise SchemaError(f"{key} of {field.name!r} must not be negative, got {number}")
            return number

        return cls(
            value(INLINE_THRESHOLD_KEY, DEFAULT_INLINE_THRESHOLD),
            value(DEDICATED_THRESHOLD_KEY, DEFAULT_DEDICATED_THRESHOLD),
        )


def _range_mask(length: int, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """A mask of ``length`` bytes covering the disjoint, ascending ranges ``[start, start + size)``."""
    marks = np.zeros(length + 1, np.int8)
    keep = sizes > 0
    marks[starts[keep]] += 1
    marks[(starts + sizes)[keep]] -= 1
    return np.cumsum(marks[:-1], dtype=np.int8).view(bool)


class BlobV2Writer:
    """Stores the blobs of the ``lance.blob.v2`` columns of one data file; see the module docstring.

    ``write_inline`` writes one buffer into the data file (64-byte aligned) and returns its
    position. :meth:`close` publishes the packed sidecar; :meth:`abort` removes every sidecar.
    """

    def __init__(
        self,
        data_file_uri: str,
        write_inline: Callable[[np.ndarray], int],
        storage: StorageContext,
    ) -> None:
        self._data_file_uri = data_file_uri
        self._write_inline = write_inline
        self._storage = storage
        self._next_id = 1
        self._packed: OutputStream | None = None
        self._packed_id = 0
        self._sidecars: list[tuple[ObjectStore, str]] = []

    def store(self, array: pa.Array, field: pa.Field) -> pa.Array:
        """The data file column (:func:`file_field`) of ``array`` of the dataset field ``field``,
        storing the blobs of its ``lance.blob.v2`` fields in pre-order."""
        if is_blob_v2(field):
            return self.describe(array, field)
        if not contains_blob_v2(field):
            return array
        struct, values = _struct_values(array, field)
        children = [self.store(values[child.name], child) for child in field.type]
        return _rebuild(struct, children, list(file_field(field).type))

    def describe(self, array: pa.Array, field: pa.Field) -> pa.StructArray:
        """Store the blobs of ``array`` (``field.type`` or :func:`input_field`); their descriptions."""
        storage = array.storage if isinstance(array, pa.ExtensionArray) else array
        n = len(storage)
        names = {child.name for child in storage.type}
        valid = storage.is_valid().to_numpy(zero_copy_only=False)
        data = storage.field("data")
        uri = storage.field("uri")
        external = valid & uri.is_valid().to_numpy(zero_copy_only=False)
        sizes = np.array(pc.binary_length(data).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        sizes[~valid | external] = 0
        buffers = data.buffers()
        starts = np.frombuffer(buffers[1], np.int64)[data.offset : data.offset + n]
        values = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        limits = BlobThresholds.of(field)
        stored = valid & ~external
        inline = stored & (sizes <= limits.inline)
        dedicated = stored & (sizes > limits.dedicated)
        packed = stored & ~inline & ~dedicated
        kind = np.zeros(n, np.uint8)
        kind[packed], kind[dedicated], kind[external] = BlobKind.PACKED, BlobKind.DEDICATED, BlobKind.EXTERNAL
        position = np.zeros(n, np.uint64)
        size = sizes.astype(np.uint64)
        for name, target in (("position", position), ("size", size)):
            if name in names:
                target[external] = storage.field(name).fill_null(0).to_numpy(zero_copy_only=False)[external]
        blob_id = self._assign_ids(packed, dedicated)
        position[inline] = self._store_inline(values, starts[inline], sizes[inline])
        position[packed] = self._store_packed(values, starts[packed], sizes[packed], blob_id)
        for row in np.flatnonzero(dedicated).tolist():
            self._store_dedicated(int(blob_id[row]), values[starts[row] : starts[row] + sizes[row]])
        blob_uri = uri.cast(pa.string()).fill_null("")
        children = [pa.array(kind), pa.array(position), pa.array(size), pa.array(blob_id), blob_uri]
        mask = None if valid.all() else pa.array(~valid)
        return pa.StructArray.from_arrays(children, fields=list(DESCRIPTION_TYPE), mask=mask)

    def _assign_ids(self, packed: np.ndarray, dedicated: np.ndarray) -> np.ndarray:
        """Sidecar ids per row, new ones in row order (the packed sidecar's at its first blob)."""
        takers = dedicated.copy()
        opening = self._packed is None and bool(packed.any())
        if opening:
            takers[np.argmax(packed)] = True
        rows = np.flatnonzero(takers)
        blob_id = np.zeros(len(packed), np.uint32)
        blob_id[rows] = self._next_id + np.arange(len(rows), dtype=np.uint32)
        self._next_id += len(rows)
        if opening:
            self._packed_id = int(blob_id[np.argmax(packed)])
            self._packed = self._open(self._packed_id)
        blob_id[packed] = self._packed_id
        return blob_id

    def _store_inline(self, values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Write the blobs into the data file, each 64-byte aligned; their positions."""
        if not len(sizes):
            return np.zeros(0, np.uint64)
        slots = -(-sizes // _ALIGNMENT) * _ALIGNMENT
        offsets = np.concatenate([[0], np.cumsum(slots)[:-1]])
        out = np.full(int(slots.sum()), _PAD_BYTE, np.uint8)
        out[_range_mask(len(out), offsets, sizes)] = values[_range_mask(len(values), starts, sizes)]
        return (self._write_inline(out) + offsets).astype(np.uint64)

    def _store_packed(
        self, values: np.ndarray, starts: np.ndarray, sizes: np.ndarray, blob_id: np.ndarray
    ) -> np.ndarray:
        """Append the blobs to the packed sidecar; their positions in it."""
        if not len(sizes):
            return np.zeros(0, np.uint64)
        assert self._packed is not None
        base = self._packed.tell()
        self._packed.write(values[_range_mask(len(values), starts, sizes)].data)
        return (base + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.uint64)

    def _store_dedicated(self, blob_id: int, data: np.ndarray) -> None:
        with self._open(blob_id) as out:
            out.write(data.data)

    def _open(self, blob_id: int) -> OutputStream:
        store, path = self._storage.locate(sidecar_uri(self._data_file_uri, blob_id))
        self._sidecars.append((store, path))
        return store.open_output(path)

    def close(self) -> None:
        """Publish the packed sidecar (call before closing the data file)."""
        if self._packed is not None:
            self._packed.close()

    def abort(self) -> None:
        """Discard every sidecar written or being written."""
        if self._packed is not None:
            self._packed.abort()
        for store, path in self._sidecars:
            store.delete(path)
