"""Which kind of index an ``IndexMetadata`` describes, named as pylance 14 names it.

Scalar indices carry their kind in the ``index_details`` Any's type URL
(``/lance.table.BTreeIndexDetails`` ...). Every vector index has the same type URL,
``/lance.index.pb.VectorIndexDetails``; pylance 14 fills that message with one sub-message per
part of the index, and the top-level field numbers present tell the kind apart:

====  ===================  ============================================
 3    HNSW parameters      ``IVF_HNSW_*``
 4    PQ parameters        ``IVF_PQ`` / ``IVF_HNSW_PQ``
 5    SQ parameters        ``IVF_SQ`` / ``IVF_HNSW_SQ``
 8    flat (empty message) ``IVF_FLAT`` / ``IVF_HNSW_FLAT``
====  ===================  ============================================

e.g. an IVF_PQ index's details start ``22 04 08 08 10 02`` (field 4: num_bits 8, 2 sub-vectors),
an IVF_FLAT's ``42 00``. Older writers leave the details empty; the kind is then the ``type`` of the
JSON in the ``lance:index`` schema-metadata key of the index's ``index.idx`` file
(``{"type":"IVF_PQ","distance_type":"l2"}``), read when a storage context is given.
"""

from __future__ import annotations

import json

from pyroaring import BitMap

from lance_ops.encoding.protowire import fields
from lance_ops.errors import CorruptFileError, IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.file import LanceFileReader
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = [
    "BITMAP",
    "BLOOMFILTER",
    "BTREE",
    "FRAGMENT_REUSE",
    "INVERTED",
    "LABEL_LIST",
    "NGRAM",
    "SCALAR_TYPES",
    "VECTOR_TYPES",
    "ZONEMAP",
    "index_dir",
    "covers_no_fragment",
    "index_type_of",
    "pylance_type_name",
    "scalar_type_without_details",
    "uuid_text",
]

BTREE = "BTREE"
BITMAP = "BITMAP"
LABEL_LIST = "LABEL_LIST"
ZONEMAP = "ZONEMAP"
INVERTED = "INVERTED"
NGRAM = "NGRAM"
BLOOMFILTER = "BLOOMFILTER"
JSON = "JSON"
FRAGMENT_REUSE = "FRAGMENT_REUSE"
MEM_WAL = "MEM_WAL"
VECTOR_TYPES = ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ")
SCALAR_TYPES = (BTREE, BITMAP, LABEL_LIST, ZONEMAP, INVERTED, NGRAM, BLOOMFILTER, JSON)

_VECTOR_URL = "/lance.index.pb.VectorIndexDetails"
_BY_URL = {
    "/lance.table.BTreeIndexDetails": BTREE,
    "/lance.table.BitmapIndexDetails": BITMAP,
    "/lance.table.LabelListIndexDetails": LABEL_LIST,
    "/lance.table.ZoneMapIndexDetails": ZONEMAP,
    "/lance.table.InvertedIndexDetails": INVERTED,
    "/lance.table.NGramIndexDetails": NGRAM,
    "/lance.index.pb.BloomFilterIndexDetails": BLOOMFILTER,
    "/lance.index.pb.JsonIndexDetails": JSON,
    "/lance.table.FragmentReuseIndexDetails": FRAGMENT_REUSE,
    "/lance.table.MemWalIndexDetails": MEM_WAL,
}
# What pylance's list_indices() / describe_indices() print for each kind.
_PYLANCE_NAMES = {
    BTREE: "BTree",
    BITMAP: "Bitmap",
    LABEL_LIST: "LabelList",
    ZONEMAP: "ZoneMap",
    INVERTED: "Inverted",
    NGRAM: "NGram",
    BLOOMFILTER: "BloomFilter",
    JSON: "Json",
    FRAGMENT_REUSE: "FragmentReuse",
    MEM_WAL: "MemWal",
}
_HNSW, _PQ, _SQ, _FLAT = 3, 4, 5, 8


def uuid_text(index: IndexMetadata) -> str:
    """The index's uuid as its directory name (hyphenated hex)."""
    h = index.uuid.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def index_dir(ctx: StorageContext, index: IndexMetadata) -> str:
    """The store path of the index's directory ``<root>/_indices/<uuid>``."""
    return ctx.path("_indices", uuid_text(index))


def _top_level_fields(data: bytes) -> set[int]:
    """Field numbers present at the top level of a protobuf message (contents are skipped)."""
    return {number for number, _ in fields(data)}


def _vector_type_from_details(value: bytes) -> str | None:
    fields = _top_level_fields(value)
    if _PQ in fields:
        quantizer = "PQ"
    elif _SQ in fields:
        quantizer = "SQ"
    elif _FLAT in fields:
        quantizer = "FLAT"
    else:
        return None
    return f"IVF_HNSW_{quantizer}" if _HNSW in fields else f"IVF_{quantizer}"


def _vector_type_from_file(ctx: StorageContext, index: IndexMetadata) -> str:
    path = ctx.store.join(index_dir(ctx, index), "index.idx")
    try:
        reader = LanceFileReader(path, store=ctx.store)
    except FileNotFoundError as exc:
        raise IndexCorruptError(path, f"index {index.name!r}: index.idx is missing") from exc
    raw = (reader.schema.metadata or {}).get(b"lance:index")
    try:
        kind = json.loads(raw)["type"] if raw is not None else None
    except (ValueError, KeyError, TypeError):
        kind = None
    if not isinstance(kind, str):
        raise IndexCorruptError(path, f"index {index.name!r}: no index type in 'lance:index' metadata")
    return kind.upper()


def _is_inverted_by_files(ctx: StorageContext, index: IndexMetadata) -> bool:
    """Whether the files of an index committed without details (as after pylance's distributed
    INVERTED build, whose ``Index`` carries none) are an INVERTED index's: a ``metadata.lance``
    naming its token set format."""
    path = ctx.store.join(index_dir(ctx, index), "metadata.lance")
    try:
        reader = LanceFileReader(path, store=ctx.store)
    except (FileNotFoundError, CorruptFileError):
        return False
    return b"token_set_format" in (reader.schema.metadata or {})


def covers_no_fragment(index: IndexMetadata) -> bool:
    """Whether the manifest gives ``index`` no fragment: pylance 14's empty index of
    ``train=False`` (a vector one has no file either), which scans and stats leave unopened."""
    return not index.fragment_bitmap or not BitMap.deserialize(index.fragment_bitmap)


def scalar_type_without_details(ctx: StorageContext, index: IndexMetadata, list_column: bool) -> str:
    """The type pylance 14 opens a scalar index committed without details as (an ``Index`` given
    to ``CreateIndex`` with no ``index_details``, or an older writer's), guessed as it guesses:
    LABEL_LIST on a ``list`` column, else BITMAP when ``bitmap_page_lookup.lance`` exists, else
    INVERTED when ``metadata.lance`` or ``invert.lance`` does, else BTREE. ``list_indices``
    still prints such an index's type as ``"Unknown"``, as pylance does."""
    if list_column:
        return LABEL_LIST
    directory = index_dir(ctx, index)

    def exists(name: str) -> bool:
        return bool(ctx.store.exists(ctx.store.join(directory, name)))

    if exists("bitmap_page_lookup.lance"):
        return BITMAP
    return INVERTED if exists("metadata.lance") or exists("invert.lance") else BTREE


def index_type_of(index: IndexMetadata, ctx: StorageContext | None = None) -> str:
    """pylance's create-time type name of ``index``: ``"BTREE"``, ``"BITMAP"``, ``"LABEL_LIST"``,
    ``"ZONEMAP"``, ``"INVERTED"``, ``"NGRAM"``, ``"IVF_PQ"``, ``"IVF_HNSW_SQ"``, ...; also
    ``"FRAGMENT_REUSE"`` / ``"MEM_WAL"`` for the system indices.

    A vector index whose details do not say its kind (older writers) needs ``ctx`` to read it from
    its ``index.idx``. Raises :class:`UnsupportedIndexTypeError` (naming the index) for a type URL
    we do not know, and :class:`IndexCorruptError` for undecodable details or a missing file.
    """
    if index.details is None and ctx is not None and _is_inverted_by_files(ctx, index):
        return INVERTED
    if index.details is None:
        raise UnsupportedIndexTypeError(
            f"index {index.name!r} has no index details; its type is unknown", index.name
        )
    url, value = index.details
    if url in _BY_URL:
        return _BY_URL[url]
    if url != _VECTOR_URL:
        raise UnsupportedIndexTypeError(f"index {index.name!r} has an unknown type {url!r}", index.name)
    try:
        kind = _vector_type_from_details(value)
    except ValueError as exc:
        raise IndexCorruptError(
            "<index details>", f"index {index.name!r}: undecodable vector details: {exc}"
        ) from exc
    if kind is not None:
        return kind
    if ctx is None:
        raise UnsupportedIndexTypeError(
            f"vector index {index.name!r} has empty details; its type is read from its files (pass ctx)",
            index.name,
        )
    return _vector_type_from_file(ctx, index)


def pylance_type_name(kind: str) -> str:
    """How pylance's ``list_indices()`` / ``describe_indices()`` print a type (``"BTree"``, ``"IVF_PQ"``)."""
    return _PYLANCE_NAMES.get(kind, kind)
