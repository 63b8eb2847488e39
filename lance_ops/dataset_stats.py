"""``LanceDataset.stats``: pylance's dataset statistics plus column statistics.

``dataset_stats()`` has pylance's keys. ``column_stats(name)`` has one row per fragment
(``fragment_id, null_count, min_value, max_value, distinct_count``; min / max in the column's
type, nulls where the fragment has no usable statistics) and ``column_summary(name)`` bounds the
whole dataset, its distinct count from the fragments' merged sketches. Statistics describe a
fragment's data files, so they count *physical* rows: a deleted row's value and its null still
count (``add_columns`` writes nulls for deleted rows, so a new column may show as many nulls as the
dataset has deleted rows), and bounds are bounds, not values (they may be truncated, or belong to
deleted rows). ``counted_rows(name)`` says how many physical and deleted rows the figures cover;
``live_null_count(name)`` counts nulls among live rows, from statistics where a fragment has no
deleted rows and by reading the column where it has (or, with ``read=False``, None there).
``rebuild(...)`` computes missing statistics (:func:`lance_ops.ops.statistics.rebuild`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.encoding.statistics import merge_statistics, statistics_type, supports_statistics
from lance_ops.errors import SchemaError
from lance_ops.ops import statistics as statistics_op
from lance_ops.ops.commit import CommitOptions
from lance_ops.progress import ProgressCallback
from lance_ops.query.predicate import parse_predicate
from lance_ops.table.statistics import FragmentStatistics

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset
    from lance_ops.fragment.reader import FragmentReader
    from lance_ops.table.manifest import DataFile

__all__ = ["DataStatistics", "FieldStatistics", "LanceStats"]

DEFAULT_MAX_ROWS_PER_GROUP = 1024


def _python_value(scalar: pa.Scalar) -> Any:
    """``scalar`` as a Python value, or the Arrow scalar itself where Python cannot hold it.

    Bounds of temporal columns may be the type's extremes (the format's unknown bounds, or real
    values): ``date32`` -2147483648 days, ``timestamp`` -2**63 (which pandas would call NaT);
    a value that does not convert back to the same scalar stays an Arrow scalar too.
    """
    if not scalar.is_valid:
        return None
    try:
        value = scalar.as_py()
    except (OverflowError, ValueError, pa.ArrowException):
        return scalar
    if pa.types.is_temporal(scalar.type) and value != value:  # a NaT stands for a real bound here
        return scalar
    try:  # a value Python holds only in part (date64 milliseconds within a day) stays Arrow's
        exact = pa.scalar(value, scalar.type).equals(scalar)
    except (OverflowError, ValueError, TypeError, pa.ArrowException):
        exact = False
    return value if exact else scalar


@dataclass(frozen=True)
class FieldStatistics:
    """Bytes of one field's pages on disk, over the version's data files (pylance's)."""

    id: int
    bytes_on_disk: int


@dataclass(frozen=True)
class DataStatistics:
    """``ds.stats.data_stats()``: one :class:`FieldStatistics` per field id of the schema, nested
    fields included, in schema order (pylance's ``lance.dataset.DataStatistics``)."""

    fields: list[FieldStatistics]


def _add_file_sizes(sizes: dict[int, int], data_file: DataFile, columns: Sequence[int]) -> None:
    """Add a data file's column sizes to their fields. A column that starts no field (a field
    spanning several columns) counts for the field before it; fields no longer in the schema
    are left out."""
    starts = {
        column: field for field, column in zip(data_file.fields, data_file.column_indices, strict=False)
    }
    if not data_file.column_indices:  # files written before column indices: one column per field
        starts = dict(enumerate(data_file.fields))
    current = 0
    for column, size in enumerate(columns):
        current = starts.get(column, current)
        if current in sizes:
            sizes[current] += size


class LanceStats:
    """Statistics about one version of a dataset (``ds.stats``)."""

    def __init__(self, ds: LanceDataset) -> None:
        self._ds = ds

    def dataset_stats(self, max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP) -> dict[str, int]:
        """pylance's: deleted rows, fragments, and fragments of fewer than ``max_rows_per_group`` rows."""
        fragments = self._ds.handle.files.fragments()
        return {
            "num_deleted_rows": sum(f.physical_rows - f.live_count for f in fragments),
            "num_fragments": len(fragments),
            "num_small_files": sum(f.physical_rows < max_rows_per_group for f in fragments),
        }

    def data_stats(self) -> DataStatistics:
        """Bytes on disk of every field's pages (buffers of the column metadata's pages, as
        pylance counts them); 0 for every field of legacy (0.1) files, which pylance does not
        measure either."""
        files = self._ds.handle.files
        sizes = dict.fromkeys((f.id for f in files.lance_schema.fields), 0)
        for fragment in files.manifest.fragments:
            for data_file in fragment.files:
                if data_file.file_major_version >= 2:
                    columns = files.open_file(data_file).file_statistics().columns
                    _add_file_sizes(sizes, data_file, [c.size_bytes for c in columns])
        return DataStatistics([FieldStatistics(field_id, size) for field_id, size in sizes.items()])

    def index_stats(self, index_name: str) -> dict[str, Any]:
        """Coverage of the index ``index_name`` (pylance's keys: type, segments, indexed and
        unindexed fragments and rows); :class:`~lance_ops.errors.IndexNotFoundError` if none."""
        from lance_ops.ops.indices import index_stats  # noqa: PLC0415 (keeps the facade light)

        return index_stats(self._ds.handle.files, index_name)

    def _field(self, name: str) -> tuple[int, pa.DataType]:
        schema = self._ds.schema
        if schema.get_field_index(name) < 0:
            raise SchemaError(f"no such column {name!r}; the dataset has {schema.names}")
        type_ = schema.field(name).type
        if not supports_statistics(type_):
            raise SchemaError(f"column {name!r} of type {type_} has no statistics")
        return self._ds.manifest.schema.field(name).id, type_

    def _fresh(self, field_id: int) -> list[tuple[FragmentReader, FragmentStatistics | None]]:
        """Per fragment, its statistics (data files' own or a statistics file's) if they cover the field."""
        out = []
        for fragment in self._ds.handle.files.fragments():
            entry = fragment.statistics(sketches=True)
            out.append((fragment, entry if entry is not None and field_id in entry.columns else None))
        return out

    @staticmethod
    def _merged(entry: FragmentStatistics, field_id: int) -> pa.StructArray:
        """One fragment's statistics of the field as one row (``null_count, min_value, max_value``)."""
        return merge_statistics(entry.columns[field_id], entry.lengths(field_id))

    @staticmethod
    def _distinct(entries: Sequence[FragmentStatistics], field_id: int) -> int | None:
        """The merged sketches' estimate (None unless every entry has a sketch of the field)."""
        sketches = [e.sketches.get(field_id) for e in entries]
        if not sketches or any(s is None for s in sketches):
            return None
        return round(reduce(DistinctSketch.merge, (s for s in sketches if s is not None)).estimate())

    def column_stats(self, name: str) -> pa.Table:
        """One row per fragment: ``fragment_id, null_count, min_value, max_value, distinct_count``."""
        field_id, type_ = self._field(name)
        rows = self._fresh(field_id)
        empty = pa.nulls(1, statistics_type(type_))
        merged = [empty if e is None else self._merged(e, field_id) for _, e in rows]
        combined = pa.concat_arrays(merged) if merged else pa.array([], statistics_type(type_))
        distinct = [None if e is None else self._distinct([e], field_id) for _, e in rows]
        return pa.table(
            {
                "fragment_id": pa.array([f.id for f, _ in rows], pa.int64()),
                "null_count": combined.field("null_count"),
                "min_value": combined.field("min_value"),
                "max_value": combined.field("max_value"),
                "distinct_count": pa.array(distinct, pa.int64()),
            }
        )

    def column_summary(self, name: str) -> dict[str, Any]:
        """Bounds of the whole dataset: null count, min, max, distinct count (None where unknown).

        Bounds are Python values, or Arrow scalars where Python's types cannot hold them (dates
        and timestamps beyond ``datetime``'s years 1-9999, nanosecond extremes).

        ``fragments_with_statistics`` says how many of the ``num_fragments`` the figures cover.
        """
        field_id, type_ = self._field(name)
        entries = [e for _, e in self._fresh(field_id) if e is not None]
        summary: dict[str, Any] = {
            "null_count": None,
            "min_value": None,
            "max_value": None,
            "distinct_count": None,
        }
        if entries:
            stats = pa.concat_arrays([e.columns[field_id] for e in entries])
            lengths = np.concatenate([e.lengths(field_id) for e in entries])
            merged = merge_statistics(stats, lengths)
            summary["null_count"] = merged.field("null_count")[0].as_py()
            for key in ("min_value", "max_value"):
                summary[key] = _python_value(merged.field(key)[0])
            summary["distinct_count"] = self._distinct(entries, field_id)
        summary["fragments_with_statistics"] = len(entries)
        summary["num_fragments"] = len(self._ds.manifest.fragments)
        return summary

    def counted_rows(self, name: str) -> dict[str, int]:
        """The rows :meth:`column_summary`'s figures count: ``physical_rows`` of the fragments with
        statistics of the column and ``deleted_rows``, how many of those are deleted."""
        field_id, _ = self._field(name)
        covered = [f for f, e in self._fresh(field_id) if e is not None]
        physical = sum(f.physical_rows for f in covered)
        return {"physical_rows": physical, "deleted_rows": physical - sum(f.live_count for f in covered)}

    def live_null_count(self, name: str, read: bool = True) -> int | None:
        """Nulls among the live rows of the column.

        A fragment answers from its statistics when they are exact for its live rows (it has no
        deleted rows, or no nulls at all); any other fragment is read, unless ``read`` is False:
        then the answer is None (unknown without reading data).
        """
        field_id, _ = self._field(name)
        is_null = parse_predicate(pc.field(name).is_null(), self._ds.schema)
        total = 0
        for fragment, entry in self._fresh(field_id):
            nulls = None if entry is None else self._merged(entry, field_id).field("null_count")[0].as_py()
            if nulls is not None and (nulls == 0 or fragment.live_count == fragment.physical_rows):
                total += nulls
            elif read:
                total += fragment.count(is_null)
            else:
                return None
        return total

    def clustering(self, name: str) -> dict[str, Any]:
        """How well the fragments are clustered on column ``name`` (:mod:`lance_ops.ops.clustering`).

        Each fragment's ``[min, max]`` comes from its statistics, or from reading the column where
        it has none. ``average_overlap_depth`` is the mean, over fragments with values, of how many
        fragments' ranges meet its range (itself included): 1.0 when the ranges are disjoint, the
        number of fragments when every range spans the data. ``max_overlap_depth`` is the most
        ranges covering one value.
        """
        field_id, _ = self._field(name)
        bounds: list[tuple[Any, Any]] = []
        for fragment, entry in self._fresh(field_id):
            row = None if entry is None else self._merged(entry, field_id).to_pylist()[0]
            if row is None or row["min_value"] is None:
                values = fragment.read((name,), fragment.live_offsets())[name]
                found = pc.min_max(values).as_py()
                row = {"min_value": found["min"], "max_value": found["max"]}
            if row["min_value"] is not None and row["max_value"] is not None:
                bounds.append((row["min_value"], row["max_value"]))
        lows = np.array([b[0] for b in bounds], dtype=object)
        highs = np.array([b[1] for b in bounds], dtype=object)
        count = len(bounds)
        result: dict[str, Any] = {"column": name, "fragments": count}
        if not count:
            return {**result, "average_overlap_depth": 0.0, "max_overlap_depth": 0}
        sorted_lows, sorted_highs = np.sort(lows), np.sort(highs)
        # ranges meeting [lo, hi]: all but those starting after hi and those ending before lo
        after = count - np.searchsorted(sorted_lows, highs, side="right")
        before = np.searchsorted(sorted_highs, lows, side="left")
        depth = count - after - before
        # most ranges covering one value: at each range start, starts so far minus ends before it
        covering = np.searchsorted(sorted_lows, sorted_lows, side="right") - np.searchsorted(
            sorted_highs, sorted_lows, side="left"
        )
        return {
            **result,
            "average_overlap_depth": float(depth.mean()),
            "max_overlap_depth": int(covering.max()),
        }

    def rebuild(
        self,
        columns: Sequence[str] | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
        *,
        transaction_properties: Mapping[str, str] | None = None,
        commit: CommitOptions | None = None,
    ) -> statistics_op.RebuildResult:
        """Compute the statistics this version lacks and commit them; the dataset becomes that version.

        ``progress`` hears of every fragment computed (:mod:`lance_ops.progress`);
        ``transaction_properties`` are recorded in the transaction; ``commit`` gives the commit
        settings as one :class:`~lance_ops.CommitOptions` (as on the other mutating methods).
        """
        options = self._ds.handle.commit_options(transaction_properties, commit)
        result = statistics_op.rebuild(self._ds.handle.files, columns, force, options, progress)
        if result.manifest is not None and result.transaction is not None:
            self._ds.handle.adopt(result.manifest, result.transaction)
        return result
