"""Extending an index over fragments appended since it was built: ``update_index``.

What pylance 14's ``optimize_indices(num_indices_to_merge=n)`` does to one index name, observed:

* ``n = 0``: a **delta segment** is added (same name, new uuid, ``fragment_bitmap`` = the new
  fragments, ``dataset_version`` = the version optimized), for scalar and vector indices alike;
  a vector delta keeps the index's centroids, PQ codebook / SQ bounds (its ``index.idx`` is the
  same model) and assigns each new vector to its nearest centroid.
* ``n >= 1`` (pylance's default 1): the newest ``n`` segments and the new rows become **one**
  segment covering all their fragments (scalar: the values sorted / grouped again).

Here a merged vector segment keeps the existing model too (pylance may retrain it; either is a
correct index). The rows added are read from the new fragments with their row ids (with stable
row ids, BITMAP / LABEL_LIST / IVF store the stable ids, BTREE the row addresses, as pylance 14
does; ZONEMAP and BLOOMFILTER zones are positional: row addresses, a BLOOMFILTER dropping the zones
of fragments no longer in the dataset, as pylance 14; NGRAM its trigrams' row ids; INVERTED its
documents' row ids, a merge decoding the merged segments' postings and writing them again with the
new documents, :mod:`lance_ops.index.build_inverted`). IVF_HNSW_* are not extended:
:class:`~lance_ops.errors.UnsupportedIndexTypeError` naming the index.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.errors import IndexCorruptError, InvalidArgumentError, UnsupportedIndexTypeError
from lance_ops.fragment import VersionFiles
from lance_ops.fragment.options import ScanOptions
from lance_ops.index.bitmap import merge_bitmap
from lance_ops.index.bloomfilter import write_bloomfilter
from lance_ops.index.btree import merge_btree
from lance_ops.index.build_inverted import segment_tokenizer, write_inverted
from lance_ops.index.build_vector import build_ivf, multivector_model, params_from_details, vector_rows
from lance_ops.index.files import IndexWriter, RemapResult
from lance_ops.index.ivf import extend_ivf
from lance_ops.index.json_index import extract_keys, json_target
from lance_ops.index.legacy_ivf import is_legacy_index
from lance_ops.index.ngram import write_ngram
from lance_ops.index.types import (
    BITMAP,
    BLOOMFILTER,
    BTREE,
    INVERTED,
    JSON,
    LABEL_LIST,
    NGRAM,
    VECTOR_TYPES,
    ZONEMAP,
    covers_no_fragment,
    index_type_of,
)
from lance_ops.index.zonemap import extend_zonemap
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import DataFragment, IndexMetadata, Manifest

__all__ = ["EXTENDABLE_TYPES", "column_rows", "merge_segment_files", "update_index"]

EXTENDABLE_TYPES = (BTREE, BITMAP, LABEL_LIST, ZONEMAP, BLOOMFILTER, NGRAM, INVERTED, JSON, *VECTOR_TYPES)
_ROW_ID, _ROW_ADDRESS = "_rowid", "_rowaddr"


def _column_path(manifest: Manifest, index: IndexMetadata) -> str:
    """Dotted path of the index's (first) field in the manifest's schema."""
    by_id = {f.id: f for f in manifest.schema}
    if not index.fields or index.fields[0] not in by_id:
        raise IndexCorruptError("<manifest>", f"index {index.name!r}: its field is not in the schema")
    parts, field = [], by_id[index.fields[0]]
    while True:
        parts.append(field.name)
        if field.parent_id < 0 or field.parent_id not in by_id:
            break
        field = by_id[field.parent_id]
    return ".".join(reversed(parts))


def column_rows(
    ctx: StorageContext, manifest: Manifest, fragments: Sequence[DataFragment], column: str, id_column: str
) -> tuple[pa.Array, np.ndarray]:
    """The column's values in ``fragments`` (live rows) and their row ids or addresses. A nested
    field (``"data.text"``) is read through its top-level struct column: null where a parent is;
    an extension column's values are its storage's."""
    files = VersionFiles(ctx, manifest)
    top, path = column, []
    if "." in column and column not in {f.name for f in manifest.schema if f.parent_id < 0}:
        top, *path = column.split(".")
    options = ScanOptions(
        columns=(top,), with_row_id=id_column == _ROW_ID, with_row_address=id_column == _ROW_ADDRESS
    )
    tables = [table for fragment in fragments for table in files.fragment(fragment).scan(options)]
    if tables:
        table = pa.concat_tables(tables).combine_chunks()
        values, ids = table.column(top).combine_chunks(), np.asarray(table.column(id_column), dtype=np.uint64)
    else:
        values, ids = pa.array([], files.output_schema(options).field(top).type), np.empty(0, np.uint64)
    for name in path:
        if not pa.types.is_struct(values.type) or values.type.get_field_index(name) < 0:
            raise InvalidArgumentError(f"column {column!r} is not in the schema")
        values = pc.struct_field(values, name)  # null where the parent struct is null
    if isinstance(values, pa.ExtensionArray):  # an index keys the storage (arrow.uuid: 16 bytes)
        values = values.storage
    return values, ids


def _vectors(values: pa.Array, ids: np.ndarray, index: IndexMetadata) -> tuple[np.ndarray, np.ndarray]:
    """``[n, dim]`` float32 vectors of the non-null rows and their ids."""
    if not pa.types.is_fixed_size_list(values.type):
        raise UnsupportedIndexTypeError(
            f"index {index.name!r}: vectors of type {values.type} are not supported", index.name
        )
    keep = np.asarray(values.is_valid(), dtype=bool)
    values = values.filter(pa.array(keep))
    flat = np.asarray(values.flatten().cast(pa.float32()), dtype=np.float32)
    return flat.reshape(len(values), values.type.list_size), ids[keep]


def _segment(
    result: RemapResult,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    fragment_ids: set[int],
    version: int,
) -> IndexMetadata:
    """The new segment's metadata. pylance 14 stamps a delta with the version optimized and keeps
    the ``dataset_version`` of the segments a merge replaces (their oldest); ``created_at`` is now."""
    bitmap = BitMap(sorted(fragment_ids)).serialize()
    dataset_version = min(s.dataset_version for s in merged) if merged else version
    return replace(
        result.metadata_for(template, bitmap),
        dataset_version=dataset_version,
        created_at=int(time.time() * 1000),
    )


def _fragment_ids(index: IndexMetadata) -> set[int]:
    return set(BitMap.deserialize(index.fragment_bitmap)) if index.fragment_bitmap else set()


def update_index(
    ctx: StorageContext,
    manifest: Manifest,
    segments: Sequence[IndexMetadata],
    fragments: Sequence[DataFragment],
    num_indices_to_merge: int = 1,
) -> list[IndexMetadata] | None:
    """The segments of one index name after adding the rows of ``fragments`` (unindexed fragments
    of ``manifest``, the version being optimized): the unchanged segments as they were, then the
    new one. ``None`` when there is nothing to add. New files go to new ``_indices/<uuid>/``
    directories; nothing existing is changed."""
    if not fragments or not segments:
        return None
    if num_indices_to_merge < 0:
        raise InvalidArgumentError(f"num_indices_to_merge must not be negative, got {num_indices_to_merge}")
    ordered = sorted(segments, key=lambda s: s.dataset_version)
    count = min(num_indices_to_merge, len(ordered))
    kept, merged = ordered[: len(ordered) - count], ordered[len(ordered) - count :]
    template = ordered[-1]
    kinds = {index_type_of(s, ctx) for s in ordered}
    kind = kinds.pop()
    if kinds:
        raise IndexCorruptError("<manifest>", f"index {template.name!r} has segments of different types")
    if kind not in EXTENDABLE_TYPES:
        raise UnsupportedIndexTypeError(
            f"{kind} index {template.name!r} cannot be extended by lance_ops", template.name
        )
    if kind in VECTOR_TYPES and all(covers_no_fragment(s) for s in ordered):
        # only empty segments (train=False: no model, no file): trained now over the fragments
        # and replacing them all, as pylance 14 does
        result = _train_vector(ctx, manifest, kind, template, fragments)
        return [_segment(result, template, ordered, {f.id for f in fragments}, manifest.version)]
    result = merge_segment_files(ctx, manifest, kind, template, merged, fragments)
    covered = {f.id for f in fragments}.union(*(_fragment_ids(s) for s in merged))
    return [*kept, _segment(result, template, merged, covered, manifest.version)]


def _train_vector(
    ctx: StorageContext,
    manifest: Manifest,
    kind: str,
    template: IndexMetadata,
    fragments: Sequence[DataFragment],
) -> RemapResult:
    """A new ``kind`` index over ``fragments`` with the parameters ``template``'s details record
    (the number of partitions: pylance's default for the rows indexed)."""
    column = _column_path(manifest, template)
    rows, row_ids = column_rows(ctx, manifest, fragments, column, _ROW_ID)
    value = template.details[1] if template.details is not None else b""
    params = params_from_details(column, kind, value, len(row_ids))
    values, ids = vector_rows(rows, row_ids)
    return build_ivf(IndexWriter(ctx), params, values, ids, multivector_model(params, rows))


def merge_segment_files(
    ctx: StorageContext,
    manifest: Manifest,
    kind: str,
    template: IndexMetadata,
    merged: Sequence[IndexMetadata],
    fragments: Sequence[DataFragment],
) -> RemapResult:
    """The files of one new segment of ``kind`` over the rows of the segments ``merged`` and the
    live rows of ``fragments`` (none: the segments merged as they are), with ``template``'s model
    and parameters, by each type's codec."""
    if kind == "IVF_PQ" and any(is_legacy_index(ctx, s) for s in (template, *merged)):
        raise UnsupportedIndexTypeError(
            f"IVF_PQ index {template.name!r} is in the legacy index file version, which lance_ops "
            "(like pylance 14) does not extend or merge: rebuild it with create_index(..., "
            "replace=True) to get a V3 index",
            template.name,
        )
    column = _column_path(manifest, template)
    json_path = None
    if kind == JSON:  # the target index's files, over the values at the path
        json_path, kind, key_type = json_target(ctx, template)
    id_column = _ROW_ADDRESS if kind in (BTREE, ZONEMAP, BLOOMFILTER) else _ROW_ID
    values, ids = column_rows(ctx, manifest, fragments, column, id_column)
    if json_path is not None:
        values = extract_keys(values, json_path, column, key_type)
    if kind == BTREE:
        result = merge_btree(ctx, template, merged, values, ids)
    elif kind == ZONEMAP:
        result = extend_zonemap(ctx, template, merged, values, ids)
    elif kind == BLOOMFILTER:
        live = {f.id for f in manifest.fragments}
        result = write_bloomfilter(ctx, template, values, ids, merged=merged, live_fragments=live)
    elif kind in (BITMAP, LABEL_LIST):
        result = merge_bitmap(ctx, template, merged, values, ids, label_list=kind == LABEL_LIST)
    elif kind == NGRAM:
        result = write_ngram(ctx, template, values, ids, merged)
    elif kind == INVERTED:
        tokenizer = segment_tokenizer(ctx, template)[0]
        result = write_inverted(ctx, template, values, ids, tokenizer, merged)
    else:
        vectors, vector_ids = _vectors(*vector_rows(values, ids), template)
        result = extend_ivf(ctx, template, merged, kind, vectors, vector_ids)
    return result
