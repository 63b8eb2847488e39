"""Reads across the fragments of one version: scans with limit / offset, positional take, take by row id."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa

from lance_ops.encoding.compression import dictionary
from lance_ops.errors import TakeIndexError
from lance_ops.fragment.options import ScanOptions
from lance_ops.fragment.reader import HOLD_WHOLE_BYTES, ROW_ADDRESS, ROW_ID, FragmentReader, VersionFiles
from lance_ops.fragment.take import take_fragments

TAKE_VIRTUAL_COLUMNS = (ROW_ID, ROW_ADDRESS)
# Fragments whose small remote files are fetched together ahead of reading them
# (:meth:`VersionFiles.prefetch`); at most this many fragments' readers are opened ahead.
PREFETCH_FRAGMENTS = 64


def prefetched(
    files: VersionFiles,
    fragments: Sequence[FragmentReader],
    columns: Sequence[str],
    whole: bool = False,
    budget: int = HOLD_WHOLE_BYTES,
) -> Iterator[FragmentReader]:
    """``fragments`` in order, the small files and deletion files of the next
    :data:`PREFETCH_FRAGMENTS` fetched together before the first of them is handed out.
    ``whole`` (a scan or compaction reading each fragment as it is yielded): larger files of
    which it reads every column are fetched ahead too, up to ``budget`` bytes, and held while
    their fragment is read (:meth:`VersionFiles.held_whole`); not for a caller reading the
    fragments after the window has moved on (a take gathers them first), nor one needing a few
    chunks of each."""
    source = files.held_whole(fragments, columns, budget) if whole else iter(fragments)
    try:
        for i, fragment in enumerate(source):
            if i % PREFETCH_FRAGMENTS == 0:
                files.prefetch(fragments[i : i + PREFETCH_FRAGMENTS], columns)
            yield fragment
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def take_columns(files: VersionFiles, columns: Sequence[str] | None) -> tuple[str, ...]:
    """``columns`` of a take checked against the schema; ``_rowid`` / ``_rowaddr`` may be named."""
    if columns is None or isinstance(columns, str):
        return files.resolve_columns(columns)
    real = [c for c in columns if c not in TAKE_VIRTUAL_COLUMNS or c in files.schema.names]
    files.resolve_columns(real)
    return tuple(columns)


def _empty(files: VersionFiles, columns: Sequence[str]) -> pa.Table:
    virtual = [c for c in columns if c in TAKE_VIRTUAL_COLUMNS and c not in files.schema.names]
    real = tuple(c for c in columns if c not in virtual)
    options = ScanOptions(
        columns=real, with_row_id=ROW_ID in virtual, with_row_address=ROW_ADDRESS in virtual
    )
    return files.output_schema(options).empty_table().select(list(columns))


def scan_batches(
    files: VersionFiles,
    options: ScanOptions,
    limit: int | None = None,
    offset: int = 0,
    fragments: Sequence[FragmentReader] | None = None,
    strict_batch_size: bool = False,
    rows: Mapping[int, np.ndarray] | None = None,
    exact: Collection[int] = (),
) -> Iterator[pa.RecordBatch]:
    """Rows in fragment order as record batches of ``options.batch_size`` rows.

    As in pylance, each fragment's last batch may be shorter; with ``strict_batch_size`` batches
    run on across fragments, and only the scan's last batch may be shorter. Fragments
    (``fragments``, default all of the version) are read one batch at a time. ``offset`` and
    ``limit`` count rows that pass the predicate (as in pylance); without one, skipped fragments
    are not read at all. ``rows`` (fragment id -> physical offsets, ascending, e.g. what a scalar
    index selects) narrows a filtered scan of those fragments to those rows; in the fragments of
    ``exact`` those are exactly the rows the predicate selects, which is then not evaluated there
    (nor its columns read), unless more than half the rows are read whole.
    """
    if (limit or 0) < 0:
        raise ValueError("Limit must be non-negative")
    if offset < 0:
        raise ValueError("Offset must be non-negative")
    size = options.batch_size
    if size <= 0:
        raise ValueError(f"batch_size must be positive, got {size}")
    remaining = np.inf if limit is None else limit
    skip = offset
    pending = _Batcher(size)
    chosen: Iterable[FragmentReader] = files.fragments() if fragments is None else fragments
    predicate = options.predicate
    if limit is None and not offset and (predicate is None or not predicate.bounds):
        # Every fragment will be read (none skipped by a limit, an offset or statistics).
        read = [*options.columns, *(predicate.columns if predicate is not None else ())]
        chosen = prefetched(files, list(chosen), read, whole=True)
    for fragment in chosen:
        if remaining <= 0:
            break
        live = None
        if options.predicate is None:
            count = fragment.live_count
            if skip >= count:
                skip -= count
                continue
            live = fragment.live_rows()
            live = live[skip:] if remaining == np.inf else live[skip : skip + int(remaining)]
            skip = 0
        elif rows is not None and fragment.id in rows:
            live = selected_rows(fragment, rows[fragment.id])
        unfiltered = live is not None and predicate is not None and fragment.id in exact
        for table in fragment.scan_reads(replace(options, predicate=None) if unfiltered else options, live):
            if skip >= table.num_rows:
                skip -= table.num_rows
                continue
            # Explicit length: pyarrow does not clamp slices of zero-column tables.
            rest = table.num_rows - skip
            table = table.slice(skip, rest if remaining == np.inf else min(rest, int(remaining)))
            skip = 0
            remaining -= table.num_rows
            yield from pending.add(table)
            if remaining <= 0:
                break
        if not strict_batch_size:
            yield from pending.flush()
    yield from pending.flush()


def selected_rows(fragment: FragmentReader, offsets: np.ndarray) -> np.ndarray | None:
    """The live ones of ``offsets`` to read from ``fragment``, or None (read every live row) when
    they are more than half its rows: a range read beats a take then."""
    if 2 * len(offsets) > fragment.physical_rows:
        return None
    deleted = fragment.deleted
    return offsets if not len(deleted) else offsets[~np.isin(offsets, deleted)]


class _Batcher:
    """Cuts a stream of tables into record batches of exactly ``size`` rows (the rest on flush)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.tables: list[pa.Table] = []
        self.rows = 0

    def add(self, table: pa.Table) -> Iterator[pa.RecordBatch]:
        if not table.num_rows:
            return
        self.tables.append(table)
        self.rows += table.num_rows
        if self.rows < self.size:
            return
        held = _concat(self.tables)
        full = held.num_rows - held.num_rows % self.size
        yield from _cut(held, full, self.size)
        start = full
        rest = held.num_rows - start
        self.tables = [held.slice(start, rest)] if rest else []
        self.rows = rest

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.rows:
            held = _concat(self.tables)
            yield _one_batch(held)
        self.tables, self.rows = [], 0


def _concat(tables: list[pa.Table]) -> pa.Table:
    """``tables`` (one schema) as one; pyarrow's concatenation of zero-column tables has no rows."""
    if len(tables) == 1:
        return tables[0]
    if not tables[0].num_columns:
        rows = sum(t.num_rows for t in tables)
        return pa.Table.from_batches([pa.RecordBatch.from_struct_array(pa.nulls(rows, pa.struct([])))])
    return pa.concat_tables(tables)


def _cut(table: pa.Table, stop: int, size: int) -> Iterator[pa.RecordBatch]:
    """The first ``stop`` rows of ``table`` (a multiple of ``size``) as record batches of ``size``
    rows. Each batch lying within one run of rows where no column's chunk ends (a read of many
    batches is one or a few such runs) is a zero-copy slice of that run's record batch; a batch
    across chunk ends is combined from its pieces."""
    if not table.num_columns:
        yield from (_one_batch(table.slice(start, size)) for start in range(0, stop, size))
        return
    runs = table.to_batches()
    ends = np.cumsum([run.num_rows for run in runs]).tolist()
    at = 0  # the run holding the next batch's first row
    for start in range(0, stop, size):
        while ends[at] <= start:
            at += 1
        if start + size <= ends[at]:
            yield runs[at].slice(start - (ends[at] - runs[at].num_rows), size)
        else:
            yield _one_batch(table.slice(start, size))


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` (any chunking) as one record batch; zero-column tables keep their row count."""
    if not table.num_columns:
        return pa.RecordBatch.from_struct_array(pa.nulls(table.num_rows, pa.struct([])))
    columns = [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns]
    return pa.RecordBatch.from_arrays(columns, schema=table.schema)


def take(files: VersionFiles, positions: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """Rows at positional ``positions`` (live rows of the version, any order, repeats allowed).

    Fragments are located from the manifest's row counts; only those holding a wanted row are read.
    """
    starts = np.concatenate([[0], np.cumsum(files.live_counts)])
    if positions.size and (positions.min() < 0 or positions.max() >= starts[-1]):
        raise TakeIndexError(f"take index out of range: the dataset has {starts[-1]} rows")
    unique, inverse = np.unique(positions, return_inverse=True)
    owner = np.searchsorted(starts, unique, side="right") - 1
    bounds = np.flatnonzero(np.diff(owner, prepend=-1, append=-1))
    touched = [files.fragment_at(int(owner[first])) for first in bounds[:-1].tolist()]
    parts: list[pa.Table] = []
    pieces = []
    for fragment, first, end in zip(
        prefetched(files, touched, columns), bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
    ):
        index = int(owner[first])
        local = unique[first:end] - starts[index]
        pieces.append(
            (fragment, fragment.live_offsets()[local] if fragment.metadata.deletion_file else local)
        )
        if len(pieces) == PREFETCH_FRAGMENTS:  # each prefetched window read before the next is fetched
            parts.extend(take_fragments(pieces, columns))
            pieces = []
    parts.extend(take_fragments(pieces, columns))
    table = pa.concat_tables(parts) if parts else _empty(files, columns)
    return _join_dictionaries(table).take(pa.array(inverse.reshape(-1)))


def _join_dictionaries(table: pa.Table) -> pa.Table:
    """``table`` ready for Arrow's ``take``, which concatenates a column's chunks and unifies the
    dictionaries (top level or nested in lists, structs, maps) that differ between them. Arrow
    refuses dictionaries with null entries there (2.0 and 0.1 fragments give them): only then are
    those null entries moved into the keys first. Elsewhere the dictionaries are left as Arrow
    and pylance's take leave them (chunks sharing one dictionary keep it, null entry included)."""
    for i, column in enumerate(table.columns):
        if column.num_chunks < 2 or not dictionary.holds_dictionary(column.type):
            continue
        if not dictionary.unifies(column.chunks):
            chunks = [dictionary.normalize_nested_nulls(chunk) for chunk in column.chunks]
            table = table.set_column(i, table.field(i), pa.chunked_array(chunks, column.type))
    return table


def _check_addresses(files: VersionFiles, addresses: np.ndarray) -> None:
    """Raise :class:`TakeIndexError` for an address outside every fragment of the version."""
    # physical_rows 0 = unknown (old manifests): no bound is checked for that fragment
    sizes = {f.id: f.physical_rows or 2**32 for f in files.manifest.fragments}
    ids = np.array(sorted(sizes), dtype=np.uint64)
    limits = np.array([sizes[int(i)] for i in ids], dtype=np.int64)
    owners, offsets = addresses >> np.uint64(32), (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    slot = np.minimum(np.searchsorted(ids, owners), max(len(ids) - 1, 0))
    known = ids[slot] == owners if len(ids) else np.zeros(len(addresses), dtype=bool)
    bad = ~known | (offsets >= (limits[slot] if len(ids) else 0))
    if bad.any():
        address = int(addresses[np.flatnonzero(bad)[0]])
        raise TakeIndexError(
            f"row address {address} (fragment {address >> 32}, row {address & 0xFFFFFFFF}) is not a "
            f"row of version {files.manifest.version}"
        )


def take_rows(files: VersionFiles, ids: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """Rows by row id (stable ids when enabled, else row addresses), in the order given.

    Stable ids are resolved through the version's :class:`~lance_ops.table.rowids.RowIdIndex`;
    ids of deleted or unknown rows are skipped, as pylance does. Row addresses (without stable ids)
    of deleted rows are skipped too, but an address past its fragment's rows or in a fragment the
    version does not have raises :class:`~lance_ops.errors.TakeIndexError`, as pylance does.
    """
    ids = np.asarray(ids, dtype=np.uint64)
    if files.manifest.uses_stable_row_ids:
        found, addresses = files.row_id_index.lookup(ids)
        positions = np.flatnonzero(found)
    else:
        addresses, positions = ids, np.arange(len(ids))
    owners = addresses >> np.uint64(32)
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    if not files.manifest.uses_stable_row_ids and len(addresses):
        _check_addresses(files, addresses)
    pieces, rows, order = [], [], []
    read = 0
    index_of = files.fragment_index
    # Only the fragments named by an id are looked at, in manifest order.
    touched = sorted(index_of[i] for i in np.unique(owners).tolist() if i in index_of)
    for fragment in (files.fragment_at(index) for index in touched):
        mine = owners == np.uint64(fragment.id)
        local = offsets[mine]
        keep = (local < fragment.physical_rows) & ~np.isin(local, fragment.deleted)
        local = local[keep]
        if not len(local):
            continue
        unique, inverse = np.unique(local, return_inverse=True)
        pieces.append((fragment, unique))
        rows.append(read + inverse.reshape(-1))  # each id's row among all the rows read
        read += len(unique)
        order.append(positions[mine][keep])
    if not pieces:
        return _empty(files, columns)
    table = _join_dictionaries(pa.concat_tables(take_fragments(pieces, columns)))
    wanted = np.concatenate(rows)[np.argsort(np.concatenate(order), kind="stable")]
    return table.take(pa.array(wanted))
