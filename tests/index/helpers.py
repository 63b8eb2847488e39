"""Compaction simulated with pylance, and our remapped indices committed with lance_ops.

pylance compacts with ``defer_index_remap=True``: it moves the rows and leaves every index as it
was, adding its Fragment Reuse Index. The old -> new row addresses are recovered from the data
itself (the unique ``id`` column before and after), independent of any compaction code. The
remapped indices then replace the old ones (and the reuse index) in one CreateIndex commit made
by lance_ops, and pylance is asked to answer from them.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
from pyroaring import BitMap

import lance_ops
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.index.remap import remap_index
from lance_ops.index.scalar_query import RowSelection, select_rows
from lance_ops.query.predicate import parse_predicate
from lance_ops.table.manifest import IndexMetadata
from lance_ops.table.transaction import CreateIndex


def addresses_by_id(ds: lance.LanceDataset) -> tuple[np.ndarray, np.ndarray]:
    t = ds.to_table(columns=["id"], with_row_address=True)
    return np.asarray(t["id"]), np.asarray(t["_rowaddr"], dtype=np.uint64)


def compact_deferred(path: Path) -> tuple[RowAddressMapping, tuple[list[int], list[int]]]:
    """Compact every fragment of ``path`` into one with pylance (indices untouched); the mapping
    from the rows' old to new addresses, and (compacted fragment ids, new fragment ids)."""
    before = lance.dataset(str(path))
    old_fragments = [f.fragment_id for f in before.get_fragments()]  # compact_files moves `before` on
    old_ids, old_addrs = addresses_by_id(before)
    physical = np.concatenate(
        [
            (np.uint64(f.fragment_id) << np.uint64(32)) | np.arange(f.metadata.physical_rows, dtype=np.uint64)
            for f in before.get_fragments()
        ]
    )
    before.optimize.compact_files(target_rows_per_fragment=1 << 20, defer_index_remap=True)
    after = lance.dataset(str(path))
    new_ids, new_addrs = addresses_by_id(after)
    new_by_id = dict(zip(new_ids.tolist(), new_addrs.tolist(), strict=True))
    order = np.argsort(old_addrs)
    mapping = RowAddressMapping(
        old_addrs[order],
        np.array([new_by_id[i] for i in old_ids[order].tolist()], dtype=np.uint64),
        np.setdiff1d(physical, old_addrs),
    )
    return mapping, (old_fragments, [f.fragment_id for f in after.get_fragments()])


def commit_indices(path: Path, new: list[IndexMetadata], removed: list[IndexMetadata]) -> lance.LanceDataset:
    ours = lance_ops.dataset(str(path))
    lance_ops.LanceDataset.commit(
        str(path), CreateIndex(tuple(new), tuple(removed)), read_version=ours.version
    )
    return lance.dataset(str(path))


def remap_all(
    path: Path, mapping: RowAddressMapping, fragments: tuple[list[int], list[int]], names: set[str]
) -> lance.LanceDataset:
    """Remap the indices ``names`` of ``path`` and commit them, dropping the reuse index. Each
    index's fragments become, as pylance's remap leaves them, its old ones less the compacted ones
    (fragments deleted whole stay) plus the new ones."""
    ours = lance_ops.dataset(str(path))
    compacted, created = fragments
    new, removed = [], []
    for index in ours.manifest.indices:
        if index.name == "__lance_frag_reuse":
            removed.append(index)
        elif index.name in names:
            result = remap_index(ours.storage, index, mapping)
            assert result is not None
            covered = (BitMap.deserialize(index.fragment_bitmap) - BitMap(compacted)) | BitMap(created)
            new.append(result.metadata_for(index, covered.serialize()))
            removed.append(index)
    return commit_indices(path, new, removed)


def scalar_answers(ds: lance.LanceDataset, predicate: str) -> tuple[pa.Table, pa.Table, str]:
    """(indexed answer, full-scan answer, plan) of ``predicate``, sorted by id."""
    indexed = ds.to_table(filter=predicate, use_scalar_index=True).sort_by("id")
    scanned = ds.to_table(filter=predicate, use_scalar_index=False).sort_by("id")
    plan = ds.scanner(filter=predicate, use_scalar_index=True).explain_plan(True)
    return indexed, scanned, plan


def brute_neighbours(x: np.ndarray, q: np.ndarray, metric: str, k: int = 10) -> np.ndarray:
    """Row numbers of the exact ``k`` nearest rows of ``x`` to each query (l2, cosine or dot)."""
    if metric == "l2":
        d = (q * q).sum(1)[:, None] - 2 * q @ x.T + (x * x).sum(1)[None, :]
    elif metric == "cosine":
        d = -(q / np.linalg.norm(q, axis=1, keepdims=True)) @ (x / np.linalg.norm(x, axis=1, keepdims=True)).T
    else:
        d = -(q @ x.T)
    return np.argsort(d, axis=1, kind="stable")[:, :k]


def knn_recall(
    ds: lance.LanceDataset, truth: np.ndarray, q: np.ndarray, nprobes: int, refine: int | None = None
) -> float:
    """recall@10 of ``ds``'s kNN on ``vec`` (ids as row numbers) against ``truth``
    (:func:`brute_neighbours`)."""
    hits = 0
    for i in range(len(q)):
        got = ds.to_table(
            columns=["id"],
            nearest={"column": "vec", "q": q[i], "k": 10, "nprobes": nprobes, "refine_factor": refine},
        )
        hits += len(set(got.column("id").to_pylist()) & set(truth[i].tolist()))
    return hits / (10 * len(q))


def index_selection(ds: lance_ops.LanceDataset, flt: str) -> RowSelection:
    """What the scalar indices of ``ds`` select for the SQL filter ``flt`` over all its fragments."""
    files = ds.handle.files
    predicate = parse_predicate(flt, files.schema)
    return select_rows(
        files.storage, files.manifest, predicate, [f.id for f in files.manifest.fragments], flt
    )


def build_vector_index(path: Path, who: str, kind: str, metric: str, params: dict, seed: int = 7) -> None:
    """A 4-partition ``kind`` index on ``vec`` of the dataset at ``path``, built by lance_ops
    (``who == "ours"``, with ``seed``) or by pylance (unseeded, as pylance trains)."""
    if who == "ours":
        lance_ops.dataset(str(path)).create_index(
            "vec", kind, metric=metric, num_partitions=4, seed=seed, **params
        )
    else:
        lance.dataset(path).create_index("vec", kind, metric=metric, num_partitions=4, **params)
