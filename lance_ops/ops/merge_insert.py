"""Upserts: ``ds.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().execute(data)``.

The source is read once into memory (pylance keeps a copy too, to retry). The target is streamed
fragment by fragment: each fragment's rows whose keys the source may hold are read (when no row
must be seen for a by-source delete: in the fragments a BTREE or BITMAP index of a non-float key
column covers, only the live rows the index lists for the source's values of that column, a
fragment with none not read at all; elsewhere the pages whose statistics meet the source's key
range; only the key columns and the columns a condition or a partial source needs; which path ran
is logged at DEBUG, :class:`MergePruning`), joined with the source keys
(unique integer keys: a bitmap over their range and a binary search, :class:`IntegerKeyLookup`;
other unique keys: ``index_in``; else ``pyarrow.Table.join``), two fragments at a time on the
worker pool, and the fragment's part of the result decided with vectorised masks:

* matched rows: updated (``when_matched_update_all(condition)``: old row deleted, the source row —
  completed from the target's row when the source lacks columns — written to a new fragment),
  deleted (``when_matched_delete``) or refused (``when_matched_fail``);
* target rows no source row matches: deleted by ``when_not_matched_by_source_delete(expr)``;
* source rows that matched nothing: inserted by ``when_not_matched_insert_all`` (after the updated
  rows, in the same new fragments).

Null keys never match. A target row matched by two source rows is refused (pylance's "ambiguous
merge insert"), as is a source whose columns are not the dataset's (or lack a key), with nothing
written. One ``Update`` (rewrite-rows mode) is committed; with stable row ids the updated rows keep
their ids. The result is ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}``.

Concurrent writers: the commit retries on the latest version after a conflicting commit (one that
changed a fragment this one deletes from), as pylance does; beyond pylance, a commit that landed
since the read and added rows with keys this one inserts also makes it retry, so two upserts of the
same new key never both insert it; and a compaction of the fragments this one deletes from is
followed through the row ids instead of retrying (:mod:`lance_ops.table.rewrite_rebase`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import (
    FieldNotFoundError,
    InvalidArgumentError,
    MergeInsertError,
    RetryableCommitConflictError,
    UnsupportedFeatureError,
    WriteSchemaError,
)
from lance_ops.fragment.options import ScanOptions
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, FragmentReader, VersionFiles
from lance_ops.fragment.writer import to_reader
from lance_ops.index.scalar_query import KeyRows, key_rows
from lance_ops.ops.changes import MERGE_KEYS_PROPERTY
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.delete import FragmentDeletion
from lance_ops.ops.update import (
    CONFLICT_RETRIES,
    READ_BATCH_ROWS,
    RETRY_TIMEOUT_SECONDS,
    Attempt,
    Committed,
    RowRewrite,
    per_fragment,
    pruned,
    run_with_retries,
    with_properties,
)
from lance_ops.query.predicate import Bound, parse_predicate
from lance_ops.query.vectorized import selected
from lance_ops.table.commit import load_manifest
from lance_ops.table.manifest import DataFragment
from lance_ops.table.transaction import Append, Transaction, Update

log = logging.getLogger(__name__)

_TARGET_INDEX = "__lance_ops_target"
_SOURCE_INDEX = "__lance_ops_source"
# Matching (target row, source row) indices, ordered by target row.
_Pairs = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class MergeInsertPlan:
    """What a merge insert does (the builder's settings).

    ``when_matched``: ``"update"``, ``"delete"``, ``"fail"`` or None (matched rows are kept).
    ``use_index``: a scalar index of a key column may select the target rows read (pylance's
    ``use_index``; False: page statistics only).
    """

    on: tuple[str, ...]
    when_matched: str | None = None
    matched_condition: str | None = None
    insert_not_matched: bool = False
    delete_not_matched_by_source: bool = False
    by_source_condition: str | None = None
    conflict_retries: int = CONFLICT_RETRIES
    retry_timeout: float = RETRY_TIMEOUT_SECONDS
    use_index: bool = True

    def check_keys(self, schema: pa.Schema) -> None:
        """Refuse keys the dataset lacks (pylance's error)."""
        if not self.on:
            raise InvalidArgumentError("merge_insert needs at least one key column")
        for key in self.on:
            if schema.get_field_index(key) < 0:
                raise FieldNotFoundError(f"Merge insert key column '{key}' does not exist in schema")

    def check(self, schema: pa.Schema) -> None:
        """Refuse keys the dataset lacks and a plan that changes nothing (pylance's errors)."""
        self.check_keys(schema)
        if (
            self.when_matched is None
            and not self.insert_not_matched
            and not self.delete_not_matched_by_source
        ):
            raise InvalidArgumentError("The merge insert job is not configured to change the data in any way")


def read_source(data: Any, schema: pa.Schema | None, plan: MergeInsertPlan, target: pa.Schema) -> pa.Table:
    """The source as one table in the dataset's column order; refuses columns the dataset does not
    have, differently typed columns and a source without the key columns (pylance's errors)."""
    table = to_reader(data, schema).read_all()
    unexpected = [n for n in table.column_names if target.get_field_index(n) < 0]
    if unexpected or len(set(table.column_names)) != table.num_columns:
        raise WriteSchemaError(
            f"Append with different schema: fields did not match, missing=[], unexpected={unexpected}",
            tuple(unexpected),
        )
    for name in table.column_names:
        given, wanted = table.schema.field(name).type, target.field(name).type
        if given != wanted:
            raise WriteSchemaError(
                f"Append with different schema: `{name}` should have type {wanted} but type was {given}",
                (name,),
            )
    missing = [k for k in plan.on if k not in table.column_names]
    if missing:
        raise WriteSchemaError(f"the merge insert source lacks the key columns {missing}", tuple(missing))
    return table.select([n for n in target.names if n in table.column_names]).combine_chunks()


def all_distinct(values: pa.ChunkedArray) -> bool:
    """Whether no two of ``values`` are equal, two nulls counting as equal (``count_distinct``
    with ``mode="all"``). Integers without nulls are sorted and compared with their neighbours,
    several times cheaper than building Arrow's hash set (whose first use in a process also
    initialises its kernels)."""
    if pa.types.is_integer(values.type) and values.null_count == 0:
        ordered = np.sort(values.to_numpy())
        return bool(np.all(ordered[1:] != ordered[:-1]))
    return bool(pc.count_distinct(values, mode="all").as_py() == len(values))


def key_bounds(source: pa.Table, on: Sequence[str]) -> tuple[Bound, ...] | None:
    """Each key's range in the source, for pruning target pages by their statistics (None: a key
    is null in every source row, so no target row can match)."""
    bounds: list[Bound] = []
    for key in on:
        values = pc.drop_null(source.column(key))
        if not len(values):
            return None
        extremes = pc.min_max(values)
        if not pa.types.is_floating(values.type):
            bounds += [Bound(key, "ge", (extremes["min"],)), Bound(key, "le", (extremes["max"],))]
    return tuple(bounds)


def candidate_offsets(fragment: FragmentReader, bounds: tuple[Bound, ...] | None) -> np.ndarray:
    """The live offsets of ``fragment`` whose pages may hold keys within ``bounds``."""
    if bounds is None:
        return np.zeros(0, np.int64)
    return pruned(fragment, bounds, fragment.live_offsets())


def index_keys(files: VersionFiles, source: pa.Table, on: Sequence[str]) -> KeyRows | None:
    """Where a BTREE or BITMAP index of a key column (the first of ``on`` that has one; not a
    floating column, whose ``-0.0`` / ``NaN`` an index lookup and the join may see differently)
    puts the source's values of that column: the target rows that may match a source row, in the
    fragments the index covers (None: no such index)."""
    keyed = _index_key(files, source, on)
    return None if keyed is None else keyed[1]


def _index_key(files: VersionFiles, source: pa.Table, on: Sequence[str]) -> tuple[str, KeyRows] | None:
    """:func:`index_keys` with the key column it used."""
    for key in on:
        column = source.column(key)
        if pa.types.is_floating(column.type):
            continue
        found = key_rows(files.storage, files.manifest, key, column.combine_chunks())
        if found is not None:
            return key, found
    return None


class IndexedOffsets:
    """The live offsets, per fragment the index covers, of the rows :func:`index_keys` found."""

    def __init__(self, found: KeyRows) -> None:
        self.found = found
        # row addresses, also with stable row ids (as pylance 14 and lance_ops write BTREEs)
        self.by_fragment = found.by_fragment()

    def covers(self, fragment: FragmentReader) -> bool:
        return fragment.id in self.found.covered

    def offsets(self, fragment: FragmentReader) -> np.ndarray:
        """The live offsets of ``fragment`` (covered by the index) holding a key it found."""
        offsets = self.by_fragment.get(fragment.id, np.zeros(0, np.int64))
        offsets = offsets[offsets < fragment.physical_rows]
        deleted = fragment.deleted
        return offsets[~np.isin(offsets, deleted)] if len(deleted) and len(offsets) else offsets


# Source key ranges up to this many values are looked up in a bitmap (16 MiB at most).
BITMAP_MAX_SPAN = 1 << 27
# Target keys looked up at a time (the scratch arrays of one lookup stay a few MiB).
LOOKUP_ROWS = 1 << 18


class IntegerKeyLookup:
    """Unique, non-null integer source keys, looked up from target keys without a hash table:
    a bitmap over the keys' range says which target keys are in the source, and a binary search
    in the sorted keys finds the source row of those. Several times cheaper than ``index_in``,
    which builds its hash table of the source keys again for every target fragment."""

    def __init__(self, values: np.ndarray, span: int) -> None:
        """``values``: the keys as :func:`_int64_words`, unique; ``span``: max - min + 1."""
        self.order = np.argsort(values, kind="stable")
        self.sorted = values[self.order]
        self.low = np.uint64(int(self.sorted[0]) & 0xFFFFFFFFFFFFFFFF)
        self.span = np.uint64(span)
        present = np.zeros(span, dtype=bool)
        present[(values.view(np.uint64) - self.low).astype(np.int64)] = True
        self.bitmap = np.packbits(present, bitorder="little")

    @classmethod
    def build(cls, keys: pa.ChunkedArray | pa.Array) -> IntegerKeyLookup | None:
        """The lookup of ``keys`` (integers, unique, no null), or None when they span more than
        :data:`BITMAP_MAX_SPAN` values (or are not such keys)."""
        array = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        if not pa.types.is_integer(array.type) or array.null_count or not len(array):
            return None
        values = _int64_words(array)
        span = int(values.max()) - int(values.min()) + 1
        return cls(values, span) if span <= BITMAP_MAX_SPAN else None

    def pairs(self, target: pa.ChunkedArray | pa.Array) -> _Pairs:
        """Matching (target row, source row) indices, ordered by target row (a null target key
        matches nothing). Looked up :data:`LOOKUP_ROWS` target keys at a time (bounded scratch
        memory)."""
        array = target.combine_chunks() if isinstance(target, pa.ChunkedArray) else target
        found = [
            self._hits(array.slice(start, LOOKUP_ROWS)) + start for start in range(0, len(array), LOOKUP_ROWS)
        ]
        t_index = np.concatenate(found) if found else np.zeros(0, np.int64)
        values = _int64_words(array.take(pa.array(t_index))) if len(t_index) else np.zeros(0, np.int64)
        s_index = self.order[np.searchsorted(self.sorted, values)]
        return t_index, s_index.astype(np.int64)

    def _hits(self, array: pa.Array) -> np.ndarray:
        """Positions in ``array`` of the keys the source holds."""
        values = _int64_words(pc.fill_null(array, 0) if array.null_count else array)
        with np.errstate(over="ignore"):
            offset = values.view(np.uint64) - self.low  # wraps: keys below the range land far above it
        inside = offset < self.span
        offset[~inside] = 0
        bits = self.bitmap[offset >> np.uint64(3)] >> (offset & np.uint64(7)).astype(np.uint8)
        hit = (bits & 1).astype(bool) & inside
        if array.null_count:
            hit &= np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return np.flatnonzero(hit).astype(np.int64)


def _int64_words(array: pa.Array) -> np.ndarray:
    """Integer values as int64 words, equal exactly where the values are (uint64 reinterpreted)."""
    values = array.to_numpy(zero_copy_only=False)
    return values.view(np.int64) if values.dtype == np.uint64 else values.astype(np.int64, copy=False)


@dataclass(frozen=True)
class MergePruning:
    """How a merge read its target (logged at DEBUG by ``lance_ops.ops.merge_insert`` as the
    record's ``merge_pruning``): the fragments merged, those read at all, and the key column's
    scalar index used (None: page statistics only) with the fragments it answered for."""

    fragments: int
    fragments_read: int
    index: str | None
    fragments_by_index: int


@dataclass
class _Outcome:
    updated: int = 0
    deleted: int = 0
    inserted: int = 0

    def result(self) -> dict[str, int]:
        """pylance's result dict."""
        return {
            "num_inserted_rows": self.inserted,
            "num_updated_rows": self.updated,
            "num_deleted_rows": self.deleted,
        }


class _Merge:
    """One attempt on one version."""

    def __init__(self, files: VersionFiles, plan: MergeInsertPlan, source: pa.Table) -> None:
        self.files, self.plan, self.source = files, plan, source
        schema = files.schema
        self.partial = [n for n in schema.names if n not in source.column_names]
        self.condition = None
        needed = set(plan.on)
        if plan.when_matched == "update" and plan.matched_condition:
            joined = pa.schema(
                [
                    pa.field("target", pa.struct(list(schema))),
                    pa.field("source", pa.struct(list(source.schema))),
                ]
            )
            self.condition = parse_predicate(plan.matched_condition, joined)
            needed |= set(schema.names)
        if plan.when_matched == "update":
            needed |= set(self.partial)
        self.by_source = None
        if plan.delete_not_matched_by_source and plan.by_source_condition:
            self.by_source = parse_predicate(plan.by_source_condition, schema)
            needed |= set(self.by_source.columns) & set(schema.names)
        self.read_columns = tuple(n for n in schema.names if n in needed)
        self.keys = source.select(list(plan.on)).append_column(
            _SOURCE_INDEX, pa.array(np.arange(source.num_rows, dtype=np.int64))
        )
        key = source.column(plan.on[0]) if len(plan.on) == 1 else None
        self.unique_single_key = key is not None and all_distinct(key)
        self.lookup = IntegerKeyLookup.build(key) if key is not None and self.unique_single_key else None
        self.matched = np.zeros(source.num_rows, dtype=bool)
        self.outcome = _Outcome()
        self.rewrite = RowRewrite(files)
        self.carried: list[np.ndarray] = []
        self.pruning: MergePruning | None = None

    def run(
        self,
        fragments: Iterable[FragmentReader] | None = None,
        insert: bool = True,
        batches: Iterator[pa.RecordBatch] | None = None,
    ) -> Attempt:
        """Merge ``fragments`` (default: all of the version) and, with ``insert``, write the source
        rows that matched nothing (here or in :attr:`matched` as given); ``batches``: the rows to
        write instead (:meth:`run_rows`). Only a merge of the whole version looks its keys up in a
        key column's index: a task merging some fragments (:func:`merge_fragments`) would read the
        index once per fragment, so it prunes by the statistics."""
        chosen = self.files.fragments() if fragments is None else fragments
        use_index = fragments is None and self.plan.use_index
        written = self._batches(chosen, insert, use_index) if batches is None else batches
        try:
            self.rewrite.write(written, lambda: _concat(self.carried))
        except BaseException:
            self.rewrite.discard()
            raise
        preserved = _preserved_fields(self.files)
        return Attempt(self.rewrite, self.rewrite.operation(preserved), self.outcome.result())

    def _batches(
        self, fragments: Iterable[FragmentReader], insert: bool, use_index: bool
    ) -> Iterator[pa.RecordBatch]:
        bounds = key_bounds(self.source, self.plan.on)
        every_row = self.plan.delete_not_matched_by_source
        chosen = list(fragments)
        # A scalar index of a key column gives the rows that may match in the fragments it
        # covers; the others are pruned by their page statistics. No pruning when every target
        # row must be seen (a by-source delete).
        found = None
        if use_index and not every_row and bounds is not None and chosen:
            keyed = index_keys(self.files, self.source, self.plan.on)
            if keyed is not None:
                found = IndexedOffsets(keyed)
        read: list[int] = []
        scan = ScanOptions(
            columns=self.read_columns,
            with_row_id=self.files.manifest.uses_stable_row_ids,
            with_row_address=True,
            batch_size=READ_BATCH_ROWS,
        )

        def joined(fragment: FragmentReader) -> tuple[pa.Table, _Pairs] | None:
            """The fragment's candidate rows and their pairs with the source (None: no row)."""
            if every_row:
                live = None
            elif found is not None and found.covers(fragment):
                live = found.offsets(fragment)
            else:
                live = candidate_offsets(fragment, bounds)
            if live is not None and not len(live):
                return None
            read.append(fragment.id)
            parts = [t for t in fragment.scan(scan, live) if t.num_rows]
            if not parts:
                return None
            target = pa.concat_tables(parts).combine_chunks()
            return target, self._pairs(target)

        # Read and joined on the worker pool; the rows are written in fragment order.
        for fragment, result in per_fragment(chosen, joined):
            if result is not None:
                yield from self._fragment(fragment, *result)
        self.pruning = MergePruning(
            fragments=len(chosen),
            fragments_read=len(read),
            index=None if found is None else found.found.name,
            fragments_by_index=0 if found is None else sum(found.covers(f) for f in chosen),
        )
        log.debug("merge_insert target read: %s", self.pruning, extra={"merge_pruning": self.pruning})
        if insert:
            yield from self._inserted()

    def _inserted(self) -> Iterator[pa.RecordBatch]:
        """The source rows nothing matched (when the plan inserts them)."""
        if self.plan.insert_not_matched:
            inserted = self.source.filter(pa.array(~self.matched))
            self.outcome.inserted = inserted.num_rows
            yield from self._shaped(inserted, None).to_batches()

    def run_rows(self, target: pa.Table) -> tuple[Attempt, np.ndarray]:
        """Merge ``target`` — rows of any fragments of the version with ``_rowaddr`` (and ``_rowid``
        with stable row ids), holding every target row whose key is in the source — and write the
        updated and inserted rows. Deletes nothing: returns the row addresses to delete with the
        attempt (a distributed merge deletes them per fragment on the driver)."""
        doomed = [np.zeros(0, np.uint64)]

        def batches() -> Iterator[pa.RecordBatch]:
            if target.num_rows:
                yield from self._matched(target, doomed)
            yield from self._inserted()

        prepared = self.run((), insert=False, batches=batches())
        return prepared, np.concatenate(doomed)

    def _fragment(
        self, fragment: FragmentReader, target: pa.Table, pairs: _Pairs
    ) -> Iterator[pa.RecordBatch]:
        """The fragment's updated rows (its deletions are recorded once it is done)."""
        doomed = [np.zeros(0, np.uint64)]
        yield from self._matched(target, doomed, pairs)
        addresses = np.concatenate(doomed)
        self.rewrite.delete(fragment, (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64))

    def _matched(
        self, target: pa.Table, doomed: list[np.ndarray], pairs: _Pairs | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The updated rows of ``target``; the addresses of its rows to delete go to ``doomed``
        (``pairs``: :meth:`_pairs` of ``target`` when already found)."""
        plan = self.plan
        t_index, s_index = self._pairs(target) if pairs is None else pairs
        t_index_all = t_index
        self._refuse_ambiguous(target, t_index)
        if len(t_index) and plan.when_matched == "fail":
            first = target.slice(int(t_index[0]), 1).select(list(plan.on)).to_pylist()[0]
            raise MergeInsertError(
                f"Merge insert failed: found matching row with key values: {_describe(first)}"
            )
        self.matched[s_index] = True
        addresses = target.column(ROW_ADDRESS).to_numpy()
        if plan.when_matched in ("update", "delete") and len(t_index):
            if self.condition is not None:
                keep = self._condition_mask(target, t_index, s_index)
                t_index, s_index = t_index[keep], s_index[keep]
            doomed.append(addresses[t_index])
            if plan.when_matched == "delete":
                self.outcome.deleted += len(t_index)
            else:
                self.outcome.updated += len(t_index)
                if self.files.manifest.uses_stable_row_ids:
                    self.carried.append(target.column(ROW_ID).to_numpy()[t_index])
                rows = self._shaped(self.source.take(pa.array(s_index)), target.take(pa.array(t_index)))
                yield from rows.to_batches()
        if plan.delete_not_matched_by_source:
            unmatched = np.ones(target.num_rows, dtype=bool)
            unmatched[t_index_all] = False
            if self.by_source is not None:
                unmatched &= selected(None, self.by_source, target)
            doomed.append(addresses[unmatched])
            self.outcome.deleted += int(unmatched.sum())

    def _pairs(self, target: pa.Table) -> _Pairs:
        """Matching (target row, source row) indices, ordered by target row. One integer key
        column with unique source keys over at most :data:`BITMAP_MAX_SPAN` values is looked up in
        a bitmap (:class:`IntegerKeyLookup`); another unique key column is a hash lookup of each
        target key in the source's (``index_in``); otherwise an Arrow hash join (composite keys,
        or duplicates to refuse as ambiguous)."""
        on = list(self.plan.on)
        if self.lookup is not None:
            return self.lookup.pairs(target.column(on[0]))
        if self.unique_single_key:
            try:  # a null key matches nothing, as in the join
                found = pc.index_in(target.column(on[0]), value_set=self.keys.column(on[0]), skip_nulls=True)
            except pa.ArrowNotImplementedError:
                self.unique_single_key = False  # no lookup kernel for the key type: join
            else:
                t_index = np.flatnonzero(found.is_valid().to_numpy(zero_copy_only=False))
                return t_index.astype(np.int64), found.drop_null().to_numpy().astype(np.int64)
        numbered = target.select(on).append_column(
            _TARGET_INDEX, pa.array(np.arange(target.num_rows, dtype=np.int64))
        )
        pairs = numbered.join(self.keys, on, join_type="inner", use_threads=False)
        t_index = pairs.column(_TARGET_INDEX).to_numpy()
        s_index = pairs.column(_SOURCE_INDEX).to_numpy()
        order = np.argsort(t_index, kind="stable")
        return t_index[order], s_index[order]

    def _refuse_ambiguous(self, target: pa.Table, t_index: np.ndarray) -> None:
        repeated = t_index[1:][t_index[1:] == t_index[:-1]]
        if len(repeated):
            row = target.slice(int(repeated[0]), 1).select(list(self.plan.on)).to_pylist()[0]
            raise MergeInsertError(
                "Ambiguous merge inserts are prohibited: multiple source rows match the same target row "
                f"on ({_describe(row)}). Please ensure each target row is matched by at most one source row."
            )

    def _condition_mask(self, target: pa.Table, t_index: np.ndarray, s_index: np.ndarray) -> np.ndarray:
        assert self.condition is not None
        schema = self.files.schema
        old = target.select(schema.names).take(pa.array(t_index))
        new = self.source.take(pa.array(s_index))
        joined = pa.table({"target": old.to_struct_array(), "source": new.to_struct_array()})
        return selected(None, self.condition, joined)

    def _shaped(self, rows: pa.Table, target: pa.Table | None) -> pa.Table:
        """``rows`` of the source with the columns it lacks from ``target`` (updated rows) or null."""
        schema = self.files.schema
        columns = []
        for field in schema:
            if field.name in rows.column_names:
                columns.append(rows.column(field.name))
            elif target is not None:
                columns.append(target.column(field.name))
            else:
                columns.append(pa.nulls(rows.num_rows, field.type))
        return pa.Table.from_arrays(columns, schema=schema)


def _concat(parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _describe(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in row.items())


def _new_key_check(
    files: VersionFiles, plan: MergeInsertPlan, source: pa.Table
) -> Callable[[Transaction, int], None]:
    """A commit check: retry when a commit since our read added rows with keys we insert."""
    keys = source.select(list(plan.on))

    def check(theirs: Transaction, their_version: int) -> None:
        op = theirs.operation
        added = op.fragments if isinstance(op, Append) else op.new_fragments if isinstance(op, Update) else ()
        bounds = key_bounds(source, plan.on) if added else None
        if bounds is None:
            return
        version = VersionFiles(files.storage, load_manifest(files.store, files.root, their_version).manifest)
        scan = ScanOptions(columns=plan.on, batch_size=READ_BATCH_ROWS)
        for metadata in added:
            fragment = FragmentReader(version, metadata)
            for table in fragment.scan(scan, candidate_offsets(fragment, bounds)):
                if (
                    table.num_rows
                    and table.select(list(plan.on)).join(keys, list(plan.on), join_type="inner").num_rows
                ):
                    raise RetryableCommitConflictError(
                        f"Retryable commit conflict: version {their_version} added rows with keys "
                        "this merge insert inserts"
                    )

    return check


def merge_insert(
    files: VersionFiles, plan: MergeInsertPlan, data: Any, schema: pa.Schema | None, options: CommitOptions
) -> Committed:
    """Run ``plan`` with ``data`` as the source on the version ``files`` reads and commit it."""
    plan.check(files.schema)
    source = read_source(data, schema, plan, files.schema)

    def attempt(version: VersionFiles) -> Attempt:
        plan.check(version.schema)
        return _Merge(version, plan, read_source(source, None, plan, version.schema)).run()

    return commit_merge(files, plan, source, attempt, options)


def prepare(files: VersionFiles, plan: MergeInsertPlan, data: Any, schema: pa.Schema | None) -> Attempt:
    """Write the files of ``plan`` on the version ``files`` reads without committing them."""
    plan.check(files.schema)
    return _Merge(files, plan, read_source(data, schema, plan, files.schema)).run()


# ------------------------------------------------------------ pieces of a distributed merge


@dataclass(frozen=True)
class MergePart:
    """One task's share of a merge: the deletion files and fragments it wrote, the source rows it
    matched (indices) and its counts. Picklable: a Spark task returns it to the driver."""

    deletions: tuple[FragmentDeletion, ...]
    new_fragments: tuple[DataFragment, ...]
    matched: np.ndarray
    result: dict[str, int]


def merge_fragments(
    files: VersionFiles, plan: MergeInsertPlan, source: pa.Table, fragment_ids: Sequence[int]
) -> MergePart:
    """Merge the target fragments ``fragment_ids`` of the version ``files`` reads with ``source``
    (shaped by :func:`read_source`): their deletions and updated rows, nothing inserted. The
    source's key lookup is built once for all of them; only their readers are built."""
    merge = _Merge(files, plan, source)
    wanted = set(fragment_ids)
    chosen = [files.fragment(f) for f in files.manifest.fragments if f.id in wanted]
    prepared = merge.run(chosen, insert=False)
    return _part(prepared, np.flatnonzero(merge.matched))


def insert_unmatched(
    files: VersionFiles, plan: MergeInsertPlan, source: pa.Table, matched: np.ndarray
) -> MergePart:
    """Write the source rows outside ``matched`` (indices) as new fragments (the inserts)."""
    merge = _Merge(files, plan, source)
    merge.matched[matched] = True
    return _part(merge.run((), insert=True), matched)


def target_columns(files: VersionFiles, plan: MergeInsertPlan, source_schema: pa.Schema) -> tuple[str, ...]:
    """The target columns a merge with a source of ``source_schema`` reads (keys, the columns an
    update keeps from the target, those its conditions name)."""
    return _Merge(files, plan, source_schema.empty_table()).read_columns


def merge_rows(
    files: VersionFiles, plan: MergeInsertPlan, source: pa.Table, target: pa.Table
) -> tuple[MergePart, np.ndarray]:
    """Merge ``source`` (shaped by :func:`read_source`) with ``target`` — rows of the version
    ``files`` reads, with :func:`target_columns`, ``_rowaddr`` and (stable row ids) ``_rowid``,
    including every target row with a key of ``source`` and, when the plan deletes by source,
    every row the merge must look at — writing the updated and inserted rows. Returns the part
    (no deletions) and the addresses of the target rows to delete."""
    merge = _Merge(files, plan, source)
    prepared, addresses = merge.run_rows(target)
    return _part(prepared, np.flatnonzero(merge.matched)), addresses


def rows_with_keys(table: pa.Table, keys: pa.Table, on: Sequence[str]) -> pa.Table:
    """The rows of ``table`` whose key (columns ``on``) is one of ``keys``' (a null key matches
    nothing); a semi join, in no particular order."""
    names = list(on)
    if len(names) == 1:
        found = pc.is_in(table.column(names[0]), value_set=keys.column(names[0]), skip_nulls=True)
        return table.filter(pc.fill_null(found, False))
    return table.join(keys.select(names).group_by(names).aggregate([]), names, join_type="left semi")


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64 words (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _key_words(array: pa.Array) -> np.ndarray:
    """One uint64 per value of a key column, equal for equal values of the column's type (nulls,
    which match nothing, hash as 0)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    type_ = array.type
    if pa.types.is_dictionary(type_):
        return _key_words(array.dictionary_decode())
    if pa.types.is_temporal(type_) and not pa.types.is_interval(type_):
        width = type_.bit_width
        return _key_words(array.view(pa.int32() if width == 32 else pa.int64()))
    if pa.types.is_boolean(type_):
        array = pc.cast(array, pa.int64())
        type_ = array.type
    if pa.types.is_integer(type_):
        words = pc.fill_null(array.cast(pa.int64(), safe=False), 0).to_numpy(zero_copy_only=False)
        return words.view(np.uint64)
    if pa.types.is_floating(type_):
        doubles = pc.fill_null(array.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        return np.where(doubles == 0, 0.0, doubles).view(np.uint64)  # -0.0 equals 0.0
    if pa.types.is_decimal(type_):
        array = array.cast(pa.string())
    binary = pc.fill_null(array.cast(pa.large_binary()), b"")
    _, offsets_buffer, data_buffer = binary.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[binary.offset :][: len(binary) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.zeros(0, np.uint8)
    from lance_ops.encoding.sketch import _murmur3

    return _murmur3(data, offsets)[0]


def key_partitions(table: pa.Table, on: Sequence[str], partitions: int) -> np.ndarray:
    """The partition (``0 .. partitions - 1``) of each row by a hash of its key columns ``on``:
    the same key gives the same partition in every process, for the source and the target alike
    (both carry the dataset's column types)."""
    hashed = np.zeros(table.num_rows, np.uint64)
    for name in on:
        with np.errstate(over="ignore"):
            hashed = _mix(hashed * _GOLDEN + _key_words(table.column(name)))
    return (hashed % np.uint64(partitions)).astype(np.int64)


def _preserved_fields(files: VersionFiles) -> list[int]:
    """``fields_for_preserving_frag_bitmap`` of a merge: every field id of the dataset (nested ones
    included), as pylance 14 records it whichever columns the source has."""
    return sorted(files.lance_schema.field_ids)


def _part(prepared: Attempt, matched: np.ndarray) -> MergePart:
    rewrite = prepared.rewrite
    return MergePart(tuple(rewrite.deletions), tuple(rewrite.new_fragments), matched, prepared.result)


def combine(files: VersionFiles, parts: Sequence[MergePart]) -> Attempt:
    """The one ``Update`` of the parts' deletions and fragments, and the summed counts."""
    rewrite = RowRewrite(
        files,
        [d for p in parts for d in p.deletions],
        [f for p in parts for f in p.new_fragments],
    )
    preserved = _preserved_fields(files)
    totals = {key: sum(p.result[key] for p in parts) for key in _Outcome().result()}
    return Attempt(rewrite, rewrite.operation(preserved), totals)


def commit_merge(
    files: VersionFiles,
    plan: MergeInsertPlan,
    source: pa.Table,
    attempt: Callable[[VersionFiles], Attempt],
    options: CommitOptions,
) -> Committed:
    """Commit what ``attempt`` prepares on ``files`` (again on the latest version after a retryable
    conflict), with the check that refuses keys a concurrent commit inserted."""
    check = _new_key_check(files, plan, source) if plan.insert_not_matched else None
    recorded = with_properties(options, {MERGE_KEYS_PROPERTY: json.dumps(list(plan.on))})
    return run_with_retries(
        files, attempt, replace(recorded, conflict_check=check), plan.conflict_retries, plan.retry_timeout
    )


# ------------------------------------------------------------ plans (explain / analyze)


def _clauses(plan: MergeInsertPlan) -> str:
    matched = {"update": "UpdateAll", "delete": "Delete", "fail": "Fail", None: "DoNothing"}[
        plan.when_matched
    ]
    if plan.when_matched == "update" and plan.matched_condition:
        matched = f"UpdateIf({plan.matched_condition})"
    by_source = "Keep"
    if plan.delete_not_matched_by_source:
        by_source = f"DeleteIf({plan.by_source_condition})" if plan.by_source_condition else "Delete"
    return (
        f"on=[{', '.join(plan.on)}], when_matched={matched}, "
        f"when_not_matched={'InsertAll' if plan.insert_not_matched else 'DoNothing'}, "
        f"when_not_matched_by_source={by_source}"
    )


def _refuse_index_path(files: VersionFiles, plan: MergeInsertPlan, source: pa.Table, what: str) -> None:
    """As pylance 14, a merge whose target rows a key column's scalar index selects has no plan
    to report (``what``): :class:`UnsupportedFeatureError` naming the index (``use_index(False)``
    reports the plan of the merge without it)."""
    if not plan.use_index or plan.delete_not_matched_by_source:
        return
    keyed = _index_key(files, source, plan.on)
    if keyed is not None:
        key, found = keyed
        raise UnsupportedFeatureError(
            f"This merge insert configuration does not support {what}: the join takes the "
            f"scalar-index execution path (index {found.name!r} on {key!r}); "
            "use_index(False) reports the plan without it"
        )


def explain(files: VersionFiles, plan: MergeInsertPlan, source: pa.Schema, verbose: bool = False) -> str:
    """What a merge of a source shaped like ``source`` does on the version ``files`` reads."""
    merge = _Merge(files, plan, source.empty_table())
    _refuse_index_path(files, plan, merge.source, "explain_plan")
    every_row = plan.delete_not_matched_by_source
    lines = [
        f"MergeInsert: {_clauses(plan)}",
        f"  HashJoin: join_type=Inner, on=[{', '.join(plan.on)}], per target fragment"
        + ("; unmatched source rows inserted" if plan.insert_not_matched else ""),
        f"    LanceRead: uri={files.uri}, projection=[{', '.join(merge.read_columns)}], "
        f"num_fragments={len(files.manifest.fragments)}, "
        + (
            "every live row" if every_row else f"pages pruned by the source's range of [{', '.join(plan.on)}]"
        ),
        f"    Source: in memory, projection=[{', '.join(source.names)}]",
    ]
    if verbose:
        lines.append(
            f"  Write: new fragments (updated then inserted rows), deletion files; one Update on "
            f"version {files.manifest.version}"
        )
    return "\n".join(lines) + "\n"


def analyze(files: VersionFiles, plan: MergeInsertPlan, data: Any, schema: pa.Schema | None) -> str:
    """Run the merge without committing (its files are removed again) and describe what it did."""
    _refuse_index_path(files, plan, _source_schema(files, data, schema).empty_table(), "plan reporting")
    started = time.perf_counter()
    prepared = prepare(files, plan, data, schema)
    elapsed = time.perf_counter() - started
    written = [f for fragment in prepared.rewrite.new_fragments for f in fragment.files]
    prepared.rewrite.discard()
    counts = prepared.result
    metrics = (
        f"bytes_written={sum(f.file_size_bytes for f in written)}, "
        f"num_deleted_rows={counts['num_deleted_rows']}, num_files_written={len(written)}, "
        f"num_inserted_rows={counts['num_inserted_rows']}, num_updated_rows={counts['num_updated_rows']}, "
        f"num_deletion_files_written={len(prepared.rewrite.deletions)}"
    )
    steps = explain(files, plan, _source_schema(files, data, schema)).splitlines()[1:]
    lines = [f"MergeInsert: elapsed={elapsed * 1000:.3f}ms, {_clauses(plan)}, metrics=[{metrics}]", *steps]
    return "\n".join(lines) + "\n"


def _source_schema(files: VersionFiles, data: Any, schema: pa.Schema | None) -> pa.Schema:
    if schema is not None:
        return schema
    return data.schema if isinstance(data, pa.Table | pa.RecordBatch) else files.schema
