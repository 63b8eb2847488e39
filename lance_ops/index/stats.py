"""Per-segment details of ``ds.stats.index_stats(name)`` (its ``indices`` / ``segments`` lists), as
pylance 14 reports them, read from each segment's files (only their metadata, global buffers and,
for the small lookup files, rows: never a vector storage's rows).

==========  ========================================================================================
BTREE       ``min`` / ``max`` (the first page's minimum and last page's maximum, as text,
            ``"NULL"`` for a null), ``num_pages`` (rows of ``page_lookup.lance``)
BITMAP      ``num_bitmaps`` (the ``lance:index_stats`` of ``bitmap_page_lookup.lance``, else its rows)
LABEL_LIST  as BITMAP
ZONEMAP     ``num_zones`` (rows of ``zonemap.lance``), ``rows_per_zone`` (its metadata)
BLOOMFILTER ``num_blocks`` (zones: rows of ``bloomfilter.lance``), ``number_of_items``,
            ``probability`` (its metadata)
IVF_*       ``index_type``, ``uuid``, ``uri`` (of ``index.idx``), ``metric_type``, ``num_partitions``,
            ``sub_index`` (the quantizer's or HNSW graph's parameters: the storage metadata without
            the codebook's place, the first partition's graph header for HNSW), ``partitions``
            (``[{"size": rows}]``), ``centroids`` (lists of floats), ``loss``,
            ``index_file_version`` (``"V3"``; ``"Legacy"`` for a legacy IVF_PQ ``index.idx``, whose
            ``sub_index`` is ``index_type``, ``nbits``, ``num_sub_vectors``, ``dimension``,
            ``metric_type``)
INVERTED    ``params`` (the tokenizer, the ``params`` JSON of ``metadata.lance``), ``num_tokens`` and
            ``num_docs`` (summed over the partitions: tokens of each ``part_<p>_tokens.lance``,
            rows of each ``part_<p>_docs.lance``; a token in two partitions counts twice)
NGRAM       ``num_ngrams`` (rows of ``ngram_postings.lance``)
others      ``{}`` (types we do not read report no details)
==========  ========================================================================================

e.g. a BTREE on ``id`` over ids 0..2999 in one page: ``{"min": "0", "max": "2999", "num_pages": 1}``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.errors import CorruptFileError, IndexCorruptError, UnsupportedIndexTypeError
from lance_ops.file import LanceFileReader
from lance_ops.index.bloomfilter import bloomfilter_stats
from lance_ops.index.files import read_index_file
from lance_ops.index.ivf_pb import IVF, tensor_array
from lance_ops.index.legacy_ivf import LEGACY_FILE, is_legacy_index, read_legacy_model
from lance_ops.index.types import (
    BITMAP,
    BLOOMFILTER,
    BTREE,
    INVERTED,
    LABEL_LIST,
    NGRAM,
    VECTOR_TYPES,
    ZONEMAP,
    index_dir,
    index_type_of,
    uuid_text,
)
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexMetadata

__all__ = ["segment_details"]

# storage parameters that place the codebook in the file rather than describe the quantizer
_PLACEMENT_KEYS = ("codebook_position", "codebook_tensor")


def segment_details(ctx: StorageContext, index: IndexMetadata) -> dict[str, Any]:
    """The details pylance lists for one segment of ``index`` (``{}`` for a type without any)."""
    try:
        kind = index_type_of(index, ctx)
    except UnsupportedIndexTypeError:
        return {}
    if kind == BTREE:
        return _btree(ctx, index)
    if kind in (BITMAP, LABEL_LIST):
        data = read_index_file(ctx, index, "bitmap_page_lookup.lance")
        stats = data.metadata.get(b"lance:index_stats")
        return json.loads(stats) if stats else {"num_bitmaps": data.table.num_rows}
    if kind == ZONEMAP:
        data = read_index_file(ctx, index, "zonemap.lance")
        return {
            "num_zones": data.table.num_rows,
            "rows_per_zone": int(data.meta("rows_per_zone", index, "zonemap.lance")),
        }
    if kind == BLOOMFILTER:
        return bloomfilter_stats(ctx, index)
    if kind in VECTOR_TYPES:
        return _vector(ctx, index, kind)
    if kind == INVERTED:
        return _inverted(ctx, index)
    if kind == NGRAM:
        return {"num_ngrams": int(_header(ctx, index, "ngram_postings.lance")[1].num_rows)}
    return {}


def _inverted(ctx: StorageContext, index: IndexMetadata) -> dict[str, Any]:
    metadata, _ = _header(ctx, index, "metadata.lance")
    try:
        params = json.loads(metadata["params"])
        partitions = [int(p) for p in json.loads(metadata["partitions"])]
    except (KeyError, ValueError, TypeError) as exc:
        raise IndexCorruptError(
            "metadata.lance", f"index {index.name!r}: undecodable metadata: {exc}"
        ) from exc
    num_tokens = num_docs = 0
    for partition in partitions:
        tokens = read_index_file(ctx, index, f"part_{partition}_tokens.lance").table
        if "_token_next_id" in tokens.column_names and tokens.num_rows:
            num_tokens += int(tokens.column("_token_next_id")[0].as_py())
        else:  # the "arrow" token set: one row per token
            num_tokens += tokens.num_rows
        num_docs += int(_header(ctx, index, f"part_{partition}_docs.lance")[1].num_rows)
    return {"params": params, "num_tokens": num_tokens, "num_docs": num_docs}


def _text(value: Any, single: bool) -> str:
    """A page bound as pylance prints it: ``NULL``, ``NaN``, an integral float without ``.0``, a
    float32 (``single``) by its shortest float32 digits (``0.1``, not ``0.10000000149011612``)."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value.is_integer():
            return str(int(value))
        if single:
            return str(np.float32(value))
    return str(value)


def _btree(ctx: StorageContext, index: IndexMetadata) -> dict[str, Any]:
    """The first page's minimum and the last page's maximum (pages are in value order, nulls
    first): a BTREE over a column with nulls reports ``"NULL"`` as its minimum, as pylance does."""
    lookup = read_index_file(ctx, index, "page_lookup.lance").table
    if not lookup.num_rows:
        return {"min": "NULL", "max": "NULL", "num_pages": 0}
    single = lookup.schema.field("min").type in (pa.float32(), pa.float16())
    return {
        "min": _text(lookup.column("min")[0].as_py(), single),
        "max": _text(lookup.column("max")[lookup.num_rows - 1].as_py(), single),
        "num_pages": lookup.num_rows,
    }


def _header(ctx: StorageContext, index: IndexMetadata, name: str) -> tuple[dict[str, str], LanceFileReader]:
    """A file's schema metadata (as text) and its reader, without reading its rows."""
    path = ctx.store.join(index_dir(ctx, index), name)
    size = next((f.size_bytes for f in index.files if f.path == name), None)
    try:
        reader = LanceFileReader(path, store=ctx.store, size=size or None)
        metadata = {k.decode(): v.decode() for k, v in (reader.schema.metadata or {}).items()}
    except FileNotFoundError as exc:
        raise IndexCorruptError(path, f"index {index.name!r}: file {name} is missing") from exc
    except CorruptFileError as exc:
        raise IndexCorruptError(path, f"index {index.name!r}: {exc.reason}") from exc
    return metadata, reader


def _ivf(index: IndexMetadata, metadata: dict[str, str], reader: LanceFileReader, name: str) -> Any:
    try:
        message = IVF()
        message.ParseFromString(reader.read_global_buffer(int(metadata["lance:ivf"])))
    except (KeyError, ValueError, IndexError) as exc:
        raise IndexCorruptError(name, f"index {index.name!r}: no readable IVF model: {exc}") from exc
    return message


def _legacy(ctx: StorageContext, index: IndexMetadata, kind: str) -> dict[str, Any]:
    """A legacy IVF_PQ file's details, as pylance 14 reports them (its PQ's metric is the index's)."""
    model = read_legacy_model(ctx, index)
    sub_index = {
        "index_type": "PQ",
        "nbits": model.num_bits,
        "num_sub_vectors": model.num_sub_vectors,
        "dimension": model.dimension,
        "metric_type": model.metric,
    }
    return {
        "index_type": kind,
        "uuid": uuid_text(index),
        "uri": ctx.store.join(index_dir(ctx, index), LEGACY_FILE),
        "metric_type": model.metric,
        "num_partitions": len(model.lengths),
        "sub_index": sub_index,
        "partitions": [{"size": int(n)} for n in model.lengths],
        "centroids": model.centroids.tolist(),
        "loss": model.loss,
        "index_file_version": "Legacy",
    }


def _vector(ctx: StorageContext, index: IndexMetadata, kind: str) -> dict[str, Any]:
    if kind == "IVF_PQ" and is_legacy_index(ctx, index):
        return _legacy(ctx, index, kind)
    model_meta, model = _header(ctx, index, "index.idx")
    storage_meta, storage = _header(ctx, index, "auxiliary.idx")
    model_ivf = _ivf(index, model_meta, model, "index.idx")
    storage_ivf = _ivf(index, storage_meta, storage, "auxiliary.idx")
    try:
        metric = json.loads(model_meta["lance:index"])["distance_type"]
        params = json.loads(json.loads(storage_meta["storage_metadata"])[0])
        graphs = [json.loads(m) for m in json.loads(model_meta["lance:hnsw"])] if "HNSW" in kind else []
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        raise IndexCorruptError("index.idx", f"index {index.name!r}: undecodable metadata: {exc}") from exc
    centroids = tensor_array(model_ivf.centroids_tensor).astype(np.float32)
    quantizer = kind.rsplit("_", 1)[1]
    sub_index: dict[str, Any] = {k: v for k, v in params.items() if k not in _PLACEMENT_KEYS}
    if graphs:
        sub_index = {**graphs[0], **sub_index, "index_type": "HNSW"}
    else:
        sub_index["index_type"] = quantizer
    # a cosine index's PQ codes are of normalized vectors, compared in l2 (pylance reports so)
    sub_index["metric_type"] = "l2" if quantizer == "PQ" and metric == "cosine" else metric
    return {
        "index_type": kind,
        "uuid": uuid_text(index),
        "uri": ctx.store.join(index_dir(ctx, index), "index.idx"),
        "metric_type": metric,
        "num_partitions": len(storage_ivf.lengths),
        "sub_index": sub_index,
        "partitions": [{"size": int(n)} for n in storage_ivf.lengths],
        "centroids": centroids.tolist(),
        "loss": model_ivf.loss if model_ivf.HasField("loss") else None,
        "index_file_version": "V3",
    }
