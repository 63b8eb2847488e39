"""The HNSW graphs in an IVF_HNSW_* ``index.idx`` (pylance 14): removing nodes, building graphs.

Rows, partition after partition (the file's IVF message gives each partition's rows), level after
level within a partition (``level_offsets`` in the partition's ``lance:hnsw`` JSON: level ``l`` is
rows ``[level_offsets[l], level_offsets[l + 1])``)::

    __vector_id  uint32            the node: its position in the partition's storage rows
    __neighbors  list<uint32>      its neighbours on that level (storage positions)
    _distance    list<float>       the distances to them (squared l2; cosine: 1 - cos; dot: 1 - x.y)

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

__all__ = ["build_graphs", "drop_nodes"]

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


# --- building graphs (extension over appended rows) ----------------------------------------------


def _distances(block: np.ndarray, points: np.ndarray, metric: str) -> np.ndarray:
    """``[len(block), len(points)]`` distances as pylance stores them in its graphs: squared l2;
    for cosine (vectors stored normalized) ``1 - cos``, half the squared l2; for dot ``1 - x.y``."""
    if metric == "dot":
        return (1.0 - block @ points.T).astype(np.float32)
    norms = (points * points).sum(1)
    squared = np.maximum((block * block).sum(1)[:, None] - 2.0 * block @ points.T + norms[None, :], 0.0)
    return squared * 0.5 if metric == "cosine" else squared


def _knn(
    points: np.ndarray, k: int, metric: str = "l2", chunk: int = 2048
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges ``(from, to, distance)`` from every point to its ``k`` nearest others in ``metric``
    (exact, chunked brute force: quadratic in the number of points)."""
    n = len(points)
    k = min(k, n - 1)
    if k <= 0:
        empty = np.empty(0, np.int64)
        return empty, empty, np.empty(0, np.float32)
    sources, targets, distances = [], [], []
    for start in range(0, n, chunk):
        block = points[start : start + chunk]
        d = _distances(block, points, metric)
        d[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        nearest = np.argpartition(d, k - 1, axis=1)[:, :k]
        sources.append(np.repeat(np.arange(start, start + len(block)), k))
        targets.append(nearest.ravel())
        distances.append(np.take_along_axis(d, nearest, axis=1).ravel())
    return np.concatenate(sources), np.concatenate(targets), np.concatenate(distances).astype(np.float32)


def _symmetric(
    sources: np.ndarray, targets: np.ndarray, distances: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k-nearest-neighbour edges and their reverses, once each, closest first per node: a
    symmetric graph (a node's neighbours are those it chose and those that chose it, so the
    degree may pass ``k``; none is cut, or the graph would turn directed and unreachable parts
    could appear)."""
    src = np.concatenate([sources, targets])
    dst = np.concatenate([targets, sources])
    dist = np.concatenate([distances, distances])
    order = np.lexsort((dist, dst, src))
    src, dst, dist = src[order], dst[order], dist[order]
    first = (
        np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
        if src.size
        else src.astype(bool)
    )
    src, dst, dist = src[first], dst[first], dist[first]
    order = np.lexsort((dist, src))
    return src[order], dst[order], dist[order]


def _connected(
    src: np.ndarray, dst: np.ndarray, dist: np.ndarray, points: np.ndarray, metric: str = "l2"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges plus one edge pair joining each connected component to the first node's, so a
    search from any node reaches every node (a k-nearest-neighbour graph of clustered points may
    fall apart). Components are found by propagating the smallest node number along edges."""
    n = len(points)
    label = np.arange(n)
    while src.size:
        spread = label.copy()
        np.minimum.at(spread, src, label[dst])
        np.minimum.at(spread, dst, label[src])
        spread = spread[spread]  # jump along already merged labels
        if np.array_equal(spread, label):
            break
        label = spread
    roots = np.flatnonzero((label == np.arange(n)) & (np.arange(n) != 0))
    if not roots.size:
        return src, dst, dist
    joins = _distances(points[roots], points[:1], metric)[:, 0].astype(np.float32)
    zeros = np.zeros(roots.size, np.int64)
    src = np.concatenate([src, roots, zeros])
    dst = np.concatenate([dst, zeros, roots])
    dist = np.concatenate([dist, joins, joins])
    order = np.argsort(src, kind="stable")
    return src[order], dst[order], dist[order]


def build_graphs(
    vectors: np.ndarray, lengths: np.ndarray, params: dict[str, Any], seed: int, metric: str = "l2"
) -> tuple[pa.Table, list[dict[str, Any]], np.ndarray]:
    """HNSW graphs over ``vectors`` (storage order, partition after partition; ``lengths`` rows
    each) with pylance's parameters ``params`` (``m``, ``max_level``): ``(rows, per-partition
    metadata, rows per partition)``. Neighbours and stored distances are in ``metric`` (``l2``,
    ``cosine`` on the normalized vectors a cosine index stores, or ``dot``; see :func:`_distances`).

    Levels are drawn as HNSW draws them (level >= l with probability ``m ** -l``); on each level a
    node is linked to its nearest nodes of that level (``2 * m`` on level 0, ``m`` above) and to the
    nodes that chose it, closest first, and a part of the graph left unconnected is joined to the
    first node: every node is reachable from every other (degrees may pass pylance's caps).
    Exact neighbours, so the cost grows with the square of a
    partition's size: meant for delta segments of appended rows.
    """
    m, max_level = int(params["m"]), int(params["max_level"])
    rng = np.random.default_rng(seed)
    ids, neighbour_lists, distance_lists, graph_lengths, metas = [], [], [], [], []
    start = 0
    for n in lengths.tolist():
        points = vectors[start : start + n]
        start += n
        levels = np.minimum(np.floor(-np.log(1.0 - rng.random(n)) / np.log(m)), max_level - 1).astype(
            np.int64
        )
        level_offsets, rows = [0], 0
        for level in range(max_level):
            nodes = np.flatnonzero(levels >= level)
            k = 2 * m if level == 0 else m
            src, dst, dist = _connected(*_symmetric(*_knn(points[nodes], k, metric)), points[nodes], metric)
            counts = np.bincount(src, minlength=nodes.size)
            ids.append(nodes)
            neighbour_lists.append((counts, nodes[dst]))
            distance_lists.append(dist)
            rows += nodes.size
            level_offsets.append(rows)
        top = np.flatnonzero(levels == levels.max()) if n else np.zeros(1, np.int64)
        metas.append({"entry_point": int(top[0]), "params": dict(params), "level_offsets": level_offsets})
        graph_lengths.append(rows)
    counts = np.concatenate([c for c, _ in neighbour_lists]) if neighbour_lists else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = np.concatenate([v for _, v in neighbour_lists]) if neighbour_lists else np.zeros(0, np.int64)
    distances = np.concatenate(distance_lists) if distance_lists else np.zeros(0, np.float32)
    table = pa.table(
        {
            "__vector_id": pa.array(np.concatenate(ids).astype(np.uint32) if ids else np.zeros(0, np.uint32)),
            "__neighbors": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.uint32))),
            "_distance": pa.ListArray.from_arrays(pa.array(offsets), pa.array(distances, pa.float32())),
        }
    )
    return table, metas, np.asarray(graph_lengths, np.int64)
