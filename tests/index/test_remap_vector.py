"""Vector indices remapped by lance_ops after a compaction: pylance searches them (the plan names
the index), returns only live rows, and recalls as well as after its own remap of a twin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file import LanceFileReader
from lance_ops.index.types import uuid_text
from tests.index.conftest import DELETE, DIM, build_vector
from tests.index.helpers import compact_deferred, remap_all

K = 10
QUERIES = np.random.default_rng(42).standard_normal((20, DIM)).astype(np.float32)


def exact_ids(ds: lance.LanceDataset, q: np.ndarray) -> set[int]:
    t = ds.to_table(columns=["id", "vec"])
    vectors = np.asarray(t["vec"].combine_chunks().flatten()).reshape(-1, DIM)
    return set(np.asarray(t["id"])[np.argsort(((vectors - q) ** 2).sum(1), kind="stable")[:K]].tolist())


def search(ds: lance.LanceDataset, q: np.ndarray) -> pa.Table:
    return ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": K, "nprobes": 4})


def recall(ds: lance.LanceDataset) -> float:
    hits = [len(set(search(ds, q)["id"].to_pylist()) & exact_ids(ds, q)) for q in QUERIES]
    return sum(hits) / (K * len(QUERIES))


def twins(tmp_path: Path, kind: str, delete: str | None) -> tuple[lance.LanceDataset, lance.LanceDataset]:
    """(ours: pylance compacts deferred, lance_ops remaps; theirs: pylance compacts and remaps) of
    one dataset (index training is random: the twins are copies)."""
    base = tmp_path / "base"
    ds = build_vector(base, kind)
    if delete:
        ds.delete(delete)
    paths = {name: tmp_path / name for name in ("ours", "theirs")}
    for path in paths.values():
        shutil.copytree(base, path)
    mapping, fragments = compact_deferred(paths["ours"])
    ours = remap_all(paths["ours"], mapping, fragments, {"vec_idx"})
    lance.dataset(str(paths["theirs"])).optimize.compact_files(target_rows_per_fragment=1 << 20)
    return ours, lance.dataset(str(paths["theirs"]))


def covered(ds: lance.LanceDataset) -> set[int]:
    return {
        i for d in ds.describe_indices() if d.name == "vec_idx" for s in d.segments for i in s.fragment_ids
    }


def check_search(ours: lance.LanceDataset, theirs: lance.LanceDataset, exact: bool) -> None:
    plan = ours.scanner(nearest={"column": "vec", "q": QUERIES[0], "k": K, "nprobes": 4}).explain_plan(True)
    assert "ANNSubIndex: name=vec_idx" in plan, plan
    live = set(ours.to_table(columns=["id"])["id"].to_pylist())
    for q in QUERIES:
        found = search(ours, q)["id"].to_pylist()
        assert len(found) == K and set(found) <= live
        if exact:
            assert set(found) == exact_ids(ours, q)
    assert recall(ours) >= recall(theirs) - 0.05
    assert covered(ours) == covered(theirs)
    assert (
        ours.stats.index_stats("vec_idx")["num_indexed_rows"]
        == theirs.stats.index_stats("vec_idx")["num_indexed_rows"]
    )


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ"])
def test_remapped_ivf_searches(tmp_path: Path, kind: str) -> None:
    ours, theirs = twins(tmp_path, kind, DELETE)
    check_search(ours, theirs, exact=kind == "IVF_FLAT")  # every partition probed: FLAT is exact


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ"])
def test_partitions_equal_pylance_remap(tmp_path: Path, kind: str) -> None:
    """Partition by partition the remapped storage holds pylance's rows, in pylance's order, with
    the same codes (PQ codes transposed within each partition as pylance stores them)."""
    ours, theirs = twins(tmp_path, kind, DELETE)
    tables = []
    for ds in (ours, theirs):
        index = next(ix for ix in lance_ops.dataset(ds.uri).manifest.indices if ix.name == "vec_idx")
        reader = LanceFileReader(str(Path(ds.uri) / "_indices" / uuid_text(index) / "auxiliary.idx"))
        tables.append((reader.read_all().to_table(), reader.read_global_buffer(1)))
    (mine, my_ivf), (pylance_own, their_ivf) = tables
    assert my_ivf == their_ivf
    assert mine.equals(pylance_own, check_metadata=True)


@pytest.mark.parametrize("kind", ["IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"])
@pytest.mark.parametrize("delete", [None, DELETE], ids=["kept", "removed"])
def test_remapped_hnsw_searches(tmp_path: Path, kind: str, delete: str | None) -> None:
    """Without removed rows the graphs are copied; with them their nodes are dropped and the graphs
    repaired (pylance rebuilds them; it cannot search them behind a Fragment Reuse Index)."""
    ours, theirs = twins(tmp_path, kind, delete)
    check_search(ours, theirs, exact=False)
    index = next(ix for ix in lance_ops.dataset(ours.uri).manifest.indices if ix.name == "vec_idx")
    graphs = LanceFileReader(str(Path(ours.uri) / "_indices" / uuid_text(index) / "index.idx"))
    storage = LanceFileReader(str(Path(ours.uri) / "_indices" / uuid_text(index) / "auxiliary.idx"))
    level0 = sum(json.loads(m)["level_offsets"][1] for m in json.loads(graphs.schema.metadata[b"lance:hnsw"]))
    assert level0 == storage.num_rows == ours.count_rows()


@pytest.mark.parametrize("kind", ["IVF_PQ", "IVF_HNSW_SQ"])
def test_one_row_left(tmp_path: Path, kind: str) -> None:
    """Every row but one deleted: partitions and graphs left empty are still searchable."""
    ours, _ = twins(tmp_path, kind, "id != 2222")
    found = ours.to_table(columns=["id"], nearest={"column": "vec", "q": QUERIES[0], "k": 5, "nprobes": 4})
    assert found["id"].to_pylist() == [2222]
    assert ours.stats.index_stats("vec_idx")["num_indexed_rows"] == 1


def metric_recall(ds: lance.LanceDataset, metric: str) -> float:
    """kNN recall of the index against pylance's exact search in ``metric``."""
    hits = 0
    for q in QUERIES:
        nearest = {"column": "vec", "q": q, "k": K, "nprobes": 4, "metric": metric}
        found = ds.to_table(columns=["id"], nearest=nearest)["id"].to_pylist()
        exact = ds.to_table(columns=["id"], nearest={**nearest, "use_index": False})["id"].to_pylist()
        hits += len(set(found) & set(exact))
    return hits / (K * len(QUERIES))


@pytest.mark.parametrize("kind", ["IVF_HNSW_SQ", "IVF_HNSW_PQ"])
@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_hnsw_cosine_and_dot_after_our_compaction(tmp_path: Path, kind: str, metric: str) -> None:
    """pylance-built cosine / dot HNSW indices: our compaction (rows removed, graphs repaired)
    recalls within 0.05 of pylance's own compaction of a twin, and covers the same fragments."""
    build_vector(tmp_path / "base", kind, metric=metric).delete(DELETE)
    for name in ("ours", "theirs"):
        shutil.copytree(tmp_path / "base", tmp_path / name)
    lance_ops.dataset(str(tmp_path / "ours")).optimize.compact_files(target_rows_per_fragment=1 << 20)
    lance.dataset(str(tmp_path / "theirs")).optimize.compact_files(target_rows_per_fragment=1 << 20)
    ours, theirs = lance.dataset(str(tmp_path / "ours")), lance.dataset(str(tmp_path / "theirs"))
    plan = ours.scanner(nearest={"column": "vec", "q": QUERIES[0], "k": K, "nprobes": 4}).explain_plan(True)
    assert "ANNSubIndex: name=vec_idx" in plan, plan
    assert covered(ours) == covered(theirs)
    live = set(ours.to_table(columns=["id"])["id"].to_pylist())
    found = search(ours, QUERIES[1])["id"].to_pylist()
    assert len(found) == K and set(found) <= live
    mine, pylance_own = metric_recall(ours, metric), metric_recall(theirs, metric)
    assert mine >= pylance_own - 0.05 and pylance_own > 0.3
