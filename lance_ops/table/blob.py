"""Blob v2 columns of datasets (``lance.blob.v2``), read side.

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
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from lance_ops.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.io import object_store

BLOB_V2_EXTENSION = "lance.blob.v2"
_EXTENSION_KEY = b"ARROW:extension:name"
_DATA_FILE_SUFFIX = ".lance"
_SIDECAR_ID_BITS = 32


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
    uri: str, starts: list[int], lengths: list[int], storage_options: Mapping[str, str] | None
) -> list[bytes | memoryview]:
    """Byte ranges of one object; a length of -1 is the whole object."""
    store, path = object_store(uri, storage_options)
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
    storage_options: Mapping[str, str] | None = None,
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
        got = _read_pieces(uri, position[rows].tolist(), lengths[rows].tolist(), storage_options)
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
