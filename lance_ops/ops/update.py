"""Updating rows in place of SQL expressions: ``ds.update({"col": "expr"}, where=...)``.

The rows ``where`` selects are read fragment by fragment, the new column values computed, and the
rewritten rows written as new fragments while the old ones are deleted (deletion files; a fragment
left without live rows is removed). One ``Update`` transaction in pylance's rewrite-rows mode records
it (``fields_for_preserving_frag_bitmap`` = the updated columns). With stable row ids the rewritten
rows keep their ids: the new fragments carry them and the commit keeps their created-at versions
(:mod:`lance_ops.table.apply`). The fragments' selections are found two at a time (one per core,
:func:`per_fragment`) and a simple integer filter (``id % 100 = 7``) is evaluated with numpy
(:mod:`lance_ops.query.vectorized`), other filters with Arrow on the task's thread.

:class:`RowRewrite` is the part ``merge_insert`` shares: it collects one attempt's deletions and new
fragments, turns them into the ``Update`` and removes the files of an attempt that was not
committed. :func:`run_with_retries` redoes an attempt on the latest version after a retryable
conflict, as pylance does (``conflict_retries``, ``retry_timeout``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import FieldNotFoundError, InvalidArgumentError, RetryableCommitConflictError
from lance_ops.file.parallel import WORKER_THREADS, run_tasks
from lance_ops.fragment.conform import evaluate_expressions
from lance_ops.fragment.options import WriteOptions
from lance_ops.fragment.pruning import row_mask
from lance_ops.fragment.reader import READ_AHEAD_ROWS, ROW_ID, FragmentReader, VersionFiles
from lance_ops.fragment.writer import write_new_fragments
from lance_ops.ops.changes import IN_ORDER, UPDATE_ROWS_PROPERTY
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.delete import FragmentDeletion, delete_offsets
from lance_ops.query.predicate import Bound, Predicate, parse_expression, parse_predicate
from lance_ops.query.vectorized import Mask, compile_mask, selected
from lance_ops.table.commit import load_manifest
from lance_ops.table.manifest import DataFragment, Manifest
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR
from lance_ops.table.rowids import encode_row_ids
from lance_ops.table.transaction import Transaction, Update

CONFLICT_RETRIES = 10
RETRY_TIMEOUT_SECONDS = 30.0
READ_BATCH_ROWS = 8192

T = TypeVar("T")
R = TypeVar("R")


def dataset_write_options(files: VersionFiles) -> WriteOptions:
    """Write options for new fragments of the version ``files`` reads (its format, plan, config)."""
    manifest = files.manifest
    options = WriteOptions(
        data_storage_version=manifest.data_storage_version,
        encoding_plan=EncodingPlan.from_config(manifest.config),
        storage_options=files.storage_options,
    )
    return options.for_dataset(manifest.config)


@dataclass
class RowRewrite:
    """One attempt's rows rewritten: deletions of old rows and the fragments written in their place.

    With stable row ids the rows written first (rewritten rows, in write order) carry their ids
    into the new fragments; rows after them (inserted rows) get new ids at commit.
    """

    files: VersionFiles
    deletions: list[FragmentDeletion] = field(default_factory=list)
    new_fragments: list[DataFragment] = field(default_factory=list)

    def delete(self, fragment: FragmentReader, offsets: np.ndarray) -> int:
        """Delete the live rows at physical ``offsets`` of ``fragment``; returns how many."""
        deletion = delete_offsets(fragment, np.unique(offsets), self.files.manifest.version)
        if deletion is None:
            return 0
        self.deletions.append(deletion)
        return deletion.num_deleted_rows

    def write(self, batches: Iterable[pa.RecordBatch], carried_ids: Callable[[], np.ndarray]) -> None:
        """Write ``batches`` (shaped like the dataset) as new fragments; ``carried_ids()`` (called
        once the batches are consumed) gives the stable row ids of their first rows."""
        schema = self.files.schema
        reader = pa.RecordBatchReader.from_batches(schema, _nonempty(batches))
        written = write_new_fragments(
            reader, self.files.storage, self.files.lance_schema, dataset_write_options(self.files)
        )
        if self.files.manifest.uses_stable_row_ids:
            ids, start = carried_ids(), 0
            for i, fragment in enumerate(written):
                own = ids[start : start + fragment.physical_rows]
                start += len(own)
                written[i] = replace(fragment, row_ids=encode_row_ids([own]))
        self.new_fragments.extend(written)

    def operation(self, preserved_fields: Iterable[int]) -> Update:
        """The ``Update`` recording this rewrite (rewrite-rows mode)."""
        ordered = sorted(self.deletions, key=lambda d: d.fragment_id)
        return Update(
            removed_fragment_ids=tuple(d.fragment_id for d in ordered if d.updated is None),
            updated_fragments=tuple(d.updated for d in ordered if d.updated is not None),
            new_fragments=tuple(self.new_fragments),
            fields_for_preserving_frag_bitmap=tuple(preserved_fields),
        )

    def discard(self) -> None:
        """Remove the deletion files and data files of an attempt that was not committed."""
        store, root = self.files.store, self.files.root
        for deletion in self.deletions:
            if deletion.updated is not None and deletion.updated.deletion_file is not None:
                name = deletion.updated.deletion_file.file_name(deletion.fragment_id)
                store.delete(store.join(root, DELETIONS_DIR, name))
        for fragment in self.new_fragments:
            for data_file in fragment.files:
                store.delete(store.join(root, DATA_DIR, data_file.path))


def _nonempty(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return (b for b in batches if b.num_rows)


@dataclass(frozen=True)
class Attempt:
    """What one attempt prepared: the rewrite to commit and its result (counts)."""

    rewrite: RowRewrite
    operation: Update
    result: dict[str, int]


@dataclass(frozen=True)
class Committed:
    """The version committed, its transaction, the result dict and the attempts it took."""

    manifest: Manifest
    transaction: Transaction
    result: dict[str, int]
    attempts: int


def run_with_retries(
    files: VersionFiles,
    attempt: Callable[[VersionFiles], Attempt],
    options: CommitOptions,
    conflict_retries: int = CONFLICT_RETRIES,
    retry_timeout: float = RETRY_TIMEOUT_SECONDS,
) -> Committed:
    """Run ``attempt`` on ``files`` and commit its Update; after a retryable conflict, remove its
    files and run it again on the latest version (at most ``conflict_retries`` more times, none
    started after ``retry_timeout`` seconds). Any other failure also removes the attempt's files."""
    deadline = time.monotonic() + retry_timeout
    for number in itertools.count(1):
        prepared = attempt(files)
        try:
            manifest, transaction = commit(
                files.storage, prepared.operation, replace(options, read_version=files.manifest.version)
            )
        except RetryableCommitConflictError:
            prepared.rewrite.discard()
            if number > conflict_retries or time.monotonic() > deadline:
                raise
        except BaseException:
            prepared.rewrite.discard()
            raise
        else:
            return Committed(manifest, transaction, prepared.result, number)
        files = VersionFiles(files.storage, load_manifest(files.store, files.root).manifest)
    raise AssertionError("unreachable")


def _bind_updates(files: VersionFiles, updates: Mapping[str, str]) -> dict[str, pc.Expression]:
    """``{column: Arrow expression cast to the column's type}``, checked on a row of nulls."""
    if not isinstance(updates, Mapping) or not updates:
        raise InvalidArgumentError("updates must be a non-empty mapping of column name to SQL expression")
    schema = files.schema
    bound = {}
    for name, text in updates.items():
        if schema.get_field_index(name) < 0:
            raise FieldNotFoundError(f"Column '{name}' does not exist in dataset schema {schema.names}")
        bound[name] = parse_expression(text, schema, column_typed_literals=True).expression
    targets = pa.schema([schema.field(n) for n in bound])
    probe = pa.RecordBatch.from_arrays([pa.nulls(1, f.type) for f in schema], schema=schema)
    try:
        evaluate_expressions(probe, bound, targets)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgumentError(f"cannot update {list(bound)}: {exc}") from exc
    return bound


def update(
    files: VersionFiles,
    updates: Mapping[str, str],
    where: str | pc.Expression | None,
    options: CommitOptions,
    conflict_retries: int = CONFLICT_RETRIES,
    retry_timeout: float = RETRY_TIMEOUT_SECONDS,
) -> Committed:
    """Set ``updates`` (column -> SQL expression over the row) on the rows ``where`` selects
    (all rows when None); commits one ``Update`` (also when no row is selected, as pylance does).
    The result is ``{"num_rows_updated": n}``. Bad input raises before anything is written."""
    _bind_updates(files, updates)
    if where is not None:
        parse_predicate(where, files.schema)

    def attempt(version: VersionFiles) -> Attempt:
        expressions = _bind_updates(version, updates)
        predicate = None if where is None else parse_predicate(where, version.schema)
        mask = None if where is None else compile_mask(where, version.schema)
        preserved = [version.lance_schema.field(n).id for n in expressions]
        rewrite = RowRewrite(version)
        counted = [0]
        ids: list[np.ndarray] = []
        try:
            rewrite.write(
                _updated_batches(rewrite, predicate, mask, expressions, counted, ids), lambda: _concat(ids)
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            rewrite.discard()
            raise InvalidArgumentError(f"cannot update {list(expressions)}: {exc}") from exc
        except BaseException:
            rewrite.discard()
            raise
        return Attempt(rewrite, rewrite.operation(preserved), {"num_rows_updated": counted[0]})

    recorded = with_properties(options, {UPDATE_ROWS_PROPERTY: IN_ORDER})
    return run_with_retries(files, attempt, recorded, conflict_retries, retry_timeout)


def with_properties(options: CommitOptions, extra: Mapping[str, str]) -> CommitOptions:
    """``options`` whose transaction properties also hold ``extra`` (the caller's win)."""
    return replace(options, transaction_properties={**extra, **(options.transaction_properties or {})})


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


# Selections up to this many rows are read by the task that found them, in one read; larger ones
# are read in READ_BATCH_ROWS pieces as they are written (bounded memory).
TASK_READ_ROWS = 1 << 16


@dataclass(frozen=True)
class _Selected:
    """One fragment's rows ``where`` selects: physical offsets, and the rows themselves (all
    columns, ``_rowid`` with stable row ids) when there are few enough."""

    offsets: np.ndarray
    rows: pa.Table | None


def pruned(fragment: FragmentReader, bounds: Sequence[Bound], live: np.ndarray) -> np.ndarray:
    """The ``live`` offsets of ``fragment`` whose pages may hold rows within ``bounds`` (by the
    page statistics; all of them when there are none)."""
    stats = fragment.statistics() if bounds else None
    if stats is None:
        return live
    ids = {b.column: fragment.files.lance_schema.field(b.column).id for b in bounds}
    mask = row_mask(stats, tuple(bounds), ids, live)
    return live if mask is None else live[mask]


def matching_rows(
    fragment: FragmentReader, predicate: Predicate, mask: Mask | None
) -> tuple[np.ndarray, pa.Table | None]:
    """Physical offsets of the live rows of ``fragment`` ``predicate`` selects, ascending, and
    (with ``mask``) the selected rows' values of the columns it read: pages pruned by its bounds,
    then its columns read and evaluated (by ``mask``, its numpy form, where it applies) on the
    calling thread."""
    if mask is None:
        return fragment.matching_offsets(predicate), None
    live = pruned(fragment, predicate.bounds, fragment.live_offsets())
    offsets, tables = [np.zeros(0, np.int64)], []
    for start in range(0, len(live), READ_AHEAD_ROWS):
        chunk = live[start : start + READ_AHEAD_ROWS]
        table = fragment.read(predicate.columns, chunk)
        keep = selected(mask, predicate, table)
        offsets.append(chunk[keep])
        tables.append(table.filter(pa.array(keep)))
    values = pa.concat_tables(tables) if tables else fragment.read(predicate.columns, offsets[0])
    return np.concatenate(offsets), values


def _select(
    fragment: FragmentReader, predicate: Predicate | None, mask: Mask | None, stable: bool
) -> _Selected:
    had = None
    if predicate is None:
        offsets = fragment.live_offsets()
    else:
        offsets, had = matching_rows(fragment, predicate, mask)
    rows = None
    if len(offsets) <= TASK_READ_ROWS:
        # The filter's columns of the selected rows are at hand: only the others are read.
        known = pa.table({}) if had is None else had
        rest = [n for n in fragment.files.schema.names if n not in known.column_names]
        rows = fragment.read(rest, offsets, with_row_id=stable)
        for name in known.column_names:
            rows = rows.append_column(known.schema.field(name), known.column(name))
    return _Selected(offsets, rows)


def per_fragment(
    fragments: Iterable[FragmentReader], work: Callable[[FragmentReader], R]
) -> Iterator[tuple[FragmentReader, R]]:
    """``(fragment, work(fragment))`` in fragment order, :data:`WORKER_THREADS` fragments at a
    time on the worker pool (each fragment's reads then stay on its task's thread; the window
    bounds what is held at once)."""
    chosen = list(fragments)
    window = max(1, WORKER_THREADS)
    for start in range(0, len(chosen), window):
        some = chosen[start : start + window]
        results = run_tasks([partial(work, f) for f in some], [f.physical_rows for f in some])
        yield from zip(some, results, strict=True)


def _updated_batches(
    rewrite: RowRewrite,
    predicate: Predicate | None,
    mask: Mask | None,
    expressions: Mapping[str, pc.Expression],
    counted: list[int],
    ids: list[np.ndarray],
) -> Iterator[pa.RecordBatch]:
    """The updated rows, fragment by fragment; deletes the originals as each fragment is done."""
    files = rewrite.files
    schema = files.schema
    targets = pa.schema([schema.field(n) for n in expressions])
    stable = files.manifest.uses_stable_row_ids
    select = partial(_select, predicate=predicate, mask=mask, stable=stable)
    for fragment, found in per_fragment(files.fragments(), select):
        offsets = found.offsets
        for start in range(0, len(offsets), READ_BATCH_ROWS):
            if found.rows is not None:
                table = found.rows.slice(start, READ_BATCH_ROWS)
            else:
                chunk = offsets[start : start + READ_BATCH_ROWS]
                table = fragment.read(schema.names, chunk, with_row_id=stable)
            if stable:
                ids.append(table.column(ROW_ID).to_numpy())
            batch = table.select(schema.names).combine_chunks().to_batches()[0]
            values = dict(zip(expressions, evaluate_expressions(batch, expressions, targets), strict=True))
            arrays = [values.get(name, batch.column(i)) for i, name in enumerate(schema.names)]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        counted[0] += rewrite.delete(fragment, offsets)
