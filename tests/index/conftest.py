"""Datasets pylance 14 builds with indices, for the index codec tests (tests/index/)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

DIM = 8
ROWS = 3000
ROWS_PER_FILE = 1000
# Rows deleted before compaction: scattered rows and a whole range (a run of one fragment).
DELETE = "id % 10 = 3 or (id >= 1000 and id < 1100)"

VECTOR_PARAMS: dict[str, dict[str, int]] = {
    "IVF_FLAT": {},
    "IVF_PQ": {"num_sub_vectors": 2},
    "IVF_SQ": {},
    "IVF_HNSW_FLAT": {},
    "IVF_HNSW_PQ": {"num_sub_vectors": 2},
    "IVF_HNSW_SQ": {},
}
SCALAR_INDICES = {
    "id_idx": ("id", "BTREE"),
    "cat_idx": ("cat", "BITMAP"),
    "tags_idx": ("tags", "LABEL_LIST"),
    "id_zm": ("id", "ZONEMAP"),
    "txt_idx": ("txt", "INVERTED"),
    "txt_ng": ("txt", "NGRAM"),
}


def make_table(rows: int = ROWS, start: int = 0, seed: int = 0) -> pa.Table:
    """Rows ``start ..``: an id, a 7-value category (nulls every 13th row), two labels (a null
    list every 17th row), a short text and an 8-d vector."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + rows, dtype=np.int64)
    vectors = rng.standard_normal((rows, DIM)).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(ids),
            "cat": pa.array([None if i % 13 == 0 else f"c{i % 7}" for i in ids], pa.string()),
            "tags": pa.array([None if i % 17 == 0 else [f"t{i % 3}", f"u{i % 5}"] for i in ids]),
            "txt": pa.array([f"hello world {i % 11}" for i in ids]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


def build_scalar(path: Path, **write: object) -> lance.LanceDataset:
    """3 fragments with every scalar index type pylance 14 builds."""
    ds = lance.write_dataset(make_table(), path, max_rows_per_file=ROWS_PER_FILE, **write)
    for name, (column, kind) in SCALAR_INDICES.items():
        ds.create_scalar_index(column, kind, name=name)
    return lance.dataset(str(path))


def build_vector(
    path: Path, kind: str, metric: str = "l2", model: dict | None = None, **write: object
) -> lance.LanceDataset:
    """3 fragments with one vector index ``vec_idx`` of type ``kind`` (4 partitions), trained by
    pylance (unseeded) unless ``model`` gives its ``ivf_centroids`` / ``pq_codebook``."""
    ds = lance.write_dataset(make_table(), path, max_rows_per_file=ROWS_PER_FILE, **write)
    params = {**VECTOR_PARAMS[kind], **(model or {})}
    ds.create_index("vec", kind, name="vec_idx", metric=metric, num_partitions=4, **params)
    return lance.dataset(str(path))


def build_all(path: Path) -> lance.LanceDataset:
    """Every index type on one dataset (vector indices named ``v_<type>``)."""
    build_scalar(path)
    ds = lance.dataset(str(path))
    for kind, params in VECTOR_PARAMS.items():
        ds.create_index("vec", kind, name=f"v_{kind.lower()}", num_partitions=4, **params)
    return lance.dataset(str(path))
