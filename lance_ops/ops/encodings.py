"""Profiling data into a dataset encoding plan (:mod:`lance_ops.encoding.plan`) and storing it.

A :class:`DataProfile` holds, per top-level primitive column, an HLL sketch of its distinct values,
its non-null value count and their total size. Profiles merge (``a.merge(b)``), so each Spark
partition or fragment can be profiled on its own and the driver merges the results; fragments
with fresh statistics (:mod:`lance_ops.ops.statistics`) reuse their stored sketches. The plan is
then decided per column by the compression strategy
(:func:`lance_ops.encoding.compression_strategy.column_wants_dictionary`), with the
``lance-encoding:*`` options of the column's field metadata (dict-divisor, dict-size-ratio).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.compression_strategy import column_wants_dictionary
from lance_ops.encoding.options import EncodingOptions
from lance_ops.encoding.plan import CONFIG_KEY, ColumnPlan, EncodingPlan
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.encoding.structural.values import is_variable_width
from lance_ops.fragment.reader import VersionFiles
from lance_ops.fragment.writer import to_reader
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.table.manifest import Manifest
from lance_ops.table.transaction import Transaction, UpdateConfig, UpdateMap

__all__ = [
    "ColumnProfile",
    "DataProfile",
    "is_profiled",
    "merge_profiles",
    "profile",
    "profile_data",
    "store_plan",
]


def is_profiled(type_: pa.DataType) -> bool:
    """Columns a plan decides: primitive, non-boolean (dictionary-typed columns are always dictionaries)."""
    return not (
        pa.types.is_nested(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_null(type_)
        or pa.types.is_dictionary(type_)
    )


@dataclass(frozen=True)
class ColumnProfile:
    """Distinct-value sketch, non-null value count and total value bytes of one column."""

    sketch: DistinctSketch
    num_values: int
    value_bytes: int

    @classmethod
    def of(cls, array: pa.Array | pa.ChunkedArray, sketch: DistinctSketch | None = None) -> ColumnProfile:
        count = len(array) - array.null_count
        if is_variable_width(array.type):
            size = int(pc.sum(pc.binary_length(array)).as_py() or 0)
        else:
            size = count * array.type.bit_width // 8
        return cls(sketch if sketch is not None else DistinctSketch().update(array), count, size)

    def merge(self, other: ColumnProfile) -> ColumnProfile:
        return ColumnProfile(
            self.sketch.merge(other.sketch),
            self.num_values + other.num_values,
            self.value_bytes + other.value_bytes,
        )


@dataclass(frozen=True)
class DataProfile:
    """Per-column profiles of some data (a table, a fragment, a Spark partition)."""

    schema: pa.Schema
    columns: Mapping[str, ColumnProfile]

    def merge(self, other: DataProfile) -> DataProfile:
        names = [n for n in self.schema.names if n in self.columns or n in other.columns]
        merged = {
            n: self.columns[n].merge(other.columns[n])
            if n in self.columns and n in other.columns
            else self.columns.get(n) or other.columns[n]
            for n in names
        }
        return DataProfile(self.schema, merged)

    def plan(self) -> EncodingPlan:
        """The encoding plan: per column, dictionary or not from the merged HLL estimate."""
        out = {}
        for name, column in self.columns.items():
            item = self.schema.field(name)
            options = EncodingOptions.from_metadata(item.metadata)
            mean = column.value_bytes / column.num_values if column.num_values else 0.0
            wants = column_wants_dictionary(
                item.type, column.sketch.estimate(), column.num_values, mean, options
            )
            out[name] = ColumnPlan(
                dictionary=wants,
                compression=options.compression,
                bss=options.bss,
                rle_threshold=options.rle_threshold,
            )
        return EncodingPlan(out)


def _profile_table(table: pa.Table, sketches: Mapping[str, DistinctSketch] | None = None) -> DataProfile:
    sketches = sketches or {}
    columns = {
        f.name: ColumnProfile.of(table.column(f.name), sketches.get(f.name))
        for f in table.schema
        if is_profiled(f.type)
    }
    return DataProfile(table.schema, columns)


def profile_data(data: Any, schema: pa.Schema | None = None) -> DataProfile:
    """Profile tabular data (a Table, RecordBatch, reader, pandas frame or iterable of batches)."""
    reader = to_reader(data, schema)
    empty = DataProfile(reader.schema, {})
    return reduce(DataProfile.merge, (_profile_table(pa.Table.from_batches([b])) for b in reader), empty)


def _profile_version(files: VersionFiles, columns: Sequence[str] | None) -> DataProfile:
    schema = files.schema
    names = [n for n in (columns or schema.names) if is_profiled(schema.field(n).type)]
    ids = {n: files.lance_schema.field(n).id for n in names}
    profiles = []
    for fragment in files.fragments():
        stats = fragment.statistics(sketches=True)
        stored = (
            {} if stats is None else {n: stats.sketches[i] for n, i in ids.items() if i in stats.sketches}
        )
        table = fragment.read(names, fragment.live_offsets())
        profiles.append(_profile_table(table, stored))
    return reduce(DataProfile.merge, profiles, DataProfile(schema.remove_metadata(), {}))


def profile(source: VersionFiles | Any, columns: Sequence[str] | None = None) -> EncodingPlan:
    """The encoding plan of a dataset version (``VersionFiles`` or a dataset) or of tabular data."""
    files = getattr(source, "_files", source)
    if isinstance(files, VersionFiles):
        return _profile_version(files, columns).plan()
    data = profile_data(source)
    if columns is not None:
        data = replace(data, columns={n: p for n, p in data.columns.items() if n in columns})
    return data.plan()


def merge_profiles(profiles: Iterable[DataProfile]) -> DataProfile:
    """One profile of all ``profiles`` (e.g. of the partitions of a Spark write)."""
    return reduce(DataProfile.merge, profiles)


def store_plan(
    files: VersionFiles, plan: EncodingPlan, options: CommitOptions | None = None
) -> tuple[Manifest, Transaction]:
    """Commit ``plan`` as the dataset's encoding plan (one ``UpdateConfig``); later appends follow it."""
    options = options or CommitOptions()
    operation = UpdateConfig(config_updates=UpdateMap(((CONFIG_KEY, plan.to_json()),)))
    return commit(files.storage, operation, replace(options, read_version=files.manifest.version))
