"""Rebuilding column statistics: compute what a version lacks, write one file, one ``UpdateConfig``.

For every fragment and every top-level column with statistics (integers, floats, booleans,
temporal types, strings, binary), statistics are computed unless fresh ones exist — in a
statistics file, or in the data file itself (:mod:`lance_ops.file.page_statistics`: every file
written here has them, so only fragments written by others, or with page statistics turned off,
need a rebuild) — all of them with ``force``: per zone of
:data:`lance_ops.table.statistics.ZONE_ROWS` physical rows the format's null count / min / max,
plus one HLL sketch per fragment and column. The results go to one new statistics file and the
manifest's statistics list is updated in one transaction, dropping files no fragment needs any
more. Nothing is committed until the end, so an interrupted rebuild
leaves at most an unreferenced file and a rerun recomputes only what the last commit lacks.
Datasets written by pylance are rebuilt like any other: nothing is read but their data files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.encoding.statistics import page_nan_counts, page_statistics, supports_statistics
from lance_ops.errors import SchemaError
from lance_ops.fragment.reader import FragmentReader, VersionFiles
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.progress import STATISTICS, ProgressCallback, Tracker
from lance_ops.table.manifest import Manifest
from lance_ops.table.statistics import (
    CONFIG_KEY,
    ZONE_ROWS,
    FragmentStatistics,
    config_value,
    field_source,
    files_in_use,
    statistics_files,
    write_statistics_file,
)
from lance_ops.table.transaction import Transaction, UpdateConfig, UpdateMap

__all__ = [
    "RebuildResult",
    "commit_statistics",
    "fragment_statistics",
    "pending_statistics",
    "rebuild",
    "statistics_fields",
]


@dataclass(frozen=True)
class RebuildResult:
    """What a rebuild committed (nothing when every fragment was up to date) and for which fragments."""

    manifest: Manifest | None
    transaction: Transaction | None
    fragment_ids: tuple[int, ...]


def statistics_fields(files: VersionFiles, columns: Sequence[str] | None = None) -> dict[int, str]:
    """Field id -> name of the top-level columns (of ``columns``, default all) that get statistics."""
    schema = files.schema
    names = schema.names if columns is None else list(columns)
    unknown = [n for n in names if schema.get_field_index(n) < 0]
    if unknown:
        raise SchemaError(f"no such column(s) {unknown}; the dataset has {schema.names}")
    lance = files.lance_schema
    return {lance.field(name).id: name for name in names if supports_statistics(schema.field(name).type)}


def fragment_statistics(
    fragment: FragmentReader, fields: Mapping[int, str], zone_rows: int = ZONE_ROWS
) -> FragmentStatistics:
    """Statistics of the ``fields`` (id -> column name) of one fragment that some data file holds."""
    physical = fragment.physical_rows
    full, rest = divmod(physical, zone_rows)
    lengths = [zone_rows] * full + ([rest] if rest else [])
    sources = {i: field_source(fragment.metadata, i) for i in fields}
    held = {i: name for i, name in fields.items() if sources[i] is not None}
    table = fragment.read(list(held.values()), np.arange(physical, dtype=np.int64))
    columns, sketches, nan_counts = {}, {}, {}
    for field_id, name in held.items():
        array = table.column(name)
        columns[field_id] = page_statistics(array, lengths)
        sketches[field_id] = DistinctSketch().update(array)
        if pa.types.is_floating(array.type):
            nan_counts[field_id] = page_nan_counts(array, lengths)
    return FragmentStatistics(
        fragment.id,
        physical,
        zone_rows,
        columns,
        {i: p for i, p in sources.items() if p is not None},
        sketches,
        nan_counts=nan_counts,
    )


def rebuild(
    ds: VersionFiles | Any,
    columns: Sequence[str] | None = None,
    force: bool = False,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
) -> RebuildResult:
    """Compute the statistics a dataset version lacks (all of them with ``force``) and commit them.

    ``ds`` is a dataset or its ``VersionFiles``; the new version is returned, not adopted
    (``ds.stats.rebuild`` does that). ``progress`` hears of every fragment computed
    (:mod:`lance_ops.progress`).
    """
    files: VersionFiles = getattr(ds, "_files", ds)
    options = options or CommitOptions()
    pending = pending_statistics(files, columns, force)
    tracker = Tracker.start(progress, STATISTICS, len(pending), "fragments")
    computed = []
    for fragment in files.fragments():
        wanted = pending.get(fragment.id)
        if wanted:
            computed.append(fragment_statistics(fragment, wanted))
            tracker.advance(1, f"fragment {fragment.id}: {len(wanted)} column(s)")
    return commit_statistics(files, computed, options)


def pending_statistics(
    files: VersionFiles, columns: Sequence[str] | None = None, force: bool = False
) -> dict[int, dict[int, str]]:
    """Fragment id -> the fields (id -> name) a rebuild computes for it: those without fresh
    statistics, in its data files or a statistics file (all with ``force``), that one of its data
    files holds. Fragments needing nothing are
    left out. A distributed rebuild plans with this, computes :func:`fragment_statistics` per
    fragment elsewhere and commits with :func:`commit_statistics`."""
    fields = statistics_fields(files, columns)
    pending = {}
    for fragment in files.fragments():
        have = None if force else fragment.statistics()
        wanted = {
            i: n
            for i, n in fields.items()
            if have is None or i not in have.sources
            if field_source(fragment.metadata, i) is not None
        }
        if wanted:
            pending[fragment.id] = wanted
    return pending


def commit_statistics(
    files: VersionFiles, computed: Sequence[FragmentStatistics], options: CommitOptions | None = None
) -> RebuildResult:
    """Write ``computed`` to one new statistics file and list it in one ``UpdateConfig`` on the
    version ``files`` reads (nothing is committed when ``computed`` is empty)."""
    if not computed:
        return RebuildResult(None, None, ())
    options = options or CommitOptions()
    name = write_statistics_file(files.storage, computed)
    listed = files_in_use(files.storage, files.manifest, [*statistics_files(files.manifest), name])
    operation = UpdateConfig(config_updates=UpdateMap(((CONFIG_KEY, config_value(listed)),)))
    options = replace(options, read_version=files.manifest.version)
    manifest, transaction = commit(files.storage, operation, options)
    return RebuildResult(manifest, transaction, tuple(s.fragment_id for s in computed))
