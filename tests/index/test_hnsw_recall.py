"""L18: IVF_HNSW_* built by lance_ops in every metric and storage, searched by pylance.

pylance's recall@10 on our index is within 0.02 (PQ: 0.04, its training spread) of its recall on its
own index built with the same parameters, for several ``nprobes`` (pylance's graph construction is
randomized: recall is compared, not bytes). A seeded 5,000 x 32 dataset of 20 clusters; 100 queries
near its rows.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from tests.index.helpers import brute_neighbours, build_vector_index, knn_recall

N, DIM, CLUSTERS, NPROBES = 5000, 32, 20, (1, 2, 4)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(CLUSTERS, DIM)) * 3
    x = (centres[rng.integers(0, CLUSTERS, N)] + rng.normal(size=(N, DIM))).astype(np.float32)
    rng = np.random.default_rng(1)
    q = (x[rng.choice(N, 100, replace=False)] + rng.normal(size=(100, DIM)) * 0.5).astype(np.float32)
    return x, q


CASES = [
    (kind, metric)
    for kind in ("IVF_HNSW_FLAT", "IVF_HNSW_SQ", "IVF_HNSW_PQ")
    for metric in ("l2", "cosine", "dot")
]


@pytest.mark.parametrize(("kind", "metric"), CASES, ids=[f"{k}-{m}" for k, m in CASES])
def test_pylance_recall_on_our_hnsw_index_matches_its_own(tmp_path: Path, kind: str, metric: str) -> None:
    x, q = _data()
    truth = brute_neighbours(x, q, metric)
    params = {"num_sub_vectors": 8} if kind.endswith("PQ") else {}
    table = pa.table({"id": np.arange(N), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    # PQ training moves the recall by ~0.03 from one training sample to the next (pylance's is
    # unseeded): each side's median of three builds (ours with seeds 7, 8, 9) is compared
    count = 3 if kind.endswith("PQ") else 1
    recalls: dict[str, list[float]] = {}
    for who in ("ours", "theirs"):
        runs = [
            _recalls(tmp_path / f"{who}{b}", table, q, truth, who, kind, metric, params, 7 + b)
            for b in range(count)
        ]
        recalls[who] = [float(np.median(r)) for r in zip(*runs, strict=True)]
    # pylance's unseeded PQ builds spread over ~0.065 (0.492-0.557 in six cosine builds, ours over
    # seeds 7-12: 0.515-0.542): a median of three of its builds can sit 0.03 above its typical one
    margin = 0.04 if kind.endswith("PQ") else 0.02
    for ours, theirs in zip(recalls["ours"], recalls["theirs"], strict=True):
        assert ours >= theirs - margin, recalls


def _recalls(
    path: Path,
    table: pa.Table,
    q: np.ndarray,
    truth: np.ndarray,
    who: str,
    kind: str,
    metric: str,
    params: dict,
    seed: int,
) -> list[float]:
    """pylance's recall@10 at each of NPROBES on the index ``who`` builds over ``table``."""
    lance.write_dataset(table, path, max_rows_per_file=2000)
    build_vector_index(path, who, kind, metric, params, seed)
    ds = lance.dataset(path)
    (index,) = ds.describe_indices()
    assert (index.index_type, index.name) == (kind, "vec_idx")
    assert ds.stats.index_stats("vec_idx")["indices"][0]["metric_type"] == metric
    return [knn_recall(ds, truth, q, nprobes) for nprobes in NPROBES]
