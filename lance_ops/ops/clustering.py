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

Bounded memory (:func:`ordered_batches`): when the group's data files exceed
``cluster_memory_bytes`` it is a range-partitioned external sort. A first pass over the key columns
(:class:`Survey`) keeps each key's lowest / highest normalized value and a uniform sample of about
``SAMPLE_ROWS`` key rows; the :class:`Layout` built from it cuts a *routing key* (z-order: the
Morton code; sort: the first key's normalized form, nulls highest; non-decreasing in clustering
order, so equal routing keys share a range) at the sample's quantiles. A second pass routes every
row, with its arrival position, into one spill file per range (:class:`SpillFile`: Lance files
encoded cheaply, lz4 without dictionaries or page statistics, since they are read back once;
below :func:`spill_location`: the local temporary directory, or ``cluster_spill_location`` /
config ``lance-ops.cluster-spill-location``, e.g. an ``s3://`` prefix for workers without disk);
then each range is read back, sorted stably and streamed to the writer in turn. Whatever the split
points, the ranges concatenated are the rows sorted as one set.

Memory: ``cluster_memory_bytes`` bounds what is held, counted as decoded Arrow bytes (estimated by
decoding a few thousand rows, :func:`decoded_bytes`), not file bytes. The rows are sorted in memory
when they take at most half the budget; otherwise each range takes at most a quarter of it and the
open spill writers' caches about half. Either way the sorted rows are taken and written one batch at
a time (never a second full copy). Outside the budget: 8 bytes per row for the permutation, which
becomes the old row addresses in their new order (:func:`addresses_in_order`, in place), and the
new addresses of the old -> new map compaction returns (8 more).

Spark (``jobs/cluster.py``) runs the same layout: surveys on the executors, split points on the
driver, one task per range (:func:`execute_range`), one Rewrite of the concatenated ranges.

Indices over the clustered fragments are kept right (:func:`check_indices`) or the clustering is
refused with :class:`~lance_ops.errors.ClusterIndexError` naming the index.

Incremental mode (``cluster_incremental`` / ``lance-ops.cluster-incremental``, sort only): see
:func:`incremental_plan` for the rule.

Config: ``lance-ops.cluster-by`` (comma-separated columns) and ``lance-ops.cluster-mode`` apply to
every compaction that does not name keys itself.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.errors import ClusterIndexError, ClusterKeyError, InvalidOptionError, UnsupportedFeatureError
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
    from lance_ops.io import ObjectStore
    from lance_ops.ops.compaction import CompactionOptions, CompactionPlan, CompactionTask, RewriteResult
    from lance_ops.table.manifest import DataFragment, Manifest

CLUSTER_MODES = ("sort", "zorder")
CONFIG_CLUSTER_BY = "lance-ops.cluster-by"
CONFIG_CLUSTER_MODE = "lance-ops.cluster-mode"
CONFIG_SPILL_LOCATION = "lance-ops.cluster-spill-location"
CONFIG_INCREMENTAL = "lance-ops.cluster-incremental"
DEFAULT_CLUSTER_MEMORY_BYTES = 256 * 1024 * 1024
IN_MEMORY_SHARE = 0.5  # of the budget: the decoded rows of an in-memory sort at most
RANGE_SHARE = 0.25  # of the budget: the decoded rows of one range of the external sort at most
PROBE_ROWS = 2048  # rows decoded per probed fragment to estimate the decoded size
MAX_SPILL_BUCKETS = 256
SPILL_CACHE_MIN_BYTES = 256 * 1024
SAMPLE_ROWS = 100_000  # key rows sampled for the split points
ADDRESS_CHUNK = 1 << 20  # positions turned into row addresses at a time
_POSITION = "__lance_ops_cluster_position"
_SPILL_COMPRESSION = b"lance-encoding:compression"
_SPILL_DICTIONARY = b"lance-encoding:dictionary"
_U64_MAX = 2**64 - 1
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
    """``values`` with the clustering options from the dataset config (``lance-ops.cluster-by``,
    ``-mode``, ``-spill-location``, ``-incremental``) where not given."""
    if not values.get("cluster_by") and config.get(CONFIG_CLUSTER_BY):
        values["cluster_by"] = parse_keys(config[CONFIG_CLUSTER_BY])
    if values.get("cluster_mode") is None and config.get(CONFIG_CLUSTER_MODE):
        values["cluster_mode"] = config[CONFIG_CLUSTER_MODE]
    if values.get("cluster_spill_location") is None and config.get(CONFIG_SPILL_LOCATION):
        values["cluster_spill_location"] = config[CONFIG_SPILL_LOCATION].strip()
    if values.get("cluster_incremental") is None and config.get(CONFIG_INCREMENTAL):
        values["cluster_incremental"] = config[CONFIG_INCREMENTAL].strip().lower() in ("true", "1", "yes")
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


@dataclass(frozen=True)
class Survey:
    """One pass over the key columns: the live row count, every key's lowest and highest
    normalized value (z-order needs them to scale its keys) and a uniform sample of key rows."""

    count: int
    lows: tuple[int, ...]
    highs: tuple[int, ...]
    sample: pa.Table

    @classmethod
    def of(cls, batches: Iterable[pa.RecordBatch], schema: pa.Schema, rate: float, seed: int = 0) -> Survey:
        """The survey of ``batches`` (key columns), keeping each row in the sample with
        probability ``rate`` (a seeded draw: the same input gives the same sample)."""
        rng = np.random.default_rng(seed)
        width = len(schema)
        lows, highs = [_U64_MAX] * width, [0] * width
        count = 0
        kept: list[pa.RecordBatch] = []
        for batch in batches:
            if not batch.num_rows:
                continue
            count += batch.num_rows
            for k, column in enumerate(batch.columns):
                values = normalized(column)
                lows[k] = min(lows[k], int(values.min()))
                highs[k] = max(highs[k], int(values.max()))
            if rate >= 1:
                kept.append(batch)
            elif rate > 0:
                kept.append(batch.filter(pa.array(rng.random(batch.num_rows) < rate)))
        if not count:
            lows = [0] * width
        return cls(count, tuple(lows), tuple(highs), pa.Table.from_batches(kept, schema=schema))

    def merge(self, other: Survey) -> Survey:
        if not other.count:
            return self
        if not self.count:
            return other
        return Survey(
            self.count + other.count,
            tuple(map(min, self.lows, other.lows)),
            tuple(map(max, self.highs, other.highs)),
            pa.concat_tables([self.sample, other.sample]),
        )

    def json(self) -> str:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.sample.schema) as writer:
            writer.write_table(self.sample)
        sample = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
        return json.dumps({"count": self.count, "lows": self.lows, "highs": self.highs, "sample": sample})

    @classmethod
    def from_json(cls, text: str) -> Survey:
        data = json.loads(text)
        sample = pa.ipc.open_stream(base64.b64decode(data["sample"])).read_all()
        return cls(data["count"], tuple(data["lows"]), tuple(data["highs"]), sample)


@dataclass(frozen=True)
class Layout:
    """How rows are ordered and range-partitioned: the clustering order, and a *routing key* (one
    uint64 per row, non-decreasing in that order) cut by ``splits`` into ranges.

    ``sort``: the order is lexicographic on the keys, nulls last; the routing key is the first
    key's normalized form (nulls highest). Rows with equal routing keys always share a range.
    ``zorder``: the routing key is the Morton code itself, and the order sorts it. Its scaling
    (``lows`` / ``shifts``, one per key) comes from the survey of every row being clustered, so
    that each range computes the codes the whole set would.

    Range ``r`` holds the routing keys in ``[splits[r - 1], splits[r])``. Within a range rows are
    sorted stably from arrival order, so the ranges, concatenated in order, are the rows sorted as
    one set (whatever the split points).
    """

    mode: str
    keys: tuple[str, ...]
    lows: tuple[int, ...] = ()
    shifts: tuple[int, ...] = ()
    splits: tuple[int, ...] = ()

    @property
    def ranges(self) -> int:
        return len(self.splits) + 1

    @classmethod
    def build(cls, survey: Survey, mode: str, keys: Sequence[str], ranges: int = 1) -> Layout:
        """The layout for the rows ``survey`` describes, cut into at most ``ranges`` ranges of about
        equal rows (split points: quantiles of the sampled routing keys, without repeats)."""
        layout = cls(mode, tuple(keys))
        if mode == "zorder":
            per = 64 // len(keys)
            shifts = tuple(
                (hi - lo).bit_length() - per for lo, hi in zip(survey.lows, survey.highs, strict=True)
            )
            layout = replace(layout, lows=survey.lows, shifts=shifts)
        if ranges <= 1 or survey.sample.num_rows == 0:
            return layout
        routed = np.sort(layout.routing(survey.sample))
        cuts = routed[(np.arange(1, ranges) * len(routed)) // ranges]
        splits = np.unique(cuts[cuts > routed[0]])
        return replace(layout, splits=tuple(int(v) for v in splits))

    def routing(self, keys: pa.Table) -> np.ndarray:
        """The routing key of every row of ``keys`` (uint64)."""
        if self.mode == "zorder":
            return self._zorder(keys)
        column = keys.column(0).combine_chunks()
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if pa.types.is_floating(column.type) and len(column):
            # one NaN (sorted after numbers, before nulls) and one zero (-0.0 sorts equal to 0.0)
            column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), column.type), column)
            column = pc.if_else(pc.equal(column, 0), pa.scalar(0.0, column.type), column)
        out = normalized(column)
        if column.null_count:
            out = np.where(column.is_null().to_numpy(zero_copy_only=False), np.uint64(_U64_MAX), out)
        return out

    def _zorder(self, keys: pa.Table) -> np.ndarray:
        """The Morton codes: bit ``b`` of key ``j`` (of ``k``) lands on bit ``b * k + k - 1 - j``,
        so the keys' most significant bits come first, the first key's leading each group."""
        width = len(self.keys)
        per = 64 // width
        mask = np.uint64(_U64_MAX >> (64 - per))
        spread = _spread_table(width, per)
        z = np.zeros(keys.num_rows, dtype=np.uint64)
        for j, (column, low, shift) in enumerate(zip(keys.columns, self.lows, self.shifts, strict=True)):
            values = normalized(column.combine_chunks()) - np.uint64(low)
            # the top ``per`` significant bits, widened to ``per`` bits so every key weighs the same
            values = values >> np.uint64(shift) if shift > 0 else values << np.uint64(-shift)
            values &= mask
            if width == 1:
                return values
            # each byte's bits spread ``width`` apart through a table, byte by byte
            for byte in range(-(-per // 8)):
                part = spread[((values >> np.uint64(8 * byte)) & np.uint64(0xFF)).astype(np.intp)]
                z |= part << np.uint64(8 * byte * width + width - 1 - j)
        return z

    def range_of(self, keys: pa.Table) -> np.ndarray:
        """The range (int64) of every row of ``keys``."""
        if not self.splits:
            return np.zeros(keys.num_rows, dtype=np.int64)
        bounds = np.array(self.splits, dtype=np.uint64)
        return np.searchsorted(bounds, self.routing(keys), side="right").astype(np.int64)

    def order(self, keys: pa.Table) -> np.ndarray:
        """The stable permutation (int64) putting the rows of ``keys`` in clustering order."""
        if keys.num_rows == 0:
            return np.zeros(0, dtype=np.int64)
        if self.mode == "zorder":
            return np.argsort(self._zorder(keys), kind="stable").astype(np.int64)
        columns = [c.combine_chunks() for c in keys.columns]
        table = pa.table(
            [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in columns],
            names=keys.column_names,
        )
        order = pc.sort_indices(table, sort_keys=[(n, "ascending", "at_end") for n in table.column_names])
        return order.to_numpy().astype(np.int64)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Layout:
        return cls(
            str(data["mode"]),
            *(tuple(data[k]) for k in ("keys", "lows", "shifts", "splits")),
        )


@functools.cache
def _spread_table(width: int, per: int) -> np.ndarray:
    """For every byte value, its bits ``t`` moved to ``t * width`` (the bits below ``per`` only:
    the others are never set, and would not fit)."""
    byte = np.arange(256, dtype=np.uint64)
    table = np.zeros(256, dtype=np.uint64)
    for t in range(min(8, per)):
        table |= ((byte >> np.uint64(t)) & np.uint64(1)) << np.uint64(t * width)
    return table


def key_batches(
    readers: Sequence[FragmentReader], schema: pa.Schema, keys: Sequence[str], batch_size: int
) -> Iterator[pa.RecordBatch]:
    """The key columns of the live rows of ``readers``, in arrival order."""
    from lance_ops.ops.compaction import _scan

    return _scan(readers, key_schema(schema, keys), batch_size)


def key_schema(schema: pa.Schema, keys: Sequence[str]) -> pa.Schema:
    return pa.schema([schema.field(k) for k in keys])


def survey(
    readers: Sequence[FragmentReader],
    schema: pa.Schema,
    keys: Sequence[str],
    batch_size: int,
    live_rows: int,
    seed: int = 0,
) -> Survey:
    """The :class:`Survey` of the live rows of ``readers`` (of ``live_rows`` in all the fragments
    being clustered: the sample rate is the same in every part), sampling about ``SAMPLE_ROWS``."""
    rate = min(1.0, SAMPLE_ROWS / max(live_rows, 1))
    return Survey.of(key_batches(readers, schema, keys, batch_size), key_schema(schema, keys), rate, seed)


def range_count(held_bytes: int, live_rows: int, budget: int) -> int:
    """Ranges the sort of rows taking ``held_bytes`` in memory (decoded, :func:`decoded_bytes`)
    needs for ``budget``: 1 when the rows fit ``IN_MEMORY_SHARE`` of it (the rest: the sorted
    slice being written and the writer's pages), else enough that one range takes at most
    ``RANGE_SHARE`` of it (half the budget goes to the open spill writers' caches, the rest to one
    range and its sorted slices); at most ``MAX_SPILL_BUCKETS`` spill files of at least 1024 rows."""
    if held_bytes <= budget * IN_MEMORY_SHARE:
        return 1
    wanted = -(-held_bytes // max(1, int(budget * RANGE_SHARE)))
    return int(max(2, min(wanted, MAX_SPILL_BUCKETS, live_rows // 1024)))


def held_bytes(readers: Sequence[FragmentReader], schema: pa.Schema, live_rows: int) -> int:
    """What sorting the ``live_rows`` rows of ``readers`` holds, for the budget: their decoded size
    (:func:`decoded_bytes`), or their data files' size when that is larger."""
    data_bytes = sum(d.file_size_bytes or 0 for r in readers for d in r.metadata.files)
    return max(data_bytes, decoded_bytes(readers, schema, live_rows))


def decoded_bytes(readers: Sequence[FragmentReader], schema: pa.Schema, live_rows: int) -> int:
    """Estimated Arrow bytes of ``live_rows`` rows of ``readers``: the first ``PROBE_ROWS`` rows
    of up to three fragments (first, middle, last) decoded and measured, scaled to the row count."""
    nonempty = [r for r in readers if r.physical_rows]
    if not nonempty or not live_rows:
        return 0
    picked = {id(r): r for r in (nonempty[0], nonempty[len(nonempty) // 2], nonempty[-1])}.values()
    rows = measured = 0
    for reader in picked:
        n = min(reader.physical_rows, PROBE_ROWS)
        measured += reader.read(tuple(schema.names), np.arange(n, dtype=np.int64)).nbytes
        rows += n
    return int(measured / rows * live_rows)


def _sorted_slices(table: pa.Table, permutation: np.ndarray, batch_size: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``table`` at ``permutation``, taken and yielded ``batch_size`` at a time (never
    a second full copy of the rows)."""
    for start in range(0, len(permutation), batch_size):
        yield from table.take(pa.array(permutation[start : start + batch_size])).to_batches()


# ----------------------------------------------------------------------------------------- indices


def check_indices(files: VersionFiles, fragments: Sequence[DataFragment], options: CompactionOptions) -> None:
    """:class:`ClusterIndexError` naming the first index over ``fragments`` that a clustering
    would leave wrong. With stable row ids an index holding row ids keeps its files (the ids move
    with the rows); any other index is remapped with the old -> new row addresses (a permutation
    is just such a mapping), and a type that cannot be remapped only loses the fragments when row
    ids are stable (the new fragments are scanned unindexed until it is optimized). Refused: an
    index covering only some of the fragments (their rows would mix), ``defer_index_remap`` or an
    index behind a deferred remap, and without stable row ids a type the codecs cannot remap: a
    Fragment Reuse Index maps rows in order, and cannot express a permutation. (INVERTED indices
    are remapped like the others, deleted rows leaving them.) Zone maps are left as compaction
    leaves them."""
    from lance_ops.index.remap import REMAPPABLE_TYPES
    from lance_ops.index.types import index_type_of
    from lance_ops.ops.index_remap import covering
    from lance_ops.table import frag_reuse
    from lance_ops.table.indices import holds_row_ids, is_zone_map

    manifest = files.manifest
    stable = manifest.uses_stable_row_ids
    ids = BitMap(f.id for f in fragments)
    for index in covering(manifest, fragments):
        if is_zone_map(index):
            continue
        name = index.name
        missing = ids - frag_reuse.effective_fragment_ids(manifest, index)
        if missing:
            raise ClusterIndexError(
                f"index {name!r} covers only some of the fragments to cluster (not {list(missing)}): "
                "optimize the index (optimize_indices) before clustering",
                name,
            )
        if stable and holds_row_ids(index):
            continue
        if options.defer_index_remap or frag_reuse.is_behind(manifest, index):
            raise ClusterIndexError(
                f"index {name!r}: a clustering permutes rows, which a deferred remap (Fragment Reuse "
                "Index) cannot express; cluster without defer_index_remap, after remapping the index",
                name,
            )
        kind = index_type_of(index, files.storage)
        if kind not in REMAPPABLE_TYPES and not stable:
            raise ClusterIndexError(
                f"{kind} index {name!r} cannot be remapped by lance_ops; "
                "drop it or cluster after it is rebuilt",
                name,
            )


def keeps_order(result: RewriteResult) -> bool:
    """Whether ``result`` keeps its rows in order (every old fragment's surviving rows in turn, in
    the order of ``original_fragments``): what a Fragment Reuse Index can record."""
    if result.row_addrs is None or len(result.row_addrs) < 2:
        return True
    addrs = result.row_addrs.astype(np.uint64)
    position = {f.id: n for n, f in enumerate(result.original_fragments)}
    ids = (addrs >> np.uint64(32)).astype(np.int64)
    unique, inverse = np.unique(ids, return_inverse=True)
    ranks = np.array([position.get(int(i), -1) for i in unique], dtype=np.int64)[inverse]
    keys = (ranks << 32) | (addrs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return bool(np.all(np.diff(keys) > 0))


def refuse_deferred_permutation(results: Sequence[RewriteResult], deferred: Sequence[str]) -> None:
    """:class:`ClusterIndexError` when an index would be deferred to the Fragment Reuse Index for
    results that permute rows (a clustering): the reuse index would map the rows wrongly."""
    if deferred and not all(keeps_order(r) for r in results):
        raise ClusterIndexError(
            f"index {deferred[0]!r} would be deferred through the Fragment Reuse Index, which cannot "
            "express the clustering's permutation of rows; nothing committed",
            deferred[0],
        )


# ---------------------------------------------------------------------------------------- planning


def in_order(readers: Sequence[FragmentReader], schema: pa.Schema, layout: Layout, batch_size: int) -> bool:
    """Whether the live rows of ``readers`` already are in clustering order (one pass over the
    keys, each batch checked with the last row of the one before)."""
    if layout.mode == "zorder":  # in order when the Morton codes never decrease
        last = np.zeros(1, dtype=np.uint64)
        for batch in key_batches(readers, schema, layout.keys, batch_size):
            codes = np.concatenate([last, layout.routing(pa.Table.from_batches([batch]))])
            if not bool(np.all(codes[1:] >= codes[:-1])):
                return False
            last = codes[-1:]
        return True
    previous: pa.Table | None = None
    for batch in key_batches(readers, schema, layout.keys, batch_size):
        table = pa.Table.from_batches([batch])
        if previous is not None:
            table = pa.concat_tables([previous, table])
        order = layout.order(table)
        if not bool(np.all(order == np.arange(len(order)))):
            return False
        previous = table.slice(table.num_rows - 1)
    return True


def plan(files: VersionFiles, the_plan: CompactionPlan) -> CompactionPlan:
    """The clustering plan: one task of every fragment not excluded, or ``the_plan`` unchanged when
    the fragments are already in key order and ``the_plan`` has nothing to do."""
    from lance_ops.ops.compaction import CompactionTask

    options = the_plan.options
    mode = options.cluster_mode or "sort"
    check_keys(files.schema, options.cluster_by, mode)
    manifest: Manifest = files.manifest
    excluded = set(options.excluded_fragment_ids)
    fragments = tuple(f for f in manifest.fragments if f.id not in excluded and f.num_rows > 0)
    if not fragments and not the_plan.tasks:
        return the_plan
    gone = tuple(f for f in manifest.fragments if f.id not in excluded and f.num_rows == 0)
    if options.cluster_incremental:
        return incremental_plan(files, the_plan, fragments, gone)
    check_indices(files, fragments, options)
    if not the_plan.tasks:
        readers = [files.fragment(f) for f in fragments]
        batch_size = options.batch_size or 8192
        layout = Layout(mode, options.cluster_by)
        if mode == "zorder":
            live = sum(f.num_rows for f in fragments)
            layout = Layout.build(
                survey(readers, files.schema, options.cluster_by, batch_size, live), mode, layout.keys
            )
        if in_order(readers, files.schema, layout, batch_size):
            return the_plan
    task = CompactionTask(manifest.version, fragments + gone, options)
    return replace(the_plan, tasks=(task,))


def incremental_plan(
    files: VersionFiles,
    the_plan: CompactionPlan,
    fragments: Sequence[DataFragment],
    gone: Sequence[DataFragment],
) -> CompactionPlan:
    """The incremental clustering plan (``cluster_incremental``, sort mode only).

    The rule: each fragment's range is the lowest and highest routing key of its live rows (the
    first key's order-preserving form). Taking the fragments by ascending id (older first), a
    fragment is *clustered* when its range overlaps none of the clustered fragments before it
    (ranges that only touch do not overlap); the others are *new*. Each new row is routed to the
    clustered fragment whose range it falls in, the ranges being extended down to the next one's
    lowest key (the first taking everything below it). The task rewrites the new fragments and
    the clustered ones that receive a row (or have deletions to materialise: above the threshold,
    or any with ``purge``), each such range sorted and written as fragments of its own; every other
    fragment is left alone. No clustered fragment yet: the whole set is clustered. So a night
    after appends rewrites only the ranges the new rows fall into, and the ranges stay disjoint
    (overlap depth about 1)."""
    from lance_ops.ops.compaction import CompactionTask

    options = the_plan.options
    if (options.cluster_mode or "sort") != "sort":
        raise InvalidOptionError(
            "cluster_incremental needs cluster_mode='sort' (z-order ranges are not kept)"
        )
    layout = Layout("sort", options.cluster_by)
    first = key_schema(files.schema, options.cluster_by[:1])
    batch_size = options.batch_size or 8192
    routed: dict[int, np.ndarray] = {}
    for fragment in fragments:
        reader = files.fragment(fragment)
        batches = key_batches([reader], files.schema, first.names, batch_size)
        keys = pa.Table.from_batches(list(batches), schema=first)
        routed[fragment.id] = layout.routing(keys)
    clustered: list[tuple[int, int, DataFragment]] = []
    new: list[DataFragment] = []
    for fragment in sorted(fragments, key=lambda f: f.id):
        lo, hi = int(routed[fragment.id].min()), int(routed[fragment.id].max())
        if all(not (lo < b and a < hi) for a, b, _ in clustered):
            clustered.append((lo, hi, fragment))
        else:
            new.append(fragment)
    if not clustered or not new and not any(_deleting(f, options) for _, _, f in clustered):
        if not clustered:
            return plan(files, replace(the_plan, options=replace(options, cluster_incremental=False)))
        return replace(the_plan, tasks=())
    clustered.sort(key=lambda item: item[0])
    bounds = np.array([lo for lo, _, _ in clustered[1:]], dtype=np.uint64)
    hit = {int(i) for f in new for i in np.unique(np.searchsorted(bounds, routed[f.id], side="right"))}
    affected = [f for n, (_, _, f) in enumerate(clustered) if n in hit or _deleting(f, options)]
    splits = sorted({int(routed[f.id].min()) for f in affected})
    rewrite = tuple(affected) + tuple(new)
    check_indices(files, rewrite, options)
    task = CompactionTask(files.manifest.version, rewrite + tuple(gone), options, tuple(splits[1:]))
    return replace(the_plan, tasks=(task,))


def _deleting(fragment: DataFragment, options: CompactionOptions) -> bool:
    if fragment.deletion_file is None or not fragment.physical_rows:
        return False
    share = fragment.num_deleted_rows / fragment.physical_rows
    return options.purge or options.materialize_deletions and share > options.materialize_deletions_threshold


# --------------------------------------------------------------------------------------- execution


def ordered_batches(
    files: VersionFiles, readers: Sequence[FragmentReader], options: CompactionOptions, batch_size: int
) -> tuple[Iterator[pa.RecordBatch], np.ndarray]:
    """The live rows of ``readers`` in clustering order, and the permutation: the ``n``-th row out
    is the ``order[n]``-th live row in arrival order. ``order`` is filled as the batches are
    consumed (complete once they are).

    When the data files of ``readers`` exceed ``cluster_memory_bytes``, this is a range-partitioned
    external sort: the keys are surveyed (a sample gives the split points), the rows routed into
    one spill file per range (Lance files under :func:`spill_location`), then each range read back,
    sorted in memory and streamed out in turn. Otherwise the rows are sorted in memory."""
    from lance_ops.ops.compaction import _scan

    schema = files.schema
    mode = options.cluster_mode or "sort"
    check_keys(schema, options.cluster_by, mode)
    live_rows = sum(r.physical_rows - len(r.deleted) for r in readers)
    order = np.empty(live_rows, dtype=np.int64)
    held = held_bytes(readers, schema, live_rows)
    budget = options.cluster_memory_bytes or DEFAULT_CLUSTER_MEMORY_BYTES
    ranges = range_count(held, live_rows, budget)
    if ranges == 1:
        table = pa.Table.from_batches(list(_scan(readers, schema, batch_size)), schema=schema)
        keys = table.select(list(options.cluster_by))
        found = Survey.of(keys.to_batches(), keys.schema, 0.0)
        order[:] = Layout.build(found, mode, options.cluster_by).order(keys)
        del keys
        return _sorted_slices(table, order, batch_size), order
    found = survey(readers, schema, options.cluster_by, batch_size, live_rows)
    layout = Layout.build(found, mode, options.cluster_by, ranges)
    return _spilled(files, readers, layout, options, order, batch_size), order


def spill_location(files: VersionFiles, options: CompactionOptions) -> tuple[ObjectStore, str]:
    """A fresh directory for the spill files of one clustering: below ``cluster_spill_location``
    (a local path or an object-store URI, reached with the dataset's storage options; config
    ``lance-ops.cluster-spill-location``), else below the local temporary directory (``TMPDIR``;
    on a Spark executor its first ``SPARK_LOCAL_DIRS`` entry)."""
    base = options.cluster_spill_location
    if not base:
        local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
        base = local if local and os.path.isdir(local) else tempfile.gettempdir()
    store, root = files.storage.locate(str(base))
    return store, store.join(root, f"lance-ops-cluster-{uuid.uuid4().hex}")


def _spilled(
    files: VersionFiles,
    readers: Sequence[FragmentReader],
    layout: Layout,
    options: CompactionOptions,
    order: np.ndarray,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """External sort: rows routed into one spill file per range (with their arrival position),
    then each range sorted in memory; ``order`` receives the positions as ranges are sorted."""
    from lance_ops.ops.compaction import _scan

    schema = files.schema
    keys = list(layout.keys)
    spill_schema = schema.append(pa.field(_POSITION, pa.int64()))
    store, directory = spill_location(files, options)
    paths = [store.join(directory, f"range-{r}.lance") for r in range(layout.ranges)]
    spills: dict[int, SpillFile] = {}
    budget = options.cluster_memory_bytes or DEFAULT_CLUSTER_MEMORY_BYTES
    # what the open spill files hold, in all: about half the budget
    cache = max(SPILL_CACHE_MIN_BYTES, budget // (2 * layout.ranges))
    try:
        position = 0
        for batch in _scan(readers, schema, batch_size):
            where = layout.range_of(pa.Table.from_batches([batch.select(keys)]))
            positions = pa.array(np.arange(position, position + batch.num_rows, dtype=np.int64))
            position += batch.num_rows
            with_position = pa.RecordBatch.from_arrays([*batch.columns, positions], schema=spill_schema)
            # the batch's rows grouped by range (one stable take), each range's rows one slice
            grouped, counts = with_position, np.bincount(where, minlength=layout.ranges)
            if np.count_nonzero(counts) > 1:
                grouped = with_position.take(pa.array(np.argsort(where, kind="stable")))
            start = 0
            for r in np.flatnonzero(counts).tolist():
                if r not in spills:
                    spills[r] = SpillFile(paths[r], spill_schema, store=store, cache_bytes=cache)
                spills[r].write(grouped.slice(start, int(counts[r])))
                start += int(counts[r])
        for spill in spills.values():
            spill.close()
        done = 0
        for r in sorted(spills):
            table = spills[r].read()
            permutation = layout.order(table.select(keys))
            order[done : done + len(permutation)] = table[_POSITION].to_numpy()[permutation]
            done += len(permutation)
            table = table.drop_columns([_POSITION])
            yield from _sorted_slices(table, permutation, batch_size)
            del table
    finally:
        for spill in spills.values():
            spill.discard()
        with contextlib.suppress(OSError):
            store.remove_directories(directory)


class SpillFile:
    """The spill file of one range of the external sort: a Lance file whose columns are encoded
    cheaply (:func:`spill_schema`: lz4, no dictionaries, no page statistics), since it is read back
    once, soon, and never committed; the dataset's own encodings would cost several times the sort.
    The writer gathers up to ``cache_bytes`` per column before it encodes a page."""

    def __init__(self, path: str, schema: pa.Schema, *, store: ObjectStore, cache_bytes: int) -> None:
        self.path = path
        self._store = store
        self._closed = False
        self._writer = LanceFileWriter(
            path,
            spill_schema(schema),
            store=store,
            data_cache_bytes=max(1, cache_bytes // len(schema)),
            page_statistics=False,
        )

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        """Encode what is gathered and publish the file."""
        self._writer.close()
        self._closed = True

    def read(self) -> pa.Table:
        """The rows written (the dataset's schema and the position column), the file deleted."""
        table = LanceFileReader(self.path, store=self._store).read_all().to_table()
        self._store.delete(self.path)
        return table.cast(_plain_schema(table.schema)).combine_chunks()

    def discard(self) -> None:
        """Nothing left behind (whether closed, read or not)."""
        if not self._closed:
            self._writer.abort()
            self._closed = True
        elif self._store.exists(self.path):
            self._store.delete(self.path)


def spill_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field (blobs excepted) marked for lz4 and no dictionary encoding."""
    fields = []
    for field in schema:
        metadata = dict(field.metadata or {})
        if BLOB_KEY.encode() not in metadata:
            metadata.update({_SPILL_COMPRESSION: b"lz4", _SPILL_DICTIONARY: b"never"})
        fields.append(field.with_metadata(metadata))
    return pa.schema(fields, metadata=schema.metadata)


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without the spill encoding marks (the fields as the dataset has them)."""
    marks = {_SPILL_COMPRESSION, _SPILL_DICTIONARY}
    fields = [
        f.with_metadata({k: v for k, v in (f.metadata or {}).items() if k not in marks} or None)
        for f in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)


def addresses_in_order(
    readers: Sequence[FragmentReader], order: np.ndarray, chunk: int = ADDRESS_CHUNK
) -> np.ndarray:
    """The old row addresses of the rows ``order`` lists (positions among the live rows of
    ``readers`` in arrival order), written over ``order`` itself (int64, consumed) a chunk at a
    time: no second row-per-entry array besides the fragments' live offsets (uint32) when some have
    deleted rows. Returns ``order``'s buffer viewed as uint64."""
    counts = np.array([r.physical_rows - len(r.deleted) for r in readers], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    ids = np.array([r.id for r in readers], dtype=np.uint64) << np.uint64(32)
    live = None
    if any(len(r.deleted) for r in readers):
        live = np.concatenate([r.live_offsets().astype(np.uint32) for r in readers])
    out = order.view(np.uint64)
    for begin in range(0, len(order), chunk):
        positions = order[begin : begin + chunk]
        fragment = np.searchsorted(starts, positions, side="right") - 1
        offsets = live[positions] if live is not None else positions - starts[fragment]
        out[begin : begin + len(positions)] = ids[fragment] | offsets.astype(np.uint64)
    return out


def execute_range(files: VersionFiles, task: CompactionTask, layout: Layout, index: int) -> RewriteResult:
    """Range ``index`` of ``layout`` over the fragments of ``task``, rewritten (nothing committed):
    its rows found by their keys, read, sorted and written as new fragments. The result's
    ``row_addrs`` are the old addresses of the range's rows in their new order, and with stable
    row ids the new fragments carry those rows' ids. The results of every range, concatenated in
    range order, are what :func:`lance_ops.ops.compaction.execute_task` returns for ``task``."""
    return execute_ranges(files, task, layout, [index])[0]


def execute_ranges(
    files: VersionFiles, task: CompactionTask, layout: Layout, indices: Sequence[int]
) -> list[RewriteResult]:
    """:func:`execute_range` of each of ``indices`` (the keys read once; one range in memory at a time)."""
    from lance_ops.ops.compaction import CompactionMetrics, RewriteResult, write_rows

    options = task.options
    schema = files.schema
    batch_size = options.batch_size or 8192
    readers = [files.fragment(f) for f in task.fragments]
    lives = [r.live_offsets().astype(np.int64) for r in readers]
    where = []
    for reader in readers:
        keys = pa.Table.from_batches(
            list(key_batches([reader], schema, layout.keys, batch_size)),
            schema=key_schema(schema, layout.keys),
        )
        where.append(layout.range_of(keys))
    starts = np.cumsum([0] + [len(live) for live in lives])
    results = []
    for index in indices:
        parts: list[pa.Table] = []
        positions: list[np.ndarray] = []
        for n, reader in enumerate(readers):
            mine = np.flatnonzero(where[n] == index)
            if len(mine):
                parts.append(reader.read(tuple(schema.names), lives[n][mine]).cast(schema))
                positions.append(mine + starts[n])
        table = pa.concat_tables(parts) if parts else schema.empty_table()
        permutation = layout.order(table.select(list(layout.keys)))
        order = np.concatenate(positions)[permutation] if positions else np.zeros(0, np.int64)
        del parts
        new = write_rows(files, options, _sorted_slices(table, permutation, batch_size), table.num_rows)
        del table
        if files.manifest.uses_stable_row_ids:
            new = moved_sequences(files, readers, new, order)
        metrics = CompactionMetrics(fragments_added=len(new), files_added=sum(len(f.files) for f in new))
        addresses = addresses_in_order(readers, order)
        results.append(
            RewriteResult(task.read_version, tuple(task.fragments), tuple(new), metrics, addresses)
        )
    return results


def execute_split_task(files: VersionFiles, task: CompactionTask) -> RewriteResult:
    """An incremental clustering task (its ``cluster_splits`` from :func:`plan`): every range
    sorted and written as fragments of its own, so that none spans the key range of a fragment
    left alone."""
    assert task.cluster_splits is not None
    layout = Layout("sort", task.options.cluster_by, splits=task.cluster_splits)
    return merge_ranges(task, execute_ranges(files, task, layout, range(layout.ranges)))


def merge_ranges(task: CompactionTask, results: Sequence[RewriteResult]) -> RewriteResult:
    """The results of every range of ``task`` (in range order) as the one result of ``task``."""
    from lance_ops.ops.compaction import CompactionMetrics, RewriteResult

    new = tuple(f for r in results for f in r.new_fragments)
    metrics = CompactionMetrics(
        fragments_removed=len(task.fragments),
        fragments_added=len(new),
        files_removed=sum(len(f.files) + (f.deletion_file is not None) for f in task.fragments),
        files_added=sum(len(f.files) for f in new),
    )
    parts = [r.row_addrs for r in results if r.row_addrs is not None]
    addresses = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    return RewriteResult(
        task.read_version, tuple(task.fragments), new, metrics, addresses, task.options.defer_index_remap
    )


def moved_sequences(
    files: VersionFiles, readers: Sequence[FragmentReader], new: Sequence[DataFragment], order: np.ndarray
) -> list[DataFragment]:
    """``new`` with the row ids and versions of the rows they received: the live rows' ids and
    per-row versions in arrival order, permuted by ``order``, cut into the new fragments."""
    for reader in readers:
        if reader.metadata.row_ids is None:
            raise UnsupportedFeatureError(f"fragment {reader.id} has no row id sequence")

    def row_ids(reader: FragmentReader) -> np.ndarray:
        assert reader.metadata.row_ids is not None
        segments = decode_row_id_segments(load_sequence(files.store, files.root, reader.metadata.row_ids))
        return np.concatenate(segments or [np.zeros(0, np.uint64)])

    def versions(field: str) -> Callable[[FragmentReader], np.ndarray]:
        def per_row(reader: FragmentReader) -> np.ndarray:
            value = getattr(reader.metadata, field)
            if value is None:
                return np.ones(reader.physical_rows, dtype=np.uint64)
            return decode_versions(load_sequence(files.store, files.root, value), reader.physical_rows)

        return per_row

    # one kind at a time, versions narrowed to 32 bits where they fit: a few arrays of a row each
    all_ids = _permuted(readers, row_ids, order)
    made = _permuted(readers, versions("created_at_versions"), order, narrow=True)
    changed = _permuted(readers, versions("last_updated_at_versions"), order, narrow=True)
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


def _permuted(
    readers: Sequence[FragmentReader],
    values_of: Callable[[FragmentReader], np.ndarray],
    order: np.ndarray,
    narrow: bool = False,
) -> np.ndarray:
    """``values_of(reader)`` (a value per physical row) of the live rows of ``readers`` in arrival
    order, permuted by ``order``; as uint32 when ``narrow`` and every value fits."""
    parts = []
    for reader in readers:
        values = values_of(reader)
        if len(reader.deleted):
            live = np.ones(reader.physical_rows, dtype=bool)
            live[reader.deleted.astype(np.int64)] = False
            values = values[live]
        if narrow and (not len(values) or int(values.max()) <= np.iinfo(np.uint32).max):
            values = values.astype(np.uint32)
        parts.append(values)
    joined = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    del parts
    return joined[order]
