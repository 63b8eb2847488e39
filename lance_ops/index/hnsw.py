"""The HNSW graphs in an IVF_HNSW_* ``index.idx`` (pylance 14), and removing nodes from them.

Rows, partition after partition (the file's IVF message gives each partition's rows), level after
level within a partition (``level_offsets`` in the partition's ``lance:hnsw`` JSON: level ``l`` is
rows ``[level_offsets[l], level_offsets[l + 1])``)::

    __vector_id  uint32            the node: its position in the partition's storage rows
    __neighbors  list<uint32>      its neighbours on that level (storage positions)
    _distance    list<float>       the distances to them (squared l2 for l2 indices)

Level 0 lists every node of the partition in order; higher levels list fewer. e.g. a partition of
3 nodes with node 1 also on level 1: rows ``(0, [1, 2])``, ``(1, [0])``, ``(2, [0])``, ``(1, [])``,
``level_offsets`` ``[0, 3, 4]``, ``entry_point`` 1.

Removing nodes (rows gone in a compaction): their rows and every edge to them go, the rest are
renumbered to their new storage positions; a node that lost neighbours gets its neighbours'
neighbours in their place (closest first by the stored distances, up to its old degree), so the
graph stays connected as pylance's search needs; a removed entry point is replaced by a node on the
highest level left. pylance itself rebuilds the graphs instead; both answer searches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["drop_nodes"]

# How many neighbours of a removed neighbour a node is offered in its place.
_SECOND_HOPS = 4


def _levels(meta: list[dict[str, Any]], lengths: np.ndarray) -> tuple[np.ndarray, int]:
    """Level of every row of the file, and the number of levels."""
    depth = max(len(m["level_offsets"]) for m in meta) - 1
    level = np.empty(int(lengths.sum()), np.int64)
    start = 0
    for m, n in zip(meta, lengths.tolist(), strict=True):
        bounds = np.asarray(m["level_offsets"], np.int64)
        level[start : start + n] = np.searchsorted(bounds[1:], np.arange(n), side="right")
        start += n
    return level, depth


def drop_nodes(
    table: pa.Table,
    meta: list[dict[str, Any]],
    graph_lengths: np.ndarray,
    storage_lengths: np.ndarray,
    kept: np.ndarray,
) -> tuple[pa.Table, list[dict[str, Any]], np.ndarray]:
    """The graphs without the storage rows ``~kept`` (a mask over all storage rows, partition after
    partition): ``(rows, per-partition HNSW metadata, rows per partition)``."""
    partitions = storage_lengths.size
    storage_start = np.cumsum(storage_lengths) - storage_lengths
    # new position of each storage row within its partition (-1: removed)
    storage_partition = np.repeat(np.arange(partitions), storage_lengths)
    kept_before = np.concatenate([[0], np.cumsum(kept)])[storage_start]
    new_local = np.where(kept, np.cumsum(kept) - 1 - kept_before[storage_partition], -1)

    row_partition = np.repeat(np.arange(partitions), graph_lengths)
    level, depth = _levels(meta, graph_lengths)
    node = np.asarray(table.column("__vector_id").combine_chunks(), np.int64)
    node_global = storage_start[row_partition] + node
    row_kept = kept[node_global]

    neighbours = table.column("__neighbors").combine_chunks()
    distances = table.column("_distance").combine_chunks()
    degree = np.diff(np.asarray(neighbours.offsets))
    edge_row = np.repeat(np.arange(len(node)), degree)
    edge_to = np.asarray(neighbours.flatten(), np.int64)
    edge_distance = np.asarray(distances.flatten(), np.float32)
    edge_to_global = storage_start[row_partition[edge_row]] + edge_to

    edge_row, edge_to_global, edge_distance = _repair(
        edge_row, edge_to_global, edge_distance, row_kept, kept, node_global, level, degree
    )

    # keep rows of kept nodes; renumber
    new_row = np.cumsum(row_kept) - 1
    keep_edge = row_kept[edge_row]
    edge_row, edge_to_global, edge_distance = (
        edge_row[keep_edge],
        edge_to_global[keep_edge],
        edge_distance[keep_edge],
    )
    order = np.argsort(new_row[edge_row], kind="stable")  # a row's kept edges first, in their old order
    edge_row, edge_to_global, edge_distance = edge_row[order], edge_to_global[order], edge_distance[order]
    rows = int(row_kept.sum())
    counts = np.bincount(new_row[edge_row], minlength=rows)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = new_local[edge_to_global].astype(np.uint32)
    out = pa.table(
        {
            "__vector_id": pa.array(new_local[node_global[row_kept]].astype(np.uint32)),
            "__neighbors": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.uint32())),
            "_distance": pa.ListArray.from_arrays(pa.array(offsets), pa.array(edge_distance, pa.float32())),
        }
    ).cast(table.schema)

    kept_partition, kept_level = row_partition[row_kept], level[row_kept]
    per_level = np.zeros((partitions, depth), np.int64)
    np.add.at(per_level, (kept_partition, kept_level), 1)
    new_meta = []
    for p, m in enumerate(meta):
        entry = int(m["entry_point"])
        global_entry = storage_start[p] + entry
        if storage_lengths[p] and not kept[global_entry]:
            top = np.flatnonzero(per_level[p])
            if top.size:
                candidates = np.flatnonzero((kept_partition == p) & (kept_level == top[-1]))
                entry = int(node[row_kept][candidates[0]])
                global_entry = storage_start[p] + entry
        new_entry = int(new_local[global_entry]) if storage_lengths[p] and kept[global_entry] else 0
        bounds = np.concatenate([[0], np.cumsum(per_level[p][: len(m["level_offsets"]) - 1])])
        new_meta.append({**m, "entry_point": new_entry, "level_offsets": bounds.tolist()})
    return out, new_meta, np.bincount(kept_partition, minlength=partitions)


def _repair(
    edge_row: np.ndarray,
    edge_to: np.ndarray,
    edge_distance: np.ndarray,
    row_kept: np.ndarray,
    kept: np.ndarray,
    node_global: np.ndarray,
    level: np.ndarray,
    degree: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges to kept nodes, plus two-hop edges through removed neighbours (the first
    ``_SECOND_HOPS`` neighbours of each) for the rows that lost some, filling each row up to its old
    degree closest first (a two-hop edge's distance is taken as the sum of its two stored
    distances, an upper bound)."""
    alive = kept[edge_to]
    lost = ~alive & row_kept[edge_row]
    direct_row, direct_to, direct_distance = edge_row[alive], edge_to[alive], edge_distance[alive]
    if not lost.any():
        return direct_row, direct_to, direct_distance
    # the row of each (node, level) pair, to follow an edge to the removed node's own neighbours
    key = node_global * 64 + level
    sorter = np.argsort(key)
    sorted_key = key[sorter]
    via_key = edge_to[lost] * 64 + level[edge_row[lost]]
    at = np.minimum(np.searchsorted(sorted_key, via_key), key.size - 1)
    found = sorted_key[at] == via_key
    via_row = sorter[at[found]]
    source = edge_row[lost][found]
    first_hop = edge_distance[lost][found]
    # the first few edges of each via_row
    starts = np.concatenate([[0], np.cumsum(degree)])
    counts = np.minimum(degree[via_row], _SECOND_HOPS)
    step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    edge_index = np.repeat(starts[via_row], counts) + step
    source = np.repeat(source, counts)
    target = edge_to[edge_index]
    distance = np.repeat(first_hop, counts) + edge_distance[edge_index]
    ok = kept[target] & (target != node_global[source])
    source, target, distance = source[ok], target[ok], distance[ok]
    # drop candidates a row already has (directly, or twice: keep the closest)
    shift = np.int64(1 + int(max(edge_to.max(initial=0), 0)))
    candidate_key = source.astype(np.int64) * shift + target
    order = np.lexsort((distance, candidate_key))
    candidate_key, source, target, distance = (
        candidate_key[order],
        source[order],
        target[order],
        distance[order],
    )
    first = np.concatenate([[True], candidate_key[1:] != candidate_key[:-1]])
    direct_key = np.sort(direct_row.astype(np.int64) * shift + direct_to)
    at = np.minimum(np.searchsorted(direct_key, candidate_key), max(direct_key.size - 1, 0))
    if direct_key.size:
        first &= direct_key[at] != candidate_key
    source, target, distance = source[first], target[first], distance[first]
    # closest candidates into each row's free slots
    order = np.lexsort((distance, source))
    source, target, distance = source[order], target[order], distance[order]
    rank = np.arange(source.size) - np.searchsorted(source, source)
    free = degree - np.bincount(direct_row, minlength=degree.size)
    take = rank < free[source]
    return (
        np.concatenate([direct_row, source[take]]),
        np.concatenate([direct_to, target[take]]),
        np.concatenate([direct_distance, distance[take]]),
    )
