"""L18: pylance 14's legacy IVF_PQ index file (``index_file_version="Legacy"``), both ways.

We write -> pylance opens, reports and searches it as its own legacy index of the same model (same
partitions, same codes per row); pylance writes -> we decode it byte for byte (re-encoding gives
its file back), search it as pylance does and report it in ``index_stats``; compaction remaps it
into a new legacy file pylance reads; ``optimize_indices`` refuses it with a typed error (pylance
14 panics) and commits nothing. Null and NaN vectors are left out, as pylance leaves them out.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import VectorIndexReader as PylanceReader

import lance_ops
from lance_ops.errors import (
    IndexCorruptError,
    InvalidArgumentError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from lance_ops.index.legacy_ivf import (
    is_legacy_index,
    read_legacy_model,
    read_legacy_partitions,
)
from lance_ops.indices import VectorIndexReader

DIM, ROWS, NANS, PER_FILE = 16, 1000, 24, 400
PARAMS = {"num_partitions": 4, "num_sub_vectors": 4}


def _table(rows: int = ROWS, nans: int = NANS, seed: int = 0, start: int = 0, nulls: bool = True) -> pa.Table:
    x = np.random.default_rng(seed).normal(size=(rows + nans, DIM)).astype(np.float32)
    x[rows:] = np.nan
    vec = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM)
    if nulls:  # every 9th vector null (as pylance's create_table(nullify=True), sparser)
        mask = np.arange(rows + nans) % 9 == 4
        vec = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM, mask=pa.array(mask))
    return pa.table({"id": pa.array(np.arange(start, start + rows + nans)), "vec": vec})


def _segment(path: Path) -> tuple[lance_ops.LanceDataset, object]:
    ds = lance_ops.dataset(str(path))
    (index,) = [i for i in ds.manifest.indices if i.name == "vec_idx"]
    return ds, index


def _rows(path: Path) -> tuple[object, dict[int, tuple[int, bytes]]]:
    """The legacy model of ``path``'s index and each row id's (partition, codes)."""
    ds, index = _segment(path)
    model = read_legacy_model(ds.storage, index)
    parts = read_legacy_partitions(ds.storage, index, model, list(range(len(model.lengths))))
    rows = {
        int(i): (p, bytes(c)) for p, (ids, codes) in enumerate(parts) for i, c in zip(ids, codes, strict=True)
    }
    return model, rows


def _stats(ds: object) -> dict:
    stats = ds.stats.index_stats("vec_idx")  # type: ignore[attr-defined]
    stats.pop("updated_at_timestamp_ms", None)
    for entry in stats["indices"] + stats["segments"]:
        entry.pop("uuid"), entry.pop("uri")
    return stats


def _same_answer(a: pa.Table, b: pa.Table) -> None:
    """Equal distances in order, and equal ids except among rows tied at the last distance."""
    da, db = a["_distance"].to_numpy(), b["_distance"].to_numpy()
    assert np.allclose(da, db, rtol=1e-5, atol=1e-6)
    below = da < da[-1] - 1e-5
    assert set(np.asarray(a["id"])[below]) == set(np.asarray(b["id"])[below])


def _queries(count: int = 6) -> np.ndarray:
    return np.random.default_rng(7).normal(size=(count, DIM)).astype(np.float32)


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_we_write_pylance_reads_as_its_own(tmp_path: Path, metric: str) -> None:
    table = _table()
    ours_path, theirs_path = tmp_path / "ours", tmp_path / "theirs"
    lance_ops.write_dataset(table, ours_path, max_rows_per_file=PER_FILE)
    lance.write_dataset(table, theirs_path, max_rows_per_file=PER_FILE)
    ours = lance_ops.dataset(str(ours_path))
    ours.create_index("vec", "IVF_PQ", metric=metric, index_file_version="Legacy", seed=3, **PARAMS)
    model, our_rows = _rows(ours_path)
    assert os.listdir(ours_path / "_indices" / str(uuid.UUID(bytes=_segment(ours_path)[1].uuid))) == [
        "index.idx"
    ]
    # pylance builds its own legacy index from the model we trained
    book = model.codebook.reshape(-1)  # as pylance's PqModel.codebook: sub-vector by sub-vector
    theirs = lance.dataset(str(theirs_path)).create_index(
        "vec",
        "IVF_PQ",
        metric=metric,
        index_file_version="Legacy",
        ivf_centroids=model.centroids,
        pq_codebook=pa.FixedSizeListArray.from_arrays(pa.array(book), DIM),
        **PARAMS,
    )
    their_model, their_rows = _rows(theirs_path)
    assert np.array_equal(their_model.codebook, model.codebook)
    assert np.array_equal(their_model.centroids, model.centroids)
    assert our_rows == their_rows  # same rows (no null, no NaN), partitions and codes
    assert len(our_rows) == int((np.arange(ROWS) % 9 != 4).sum())
    pl_ours = lance.dataset(str(ours_path))
    ours_stats, their_stats = _stats(pl_ours), _stats(theirs)
    assert ours_stats["indices"][0].pop("loss") is not None and their_stats["indices"][0].pop("loss") is None
    ours_stats["segments"][0].pop("loss"), their_stats["segments"][0].pop("loss")
    assert ours_stats == their_stats
    assert ours_stats["indices"][0]["index_file_version"] == "Legacy"
    assert _stats(lance_ops.dataset(str(ours_path))) == _stats(pl_ours)
    for q in _queries():
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        expected = theirs.to_table(nearest=nearest)
        _same_answer(pl_ours.to_table(nearest=nearest), expected)
        _same_answer(lance_ops.dataset(str(ours_path)).to_table(nearest=nearest), expected)
    if metric == "dot":  # a vector is not its own best inner product
        return
    # indexed vectors find themselves with refine (pylance's validate_vector_index, nulls aside)
    sample = table.slice(0, 40).filter(pa.compute.is_valid(table["vec"].slice(0, 40)))
    for row_id, vec in zip(
        sample["id"].to_pylist(), sample["vec"].to_numpy(zero_copy_only=False), strict=True
    ):
        nearest = {"column": "vec", "q": vec, "k": 1, "nprobes": 4, "refine_factor": 10}
        assert pl_ours.to_table(nearest=nearest)["id"].to_pylist() == [row_id]


@pytest.mark.parametrize(("metric", "num_bits"), [("l2", 8), ("cosine", 8), ("l2", 4)])
def test_pylance_writes_we_decode_search_and_report(tmp_path: Path, metric: str, num_bits: int) -> None:
    path = tmp_path / "ds"
    theirs = lance.write_dataset(_table(), path, max_rows_per_file=PER_FILE).create_index(
        "vec", "IVF_PQ", metric=metric, num_bits=num_bits, index_file_version="Legacy", **PARAMS
    )
    ds, index = _segment(path)
    assert is_legacy_index(ds.storage, index)
    model, rows = _rows(path)
    assert (model.metric, model.num_bits, model.dimension, model.num_sub_vectors) == (
        metric,
        num_bits,
        DIM,
        4,
    )
    # re-encoding what we decoded gives pylance's file back, byte for byte
    ids = np.asarray(list(rows), np.uint64)
    data = model.file_bytes(
        ids,
        np.asarray([rows[i][0] for i in rows.keys()]),
        np.frombuffer(b"".join(rows[i][1] for i in rows.keys()), np.uint8).reshape(len(ids), -1),
    )
    assert data == ds.storage.store.read(
        str(path / "_indices" / str(uuid.UUID(bytes=index.uuid)) / "index.idx")
    )
    assert _stats(ds) == _stats(theirs)
    if num_bits == 4:  # pylance 14 reads its own 4-bit legacy partitions as m bytes a row and
        return  # panics searching them: only the bytes and the stats are compared
    their_reader, our_reader = PylanceReader(theirs, "vec_idx"), VectorIndexReader(ds, "vec_idx")
    assert our_reader.num_partitions() == their_reader.num_partitions() == len(model.lengths)
    for partition in range(their_reader.num_partitions()):
        expected = their_reader.read_partition(partition, with_vector=True)
        assert our_reader.read_partition(partition, with_vector=True).equals(expected)
    for q in _queries():
        for nprobes in (1, 3):
            nearest = {"column": "vec", "q": q, "k": 10, "nprobes": nprobes}
            _same_answer(ds.to_table(nearest=nearest), theirs.to_table(nearest=nearest))
    # the next day: rows appended by us are searched flat next to the index, as pylance does
    lance_ops.write_dataset(_table(200, 0, seed=5, start=5000, nulls=False), path, mode="append")
    theirs, ours = lance.dataset(str(path)), lance_ops.dataset(str(path))
    for q in _queries(3):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        _same_answer(ours.to_table(nearest=nearest), theirs.to_table(nearest=nearest))


def test_compaction_remaps_into_a_legacy_file(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    lance.write_dataset(_table(), path, max_rows_per_file=PER_FILE).create_index(
        "vec", "IVF_PQ", index_file_version="Legacy", **PARAMS
    )
    ours = lance_ops.dataset(str(path))
    ours.delete("id % 10 = 3 or id < 100")
    before = lance.dataset(str(path))
    answers = [before.to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": 4}) for q in _queries()]
    ours.optimize.compact_files()
    after = lance.dataset(str(path))
    assert len(after.get_fragments()) == 1
    stats = after.stats.index_stats("vec_idx")
    assert stats["indices"][0]["index_file_version"] == "Legacy"
    assert stats["num_unindexed_rows"] == 0
    model, rows = _rows(path)
    assert len(rows) == before.count_rows(filter="vec is not null and id < 1000")
    for q, expected in zip(_queries(), answers, strict=True):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 4}
        _same_answer(after.to_table(nearest=nearest), expected)
        _same_answer(lance_ops.dataset(str(path)).to_table(nearest=nearest), expected)


def test_optimize_refuses_a_legacy_index_and_commits_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    lance_ops.write_dataset(_table(), path, max_rows_per_file=PER_FILE)
    lance_ops.dataset(str(path)).create_index("vec", "IVF_PQ", index_file_version="Legacy", **PARAMS)
    assert lance_ops.dataset(str(path)).optimize.optimize_indices().extended == ()  # nothing to do
    lance_ops.write_dataset(_table(100, 0, start=9000), path, mode="append")
    ds = lance_ops.dataset(str(path))
    version, directories = ds.version, sorted(os.listdir(path / "_indices"))
    with pytest.raises(UnsupportedIndexTypeError, match="'vec_idx' is in the legacy") as err:
        ds.optimize.optimize_indices()
    assert err.value.index == "vec_idx"
    assert lance_ops.dataset(str(path)).version == version
    assert sorted(os.listdir(path / "_indices")) == directories
    assert lance.dataset(str(path)).stats.index_stats("vec_idx")["num_unindexed_rows"] == 100


def test_other_types_ignore_legacy_and_bad_versions_fail(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    lance_ops.write_dataset(_table(nulls=False), path)
    ds = lance_ops.dataset(str(path))
    ds.create_index("vec", "IVF_FLAT", num_partitions=2, index_file_version="Legacy")
    stats = lance.dataset(str(path)).stats.index_stats("vec_idx")
    assert stats["indices"][0]["index_file_version"] == "V3"  # as pylance 14
    version = lance_ops.dataset(str(path)).version
    with pytest.raises(InvalidArgumentError, match="index_file_version"):
        ds.create_index("vec", "IVF_PQ", index_file_version="V2", replace=True, **PARAMS)
    with pytest.raises(UnsupportedFeatureError, match="train=False"):
        ds.create_index("vec", "IVF_PQ", index_file_version="Legacy", replace=True, train=False, **PARAMS)
    assert lance_ops.dataset(str(path)).version == version


@pytest.mark.parametrize("damage", ["metadata length", "metadata bytes", "cut short"])
def test_a_damaged_legacy_file_is_a_typed_error(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "ds"
    lance_ops.write_dataset(_table(nulls=False), path)
    lance_ops.dataset(str(path)).create_index("vec", "IVF_PQ", index_file_version="Legacy", **PARAMS)
    ds, index = _segment(path)
    file = path / "_indices" / str(uuid.UUID(bytes=index.uuid)) / "index.idx"
    data = file.read_bytes()
    position = int.from_bytes(data[-16:-8], "little")
    if damage == "metadata length":
        data = data[:position] + b"\xff\xff\xff\x7f" + data[position + 4 :]
    elif damage == "metadata bytes":
        data = data[: position + 4] + b"\xff" * 40 + data[position + 44 :]
    else:
        data = data[:12]
    file.write_bytes(data)
    with pytest.raises(IndexCorruptError, match="vec_idx"):
        lance_ops.dataset(str(path)).to_table(nearest={"column": "vec", "q": _queries(1)[0], "k": 3})


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_few_rows_and_empty_partitions(tmp_path: Path, rows: int) -> None:
    """Partitions left empty take no bytes; pylance reads and searches the file all the same."""
    path = tmp_path / "ds"
    table = _table(rows, 0, nulls=False)
    lance_ops.write_dataset(table, path)
    centroids = np.random.default_rng(2).normal(size=(4, DIM)).astype(np.float32)
    book = np.random.default_rng(3).normal(size=(4 * 256 * DIM // 4)).astype(np.float32)
    lance_ops.dataset(str(path)).create_index(
        "vec", "IVF_PQ", index_file_version="Legacy", ivf_centroids=centroids, pq_codebook=book, **PARAMS
    )
    model, found = _rows(path)
    assert sorted(found) == list(range(rows)) and int(model.lengths.sum()) == rows
    theirs = lance.dataset(str(path))
    assert [p["size"] for p in theirs.stats.index_stats("vec_idx")["indices"][0]["partitions"]] == list(
        model.lengths
    )
    q = table["vec"].to_numpy(zero_copy_only=False)[0]
    nearest = {"column": "vec", "q": q, "k": rows, "nprobes": 4}
    _same_answer(lance_ops.dataset(str(path)).to_table(nearest=nearest), theirs.to_table(nearest=nearest))
    assert sorted(theirs.to_table(nearest=nearest)["id"].to_pylist()) == list(range(rows))
