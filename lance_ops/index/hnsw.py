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


# --- building graphs (new indices, and extension over appended rows) -----------------------------


def _distances(block: np.ndarray, points: np.ndarray, metric: str) -> np.ndarray:
    """``[len(block), len(points)]`` distances as pylance stores them in its graphs: squared l2;
    for cosine (vectors stored normalized) ``1 - cos``, half the squared l2; for dot ``1 - x.y``."""
    if metric == "dot":
        return (1.0 - block @ points.T).astype(np.float32)
    norms = (points * points).sum(1)
    squared = np.maximum((block * block).sum(1)[:, None] - 2.0 * block @ points.T + norms[None, :], 0.0)
    return squared * 0.5 if metric == "cosine" else squared


def _candidates(points: np.ndarray, k: int, metric: str, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Each point's ``k`` nearest among the points before it in ``metric`` (those an insertion
    in storage order finds in the graph), closest first: ``(ids [n, k], distances [n, k])``, a
    distance ``inf`` where a point has fewer than ``k`` before it (exact, chunked brute force:
    quadratic in the number of points)."""
    n = len(points)
    ids, distances = np.zeros((n, k), np.int64), np.zeros((n, k), np.float32)
    for start in range(0, n if k > 0 else 0, chunk):
        block = points[start : start + chunk]
        d = _distances(block, points, metric)
        d[np.arange(start, start + len(block))[:, None] <= np.arange(n)[None, :]] = np.inf
        nearest = np.argpartition(d, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(d, nearest, axis=1)
        order = np.argsort(near, axis=1, kind="stable")
        ids[start : start + len(block)] = np.take_along_axis(nearest, order, axis=1)
        distances[start : start + len(block)] = np.take_along_axis(near, order, axis=1)
    return ids, distances


def _to_kept(
    vector: np.ndarray, norm: np.ndarray, kept: np.ndarray, kept_norms: np.ndarray, metric: str
) -> np.ndarray:
    """``[b, f]`` distances from each row's candidate ``vector`` (``[b, dim]``, squared norms
    ``norm``) to the ``f`` vectors ``kept`` for that row, as :func:`_distances` measures them (l2
    and cosine up to rounding below zero)."""
    dots = np.matmul(kept, vector[:, :, None])[:, :, 0]
    if metric == "dot":
        return 1.0 - dots
    squared = norm[:, None] + kept_norms - 2.0 * dots
    return squared * 0.5 if metric == "cosine" else squared


def _select(
    points: np.ndarray,
    ids: np.ndarray,
    distances: np.ndarray,
    valid: np.ndarray,
    k: int,
    metric: str,
    batch: int = 256,
) -> np.ndarray:
    """HNSW's heuristic neighbour choice (Malkov & Yashunin, algorithm 4), as pylance's builder
    makes it: of each row's candidates ``ids`` (closest first, ``valid`` ones), keep a candidate
    only if it is closer to the node than to every candidate already kept, up to ``k``; a row of
    at most ``k`` candidates keeps them all. Unlike pylance, free places are then filled with the
    pruned candidates, closest first (the algorithm's ``keepPrunedConnections``): without the
    order effects of pylance's one-by-one insertion, the heuristic alone leaves neighbourhoods too
    sparse for pylance's recall. Returns the mask of kept candidates. One step per candidate
    rank, every row of a batch at once, measuring a candidate against the (at most ``k``) kept
    ones only."""
    keep = valid & (valid.sum(1) <= k)[:, None]
    rows = np.flatnonzero(valid.sum(1) > k)
    width = ids.shape[1]
    for start in range(0, rows.size, batch):
        chosen = rows[start : start + batch]
        candidates = points[ids[chosen]]  # [b, width, dim]
        norms = np.einsum("bcd,bcd->bc", candidates, candidates)
        to_node, ok = distances[chosen], valid[chosen]
        b = chosen.size
        kept = np.zeros((b, width), bool)
        count = np.zeros(b, np.int64)
        # the vectors (and squared norms) kept so far, row by row
        chosen_vectors = np.zeros((b, k, points.shape[1]), points.dtype)
        chosen_norms = np.zeros((b, k), np.float32)
        for j in range(width):
            open_rows = ok[:, j] & (count < k)
            if not open_rows.any():
                if not (count < k).any():
                    break
                continue
            filled = int(count.max())
            if filled:
                between = _to_kept(
                    candidates[:, j],
                    norms[:, j],
                    chosen_vectors[:, :filled],
                    chosen_norms[:, :filled],
                    metric,
                )
                slots = np.arange(filled)[None, :] < count[:, None]
                open_rows &= ~((between <= to_node[:, j, None]) & slots).any(1)
            taken = np.flatnonzero(open_rows)
            kept[taken, j] = True
            chosen_vectors[taken, count[taken]] = candidates[taken, j]
            chosen_norms[taken, count[taken]] = norms[taken, j]
            count[taken] += 1
        spare = ok & ~kept
        kept |= spare & (np.cumsum(spare, axis=1) <= (k - count)[:, None])
        keep[chosen] = kept
    return keep


def _padded(
    src: np.ndarray, dst: np.ndarray, dist: np.ndarray, n: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges (sorted by source, then distance) as ``[n, width]`` candidate rows: ids, distances
    and the valid mask; a row's edges past ``width`` are dropped."""
    rank = np.arange(src.size) - np.searchsorted(src, src)
    fits = rank < width
    ids, distances = np.zeros((n, width), np.int64), np.full((n, width), np.inf, np.float32)
    valid = np.zeros((n, width), bool)
    ids[src[fits], rank[fits]] = dst[fits]
    distances[src[fits], rank[fits]] = dist[fits]
    valid[src[fits], rank[fits]] = True
    return ids, distances, valid


def _level_edges(
    points: np.ndarray, m_max: int, ef: int, metric: str, entry: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One level's graph ``(from, to, distance)``, sorted by node then distance, built as
    pylance's builder inserts nodes in storage order: each node's choice (:func:`_select`) among
    its ``ef`` nearest earlier nodes (pylance's ``ef_construction`` beam, here exact), then each
    chosen edge also offered to its other end, whose list is chosen again the same way when it
    passes ``m_max``. Early nodes thus keep the long edges a search needs to cross clusters. A
    node the level's ``entry`` cannot reach gets an edge from the closest reachable node."""
    n = len(points)
    width = min(ef, n - 1)
    if width <= 0:
        empty = np.empty(0, np.int64)
        return empty, empty, np.empty(0, np.float32)
    ids, distances = _candidates(points, width, metric)
    keep = _select(points, ids, distances, np.isfinite(distances), m_max, metric)
    src = np.repeat(np.arange(n), keep.sum(1))
    dst, dist = ids[keep], distances[keep]
    # the chosen edges both ways, once each, closest first per node
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    dist = np.concatenate([dist, dist])
    order = np.lexsort((dist, dst, src))
    src, dst, dist = src[order], dst[order], dist[order]
    first = np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
    src, dst, dist = src[first], dst[first], dist[first]
    order = np.lexsort((dist, src))
    ids, distances, valid = _padded(src[order], dst[order], dist[order], n, width)
    keep = _select(points, ids, distances, valid, m_max, metric)
    src = np.repeat(np.arange(n), keep.sum(1))
    return _reachable(src, ids[keep], distances[keep], points, metric, entry)


def _reachable(
    src: np.ndarray, dst: np.ndarray, dist: np.ndarray, points: np.ndarray, metric: str, entry: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges (sorted by source, then distance), plus an edge from the closest node ``entry``
    reaches to each node it does not (a breadth-first walk over the directed edges, a frontier at
    a time), in the same order."""
    n = len(points)
    starts = np.searchsorted(src, np.arange(n + 1))
    seen = np.zeros(n, bool)
    seen[entry] = True
    frontier = np.array([entry])
    while frontier.size:
        counts = starts[frontier + 1] - starts[frontier]
        at = np.repeat(starts[frontier] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        reached = np.unique(dst[at])
        frontier = reached[~seen[reached]]
        seen[frontier] = True
    if seen.all():
        return src, dst, dist
    lost, found = np.flatnonzero(~seen), np.flatnonzero(seen)
    d = _distances(points[lost], points[found], metric)
    closest = np.argmin(d, axis=1)
    src = np.concatenate([src, found[closest]])
    dst = np.concatenate([dst, lost])
    dist = np.concatenate([dist, d[np.arange(lost.size), closest].astype(np.float32)])
    order = np.lexsort((dist, src))
    return src[order], dst[order], dist[order]


def build_graphs(
    vectors: np.ndarray, lengths: np.ndarray, params: dict[str, Any], seed: int, metric: str = "l2"
) -> tuple[pa.Table, list[dict[str, Any]], np.ndarray]:
    """HNSW graphs over ``vectors`` (storage order, partition after partition; ``lengths`` rows
    each) with pylance's parameters ``params`` (``m``, ``max_level``): ``(rows, per-partition
    metadata, rows per partition)``. Neighbours and stored distances are in ``metric`` (``l2``,
    ``cosine`` on the normalized vectors a cosine index stores, or ``dot``; see :func:`_distances`).

    Levels are drawn as HNSW draws them (level >= l with probability ``m ** -l``, up to
    ``max_level``); on each level a node gets at most ``2 * m`` neighbours on level 0, ``m``
    above, chosen by HNSW's heuristic among its ``ef_construction`` nearest (:func:`_level_edges`),
    closest first; every node is reachable from the entry point (a node on the top level), whose
    repair edges may pass those caps. Candidates are found by exact search, so the cost grows with
    the square of a partition's size (one CPU, a loaded machine: about 1 s for 5,000 32-d vectors
    in 4 partitions, 9 s for 16,384 128-d vectors in 2).
    """
    m, max_level = int(params["m"]), int(params["max_level"])
    ef = int(params.get("ef_construction", 150))
    rng = np.random.default_rng(seed)
    ids, neighbour_lists, distance_lists, graph_lengths, metas = [], [], [], [], []
    start = 0
    for n in lengths.tolist():
        points = vectors[start : start + n]
        start += n
        levels = np.minimum(np.floor(-np.log(1.0 - rng.random(n)) / np.log(m)), max_level - 1).astype(
            np.int64
        )
        top = np.flatnonzero(levels == levels.max()) if n else np.zeros(1, np.int64)
        entry = int(top[0])
        level_offsets, rows = [0], 0
        for level in range(max_level):
            nodes = np.flatnonzero(levels >= level)
            m_max = 2 * m if level == 0 else m
            local_entry = int(np.searchsorted(nodes, entry))
            src, dst, dist = _level_edges(points[nodes], m_max, ef, metric, local_entry)
            counts = np.bincount(src, minlength=nodes.size)
            ids.append(nodes)
            neighbour_lists.append((counts, nodes[dst]))
            distance_lists.append(dist)
            rows += nodes.size
            level_offsets.append(rows)
        metas.append({"entry_point": entry, "params": dict(params), "level_offsets": level_offsets})
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
