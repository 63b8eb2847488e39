"""Clustering compaction: rows of the compacted fragments rewritten in the order of clustering keys.

``compact_files(cluster_by=[...], cluster_mode="sort" | "zorder")`` plans one group of every fragment
(except ``excluded_fragment_ids``) unless the dataset is already laid out in key order, and executes
it through the ordinary compaction task (:func:`lance_ops.ops.compaction.execute_task`): the task
asks this module for its live rows in key order (:func:`ordered_batches`) and for the permutation
that moved them, so that the Rewrite commit, the row-id sequences (stable row ids move with their
rows: each new fragment's sequence is the permuted ids, encoded as arrays where they are not
ranges) and the old -> new row address map stay those of compaction.

Ordering:

* ``sort``: lexicographic on the keys, nulls last (a stable sort, so equal keys keep arrival order);
* ``zorder``: every key is mapped to an unsigned 64-bit order-preserving form (integers: sign bit
  flipped; floats: IEEE total order; dates / times / timestamps / durations: their integer; strings
  and binaries: the first 8 bytes, big-endian, so only that prefix orders; booleans: 0/1; nulls
  first), shifted to start at 0 and scaled so that its ``64 // len(keys)`` most significant bits
  span the key's range; those bits of every key are interleaved into one 64-bit Morton code.

Bounded memory: only the key columns of the group (and one int64 rank per row) are held. When the
group's data (its data files' bytes) exceeds ``cluster_memory_bytes``, the rows are range-partitioned
by rank into buckets of about that size, each spilled to a Lance file in a local temporary
directory, then each bucket is read back, sorted and streamed to the writer in turn.

Config: ``lance-ops.cluster-by`` (comma-separated columns) and ``lance-ops.cluster-mode`` apply to
every compaction that does not name keys itself.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import ClusterKeyError, InvalidOptionError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file.schema import BLOB_KEY
from lance_ops.table.rowids import (
    decode_row_id_segments,
    decode_versions,
    encode_row_ids,
    encode_versions,
    load_sequence,
)

if TYPE_CHECKING:
    from lance_ops.fragment.reader import FragmentReader, VersionFiles
    from lance_ops.ops.compaction import CompactionOptions, CompactionPlan
    from lance_ops.table.manifest import DataFragment, Manifest

CLUSTER_MODES = ("sort", "zorder")
CONFIG_CLUSTER_BY = "lance-ops.cluster-by"
CONFIG_CLUSTER_MODE = "lance-ops.cluster-mode"
DEFAULT_CLUSTER_MEMORY_BYTES = 256 * 1024 * 1024
MAX_SPILL_BUCKETS = 256
_RANK = "__lance_ops_cluster_rank"
_SIGN = np.uint64(1 << 63)


def check_mode(mode: str | None) -> str | None:
    """The mode, lower-cased; :class:`InvalidOptionError` for anything but sort / zorder."""
    if mode is None:
        return None
    value = str(mode).strip().lower()
    if value not in CLUSTER_MODES:
        raise InvalidOptionError(f"unknown cluster_mode {mode!r}; valid: {', '.join(CLUSTER_MODES)}")
    return value


def parse_keys(keys: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"a, b"`` or ``["a", "b"]`` -> ``("a", "b")``."""
    if keys is None:
        return ()
    if isinstance(keys, str):
        keys = keys.split(",")
    return tuple(k.strip() for k in keys if k and k.strip())


def config_defaults(config: Mapping[str, str], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``cluster_by`` / ``cluster_mode`` from the dataset config where not given."""
    if not values.get("cluster_by") and config.get(CONFIG_CLUSTER_BY):
        values["cluster_by"] = parse_keys(config[CONFIG_CLUSTER_BY])
    if values.get("cluster_mode") is None and config.get(CONFIG_CLUSTER_MODE):
        values["cluster_mode"] = config[CONFIG_CLUSTER_MODE]
    return values


def check_keys(schema: pa.Schema, keys: Sequence[str], mode: str) -> None:
    """:class:`ClusterKeyError` naming the first key that is missing or cannot be ordered."""
    for key in keys:
        if schema.get_field_index(key) < 0:
            raise ClusterKeyError(f"clustering key {key!r} is not a column of the dataset {schema.names}")
        field = schema.field(key)
        type_ = field.type
        if pa.types.is_dictionary(type_):
            type_ = type_.value_type
        blob = field.metadata is not None and BLOB_KEY.encode() in field.metadata
        nested = pa.types.is_nested(type_) or pa.types.is_fixed_size_binary(type_) and mode == "zorder"
        if blob or nested or pa.types.is_null(type_):
            kind = "a blob" if blob else f"of type {type_}"
            raise ClusterKeyError(f"clustering key {key!r} is {kind}, which cannot be ordered")


# ---------------------------------------------------------------------------------------- ordering


def _string_prefix(values: pa.Array) -> np.ndarray:
    """The first 8 bytes of each value, big-endian (shorter values zero-padded)."""
    arr = pc.cast(values.fill_null(""), pa.large_binary())
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = np.zeros(len(arr), dtype=np.uint64)
    for k in range(8):
        present = lengths > k
        byte = np.zeros(len(arr), dtype=np.uint64)
        byte[present] = data[starts[present] + k]
        out |= byte << np.uint64(8 * (7 - k))
    return out


def normalized(values: pa.Array) -> np.ndarray:
    """An unsigned 64-bit form of ``values`` with the same order (nulls map to 0, the lowest)."""
    type_ = values.type
    if pa.types.is_dictionary(type_):
        values = values.dictionary_decode()
        type_ = values.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_):
        return _string_prefix(values)
    if pa.types.is_large_binary(type_) or pa.types.is_string_view(type_) or pa.types.is_binary_view(type_):
        return _string_prefix(values)
    nulls = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
    if pa.types.is_boolean(type_):
        out = values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint64) + np.uint64(1)
    elif pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        floats = pc.cast(values, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
        bits = np.ascontiguousarray(floats, dtype=np.float64).view(np.uint64)
        negative = (bits >> np.uint64(63)).astype(bool)
        out = np.where(negative, ~bits, bits | _SIGN)
    elif pa.types.is_unsigned_integer(type_):
        out = pc.cast(values, pa.uint64()).fill_null(0).to_numpy(zero_copy_only=False)
    else:  # signed integers and the temporal types, as their integers
        if pa.types.is_temporal(type_):
            width = pa.int32() if type_.bit_width == 32 else pa.int64()
            values = values.view(width)
        ints = pc.cast(values, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        out = ints.view(np.uint64) ^ _SIGN
    out = np.asarray(out, dtype=np.uint64)
    if nulls is not None:
        out = np.where(nulls, np.uint64(0), out)
    return out


def zorder_values(keys: pa.Table) -> np.ndarray:
    """Morton codes of the rows of ``keys`` (one uint64 per row)."""
    count = keys.num_columns
    per = 64 // count
    parts = []
    for column in keys.columns:
        values = normalized(column.combine_chunks())
        if len(values):
            values = values - values.min()
        top = int(values.max()).bit_length() if len(values) else 0
        # the top ``per`` significant bits, widened to ``per`` bits so every key weighs the same
        parts.append(values >> np.uint64(top - per) if top > per else values << np.uint64(per - top))
    z = np.zeros(keys.num_rows, dtype=np.uint64)
    one = np.uint64(1)
    for bit in range(per - 1, -1, -1):
        for values in parts:
            z = (z << one) | ((values >> np.uint64(bit)) & one)
    return z


def row_order(keys: pa.Table, mode: str) -> np.ndarray:
    """The permutation (int64) putting the rows of ``keys`` in clustering order (stable)."""
    if keys.num_rows == 0:
        return np.zeros(0, dtype=np.int64)
    if mode == "zorder":
        return np.argsort(zorder_values(keys), kind="stable").astype(np.int64)
    columns = [c.combine_chunks() for c in keys.columns]
    table = pa.table(
        [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in columns],
        names=keys.column_names,
    )
    order = pc.sort_indices(table, sort_keys=[(n, "ascending", "at_end") for n in table.column_names])
    return order.to_numpy().astype(np.int64)


# ---------------------------------------------------------------------------------------- planning


def _key_table(
    readers: Sequence[FragmentReader], schema: pa.Schema, keys: Sequence[str], batch_size: int
) -> pa.Table:
    from lance_ops.ops.compaction import _scan

    schema = pa.schema([schema.field(k) for k in keys])
    return pa.Table.from_batches(list(_scan(readers, schema, batch_size)), schema=schema)


def plan(files: VersionFiles, the_plan: CompactionPlan) -> CompactionPlan:
    """The clustering plan: one task of every fragment not excluded, or ``the_plan`` unchanged when
    the fragments are already in key order and ``the_plan`` has nothing to do."""
    from lance_ops.ops.compaction import CompactionTask, _index_sets

    options = the_plan.options
    mode = options.cluster_mode or "sort"
    check_keys(files.schema, options.cluster_by, mode)
    manifest: Manifest = files.manifest
    excluded = set(options.excluded_fragment_ids)
    fragments = tuple(f for f in manifest.fragments if f.id not in excluded and f.num_rows > 0)
    if not fragments and not the_plan.tasks:
        return the_plan
    covered = _index_sets(manifest)
    if any(f.id in covered for f in fragments):
        raise UnsupportedFeatureError(
            "clustering fragments covered by an index is not supported (indices would need remapping)"
        )
    if not the_plan.tasks:
        readers = [files.fragment(f) for f in fragments]
        keys = _key_table(readers, files.schema, options.cluster_by, options.batch_size or 8192)
        order = row_order(keys, mode)
        if bool(np.all(order == np.arange(len(order)))):
            return the_plan
    gone = tuple(f for f in manifest.fragments if f.id not in excluded and f.num_rows == 0)
    task = CompactionTask(manifest.version, fragments + gone, options)
    return replace(the_plan, tasks=(task,))


# --------------------------------------------------------------------------------------- execution


def ordered_batches(
    readers: Sequence[FragmentReader], schema: pa.Schema, options: CompactionOptions, batch_size: int
) -> tuple[Iterator[pa.RecordBatch], np.ndarray]:
    """The live rows of ``readers`` in clustering order, and the permutation: the ``n``-th row out
    is the ``order[n]``-th live row in arrival order."""
    from lance_ops.ops.compaction import _scan

    mode = options.cluster_mode or "sort"
    check_keys(schema, options.cluster_by, mode)
    order = row_order(_key_table(readers, schema, options.cluster_by, batch_size), mode)
    data_bytes = sum(d.file_size_bytes or 0 for r in readers for d in r.metadata.files)
    budget = options.cluster_memory_bytes or DEFAULT_CLUSTER_MEMORY_BYTES
    if data_bytes <= budget:
        table = pa.Table.from_batches(list(_scan(readers, schema, batch_size)), schema=schema)
        return iter(table.take(pa.array(order)).to_batches(max_chunksize=batch_size)), order
    # open spill writers are bounded too: at most MAX_SPILL_BUCKETS, and at least 1024 rows each
    buckets = max(2, min(-(-data_bytes // budget), MAX_SPILL_BUCKETS, len(order) // 1024))
    return _spilled(readers, schema, order, buckets, batch_size), order


def _spilled(
    readers: Sequence[FragmentReader], schema: pa.Schema, order: np.ndarray, buckets: int, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """External sort: rows range-partitioned by rank into ``buckets`` Lance files, each then sorted."""
    from lance_ops.ops.compaction import _scan

    count = len(order)
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count, dtype=np.int64)
    bucket_of = rank * buckets // max(count, 1)
    spill_schema = schema.append(pa.field(_RANK, pa.int64()))
    with tempfile.TemporaryDirectory(prefix="lance-ops-cluster-") as tmp:
        paths = [os.path.join(tmp, f"bucket-{b}.lance") for b in range(buckets)]
        writers: dict[int, LanceFileWriter] = {}
        position = 0
        for batch in _scan(readers, schema, batch_size):
            ranks = rank[position : position + batch.num_rows]
            where = bucket_of[position : position + batch.num_rows]
            position += batch.num_rows
            with_rank = pa.RecordBatch.from_arrays([*batch.columns, pa.array(ranks)], schema=spill_schema)
            for b in np.unique(where).tolist():
                if b not in writers:
                    writers[b] = LanceFileWriter(paths[b], spill_schema)
                writers[b].write_batch(with_rank.filter(pa.array(where == b)))
        for writer in writers.values():
            writer.close()
        for b in sorted(writers):
            table = LanceFileReader(paths[b]).read_all().to_table()
            sorted_rows = table.take(pc.sort_indices(table[_RANK])).drop_columns([_RANK])
            del table
            yield from sorted_rows.cast(schema).to_batches(max_chunksize=batch_size)
            del sorted_rows


def moved_sequences(
    files: VersionFiles, readers: Sequence[FragmentReader], new: Sequence[DataFragment], order: np.ndarray
) -> list[DataFragment]:
    """``new`` with the row ids and versions of the rows they received: the live rows' ids and
    per-row versions in arrival order, permuted by ``order``, cut into the new fragments."""
    ids: list[np.ndarray] = []
    created: list[np.ndarray] = []
    updated: list[np.ndarray] = []
    for reader in readers:
        meta = reader.metadata
        live = np.ones(reader.physical_rows, dtype=bool)
        live[reader.deleted.astype(np.int64)] = False
        if meta.row_ids is None:
            raise UnsupportedFeatureError(f"fragment {meta.id} has no row id sequence")
        segments = decode_row_id_segments(load_sequence(files.store, files.root, meta.row_ids))
        ids.append(np.concatenate(segments or [np.zeros(0, np.uint64)])[live])
        for out, value in ((created, meta.created_at_versions), (updated, meta.last_updated_at_versions)):
            if value is None:
                per_row = np.ones(reader.physical_rows, dtype=np.uint64)
            else:
                per_row = decode_versions(load_sequence(files.store, files.root, value), reader.physical_rows)
            out.append(per_row[live])
    all_ids, made, changed = (
        np.concatenate(x)[order] if x else np.zeros(0, np.uint64) for x in (ids, created, updated)
    )
    out_fragments = []
    start = 0
    for fragment in new:
        stop = start + fragment.physical_rows
        out_fragments.append(
            replace(
                fragment,
                row_ids=encode_row_ids([all_ids[start:stop]]),
                created_at_versions=encode_versions(made[start:stop]),
                last_updated_at_versions=encode_versions(changed[start:stop]),
            )
        )
        start = stop
    return out_fragments
