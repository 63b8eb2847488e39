"""Page statistics inside the v2 data files lance-ops writes (layout: docs/statistics.md).

The format's statistics are a small Lance file of their own: one column per data-file field id,
named by the id (``"0"``, ``"3"``), of type ``struct{null_count: i64, min_value: T, max_value: T}``
(:mod:`lance_ops.encoding.statistics`), row *i* describing page *i* of that field's column in the
data file. Columns of fields with fewer pages than the longest are padded with null rows (a Lance
file's columns all have the file's row count). That statistics file is stored, whole, as one
global buffer of the data file; a second global buffer holds one DataSketches HLL sketch per
field (:mod:`lance_ops.encoding.sketch`), so reads that only prune never fetch the sketches. The
data file's schema metadata key :data:`PAGE_STATISTICS_KEY` (JSON) locates both::

    {"statistics": 1, "sketches": 2, "sketch_ranges": {"0": [0, 2096], "3": [2096, 40]},
     "float_max": "ignores-nan", "nan_counts": {"3": [[0, 4], [0, 1]]}}

Float bounds ignore NaN, as the format says (``float_max = "ignores-nan"``); ``nan_counts`` holds,
per float field id, the NaN values of each page by sign (``[[positive...], [negative...]]``,
:func:`lance_ops.encoding.statistics.page_nan_counts`) — outside the format's statistics schema,
which stays exactly the format's. Files written before that carry ``float_max = "nan-inf"``: a
float page holding NaN (of either sign) records ``+inf`` as its max; readers still prune them
exactly (:mod:`lance_ops.fragment.pruning`).

Statistics are written for top-level fields whose type has them (integers, floats, booleans,
temporal types, strings, binary), not for blob columns. pylance ignores the extra buffers and the
metadata key; readers here ignore statistics columns they do not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops._proto import file_pb2 as pb
from lance_ops.encoding.compression.dictionary import holds_dictionary
from lance_ops.encoding.sketch import UPDATE_SLICE_ROWS, DistinctSketch
from lance_ops.encoding.statistics import float_page_summary, page_statistics, supports_statistics
from lance_ops.errors import CorruptFileError
from lance_ops.file.schema import BLOB_KEY

__all__ = [
    "FLOAT_MAX_COVERS_NAN",
    "FLOAT_MAX_IGNORES_NAN",
    "PAGE_STATISTICS_KEY",
    "ColumnPageStatistics",
    "PageStatistics",
    "PageStatisticsCollector",
    "StatisticsLocation",
    "nan_counts_from_json",
    "nan_counts_json",
]

PAGE_STATISTICS_KEY = "lance-ops:page-statistics"
FLOAT_MAX_COVERS_NAN = "nan-inf"
FLOAT_MAX_IGNORES_NAN = "ignores-nan"


def nan_counts_json(counts: Mapping[int, np.ndarray]) -> dict[str, list[list[int]]]:
    """NaN counts by field id (``(2, zones)`` arrays) as JSON-ready lists."""
    return {str(i): np.asarray(c, dtype=np.int64).tolist() for i, c in counts.items()}


def nan_counts_from_json(value: Mapping[str, list[list[int]]]) -> dict[int, np.ndarray]:
    """The inverse of :func:`nan_counts_json` (``ValueError`` / ``TypeError`` when malformed)."""
    out = {}
    for key, rows in value.items():
        counts = np.asarray(rows, dtype=np.int64)
        if counts.ndim != 2 or counts.shape[0] != 2 or (counts < 0).any():
            raise ValueError(f"NaN counts of field {key} are not two rows of counts")
        out[int(key)] = counts
    return out


@dataclass(frozen=True)
class ColumnPageStatistics:
    """One column's statistics: one row per page, and the rows of each page.

    ``nan_counts``: for a float column whose file keeps them, the NaN values of each page by sign
    (shape ``(2, pages)``: positive, negative); None when unknown.
    """

    statistics: pa.StructArray
    page_rows: np.ndarray
    nan_counts: np.ndarray | None = None


@dataclass(frozen=True)
class PageStatistics:
    """The page statistics of one data file, by top-level column name.

    ``float_max_covers_nan``: a float page holding NaN has ``+inf`` as its max (files written
    here before NaN counts were kept); otherwise float bounds ignore NaN, and the columns'
    ``nan_counts`` say where NaN is (None: unknown, as in pylance's 0.1 statistics).
    """

    columns: Mapping[str, ColumnPageStatistics]
    float_max_covers_nan: bool


@dataclass(frozen=True)
class StatisticsLocation:
    """Where a data file keeps its statistics: the :data:`PAGE_STATISTICS_KEY` value, parsed.

    ``nan_counts``: per float field id, the NaN values of each page by sign (``(2, pages)``).
    ``float_max_covers_nan`` is only ever true for files written before the counts were kept.
    """

    statistics_buffer: int
    sketches_buffer: int
    sketch_ranges: Mapping[int, tuple[int, int]]
    float_max_covers_nan: bool = False
    nan_counts: Mapping[int, np.ndarray] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "statistics": self.statistics_buffer,
                "sketches": self.sketches_buffer,
                "sketch_ranges": {str(i): list(r) for i, r in self.sketch_ranges.items()},
                "float_max": FLOAT_MAX_COVERS_NAN if self.float_max_covers_nan else FLOAT_MAX_IGNORES_NAN,
                "nan_counts": nan_counts_json(self.nan_counts),
            }
        )

    @classmethod
    def from_json(cls, path: str, text: bytes) -> StatisticsLocation:
        try:
            value = json.loads(text)
            return cls(
                int(value["statistics"]),
                int(value["sketches"]),
                {int(k): (int(r[0]), int(r[1])) for k, r in value["sketch_ranges"].items()},
                value.get("float_max") == FLOAT_MAX_COVERS_NAN,
                nan_counts_from_json(value.get("nan_counts", {})),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise CorruptFileError(path, f"schema metadata {PAGE_STATISTICS_KEY} is malformed") from exc


class PageStatisticsCollector:
    """Collects, while a data file is written, the statistics of each page of its top-level fields.

    Fields are addressed by their index in the file schema; ``field_ids`` are the file's own field
    ids of those fields (pre-order numbering, as the file's schema records them).
    """

    def __init__(self, schema: pa.Schema, fields: Sequence[pb.Field]) -> None:
        top = [f.id for f in fields if f.parent_id == -1]
        self._ids: dict[int, int] = {
            i: top[i]
            for i, field in enumerate(schema)
            if supports_statistics(field.type) and (field.metadata or {}).get(BLOB_KEY.encode()) != b"true"
        }
        self._types = {i: schema.field(i).type for i in self._ids}
        self._parts: dict[int, list[pa.StructArray]] = {i: [] for i in self._ids}
        self._sketches: dict[int, DistinctSketch] = {i: DistinctSketch() for i in self._ids}
        self._nans: dict[int, list[np.ndarray]] = {
            i: [] for i in self._ids if pa.types.is_floating(self._types[i])
        }

    def wants(self, index: int) -> bool:
        return index in self._parts

    def add(self, index: int, array: pa.Array, page_rows: Sequence[int], sketch: bool = True) -> None:
        """Statistics of the pages (``page_rows`` rows each) ``array`` of field ``index`` was cut into.

        Pages that do not hold exactly the rows of ``array`` (an encoder keeping rows for later)
        leave the field without statistics. ``sketch=False``: the rows reach the field's distinct
        sketch by :meth:`update_sketch` instead (the writer runs it beside the encoding).
        """
        if sum(page_rows) != len(array):
            self.discard(index)
            return
        if array.type != self._types[index]:
            array = array.view(self._types[index])
        if index in self._nans:
            stats, nans = float_page_summary(array, page_rows)
            self._parts[index].append(stats)
            self._nans[index].append(nans)
        else:
            self._parts[index].append(page_statistics(array, page_rows))
        if sketch:
            self._sketches[index].update(array)

    def update_sketch(self, index: int, arrays: Sequence[pa.Array]) -> None:
        """Add rows of field ``index`` to its distinct sketch (nothing once the field is discarded).

        Safe beside :meth:`add` on another thread; one field's sketch takes one call at a time.
        """
        sketch = self._sketches.get(index)
        if sketch is None:
            return
        # The batches the writer buffered joined into updates of up to UPDATE_SLICE_ROWS rows: the
        # fixed cost per call is paid once per slice, not once per batch (compaction's many small
        # ones), and no copy of all the rows is made (the sketch hashes a slice at a time anyway).
        arrays = [a if a.type == self._types[index] else a.view(self._types[index]) for a in arrays]
        if not arrays or holds_dictionary(arrays[0].type):  # those: one by one, as before
            for array in arrays:
                sketch.update(array)
            return
        group: list[pa.Array] = []
        rows = 0
        for array in arrays:
            if group and rows + len(array) > UPDATE_SLICE_ROWS:
                sketch.update(group[0] if len(group) == 1 else pa.concat_arrays(group))
                group, rows = [], 0
            group.append(array)
            rows += len(array)
        if group:
            sketch.update(group[0] if len(group) == 1 else pa.concat_arrays(group))

    def discard(self, index: int) -> None:
        """Write no statistics for field ``index`` (its pages did not come from :meth:`add`)."""
        self._parts.pop(index, None)
        self._sketches.pop(index, None)
        self._nans.pop(index, None)

    def nan_counts(self) -> dict[int, np.ndarray]:
        """Per float field id with statistics, the NaN values of each page by sign (``(2, pages)``)."""
        return {self._ids[i]: np.concatenate(c, axis=1) for i, c in self._nans.items() if c}

    def table(self) -> pa.Table | None:
        """The statistics table (columns by field id, padded with null rows), or None when empty."""
        columns = {i: pa.concat_arrays(p) for i, p in self._parts.items() if p}
        if not columns:
            return None
        rows = max(len(c) for c in columns.values())
        return pa.table(
            {
                str(self._ids[i]): pa.concat_arrays([c, pa.nulls(rows - len(c), c.type)])
                for i, c in columns.items()
            }
        )

    def sketches(self) -> tuple[bytes, dict[int, tuple[int, int]]]:
        """The serialised sketches of the fields that have statistics, and each one's byte range."""
        blob = bytearray()
        ranges = {}
        for index, sketch in self._sketches.items():
            if not self._parts[index]:
                continue
            data = sketch.to_bytes()
            ranges[self._ids[index]] = (len(blob), len(data))
            blob += data
        return bytes(blob), ranges


def column_statistics(
    path: str,
    table: pa.Table,
    ids: Mapping[int, str],
    page_rows: Mapping[str, np.ndarray],
    nan_counts: Mapping[int, np.ndarray] | None = None,
) -> dict[str, ColumnPageStatistics]:
    """The statistics ``table`` read from a data file, by column name.

    ``ids`` maps the data file's top-level field ids to their names, ``page_rows`` gives the rows
    of each page of those columns, ``nan_counts`` the NaN counts by field id a file keeps.
    Columns of unknown ids, or of types this reader does not know, are ignored; a column with
    fewer rows (or NaN counts) than its field has pages is corrupt.
    """
    nan_counts = nan_counts or {}
    out = {}
    for name in table.column_names:
        try:
            field_id = int(name)
        except ValueError:
            continue
        column_name = ids.get(field_id)
        stats = table.column(name).combine_chunks()
        if column_name is None or not pa.types.is_struct(stats.type):
            continue
        rows = page_rows[column_name]
        if len(stats) < len(rows):
            raise CorruptFileError(
                path, f"statistics of field {field_id} have {len(stats)} rows for {len(rows)} pages"
            )
        names = {stats.type.field(k).name for k in range(stats.type.num_fields)}
        if not {"null_count", "min_value", "max_value"} <= names:
            continue
        fields = [stats.field(k) for k in ("null_count", "min_value", "max_value")]
        struct = pa.StructArray.from_arrays(
            [f.slice(0, len(rows)) for f in fields], names=["null_count", "min_value", "max_value"]
        )
        nans = nan_counts.get(field_id)
        if nans is not None and nans.shape[1] != len(rows):
            raise CorruptFileError(
                path, f"NaN counts of field {field_id} cover {nans.shape[1]} pages of {len(rows)}"
            )
        out[column_name] = ColumnPageStatistics(struct, rows, nans)
    return out
