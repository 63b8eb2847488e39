"""Where column statistics live in a dataset, and when they may be used (see docs/statistics.md).

Statistics files are Lance files under ``{root}/_stats/{uuid}.lance``. Their columns follow the
format's statistics schema: one column per dataset field id, named by the id, of type
``struct{null_count: i64, min_value: T, max_value: T}`` (:mod:`lance_ops.encoding.statistics`),
one row per *zone* — :data:`ZONE_ROWS` consecutive physical rows of a fragment — with the zones of
every fragment the file covers one after the other. The schema metadata key
:data:`FILE_METADATA_KEY` says which rows belong to which fragment and which data file each
field's statistics were computed from; global buffer 1 holds the fragments' HLL sketches
(:mod:`lance_ops.encoding.sketch`), addressed from that metadata. Fragments whose data files carry
their own page statistics (:mod:`lance_ops.file.page_statistics`, written by every writer here)
need no statistics file: :class:`FragmentStatistics` describes both kinds.

The manifest's config key :data:`CONFIG_KEY` lists the statistics files of a version (a JSON list
of names, later files taking precedence), so statistics are committed as an ``UpdateConfig``
transaction and travel with the version — pylance keeps config entries it does not know.

A fragment's statistics for a field are used only while they describe it: same fragment id, same
physical row count, and the field still read from the same (immutable, uniquely named) data file.
A rewritten column, a compacted fragment or a data replacement therefore makes them stale.
Deleted rows are still counted: bounds stay bounds when rows go away.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops._proto import table_pb2
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import CorruptFileError
from lance_ops.file import LanceFileWriter, open_file
from lance_ops.file.page_statistics import (
    FLOAT_MAX_COVERS_NAN,
    FLOAT_MAX_IGNORES_NAN,
    nan_counts_from_json,
    nan_counts_json,
)
from lance_ops.io.context import Location, StorageContext
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.naming import child_uri

__all__ = [
    "CONFIG_KEY",
    "FILE_METADATA_KEY",
    "STATS_DIR",
    "ZONE_ROWS",
    "FragmentStatistics",
    "config_value",
    "field_source",
    "files_in_use",
    "load_statistics",
    "statistics_files",
    "write_statistics_file",
]

STATS_DIR = "_stats"
CONFIG_KEY = "lance-ops.statistics"
FILE_METADATA_KEY = "lance-ops:statistics"
ZONE_ROWS = 8192
STATS_FILE_VERSION = "2.1"


@dataclass(frozen=True)
class FragmentStatistics:
    """The statistics of one fragment: per field id, one row per zone, plus a distinct sketch.

    Zones are :attr:`zone_rows` rows long (statistics files) unless ``page_rows`` gives a field's
    own zone lengths (the pages of a data file carrying page statistics). Float bounds ignore NaN
    (the format's rule); ``nan_counts`` gives, per float field, the NaN values of each zone by sign
    (``(2, zones)``: positive, negative) where the writer kept them. ``nan_aware`` holds the fields
    of files written before the counts were kept, whose float maxima are ``+inf`` where a zone has
    NaN (see :mod:`lance_ops.fragment.pruning`).
    """

    fragment_id: int
    physical_rows: int
    zone_rows: int
    columns: Mapping[int, pa.StructArray] = field(default_factory=dict)
    sources: Mapping[int, str] = field(default_factory=dict)
    sketches: Mapping[int, DistinctSketch] = field(default_factory=dict)
    page_rows: Mapping[int, np.ndarray] = field(default_factory=dict)
    nan_aware: frozenset[int] = frozenset()
    nan_counts: Mapping[int, np.ndarray] = field(default_factory=dict)

    @property
    def zone_lengths(self) -> np.ndarray:
        full, rest = divmod(self.physical_rows, self.zone_rows)
        return np.array([self.zone_rows] * full + ([rest] if rest else []), dtype=np.int64)

    def lengths(self, field_id: int) -> np.ndarray:
        """Rows of each zone of field ``field_id``'s statistics."""
        rows = self.page_rows.get(field_id)
        return self.zone_lengths if rows is None else rows

    def _restricted(self, keep: set[int]) -> FragmentStatistics:
        return FragmentStatistics(
            self.fragment_id,
            self.physical_rows,
            self.zone_rows,
            {i: c for i, c in self.columns.items() if i in keep},
            {i: p for i, p in self.sources.items() if i in keep},
            {i: s for i, s in self.sketches.items() if i in keep},
            {i: r for i, r in self.page_rows.items() if i in keep},
            self.nan_aware & keep,
            {i: c for i, c in self.nan_counts.items() if i in keep},
        )

    def fresh_for(self, fragment: DataFragment) -> FragmentStatistics | None:
        """These statistics restricted to the fields they still describe in ``fragment``."""
        if fragment.id != self.fragment_id or fragment.physical_rows != self.physical_rows:
            return None
        keep = {i for i, path in self.sources.items() if field_source(fragment, i) == path}
        return self._restricted(keep) if keep else None

    def merged_with(self, newer: FragmentStatistics) -> FragmentStatistics:
        """Both field sets; ``newer`` wins where both describe a field (its sketch where it has one)."""
        older = self._restricted(set(self.columns) - set(newer.columns))
        return FragmentStatistics(
            self.fragment_id,
            self.physical_rows,
            self.zone_rows,
            {**older.columns, **newer.columns},
            {**older.sources, **newer.sources},
            {**self.sketches, **newer.sketches},
            {**older.page_rows, **newer.page_rows},
            older.nan_aware | newer.nan_aware,
            {**older.nan_counts, **newer.nan_counts},
        )


def field_source(fragment: DataFragment, field_id: int) -> str | None:
    """Path of the data file ``fragment`` reads field ``field_id`` from (the first listing it)."""
    return next((f.path for f in fragment.files if field_id in f.fields), None)


def statistics_files(manifest: Manifest | table_pb2.Manifest) -> list[str]:
    """Names of the statistics files a version lists (oldest first; of its protobuf too)."""
    text = manifest.config.get(CONFIG_KEY)
    if not text:
        return []
    try:
        names = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptFileError(f"manifest v{manifest.version}", f"config {CONFIG_KEY} is not JSON") from exc
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CorruptFileError(f"manifest v{manifest.version}", f"config {CONFIG_KEY} is not a list of names")
    return names


def _stats_uri(uri: str, name: str) -> str:
    return child_uri(uri, STATS_DIR, name)


def write_statistics_file(storage: StorageContext, entries: Sequence[FragmentStatistics]) -> str:
    """Write one statistics file covering ``entries`` under the dataset's ``_stats/``; returns its name."""
    field_types: dict[int, pa.DataType] = {}
    for entry in entries:
        for field_id, column in entry.columns.items():
            field_types.setdefault(field_id, column.type)
    ids = sorted(field_types)
    zones = [len(e.zone_lengths) for e in entries]
    columns = []
    for field_id in ids:
        parts = [
            e.columns[field_id] if field_id in e.columns else pa.nulls(n, field_types[field_id])
            for e, n in zip(entries, zones, strict=True)
        ]
        columns.append(pa.concat_arrays(parts) if parts else pa.array([], field_types[field_id]))
    sketch_blob = bytearray()
    described = []
    first_zone = 0
    for entry, count in zip(entries, zones, strict=True):
        sketches = {}
        for field_id, sketch in entry.sketches.items():
            data = sketch.to_bytes()
            sketches[str(field_id)] = [len(sketch_blob), len(data)]
            sketch_blob += data
        described.append(
            {
                "id": entry.fragment_id,
                "physical_rows": entry.physical_rows,
                "zone_rows": entry.zone_rows,
                "first_zone": first_zone,
                "sources": {str(i): p for i, p in entry.sources.items()},
                "sketches": sketches,
                "nan_counts": nan_counts_json(entry.nan_counts),
            }
        )
        first_zone += count
    schema = pa.schema([pa.field(str(i), field_types[i]) for i in ids])
    name = f"{uuid.uuid4()}.lance"
    with LanceFileWriter(
        storage.path(STATS_DIR, name),
        schema,
        version=STATS_FILE_VERSION,
        store=storage.store,
        page_statistics=False,
    ) as writer:
        writer.write_batch(pa.table(columns, schema=schema))
        writer.add_global_buffer(bytes(sketch_blob))
        writer.add_schema_metadata(
            FILE_METADATA_KEY, json.dumps({"fragments": described, "float_max": FLOAT_MAX_IGNORES_NAN})
        )
    return name


def _read_statistics_file(storage: StorageContext, name: str) -> list[FragmentStatistics]:
    path = _stats_uri(storage.uri, name)
    reader = open_file(storage.path(STATS_DIR, name), store=storage.store)
    text = (reader.schema.metadata or {}).get(FILE_METADATA_KEY.encode())
    if text is None:
        raise CorruptFileError(path, f"not a statistics file (no {FILE_METADATA_KEY} metadata)")
    table = reader.read_all().to_table()
    blob = reader.read_global_buffer(1)
    described = json.loads(text)
    out = []
    for entry in described["fragments"]:
        zone_rows, physical = int(entry["zone_rows"]), int(entry["physical_rows"])
        count = -(-physical // zone_rows)
        start = int(entry["first_zone"])
        sources = {int(k): str(v) for k, v in entry["sources"].items()}
        columns = {
            i: table.column(str(i)).combine_chunks().slice(start, count)
            for i in sources
            if str(i) in table.column_names
        }
        sketches = {
            int(k): DistinctSketch.from_bytes(blob[offset : offset + size])
            for k, (offset, size) in entry["sketches"].items()
        }
        nan_aware = frozenset(columns) if described.get("float_max") == FLOAT_MAX_COVERS_NAN else frozenset()
        try:
            nan_counts = nan_counts_from_json(entry.get("nan_counts", {}))
        except (ValueError, TypeError) as exc:
            raise CorruptFileError(path, f"NaN counts of fragment {entry['id']} are malformed") from exc
        if any(c.shape[1] != count for c in nan_counts.values()):
            raise CorruptFileError(
                path, f"NaN counts of fragment {entry['id']} do not cover its {count} zones"
            )
        out.append(
            FragmentStatistics(
                int(entry["id"]), physical, zone_rows, columns, sources, sketches, {}, nan_aware, nan_counts
            )
        )
    return out


def _listed_entries(storage: StorageContext, name: str) -> list[FragmentStatistics]:
    """The entries of a listed statistics file; none when the file is gone.

    Statistics only speed reads up: a file removed by a cleanup that did not know it must not fail
    reads; the next rebuild recomputes what it held and drops it from the list.
    """
    try:
        return _read_statistics_file(storage, name)
    except FileNotFoundError:
        return []


def load_statistics(
    location: Location, manifest: Manifest, storage_options: Mapping[str, str] | None = None
) -> dict[int, FragmentStatistics]:
    """Fragment id -> the usable statistics of that fragment in this version (fresh fields only).

    ``location`` is the dataset's storage context (or its URI, opened with ``storage_options``)."""
    storage = StorageContext.of(location, storage_options)
    fragments = {f.id: f for f in manifest.fragments}
    out: dict[int, FragmentStatistics] = {}
    for name in statistics_files(manifest):
        for entry in _listed_entries(storage, name):
            fragment = fragments.get(entry.fragment_id)
            fresh = None if fragment is None else entry.fresh_for(fragment)
            if fresh is None:
                continue
            previous = out.get(fresh.fragment_id)
            out[fresh.fragment_id] = fresh if previous is None else previous.merged_with(fresh)
    return out


def files_in_use(storage: StorageContext, manifest: Manifest, names: Sequence[str]) -> list[str]:
    """Those of ``names`` (oldest first) holding a fresh field of some fragment no later file replaces."""
    fragments = {f.id: f for f in manifest.fragments}
    covered: set[tuple[int, int]] = set()
    keep = []
    for name in reversed(names):
        described = set()
        for entry in _listed_entries(storage, name):
            fragment = fragments.get(entry.fragment_id)
            fresh = None if fragment is None else entry.fresh_for(fragment)
            described |= set() if fresh is None else {(fresh.fragment_id, i) for i in fresh.sources}
        if described - covered:
            keep.append(name)
        covered |= described
    return keep[::-1]


def config_value(names: Iterable[str]) -> str:
    """The :data:`CONFIG_KEY` value listing ``names``."""
    return json.dumps(list(names))
