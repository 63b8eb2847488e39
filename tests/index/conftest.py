"""One pylance-built dataset per test module with every index type pylance 14 builds on it."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

DIM = 8
ROWS = 3000
ROWS_PER_FILE = 1000


def make_table(rows: int = ROWS, start: int = 0, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + rows, dtype=np.int64)
    vectors = rng.standard_normal((rows, DIM)).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(ids),
            "cat": pa.array([f"c{i % 7}" for i in ids]),
            "tags": pa.array([[f"t{i % 3}", f"u{i % 5}"] for i in ids]),
            "txt": pa.array([f"hello world {i % 11}" for i in ids]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


VECTOR_PARAMS = {
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


def build_indexed(
    path: Path, vector_types: tuple[str, ...] = tuple(VECTOR_PARAMS), **write: object
) -> lance.LanceDataset:
    ds = lance.write_dataset(make_table(), path, max_rows_per_file=ROWS_PER_FILE, **write)
    for name, (column, kind) in SCALAR_INDICES.items():
        ds.create_scalar_index(column, kind, name=name)
    for kind in vector_types:
        ds.create_index("vec", kind, name=f"v_{kind.lower()}", num_partitions=4, **VECTOR_PARAMS[kind])
    return ds


@pytest.fixture(scope="module")
def indexed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("indexed") / "ds"
    build_indexed(path)
    return path


@pytest.fixture
def indexed(indexed_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the module's indexed dataset (tests may change it)."""
    target = tmp_path / "ds"
    shutil.copytree(indexed_template, target)
    return target
