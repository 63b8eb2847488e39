"""Building a scalar index (BTREE, BITMAP, LABEL_LIST, ZONEMAP, BLOOMFILTER, NGRAM) from scratch, as
pylance 14's ``create_scalar_index`` writes it.

A new index is the codecs' merge with no old segment: the rows of every fragment are read with
their row addresses (BTREE, ZONEMAP) or row ids (BITMAP, LABEL_LIST: the stable ids when the
dataset has them), and written into files whose schemas and metadata are those pylance 14 gives
a new index (e.g. a BTREE over an ``int32`` column: ``page_data.lance`` ``values: int32, ids:
uint64`` and ``page_lookup.lance`` with ``batch_size`` ``"4096"``).

Column types (as pylance 14 checks them): BTREE / BITMAP / ZONEMAP take integers, floats, bools,
strings, binaries, decimals, fixed-size binaries and temporal types; LABEL_LIST takes a list or
large list of those; BLOOMFILTER (:mod:`lance_ops.index.bloomfilter`) integers, float32 / float64,
strings, binaries and temporal types; NGRAM (:mod:`lance_ops.index.ngram`) and INVERTED
(:mod:`lance_ops.index.build_inverted`, tokenizer keywords as parameters) take strings. Anything else is an
:class:`~lance_ops.errors.IndexColumnTypeError` naming the column.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from lance_ops.encoding.protowire import encode_varint
from lance_ops.errors import IndexColumnTypeError, InvalidArgumentError, ResourcesExhaustedError
from lance_ops.file.schema import is_json
from lance_ops.index import bitmap, bloomfilter, btree, build_inverted, json_index, ngram, zonemap
from lance_ops.index.files import IndexFileData, RemapResult
from lance_ops.index.optimize import column_rows
from lance_ops.index.tokenizer import TokenizerParams, tokenizer_params
from lance_ops.index.treemap import encode_row_address_map
from lance_ops.index.types import BITMAP, BLOOMFILTER, BTREE, INVERTED, JSON, LABEL_LIST, NGRAM, ZONEMAP
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import DataFragment, IndexMetadata, Manifest

__all__ = [
    "BUILDABLE_SCALAR_TYPES",
    "ScalarBuild",
    "check_column_type",
    "index_entry",
    "plan_scalar_build",
    "scalar_rows",
    "write_scalar_index",
]

BUILDABLE_SCALAR_TYPES = (BTREE, BITMAP, LABEL_LIST, ZONEMAP, BLOOMFILTER, NGRAM, INVERTED, JSON)
_BTREE_BATCH_SIZE = 4096
_ROWS_PER_ZONE = 8192
# (type_url, index_version) of a new index of each kind, as pylance 14 records them (a BTREE of a
# dataset with stable row ids: version 1, without which pylance reads its row addresses as ids).
_DETAILS = {
    BTREE: ("/lance.table.BTreeIndexDetails", 0),
    BITMAP: ("/lance.table.BitmapIndexDetails", 0),
    LABEL_LIST: ("/lance.table.LabelListIndexDetails", 1),
    ZONEMAP: ("/lance.table.ZoneMapIndexDetails", 0),
    NGRAM: ("/lance.table.NGramIndexDetails", 0),
    BLOOMFILTER: (bloomfilter.BLOOMFILTER_DETAILS_URL, 0),
}


def _is_key_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_temporal(t)
    )


def check_column_type(kind: str, column: str, value_type: pa.DataType) -> pa.DataType:
    """The key type a ``kind`` index of ``column`` stores (an extension type's storage, as pylance
    checks and stores it); IndexColumnTypeError when it does not fit."""
    if kind == INVERTED and is_json(value_type):  # tokenized as JSON (lance_tokenizer "json")
        return value_type
    if isinstance(value_type, pa.BaseExtensionType):
        value_type = value_type.storage_type
    if kind == NGRAM:
        return ngram.check_ngram_column(column, value_type)
    if kind == INVERTED:
        return build_inverted.check_inverted_column(column, value_type)
    if kind == BLOOMFILTER:
        return bloomfilter.check_bloomfilter_column(column, value_type)
    if kind == LABEL_LIST:
        if (pa.types.is_list(value_type) or pa.types.is_large_list(value_type)) and _is_key_type(
            value_type.value_type
        ):
            return value_type.value_type
        raise IndexColumnTypeError(
            f"LABEL_LIST index column {column} must be a list or large list of a scalar type, "
            f"got {value_type}",
            column,
        )
    if _is_key_type(value_type):
        return value_type
    raise IndexColumnTypeError(
        f"{kind} index column {column} must be int, float, bool, str, large_str, binary, "
        f"large_binary, decimal, fixed-size-binary, or temporal, got {value_type}",
        column,
    )


def _empty(schema: pa.Schema, buffers: tuple[bytes, ...] = ()) -> IndexFileData:
    return IndexFileData(schema.empty_table(), "2.2", buffers)


def _params(kind: str, params: Mapping[str, Any]) -> int:
    """The one build parameter taken (ZONEMAP ``rows_per_zone``); others are refused."""
    allowed = {"rows_per_zone"} if kind == ZONEMAP else set()
    unknown = set(params) - allowed
    if unknown:
        raise InvalidArgumentError(f"{kind} index: unsupported parameters {sorted(unknown)}")
    rows = params.get("rows_per_zone", _ROWS_PER_ZONE)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0:
        raise InvalidArgumentError(f"rows_per_zone must be a positive integer, got {rows!r}")
    return rows


@dataclass(frozen=True)
class ScalarBuild:
    """A checked scalar build: the column, its index type and key type, the zone size (ZONEMAP)
    and the manifest entry the files are written for."""

    column: str
    kind: str
    key_type: pa.DataType
    rows_per_zone: int
    template: IndexMetadata
    tokenizer: TokenizerParams | None = None  # INVERTED
    bloom: bloomfilter.BloomFilterParams | None = None  # BLOOMFILTER
    # JSON: the target index's build (its key type set once the values are extracted) and the path
    json_target: ScalarBuild | None = None
    json_path: str = ""

    @property
    def id_column(self) -> str:
        """``_rowaddr`` (BTREE, ZONEMAP, BLOOMFILTER) or ``_rowid`` (BITMAP, LABEL_LIST, NGRAM) keys
        the rows (a JSON index: as its target)."""
        if self.json_target is not None:
            return self.json_target.id_column
        return "_rowaddr" if self.kind in (BTREE, ZONEMAP, BLOOMFILTER) else "_rowid"


def plan_scalar_build(
    manifest: Manifest,
    column: str,
    field_id: int,
    value_type: pa.DataType,
    kind: str,
    name: str,
    params: Mapping[str, Any] | None = None,
) -> ScalarBuild:
    """Check the column type and parameters of a new ``kind`` index named ``name``."""
    if kind not in BUILDABLE_SCALAR_TYPES:
        raise InvalidArgumentError(f"lance_ops builds scalar indices of types {BUILDABLE_SCALAR_TYPES}")
    if kind == JSON:
        return _plan_json_build(manifest, column, field_id, value_type, name, params or {})
    key_type = check_column_type(kind, column, value_type)
    if kind == INVERTED:  # its keywords are the tokenizer's (lance_ops.index.tokenizer)
        if is_json(value_type):  # pylance 14 tokenizes a JSON column as JSON, whatever is asked
            params = {**(params or {}), "lance_tokenizer": "json"}
        tokenizer = tokenizer_params(params)
        template = IndexMetadata(
            uuid=b"\0" * 16,
            fields=(field_id,),
            name=name,
            dataset_version=manifest.version,
            details=(build_inverted.INVERTED_DETAILS_URL, build_inverted.inverted_details(tokenizer)),
            index_version=build_inverted.INVERTED_INDEX_VERSION,
        )
        return ScalarBuild(column, kind, key_type, _ROWS_PER_ZONE, template, tokenizer)
    bloom = bloomfilter.bloomfilter_params(params or {}) if kind == BLOOMFILTER else None
    rows_per_zone = _ROWS_PER_ZONE if bloom is not None else _params(kind, params or {})
    url, version = _DETAILS[kind]
    if kind == BTREE and manifest.uses_stable_row_ids:
        version = 1
    # ZoneMapIndexDetails as pylance 14 writes it: field 1 rows_per_zone, then fields 2 = 0 and
    # 3 = 1 copied from its bytes (``08 80 40 10 00 18 01`` for the default 8192).
    detail = b"\x08" + encode_varint(rows_per_zone) + b"\x10\x00\x18\x01" if kind == ZONEMAP else b""
    template = IndexMetadata(
        uuid=b"\0" * 16,
        fields=(field_id,),
        name=name,
        dataset_version=manifest.version,
        details=(url, detail),
        index_version=version,
    )
    return ScalarBuild(column, kind, key_type, rows_per_zone, template, bloom=bloom)


def _plan_json_build(
    manifest: Manifest,
    column: str,
    field_id: int,
    value_type: pa.DataType,
    name: str,
    params: Mapping[str, Any],
) -> ScalarBuild:
    """A JSON index (:mod:`lance_ops.index.json_index`): the target's build, under JSON details."""
    if not is_json(value_type):
        raise IndexColumnTypeError(
            f"JSON index column {column} must be a JSON column, got {value_type}", column
        )
    kind, path = json_index.json_parameters(column, params)
    target = plan_scalar_build(manifest, column, field_id, pa.string(), kind, name)
    assert target.template.details is not None
    url, detail = target.template.details
    template = replace(
        target.template,
        details=(json_index.JSON_DETAILS_URL, json_index.json_details(path, url, detail)),
        index_version=json_index.JSON_INDEX_VERSION,
    )
    return ScalarBuild(
        column, JSON, value_type, target.rows_per_zone, template, json_target=target, json_path=path
    )


def scalar_rows(
    ctx: StorageContext, manifest: Manifest, fragments: Sequence[DataFragment], build: ScalarBuild
) -> pa.Table:
    """``keys`` / ``ids`` of the live rows of ``fragments`` an index of ``build`` holds (the
    writer sorts them, so runs from several tasks may come in any order)."""
    values, ids = column_rows(ctx, manifest, fragments, build.column, build.id_column)
    return pa.table({"keys": values, "ids": pa.array(ids, pa.uint64())})


def check_memory_pool(nbytes: int, what: str) -> None:
    """Refuse (:class:`ResourcesExhaustedError`) to hold ``nbytes`` for ``what`` when they exceed
    ``LANCE_MEM_POOL_SIZE`` (bytes; pylance's memory pool for the sorts of BTREE and BITMAP
    builds), unless ``LANCE_BYPASS_SPILLING`` is set, as in pylance. lance-ops sorts in memory and
    does not spill, so the whole sort must fit where pylance would spill its excess to disk."""
    text = os.environ.get("LANCE_MEM_POOL_SIZE")
    if not text or os.environ.get("LANCE_BYPASS_SPILLING"):
        return
    try:
        pool = int(text)
    except ValueError:
        raise InvalidArgumentError(f"LANCE_MEM_POOL_SIZE must be a number of bytes, got {text!r}") from None
    if nbytes > pool:
        raise ResourcesExhaustedError(
            f"Resources exhausted: {what} needs {nbytes} bytes, more than LANCE_MEM_POOL_SIZE={pool} "
            "(lance-ops does not spill; set LANCE_BYPASS_SPILLING=1 to lift the limit)"
        )


def write_scalar_index(
    ctx: StorageContext,
    manifest: Manifest,
    build: ScalarBuild,
    rows: pa.Table,
    fragments: Sequence[DataFragment] | None = None,
) -> IndexMetadata:
    """Write the index files of ``build`` over ``rows`` (from :func:`scalar_rows`, fragment after
    fragment) and return the manifest entry over ``fragments`` (default: every fragment; none for
    the empty index of ``train=False``)."""
    if build.json_target is not None:  # the target index over the values at the path
        keys = json_index.extract_keys(rows.column("keys"), build.json_path, build.column)
        target = replace(build.json_target, key_type=keys.type, template=build.template)
        return write_scalar_index(ctx, manifest, target, rows.set_column(0, "keys", keys), fragments)
    kind, key_type, rows_per_zone, template = build.kind, build.key_type, build.rows_per_zone, build.template
    if kind in (BTREE, BITMAP):
        check_memory_pool(rows.nbytes, f"sorting the keys of column {build.column!r} for a {kind} index")
    values = rows.column("keys").combine_chunks()
    ids = np.asarray(rows.column("ids").combine_chunks(), dtype=np.uint64)
    if kind == BTREE:
        pages = pa.schema([pa.field("values", key_type), pa.field("ids", pa.uint64(), nullable=False)])
        lookup = pa.schema(
            [
                pa.field("min", key_type),
                pa.field("max", key_type),
                pa.field("null_count", pa.uint32(), nullable=False),
                pa.field("page_idx", pa.uint32(), nullable=False),
            ],
            metadata={"range_partitioned": "false", "batch_size": str(_BTREE_BATCH_SIZE)},
        )
        result = btree.merge_btree(
            ctx, template, (), values, ids, base=(_empty(pages), _empty(lookup), _BTREE_BATCH_SIZE)
        )
    elif kind == NGRAM:
        result = ngram.write_ngram(ctx, template, values, ids)
    elif kind == BLOOMFILTER:
        result = bloomfilter.write_bloomfilter(ctx, template, values, ids, build.bloom)
    elif kind == INVERTED:
        assert build.tokenizer is not None
        result = build_inverted.write_inverted(ctx, template, values, ids, build.tokenizer)
    elif kind == ZONEMAP:
        schema = pa.schema(
            [pa.field("min", key_type), pa.field("max", key_type)]
            + [pa.field(n, pa.uint32(), nullable=False) for n in ("null_count", "nan_count")]
            + [
                pa.field(n, pa.uint64(), nullable=False) for n in ("fragment_id", "zone_start", "zone_length")
            ],
            metadata={"null_bitmap": "1", "rows_per_zone": str(rows_per_zone)},
        )
        empty_map = encode_row_address_map(ids[:0])
        result = zonemap.extend_zonemap(
            ctx, template, (), values, ids, base=(_empty(schema, (empty_map,)), rows_per_zone, 0)
        )
    else:
        metadata = {"lance:index_stats": json.dumps({"num_bitmaps": 0}, separators=(",", ":"))}
        buffers: tuple[bytes, ...] = ()
        if kind == LABEL_LIST:
            metadata["lance:label_list_nulls"] = "1"
            buffers = (encode_row_address_map(ids[:0]),)
        schema = pa.schema([pa.field("keys", key_type), pa.field("bitmaps", pa.binary())], metadata=metadata)
        result = bitmap.merge_bitmap(
            ctx, template, (), values, ids, label_list=kind == LABEL_LIST, base=_empty(schema, buffers)
        )
    return index_entry(manifest, template, result, fragments)


def index_entry(
    manifest: Manifest,
    template: IndexMetadata,
    result: RemapResult,
    fragments: Sequence[DataFragment] | None = None,
) -> IndexMetadata:
    """The manifest entry of a new index written as ``result``: over ``fragments`` (default: every
    fragment of ``manifest``), created now."""
    covered = manifest.fragments if fragments is None else fragments
    bitmap = BitMap(f.id for f in covered).serialize()
    return replace(result.metadata_for(template, bitmap), created_at=int(time.time() * 1000))
