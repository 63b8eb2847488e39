"""drop_nodes on small hand-made HNSW graphs (the layout of lance_ops.index.hnsw's docstring);
build_graphs' heuristic neighbour choice, degree caps and reachability."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.index.hnsw import drop_nodes

SCHEMA = pa.schema(
    [
        pa.field("__vector_id", pa.uint32(), nullable=False),
        pa.field("__neighbors", pa.list_(pa.uint32())),
        pa.field("_distance", pa.list_(pa.float32())),
    ]
)


def graph(rows: list[tuple[int, list[int], list[float]]]) -> pa.Table:
    ids, neighbours, distances = zip(*rows, strict=True)
    return pa.table([list(ids), list(neighbours), list(distances)], schema=SCHEMA)


def meta(entry: int, offsets: list[int]) -> dict:
    return {"entry_point": entry, "params": {"m": 20}, "level_offsets": offsets}


def test_removed_entry_point_and_two_hop_repair() -> None:
    # partition 0: nodes 0, 1, 2 (1 also on level 1, the entry point); partition 1: nodes 0, 1
    table = graph(
        [
            (0, [1, 2], [1.0, 4.0]),
            (1, [0, 2], [1.0, 2.0]),
            (2, [1, 0], [2.0, 4.0]),
            (1, [], []),
            (0, [1], [3.0]),
            (1, [0], [3.0]),
        ]
    )
    kept = np.array([True, False, True, True, True])
    out, new_meta, lengths = drop_nodes(
        table, [meta(1, [0, 3, 4]), meta(0, [0, 2, 2])], np.array([4, 2]), np.array([3, 2]), kept
    )
    assert lengths.tolist() == [2, 2]
    assert out.schema == SCHEMA
    assert out.to_pylist() == [
        {"__vector_id": 0, "__neighbors": [1], "_distance": [4.0]},  # old 2, direct edge kept
        {"__vector_id": 1, "__neighbors": [0], "_distance": [4.0]},
        {"__vector_id": 0, "__neighbors": [1], "_distance": [3.0]},
        {"__vector_id": 1, "__neighbors": [0], "_distance": [3.0]},
    ]
    assert new_meta[0] == meta(0, [0, 2, 2]) and new_meta[1] == meta(0, [0, 2, 2])


def test_lost_neighbour_replaced_by_its_neighbours() -> None:
    # a chain 0 - 1 - 2 - 3 on level 0; removing 1 reconnects 0 to 2 (distance 1 + 1 at most)
    table = graph(
        [
            (0, [1], [1.0]),
            (1, [0, 2], [1.0, 1.0]),
            (2, [1, 3], [1.0, 1.0]),
            (3, [2], [1.0]),
        ]
    )
    kept = np.array([True, False, True, True])
    out, new_meta, lengths = drop_nodes(table, [meta(0, [0, 4])], np.array([4]), np.array([4]), kept)
    assert lengths.tolist() == [3]
    assert out.column("__neighbors").to_pylist() == [[1], [2, 0], [1]]
    assert out.column("_distance").to_pylist() == [[2.0], [1.0, 2.0], [1.0]]
    assert new_meta == [meta(0, [0, 3])]


def test_built_graphs_reach_every_node() -> None:
    from lance_ops.index.hnsw import build_graphs

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((700, 8)).astype(np.float32)
    lengths = np.array([400, 0, 1, 299])
    table, metas, graph_lengths = build_graphs(vectors, lengths, {"m": 4, "max_level": 5}, seed=1)
    assert graph_lengths.sum() == table.num_rows
    start = 0
    for n, meta, rows in zip(lengths.tolist(), metas, graph_lengths.tolist(), strict=True):
        part = table.slice(start, rows)
        start += rows
        offsets = meta["level_offsets"]
        assert len(offsets) == 6 and offsets[1] == n and offsets[-1] == rows
        if n == 0:
            continue
        assert part.column("__vector_id").to_pylist()[:n] == list(range(n))
        neighbours = part.column("__neighbors").to_pylist()[:n]
        assert np.mean([len(x) for x in neighbours]) <= 2 * 8
        seen, frontier = {meta["entry_point"]}, [meta["entry_point"]]
        while frontier:
            frontier = [j for i in frontier for j in neighbours[i] if j not in seen and not seen.add(j)]
        assert len(seen) == n
        # distances are squared l2 between the stored vectors
        points = vectors[sum(lengths[: lengths.tolist().index(n)]) :][:n] if n > 1 else None
        if points is not None:
            d = part.column("_distance").to_pylist()[0]
            expected = ((points[0] - points[neighbours[0]]) ** 2).sum(1)
            np.testing.assert_allclose(d, expected, rtol=1e-4)


def test_heuristic_keeps_a_candidate_only_if_closer_to_the_node_than_to_those_kept() -> None:
    from lance_ops.index.hnsw import _select

    # node at 0; candidates at 1, 1.5 (closer to 1 than to 0: pruned), -2 (other side: kept), 3
    points = np.array([[0.0], [1.0], [1.5], [-2.0], [3.0]], np.float32)
    ids = np.array([[1, 2, 3, 4]])
    distances = ((points[ids[0]] - points[0]) ** 2).T.astype(np.float32)
    valid = np.ones((1, 4), bool)
    assert _select(points, ids, distances, valid, 2, "l2").tolist() == [[True, False, True, False]]
    # a free place is filled with the closest pruned candidate
    assert _select(points, ids, distances, valid, 3, "l2").tolist() == [[True, True, True, False]]
    # at most k candidates: all kept, unchecked
    assert _select(points, ids, distances, valid, 4, "l2").tolist() == [[True] * 4]


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_built_levels_respect_the_caps_and_reach_every_node_from_the_entry(metric: str) -> None:
    from lance_ops.index.hnsw import build_graphs

    rng = np.random.default_rng(11)
    centres = rng.normal(size=(6, 8)) * 4
    vectors = (centres[rng.integers(0, 6, 600)] + rng.normal(size=(600, 8))).astype(np.float32)
    if metric == "cosine":
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    m = 4
    table, (meta,), _ = build_graphs(
        vectors, np.array([600]), {"m": m, "max_level": 4, "ef_construction": 30}, 3, metric
    )
    ids = table.column("__vector_id").to_pylist()
    neighbours = table.column("__neighbors").to_pylist()
    distances = table.column("_distance").to_pylist()
    bounds = meta["level_offsets"]
    assert bounds[1] == 600
    for level in range(len(bounds) - 1):
        rows = range(bounds[level], bounds[level + 1])
        if not rows:
            continue
        cap = 2 * m if level == 0 else m
        degrees = [len(neighbours[r]) for r in rows]
        # repair edges may pass the cap; in dot (not a metric: large vectors are everyone's
        # nearest) many nodes are chosen by no one and get one from the closest reachable node
        assert sorted(degrees)[len(degrees) // 2] <= cap
        assert metric == "dot" or np.mean(degrees) <= cap
        for r in rows:  # closest first
            assert distances[r] == sorted(distances[r])
        position = {ids[r]: r for r in rows}
        seen, frontier = {meta["entry_point"]}, [meta["entry_point"]]
        while frontier:
            frontier = [
                j for i in frontier for j in neighbours[position[i]] if j not in seen and not seen.add(j)
            ]
        assert seen == set(position), level
