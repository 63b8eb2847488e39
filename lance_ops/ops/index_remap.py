"""Keeping indices right through a compaction (what goes into its Rewrite), as pylance 14 does.

For a Rewrite replacing groups of old fragments by new ones, every index covering an old
fragment is handled by one of three rules:

* **stable row ids**: row ids do not move, so an index holding row ids (vector, bitmap,
  label list) keeps its files and uuid and the Rewrite moves its fragment bitmap to the new
  fragments; a BTREE holds row addresses and is remapped (or, without a codec, only loses the old
  fragments, as a zone map does; :mod:`lance_ops.table.apply`). ``defer_index_remap=True`` is
  refused (pylance 14 refuses it).
* **remap** (default, address-based row ids): the index's files are rewritten with the old -> new
  row addresses by the codec of its type (:mod:`lance_ops.index.remap`) and recorded in
  ``rewritten_indices``; rows the compaction dropped leave the index. Zone maps are never remapped
  (pylance leaves them on the old fragments: they cover nothing until optimized).
* **defer** (``defer_index_remap=True``, or an index the codec cannot remap yet): the index is left
  as it is and the compaction is recorded in the Fragment Reuse Index, which pylance's readers
  apply; :func:`lance_ops.ops.indices.remap_deferred` catches the index up later.

Who rewrites the files: an :data:`IndexRemapper` gets the indices to remap and the moves, and
returns each one's :class:`RewrittenIndex` (or None to defer it). :func:`remap_indices`, the
default, remaps them one after the other in this process; the Spark compaction job remaps them on
the executors, one task per index (:func:`encode_moves` / :func:`decode_moves` carry the moves
there compactly). An index's files cannot be split by compaction task: a BTREE's pages are sorted
by value, a bitmap holds one row set per value, an IVF partition and an HNSW graph mix rows of every
fragment, and the manifest lists one set of files per index segment. So each compaction task
computes its part of the mapping (its surviving old row addresses, in new row order) where it
rewrites the rows, and an index is rewritten whole from the union of those parts.

Nothing half done is left behind: a remap that fails removes the directory it was writing, and
when one index fails the directories already written for the others are removed too
(:func:`discard`), before the typed error naming the index goes on; nothing is committed.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap, BitMap64

from lance_ops.errors import DeferredRemapError, IndexCorruptError, LanceOpsError, UnsupportedIndexTypeError
from lance_ops.fragment.reader import row_addresses
from lance_ops.index.files import remove_index_directory
from lance_ops.index.remap import RowAddressMapping, remap_index
from lance_ops.index.types import index_dir
from lance_ops.io.context import StorageContext
from lance_ops.table import frag_reuse
from lance_ops.table.indices import holds_row_ids, is_system, is_zone_map
from lance_ops.table.manifest import DataFragment, IndexFile, IndexMetadata, Manifest
from lance_ops.table.transaction import RewrittenIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupMove:
    """One rewrite group: old fragments, new fragments (final ids) and, without stable row ids,
    the surviving old row addresses in the order of the new rows."""

    old: tuple[DataFragment, ...]
    new: tuple[DataFragment, ...]
    row_addrs: np.ndarray | None


@dataclass(frozen=True)
class IndexChanges:
    """What a Rewrite carries for the indices, and a summary for callers (names)."""

    rewritten: tuple[RewrittenIndex, ...] = ()
    frag_reuse_index: IndexMetadata | None = None
    remapped: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()


def refuse_deferred_with_stable_ids(manifest: Manifest, defer: bool) -> None:
    if defer and manifest.uses_stable_row_ids:
        raise DeferredRemapError(
            "cannot compact with defer_index_remap=True: the dataset uses stable row ids, and a "
            "fragment reuse index records row-address moves (as pylance 14, this is refused)"
        )


def covering(manifest: Manifest, fragments: Sequence[DataFragment]) -> list[IndexMetadata]:
    """The (non-system) indices that hold rows of ``fragments``, directly or through the
    Fragment Reuse Index."""
    ids = BitMap(f.id for f in fragments)
    return [
        i
        for i in manifest.indices
        if not is_system(i) and frag_reuse.effective_fragment_ids(manifest, i) & ids
    ]


def check_index_files(storage: StorageContext, indices: Sequence[IndexMetadata]) -> None:
    """Every file the manifest lists for ``indices`` exists (before anything is committed)."""
    for index in indices:
        directory = index_dir(storage, index)
        for f in index.files:
            path = storage.store.join(directory, f.path)
            if not storage.store.exists(path):
                raise IndexCorruptError(path, f"index {index.name!r}: file {f.path} is missing")


AddressMap = tuple[np.ndarray, np.ndarray, np.ndarray]
"""``(old, new, deleted)`` row addresses, as :func:`address_mapping` gives them."""

IndexRemapper = Callable[
    [StorageContext, Manifest, Sequence[IndexMetadata], Sequence[GroupMove]], list["RewrittenIndex | None"]
]
"""``(storage, manifest, indices, moves)`` -> each index rewritten (None: defer it), in order."""


def encode_moves(moves: Sequence[GroupMove]) -> str:
    """``moves`` as a compact JSON text for executors: per group the ``(id, physical rows)`` of its
    old and new fragments and its surviving old addresses (a 64-bit roaring bitmap when ascending,
    where a fragment's offsets compress to runs, else raw little-endian uint64), base64."""
    groups = []
    for move in moves:
        assert move.row_addrs is not None
        addrs = move.row_addrs.astype(np.uint64)
        ascending = bool(np.all(addrs[1:] > addrs[:-1]))
        raw = BitMap64(addrs).serialize() if ascending else addrs.astype("<u8").tobytes()
        groups.append(
            {
                "old": [[f.id, f.physical_rows] for f in move.old],
                "new": [[f.id, f.physical_rows] for f in move.new],
                "bitmap" if ascending else "u64": base64.b64encode(raw).decode("ascii"),
            }
        )
    return json.dumps(groups)


def decode_moves(text: str) -> list[GroupMove]:
    """The moves of :func:`encode_moves` (fragments carry only their id and physical rows)."""
    moves = []
    for group in json.loads(text):
        if "bitmap" in group:
            bitmap = BitMap64.deserialize(base64.b64decode(group["bitmap"]))
            addrs = np.fromiter(bitmap, np.uint64, len(bitmap))
        else:
            addrs = np.frombuffer(base64.b64decode(group["u64"]), "<u8").astype(np.uint64)
        moves.append(
            GroupMove(
                tuple(DataFragment(i, (), rows) for i, rows in group["old"]),
                tuple(DataFragment(i, (), rows) for i, rows in group["new"]),
                addrs,
            )
        )
    return moves


def address_mapping(moves: Sequence[GroupMove]) -> AddressMap:
    """``(old, new, deleted)``: surviving old addresses sorted with their new addresses, and the
    old addresses of rows the compaction dropped."""
    olds: list[np.ndarray] = []
    news: list[np.ndarray] = []
    every: list[np.ndarray] = []
    for move in moves:
        assert move.row_addrs is not None
        olds.append(move.row_addrs.astype(np.uint64))
        news.extend(_addresses(f) for f in move.new)
        every.extend(_addresses(f) for f in move.old)
    old = np.concatenate(olds) if olds else np.zeros(0, np.uint64)
    new = np.concatenate(news) if news else np.zeros(0, np.uint64)
    order = np.argsort(old, kind="stable")
    old, new = old[order], new[order]
    # every old address, sorted (a fragment's are already ascending); the deleted ones are those
    # no survivor takes (both sorted and unique: a search, not numpy's hashing setdiff1d)
    all_old = np.sort(np.concatenate(every)) if every else np.zeros(0, np.uint64)
    survived = np.zeros(all_old.size, dtype=bool)
    survived[np.searchsorted(all_old, old)] = True
    return old, new, all_old[~survived]


def _addresses(fragment: DataFragment) -> np.ndarray:
    return row_addresses(fragment.id, np.arange(fragment.physical_rows, dtype=np.int64))


def remap_with_codec(
    storage: StorageContext,
    index: IndexMetadata,
    old: np.ndarray,
    new: np.ndarray,
    deleted: np.ndarray,
    uuid: bytes | None = None,
) -> RewrittenIndex | None:
    """The index rewritten by its type's codec (new uuid, or ``uuid``, and files), or None when no
    codec can remap its type yet (the caller defers it to the Fragment Reuse Index).

    A failure leaves no new directory behind and raises :class:`IndexCorruptError` naming the index
    (an error of the codec's own decoding included)."""
    mapping = RowAddressMapping(old_addrs=old, new_addrs=new, removed=deleted)
    try:
        result = remap_index(storage, index, mapping, uuid)
    except UnsupportedIndexTypeError as exc:
        log.info("index %r: %s; deferring through the fragment reuse index", index.name, exc)
        return None
    except LanceOpsError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
        # bytes that decoded into something the codec cannot use (e.g. a truncated array)
        raise IndexCorruptError(
            index_dir(storage, index), f"index {index.name!r}: cannot remap: {exc}"
        ) from exc
    if result is None:
        log.info(
            "index %r: its type cannot be remapped yet; deferring through the fragment reuse index",
            index.name,
        )
        return None
    return RewrittenIndex(
        old_id=index.uuid,
        new_id=result.uuid,
        new_index_details=result.index_details,
        new_index_version=(
            result.index_version if result.index_version is not None else index.index_version or 0
        ),
        new_index_files=tuple(IndexFile(f.path, f.size_bytes) for f in result.files),
    )


def discard(storage: StorageContext, rewritten: Sequence[RewrittenIndex | None]) -> None:
    """Remove the new directories of ``rewritten`` (remaps that will not be committed)."""
    for r in rewritten:
        if r is not None:
            remove_index_directory(storage, r.new_id)


def remap_all(
    storage: StorageContext,
    indices: Sequence[IndexMetadata],
    old: np.ndarray,
    new: np.ndarray,
    deleted: np.ndarray,
) -> list[RewrittenIndex | None]:
    """Each of ``indices`` remapped in turn; when one fails, those done are discarded too."""
    done: list[RewrittenIndex | None] = []
    try:
        for index in indices:
            done.append(remap_with_codec(storage, index, old, new, deleted))
    except BaseException:
        discard(storage, done)
        raise
    return done


def remap_indices(
    storage: StorageContext, manifest: Manifest, indices: Sequence[IndexMetadata], moves: Sequence[GroupMove]
) -> list[RewrittenIndex | None]:
    """The default :data:`IndexRemapper`: every index remapped here, one after the other."""
    return remap_all(storage, indices, *address_mapping(moves))


def changes_for_rewrite(
    storage: StorageContext,
    manifest: Manifest,
    moves: Sequence[GroupMove],
    *,
    defer: bool,
    reuse_version: int,
    remapper: IndexRemapper | None = None,
) -> IndexChanges:
    """The index part of the Rewrite replacing ``moves`` on top of ``manifest``; ``remapper``
    rewrites the index files (default :func:`remap_indices`)."""
    old_fragments = [f for m in moves for f in m.old]
    indices = covering(manifest, old_fragments)
    if not indices:
        return IndexChanges()
    refuse_deferred_with_stable_ids(manifest, defer)
    stable = manifest.uses_stable_row_ids
    rewritten: list[RewrittenIndex] = []
    deferred: list[str] = []
    moved: list[str] = []
    todo: list[IndexMetadata] = []
    for index in indices:
        if is_zone_map(index) or (stable and holds_row_ids(index)):
            moved.append(index.name)  # files kept; the Rewrite moves (or drops) its fragments
        elif defer or frag_reuse.is_behind(manifest, index):
            # an index behind an earlier deferred compaction stays deferred
            deferred.append(index.name)
        else:
            todo.append(index)
    results = (remapper or remap_indices)(storage, manifest, todo, moves) if todo else []
    for index, result in zip(todo, results, strict=True):
        if result is not None:
            rewritten.append(result)
        elif stable:
            log.info("index %r: the new fragments stay unindexed until the index is optimized", index.name)
            moved.append(index.name)
        else:
            deferred.append(index.name)
    reuse = None
    if deferred:
        groups = [(m.old, m.new, m.row_addrs) for m in moves]
        reuse = frag_reuse.with_version(manifest, reuse_version, groups)  # type: ignore[arg-type]
    return IndexChanges(
        rewritten=tuple(rewritten),
        frag_reuse_index=reuse,
        remapped=tuple(i.name for i in indices if i.uuid in {r.old_id for r in rewritten}),
        deferred=tuple(deferred),
        moved=tuple(moved),
    )
