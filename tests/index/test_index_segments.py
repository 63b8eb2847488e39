"""L18: segmented (distributed) index builds - ``create_index_uncommitted`` over fragment subsets,
``merge_existing_index_segments``, ``commit_existing_index_segments`` - both ways with pylance 14.

The vector model (IVF centroids, PQ codebook) is trained once here with a seeded k-means and given
to every build on both sides, as a distributed build shares it; pylance's one-shot index with the
same model is the reference for recall.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import IndexExistsError, IndexSegmentError, InvalidArgumentError
from lance_ops.index.build_vector import kmeans
from lance_ops.ops.indices import Index
from tests.index.helpers import brute_neighbours, knn_recall

N, DIM, PARTITIONS, SUB_VECTORS, PER_FILE = 4000, 16, 8, 4, 1000
HALVES = ([0, 1], [2, 3])


def _vectors(n: int = N, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, DIM)) * 3
    return (centres[rng.integers(0, 20, n)] + rng.normal(size=(n, DIM))).astype(np.float32)


def _table(x: np.ndarray, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + len(x), dtype=np.int64)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM),
        }
    )


def _write(path: Path, x: np.ndarray) -> lance_ops.LanceDataset:
    lance_ops.write_dataset(_table(x), str(path), max_rows_per_file=PER_FILE)
    return lance_ops.dataset(str(path))


def _model(x: np.ndarray, kind: str) -> dict[str, np.ndarray]:
    """Seeded centroids (and for PQ a codebook on the residuals), given to every build."""
    rng = np.random.default_rng(3)
    centroids, _ = kmeans(x, PARTITIONS, 30, rng, False)
    centroids = centroids.astype(np.float32)
    model = {"ivf_centroids": centroids}
    if kind.endswith("_PQ"):
        nearest = ((x[:, None, :] - centroids[None]) ** 2).sum(2).argmin(1)
        residuals = x - centroids[nearest]
        sub = DIM // SUB_VECTORS
        books = [
            kmeans(np.ascontiguousarray(residuals[:, j * sub : (j + 1) * sub]), 256, 10, rng, False)[0]
            for j in range(SUB_VECTORS)
        ]
        model["pq_codebook"] = np.stack(books).astype(np.float32)
    return model


def _params(kind: str) -> dict[str, int]:
    params = {"num_partitions": PARTITIONS}
    if kind.endswith("_PQ"):
        params["num_sub_vectors"] = SUB_VECTORS
    return params


def _queries(x: np.ndarray) -> np.ndarray:
    return x[np.random.default_rng(11).choice(len(x), 20, replace=False)] + np.float32(0.05)


def _pylance_reference(tmp_path: Path, x: np.ndarray, kind: str, model: dict, merge: bool | None) -> float:
    """pylance's recall on its own index of the same model: one-shot (``merge`` None), or built as
    segments over :data:`HALVES` (and merged, with ``merge``), as the index compared was."""
    ref = lance.write_dataset(_table(x), tmp_path / "reference", max_rows_per_file=PER_FILE)
    if merge is None:
        ref.create_index("vec", kind, **_params(kind), **model)
    else:
        parts = [
            ref.create_index_uncommitted("vec", kind, fragment_ids=ids, **_params(kind), **model)
            for ids in HALVES
        ]
        ref.commit_existing_index_segments(
            "vec_idx", "vec", [ref.merge_existing_index_segments(parts)] if merge else parts
        )
    q = _queries(x)
    return knn_recall(lance.dataset(tmp_path / "reference"), brute_neighbours(x, q, "l2"), q, nprobes=2)


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_SQ"])
@pytest.mark.parametrize("merge", [False, True], ids=["segments", "merged"])
def test_our_segments_are_searched_by_pylance(tmp_path: Path, kind: str, merge: bool) -> None:
    x = _vectors()
    ds = _write(tmp_path / "ds", x)
    model = _model(x, kind)
    parts = [
        ds.create_index_uncommitted("vec", kind, fragment_ids=ids, **_params(kind), **model) for ids in HALVES
    ]
    assert ds.version == 1 and ds.describe_indices() == []  # nothing committed
    assert [set(p.fragment_ids) for p in parts] == [{0, 1}, {2, 3}]
    segments = [ds.merge_existing_index_segments(parts)] if merge else parts
    if merge:
        assert set(segments[0].fragment_ids) == {0, 1, 2, 3}
        assert segments[0].uuid not in {p.uuid for p in parts}
    ds.commit_existing_index_segments("vec_idx", "vec", segments)
    assert ds.version == 2

    theirs = lance.dataset(tmp_path / "ds")
    (described,) = theirs.describe_indices()
    assert described.name == "vec_idx" and described.num_rows_indexed == N
    assert [s.uuid for s in described.segments] == [s.uuid for s in segments]
    assert [set(s.fragment_ids) for s in described.segments] == [set(s.fragment_ids) for s in segments]
    q = _queries(x)
    plan = theirs.scanner(nearest={"column": "vec", "q": q[0], "k": 10}).explain_plan()
    assert "ANNSubIndex: name=vec_idx" in plan and f"deltas={len(segments)}" in plan

    truth = brute_neighbours(x, q, "l2")
    reference = _pylance_reference(tmp_path, x, kind, model, merge)
    recall_pylance = knn_recall(theirs, truth, q, nprobes=2)
    recall_ours = knn_recall(lance_ops.dataset(str(tmp_path / "ds")), truth, q, nprobes=2)
    assert recall_pylance >= reference - 0.03, (recall_pylance, reference)
    assert abs(recall_ours - recall_pylance) <= 0.03, (recall_ours, recall_pylance)
    if kind == "IVF_FLAT":  # every partition probed: exactly the brute-force neighbours
        for who in (theirs, lance_ops.dataset(str(tmp_path / "ds"))):
            assert knn_recall(who, truth, q, nprobes=PARTITIONS) == 1.0


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_segments_in_other_metrics_probe_exactly(tmp_path: Path, metric: str) -> None:
    """IVF_FLAT segments in cosine / dot, every partition probed: the exact neighbours, in both."""
    x = _vectors(seed=8)
    ds = _write(tmp_path / "ds", x)
    normed = x / np.linalg.norm(x, axis=1, keepdims=True)
    sample = normed if metric == "cosine" else x
    centroids = kmeans(sample, PARTITIONS, 30, np.random.default_rng(3), False)[0]
    args = {"metric": metric, "num_partitions": PARTITIONS, "ivf_centroids": centroids.astype(np.float32)}
    parts = [ds.create_index_uncommitted("vec", "IVF_FLAT", fragment_ids=ids, **args) for ids in HALVES]
    ds.commit_existing_index_segments("vec_idx", "vec", parts)
    q = _queries(x)
    truth = brute_neighbours(x, q, metric)
    for who in (lance.dataset(tmp_path / "ds"), lance_ops.dataset(str(tmp_path / "ds"))):
        assert knn_recall(who, truth, q, nprobes=PARTITIONS) == 1.0


@pytest.mark.parametrize("kind", ["IVF_PQ", "IVF_FLAT"])
def test_pylance_segments_are_merged_and_committed_by_us(tmp_path: Path, kind: str) -> None:
    x = _vectors(seed=1)
    lance.write_dataset(_table(x), tmp_path / "ds", max_rows_per_file=PER_FILE)
    theirs = lance.dataset(tmp_path / "ds")
    model = _model(x, kind)
    parts = [
        theirs.create_index_uncommitted("vec", kind, fragment_ids=ids, **_params(kind), **model)
        for ids in ([0], [1], [2, 3])
    ]
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    merged = ours.merge_existing_index_segments(parts[:2])  # pylance's Index objects, as returned
    ours.commit_existing_index_segments("vec_idx", "vec", [merged, parts[2]])
    (described,) = ours.describe_indices()
    assert [set(s.fragment_ids) for s in described.segments] == [{0, 1}, {2, 3}]

    q = _queries(x)
    truth = brute_neighbours(x, q, "l2")
    reference = _pylance_reference(tmp_path, x, kind, model, None)
    for who in (lance.dataset(tmp_path / "ds"), lance_ops.dataset(str(tmp_path / "ds"))):
        assert knn_recall(who, truth, q, nprobes=2) >= reference - 0.03
    assert ours.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0


@pytest.mark.parametrize("kind", ["IVF_PQ", "IVF_SQ"])
def test_our_segments_are_merged_and_committed_by_pylance(tmp_path: Path, kind: str) -> None:
    x = _vectors(seed=7)
    ds = _write(tmp_path / "ds", x)
    model = _model(x, kind)
    parts = [
        ds.create_index_uncommitted("vec", kind, fragment_ids=ids, **_params(kind), **model) for ids in HALVES
    ]
    theirs = lance.dataset(tmp_path / "ds")
    merged = theirs.merge_existing_index_segments(parts)  # lance_ops' Index objects, as returned
    theirs.commit_existing_index_segments("vec_idx", "vec", [merged])
    q = _queries(x)
    truth = brute_neighbours(x, q, "l2")
    reference = _pylance_reference(tmp_path, x, kind, model, True)
    recall_pylance = knn_recall(lance.dataset(tmp_path / "ds"), truth, q, nprobes=2)
    recall_ours = knn_recall(lance_ops.dataset(str(tmp_path / "ds")), truth, q, nprobes=2)
    assert recall_pylance >= reference - 0.03, (recall_pylance, reference)
    assert abs(recall_ours - recall_pylance) <= 0.03, (recall_ours, recall_pylance)


def test_btree_segments_both_ways(tmp_path: Path) -> None:
    x = _vectors(seed=2)
    ds = _write(tmp_path / "ds", x)
    with pytest.raises(InvalidArgumentError, match="BTREE distributed indexing uses create_index_unc"):
        ds.create_scalar_index("id", "BTREE", fragment_ids=[0])
    assert lance_ops.LanceDataset._requires_uncommitted_scalar_index("BTREE")
    assert not lance_ops.LanceDataset._requires_uncommitted_scalar_index("INVERTED")
    assert lance_ops.LanceDataset._is_segment_native_scalar_index_type("INVERTED")
    assert not lance_ops.LanceDataset._is_segment_native_scalar_index_type("IVF_PQ")

    ours = [ds.create_index_uncommitted("id", "BTREE", fragment_ids=ids) for ids in ([0], [1], [2, 3])]
    merged = ds.merge_existing_index_segments(ours[:2])
    ds.commit_existing_index_segments("id_idx", "id", [merged, ours[2]])
    predicate = "id = 1500 or (id >= 2990 and id < 3010) or id = 7"
    theirs = lance.dataset(tmp_path / "ds")
    assert "ScalarIndexQuery" in theirs.scanner(filter=predicate).explain_plan(True)
    expected = theirs.to_table(filter=predicate, use_scalar_index=False).sort_by("id")
    assert theirs.to_table(filter=predicate).sort_by("id") == expected
    assert expected.num_rows == 22

    # pylance's BTREE segments, committed by lance_ops (replacing ours), used by both
    parts = [theirs.create_index_uncommitted("id", "BTREE", fragment_ids=ids, replace=True) for ids in HALVES]
    ours_ds = lance_ops.dataset(str(tmp_path / "ds"))
    ours_ds.commit_existing_index_segments("id_idx", "id", parts)
    assert [s.uuid for s in ours_ds.describe_indices()[0].segments] == [p.uuid for p in parts]
    assert "ScalarIndexQuery: query=[id = 1500]@id_idx" in ours_ds.scanner(filter="id = 1500").explain_plan()
    assert ours_ds.to_table(filter=predicate).sort_by("id") == expected
    assert lance.dataset(tmp_path / "ds").to_table(filter=predicate).sort_by("id") == expected


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.sampled_from([1, 2, 1023, 1024, 1025]), min_size=1, max_size=4),
    groups=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    merge=st.booleans(),
    bounds=st.tuples(st.integers(-1, 4200), st.integers(0, 4200)),
)
def test_btree_segments_of_any_grouping_answer_as_a_scan(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    groups: list[int],
    merge: bool,
    bounds: tuple[int, int],
) -> None:
    """Fragments of 1 .. 1025 rows, split into up to three segments in any way (merged or not):
    both libraries answer a range filter from the index with the rows of a full scan."""
    path = tmp_path_factory.mktemp("grouping") / "ds"
    start = 0
    for size in sizes:
        mode = "append" if start else "create"
        lance_ops.write_dataset(_table(_vectors(size, seed=size), start=start), str(path), mode=mode)
        start += size
    ds = lance_ops.dataset(str(path))
    by_group: dict[int, list[int]] = {}
    for fragment, group in zip(ds.get_fragments(), groups, strict=False):
        by_group.setdefault(group, []).append(fragment.fragment_id)
    segments = [ds.create_index_uncommitted("id", "BTREE", fragment_ids=ids) for ids in by_group.values()]
    ds.commit_existing_index_segments(
        "id_idx", "id", [ds.merge_existing_index_segments(segments)] if merge else segments
    )
    predicate = f"id >= {bounds[0]} and id < {bounds[1]}"
    for who in (lance.dataset(path), lance_ops.dataset(str(path))):
        expected = who.to_table(filter=predicate, use_scalar_index=False).sort_by("id")
        assert who.to_table(filter=predicate).sort_by("id") == expected
        assert expected.num_rows == max(0, min(bounds[1], start) - max(bounds[0], 0))


def test_segmented_index_on_day_two(tmp_path: Path) -> None:
    """Yesterday's segmented index: rows appended, indices optimized, files compacted, by each
    library in turn; both keep searching it and every row stays indexed."""
    x = _vectors(seed=3)
    ds = _write(tmp_path / "ds", x)
    model = _model(x, "IVF_PQ")
    parts = [
        ds.create_index_uncommitted("vec", "IVF_PQ", fragment_ids=ids, **_params("IVF_PQ"), **model)
        for ids in HALVES
    ]
    ds.commit_existing_index_segments("vec_idx", "vec", parts)
    extra = _vectors(500, seed=4)
    lance_ops.write_dataset(_table(extra, start=N), str(tmp_path / "ds"), mode="append")
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    ours.optimize.optimize_indices()  # a delta segment for the new fragment
    assert ours.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    ours.optimize.optimize_indices()  # nothing to do: no new commit
    all_x = np.concatenate([x, extra])
    q = _queries(all_x)
    truth = brute_neighbours(all_x, q, "l2")
    reference = knn_recall(lance.dataset(tmp_path / "ds"), truth, q, nprobes=2)
    assert abs(knn_recall(ours, truth, q, nprobes=2) - reference) <= 0.03

    ours.optimize.compact_files(target_rows_per_fragment=3000)
    theirs = lance.dataset(tmp_path / "ds")
    assert theirs.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    lance.write_dataset(_table(_vectors(300, seed=5), start=N + 500), tmp_path / "ds", mode="append")
    lance.dataset(tmp_path / "ds").optimize.optimize_indices(num_indices_to_merge=0)
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    assert ours.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    all_x = np.concatenate([all_x, _vectors(300, seed=5)])
    truth = brute_neighbours(all_x, q, "l2")
    ours_recall = knn_recall(ours, truth, q, nprobes=2)
    theirs_recall = knn_recall(lance.dataset(tmp_path / "ds"), truth, q, nprobes=2)
    assert abs(ours_recall - theirs_recall) <= 0.03 and theirs_recall >= reference - 0.05


def test_bad_segment_sets_commit_nothing(tmp_path: Path) -> None:
    x = _vectors(seed=6)
    ds = _write(tmp_path / "ds", x)
    model = _model(x, "IVF_FLAT")

    def segment(ids: list[int], **changes: object) -> Index:
        args = {**_params("IVF_FLAT"), **model, **changes}
        return ds.create_index_uncommitted("vec", "IVF_FLAT", fragment_ids=ids, **args)

    a, b = segment([0, 1]), segment([1, 2])
    other_model = segment([3], ivf_centroids=model["ivf_centroids"][::-1].copy())
    with pytest.raises(IndexSegmentError, match="overlapping fragment"):
        ds.commit_existing_index_segments("vec_idx", "vec", [a, b])
    with pytest.raises(IndexSegmentError, match="overlapping fragment"):
        ds.merge_existing_index_segments([a, b])
    with pytest.raises(IndexSegmentError, match="different models"):
        ds.merge_existing_index_segments([a, other_model])
    with pytest.raises(IndexSegmentError, match="not column 'id'"):
        ds.commit_existing_index_segments("vec_idx", "id", [a])
    unknown = Index(**{**a.__dict__, "uuid": str(uuid.uuid4())})
    with pytest.raises(IndexSegmentError, match="no index files"):
        ds.commit_existing_index_segments("vec_idx", "vec", [unknown])
    with pytest.raises(IndexSegmentError, match="at least one"):
        ds.commit_existing_index_segments("vec_idx", "vec", [])
    btree = ds.create_index_uncommitted("id", "BTREE", fragment_ids=[3])
    with pytest.raises(IndexSegmentError, match="different"):
        ds.merge_existing_index_segments([a, btree])
    with pytest.raises(InvalidArgumentError, match="Unknown fragment id 9"):
        segment([9])
    with pytest.raises(InvalidArgumentError, match="requires fragment_ids"):
        ds.create_index_uncommitted("vec", "IVF_FLAT", **_params("IVF_FLAT"))
    with pytest.raises(InvalidArgumentError, match="ivf_centroids of shape"):
        segment([3], index_uuid=str(uuid.UUID(int=9)), ivf_centroids=model["ivf_centroids"][:3])
    assert not (tmp_path / "ds" / "_indices" / str(uuid.UUID(int=9))).exists()
    assert ds.version == 1 and lance.dataset(tmp_path / "ds").version == 1

    # independently trained segments are one logical index when committed unmerged (as pylance)
    ds.commit_existing_index_segments("vec_idx", "vec", [a, other_model])
    with pytest.raises(IndexExistsError):
        segment([2])
    given = str(uuid.UUID(int=7))
    again = segment([2], replace=True, index_uuid=given)
    assert again.uuid == given and (tmp_path / "ds" / "_indices" / given / "index.idx").exists()
    assert len(lance.dataset(tmp_path / "ds").describe_indices()[0].segments) == 2
