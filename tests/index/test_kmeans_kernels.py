"""L18: the compiled nearest-point search and cluster sums k-means uses for PQ sub-vectors give the
answers of the numpy (matmul) path they replace, whatever the row count and thread split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.index import build_vector


def _numpy_path(x: np.ndarray, points: np.ndarray, dot: bool) -> tuple[np.ndarray, np.ndarray]:
    saved = build_vector._SMALL_DIM
    build_vector._SMALL_DIM = 0  # every dimension count through the matmul
    try:
        return build_vector._distances(x, points, dot)
    finally:
        build_vector._SMALL_DIM = saved


@settings(max_examples=25, deadline=None)
@given(
    rows=st.sampled_from([0, 1, 255, 256, 257, 16383, 16384, 40000]),
    dim=st.sampled_from([1, 2, 8, 16]),
    k=st.sampled_from([1, 2, 16, 256]),
    dot=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_compiled_nearest_points_equal_the_matmul(rows: int, dim: int, k: int, dot: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, dim)).astype(np.float32)
    points = rng.normal(size=(k, dim)).astype(np.float32)
    nearest, best = build_vector._distances(x, points, dot)
    expected_nearest, expected_best = _numpy_path(x, points, dot)
    assert nearest.dtype == expected_nearest.dtype and best.dtype == expected_best.dtype
    np.testing.assert_allclose(best, expected_best, rtol=1e-4, atol=1e-4)
    if rows:
        # the point picked is a nearest one (two points as near: float32 rounding decides)
        x64, p64 = x.astype(np.float64), points.astype(np.float64)
        scores = -(x64 @ p64.T) if dot else (x64 * x64).sum(1)[:, None] - 2 * x64 @ p64.T + (p64 * p64).sum(1)
        np.testing.assert_allclose(scores[np.arange(rows), nearest], scores.min(1), rtol=1e-4, atol=1e-4)
        assert (nearest == expected_nearest).mean() > 0.99


def test_kmeans_on_sub_vectors_equals_the_matmul_path() -> None:
    """Seeded k-means of PQ-sized sub-vectors: the same centroids and loss through either path,
    and again on a second run."""
    rng = np.random.default_rng(3)
    data = rng.normal(size=(6000, 8)).astype(np.float32)
    first, loss = build_vector.kmeans(data, 64, 10, np.random.default_rng(7))
    again, loss_again = build_vector.kmeans(data, 64, 10, np.random.default_rng(7))
    np.testing.assert_array_equal(first, again)
    assert loss == loss_again
    saved = build_vector._SMALL_DIM
    build_vector._SMALL_DIM = 0
    try:
        reference, reference_loss = build_vector.kmeans(data, 64, 10, np.random.default_rng(7))
    finally:
        build_vector._SMALL_DIM = saved
    np.testing.assert_allclose(first, reference, atol=1e-3)
    assert loss == pytest.approx(reference_loss, rel=1e-4)
