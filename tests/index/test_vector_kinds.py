"""L18: vector index kinds beyond the 8-bit ones, with pylance 14 as the oracle.

4-bit PQ (``num_bits=4``): 16 codewords per sub-vector, two codes a byte (sub-vector ``2 j`` in the
low nibble of byte ``j``). Our files have pylance's schema and storage metadata, pylance searches
them with the recall of its own 4-bit index, lance_ops searches pylance's, each library extends
the other's after an append, and our encoder packs pylance's own model's codes into pylance's
bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import InvalidArgumentError
from lance_ops.file import LanceFileReader
from lance_ops.index.ivf import _centroids, _code_matrix, _encode, _read_storage, pack_4bit, unpack_4bit
from tests.index.helpers import brute_neighbours

N, DIM, CLUSTERS, PARTITIONS = 4000, 16, 16, 8


def _data(n: int = N, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLUSTERS, DIM)) * 3
    return (centres[rng.integers(0, CLUSTERS, n)] + rng.normal(size=(n, DIM))).astype(np.float32)


def _table(x: np.ndarray, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + len(x))
    return pa.table({"id": pa.array(ids), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _queries(x: np.ndarray, count: int = 60, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked = x[rng.choice(len(x), count, replace=False)]
    return (picked + rng.normal(size=(count, DIM)) * 0.5).astype(np.float32)


def _recall(
    ds: lance.LanceDataset | lance_ops.LanceDataset, x: np.ndarray, q: np.ndarray, metric: str
) -> float:
    truth = brute_neighbours(x, q, metric)
    hits = 0
    for i in range(len(q)):
        got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q[i], "k": 10, "nprobes": 3})
        hits += len(set(got.column("id").to_pylist()) & set(truth[i].tolist()))
    return hits / (10 * len(q))


def _build(path: Path, who: str, kind: str, metric: str, seed: int = 7) -> None:
    params = {"metric": metric, "num_partitions": PARTITIONS, "num_sub_vectors": 8, "num_bits": 4}
    if who == "ours":
        lance_ops.dataset(str(path)).create_index("vec", kind, seed=seed, **params)
    else:
        lance.dataset(path).create_index("vec", kind, **params)


def _storage_file(path: Path) -> Path:
    (index,) = lance.dataset(path).describe_indices()
    return path / "_indices" / str(index.segments[0].uuid) / "auxiliary.idx"


@settings(max_examples=50, deadline=None)
@given(rows=st.sampled_from([0, 1, 2, 1023, 1024, 1025]), pairs=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_pack_4bit_round_trips(rows: int, pairs: int, seed: int) -> None:
    codes = np.random.default_rng(seed).integers(0, 16, (rows, 2 * pairs)).astype(np.uint8)
    packed = pack_4bit(codes)
    assert packed.shape == (rows, pairs)
    assert np.array_equal(packed & 0x0F, codes[:, 0::2]) and np.array_equal(packed >> 4, codes[:, 1::2])
    assert np.array_equal(unpack_4bit(packed), codes)
    assert np.array_equal(unpack_4bit(np.ascontiguousarray(packed.T), axis=0), codes.T)


@pytest.mark.parametrize("kind", ["IVF_PQ", "IVF_HNSW_PQ"])
def test_4bit_files_have_pylances_schema_and_metadata(tmp_path: Path, kind: str) -> None:
    x = _data(2000)
    found = {}
    for who in ("ours", "theirs"):
        path = tmp_path / who
        lance.write_dataset(_table(x), path)
        _build(path, who, kind, "l2")
        table = LanceFileReader(str(_storage_file(path))).read_all().to_table()
        meta = table.schema.metadata
        storage = json.loads(json.loads(meta[b"storage_metadata"])[0])
        stats = lance.dataset(path).stats.index_stats("vec_idx")
        found[who] = (
            table.schema.remove_metadata(),
            sorted(meta),
            storage,
            table.num_rows,
            stats["index_type"],
        )
        assert stats["indices"][0]["sub_index"]["nbits"] == 4
    assert found["ours"] == found["theirs"]
    assert found["ours"][2]["nbits"] == 4 and found["ours"][0].field("__pq_code").type.list_size == 4


def test_our_encoder_packs_pylances_codes(tmp_path: Path) -> None:
    """Encoding pylance's rows with pylance's own model gives the bytes pylance stored (the nibble
    order, the transposition and the codebook layout all as pylance's)."""
    x = _data(3000)
    lance.write_dataset(_table(x), tmp_path)
    lance.dataset(tmp_path).create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=8, num_bits=4)
    ds = lance_ops.dataset(str(tmp_path))
    (index,) = ds.manifest.indices
    storage = _read_storage(ds.storage, index, "IVF_PQ")
    centroids, _ = _centroids(ds.storage, index)
    stored = _code_matrix(storage)
    row_ids = np.asarray(storage.data.table.column("_rowid"), dtype=np.int64)
    partition = np.repeat(np.arange(len(storage.lengths)), storage.lengths)
    vectors = x[row_ids]  # one fragment: row id = row number
    ours = _encode(storage, "IVF_PQ", "l2", vectors, vectors - centroids[partition])
    assert ours.shape == stored.shape == (3000, 4)
    # the same nearest codeword up to float ties: all but a handful of the 24000 codes agree
    assert (unpack_4bit(ours) != unpack_4bit(stored)).sum() <= 24


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_pylance_searches_our_4bit_index_with_its_own_recall(tmp_path: Path, metric: str) -> None:
    x = _data()
    q = _queries(x)
    recalls: dict[str, list[float]] = {"ours": [], "theirs": [], "lance_ops": []}
    # pylance's PQ training is unseeded and moves recall by a few hundredths: medians of three builds
    for who in ("ours", "theirs"):
        for build in range(3):
            path = tmp_path / f"{who}{build}"
            lance.write_dataset(_table(x), path, max_rows_per_file=1500)
            _build(path, who, "IVF_PQ", metric, seed=7 + build)
            ds = lance.dataset(path)
            plan = ds.scanner(nearest={"column": "vec", "q": q[0], "k": 10}).explain_plan()
            assert "ANNSubIndex" in plan and "vec_idx" in plan
            recalls[who].append(_recall(ds, x, q, metric))
            if who == "theirs":  # lance_ops searching pylance's index
                recalls["lance_ops"].append(_recall(lance_ops.dataset(str(path)), x, q, metric))
    ours, theirs = float(np.median(recalls["ours"])), float(np.median(recalls["theirs"]))
    assert ours >= theirs - 0.03, recalls
    # on the same index, lance_ops' float lookups rank at least as well as pylance's quantized ones
    assert float(np.median(recalls["lance_ops"])) >= theirs - 0.02, recalls
    assert theirs > 0.15, recalls  # the data has structure a 4-bit PQ finds (dot: ~0.23)


def test_each_library_extends_the_others_4bit_index(tmp_path: Path) -> None:
    x = _data(3000)
    q = _queries(x, 30)
    for builder, extender in (("ours", "theirs"), ("theirs", "ours")):
        path = tmp_path / builder
        lance.write_dataset(_table(x[:2000]), path)
        _build(path, builder, "IVF_PQ", "l2")
        lance.write_dataset(_table(x[2000:], 2000), path, mode="append")
        if extender == "ours":
            lance_ops.dataset(str(path)).optimize.optimize_indices()
        else:
            lance.dataset(path).optimize.optimize_indices()
        ds = lance.dataset(path)
        assert ds.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
        for reader in (ds, lance_ops.dataset(str(path))):
            got = reader.to_table(
                columns=["id"],
                nearest={"column": "vec", "q": x[2500], "k": 1, "nprobes": PARTITIONS, "refine_factor": 50},
            )
            assert got.column("id").to_pylist() == [2500]
            assert _recall(reader, x, q, "l2") > 0.3


@pytest.mark.parametrize("rows", [1, 2, 15, 16, 17])
def test_4bit_tiny_datasets_build_and_pylance_finds_each_row(tmp_path: Path, rows: int) -> None:
    """Fewer rows than the 16 codewords: k-means repeats points, every row is still found."""
    x = _data(rows, seed=rows)
    lance.write_dataset(_table(x), tmp_path)
    lance_ops.dataset(str(tmp_path)).create_index(
        "vec", "IVF_PQ", num_partitions=1, num_sub_vectors=8, num_bits=4, seed=rows
    )
    ds = lance.dataset(tmp_path)
    assert ds.stats.index_stats("vec_idx")["num_indexed_rows"] == rows
    for i in range(rows):
        nearest = {"column": "vec", "q": x[i], "k": 1, "refine_factor": rows}
        assert ds.to_table(columns=["id"], nearest=nearest)["id"].to_pylist() == [i]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_sub_vectors": 8, "num_bits": 3}, "num_bits"),
        ({"num_sub_vectors": 1, "num_bits": 4}, "even"),
    ],
)
def test_bad_num_bits_commits_nothing(tmp_path: Path, kwargs: dict[str, int], match: str) -> None:
    lance.write_dataset(_table(_data(300)), tmp_path)
    with pytest.raises(InvalidArgumentError, match=match) as caught:
        lance_ops.dataset(str(tmp_path)).create_index("vec", "IVF_PQ", num_partitions=2, **kwargs)
    assert "'vec'" in str(caught.value)
    assert lance.dataset(tmp_path).version == 1 and lance.dataset(tmp_path).describe_indices() == []


def test_ivf_sq_takes_num_bits_and_stores_8_bit_codes_as_pylance(tmp_path: Path) -> None:
    lance.write_dataset(_table(_data(1000)), tmp_path)
    lance_ops.dataset(str(tmp_path)).create_index("vec", "IVF_SQ", num_partitions=2, num_bits=4)
    table = LanceFileReader(str(_storage_file(tmp_path))).read_all().to_table()
    assert json.loads(json.loads(table.schema.metadata[b"storage_metadata"])[0])["num_bits"] == 8
    assert table.schema.field("__sq_code").type.list_size == DIM
    got = lance.dataset(tmp_path).to_table(
        nearest={"column": "vec", "q": _data(1000)[5], "k": 1, "nprobes": 2}
    )
    assert got.column("id").to_pylist() == [5]


@pytest.mark.parametrize("bits", [4, 8])
def test_cosine_pq_rows_and_distances_as_pylance(tmp_path: Path, bits: int) -> None:
    """A cosine PQ index is an l2 one over normalized vectors: on pylance's own index lance_ops
    returns pylance's rows in its order with its ``_distance`` (l2 to the decoded vector)."""
    x = _data(3000)
    lance.write_dataset(_table(x), tmp_path)
    lance.dataset(tmp_path).create_index(
        "vec", "IVF_PQ", metric="cosine", num_partitions=4, num_sub_vectors=8, num_bits=bits
    )
    for query in _queries(x, 10):
        nearest = {"column": "vec", "q": query, "k": 10, "nprobes": 2}
        theirs = lance.dataset(tmp_path).to_table(columns=["id"], nearest=nearest)
        ours = lance_ops.dataset(str(tmp_path)).to_table(columns=["id"], nearest=nearest)
        if bits == 8:  # 4-bit: pylance ranks by a u8-quantized table, so only the set is close
            assert ours["id"].to_pylist() == theirs["id"].to_pylist()
            np.testing.assert_allclose(ours["_distance"], theirs["_distance"], rtol=1e-4, atol=1e-5)
        else:
            assert len(set(ours["id"].to_pylist()) & set(theirs["id"].to_pylist())) >= 7


# ---------------------------------------------------------------- binary vectors, hamming IVF_FLAT

BYTES = 16  # 128-bit binary vectors


def _binary(n: int, seed: int = 0) -> np.ndarray:
    """Clustered bit vectors: 12 random centres, each bit flipped with probability 0.15."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 2, (12, BYTES * 8), dtype=np.uint8)
    flips = (rng.random((n, BYTES * 8)) < 0.15).astype(np.uint8)
    bits = centres[rng.integers(0, 12, n)] ^ flips
    return np.packbits(bits, axis=1, bitorder="little")


def _binary_table(b: np.ndarray, start: int = 0) -> pa.Table:
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(b.ravel(), pa.uint8()), BYTES)
    return pa.table({"id": pa.array(np.arange(start, start + len(b))), "vec": vectors})


def _hamming(b: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.unpackbits(b ^ q[None, :], axis=1).sum(1)


def _build_hamming(path: Path, who: str, partitions: int = 6) -> None:
    if who == "ours":
        lance_ops.dataset(str(path)).create_index(
            "vec", "IVF_FLAT", metric="hamming", num_partitions=partitions, seed=3
        )
    else:
        lance.dataset(path).create_index("vec", "IVF_FLAT", metric="hamming", num_partitions=partitions)


def test_hamming_files_are_pylances(tmp_path: Path) -> None:
    b = _binary(1500)
    found = {}
    for who in ("ours", "theirs"):
        path = tmp_path / who
        lance.write_dataset(_binary_table(b), path)
        _build_hamming(path, who)
        ds = lance.dataset(path)
        stats = ds.stats.index_stats("vec_idx")
        index = stats["indices"][0]
        files = {}
        for name in ("index.idx", "auxiliary.idx"):
            table = LanceFileReader(str(_storage_file(path).with_name(name))).read_all().to_table()
            files[name] = (table.schema.remove_metadata(), table.schema.metadata, table.num_rows)
        files["auxiliary.idx"][1].pop(b"lance:ivf")  # the buffer number, same either way
        details = ds.get_transactions(1)[0].operation.new_indices[0].index_details[1]
        found[who] = (
            stats["index_type"],
            index["metric_type"],
            index["sub_index"],
            len(index["centroids"]),
            files,
            details[: details.index(b"J")],  # metric and flat parameters, before the build parameters
        )
        centroids = np.asarray(index["centroids"])
        assert (
            np.array_equal(centroids, np.round(centroids)) and centroids.min() >= 0 and centroids.max() <= 255
        )
    assert found["ours"] == found["theirs"]
    assert found["ours"][:2] == ("IVF_FLAT", "hamming")


@pytest.mark.parametrize("builder", ["ours", "theirs"])
def test_hamming_search_probing_every_partition_is_exact_in_both_libraries(
    tmp_path: Path, builder: str
) -> None:
    b = _binary(2000)
    lance.write_dataset(_binary_table(b), tmp_path, max_rows_per_file=800)
    _build_hamming(tmp_path, builder)
    rng = np.random.default_rng(5)
    for q in b[rng.choice(len(b), 8, replace=False)] ^ rng.integers(0, 2, (8, BYTES), dtype=np.uint8):
        want = np.sort(_hamming(b, q))[:10].astype(np.float32)
        answers = []
        for ds in (lance.dataset(tmp_path), lance_ops.dataset(str(tmp_path))):
            got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": 6})
            assert np.array_equal(got["_distance"].to_numpy(), want)
            assert np.array_equal(_hamming(b[got["id"].to_numpy()], q).astype(np.float32), want)
            answers.append(got)
        # the same rows in the same order (pylance breaks distance ties its own way: compare sets)
        assert set(answers[0]["id"].to_pylist()) >= {
            i for i, d in zip(answers[1]["id"].to_pylist(), want, strict=True) if d < want[-1]
        }


def test_hamming_recall_with_two_probes_as_pylances_index(tmp_path: Path) -> None:
    b = _binary(3000)
    rng = np.random.default_rng(6)
    queries = b[rng.choice(len(b), 40, replace=False)] ^ rng.integers(0, 4, (40, BYTES), dtype=np.uint8)

    def recall(ds: lance.LanceDataset | lance_ops.LanceDataset) -> float:
        hits = 0
        for q in queries:
            threshold = np.sort(_hamming(b, q))[9]
            got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": 2})
            hits += int((_hamming(b[got["id"].to_numpy()], q) <= threshold).sum())
        return hits / (10 * len(queries))

    recalls: dict[str, list[float]] = {"ours": [], "theirs": []}
    for who in ("ours", "theirs"):
        for build in range(5):  # pylance's k-modes is unseeded (recall 0.90 .. 1.00): medians of five
            path = tmp_path / f"{who}{build}"
            lance.write_dataset(_binary_table(b), path)
            if who == "ours":
                lance_ops.dataset(str(path)).create_index(
                    "vec", "IVF_FLAT", metric="hamming", num_partitions=6, seed=build
                )
            else:
                _build_hamming(path, who)
            recalls[who].append(recall(lance.dataset(path)))
            assert recall(lance_ops.dataset(str(path))) == recalls[who][-1]  # same index, same rows
    assert float(np.median(recalls["ours"])) >= float(np.median(recalls["theirs"])) - 0.05, recalls


def test_each_library_extends_the_others_hamming_index(tmp_path: Path) -> None:
    b = _binary(1600)
    for builder, extender in (("ours", "theirs"), ("theirs", "ours")):
        path = tmp_path / builder
        lance.write_dataset(_binary_table(b[:1000]), path)
        _build_hamming(path, builder, partitions=4)
        lance.write_dataset(_binary_table(b[1000:], 1000), path, mode="append")
        (
            lance_ops.dataset(str(path)) if extender == "ours" else lance.dataset(path)
        ).optimize.optimize_indices()
        assert lance.dataset(path).stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
        for ds in (lance.dataset(path), lance_ops.dataset(str(path))):
            got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": b[1300], "k": 1, "nprobes": 4})
            assert got["_distance"].to_pylist() == [0.0] and got["id"].to_pylist() == [1300]


def test_kmodes_centroids_are_majority_bits() -> None:
    from lance_ops.index.build_vector import kmodes

    b = _binary(500, seed=9)
    centroids, loss = kmodes(b, 5, 20, np.random.default_rng(0))
    assert centroids.dtype == np.uint8 and centroids.shape == (5, BYTES)
    distances = np.stack([_hamming(b, c) for c in centroids], axis=1)
    assign = distances.argmin(1)
    # the loss is of the last assignment, before its update: never below the final centroids' one
    assert loss >= float(distances.min(1).sum())
    for c in range(5):  # after the last update each centroid is its cluster's majority (or close)
        bits = np.unpackbits(b[assign == c], axis=1, bitorder="little")
        majority = np.packbits(bits.sum(0) * 2 > len(bits), bitorder="little")
        assert np.unpackbits(majority ^ centroids[c]).sum() <= 8


@pytest.mark.parametrize(
    ("kind", "metric", "binary"),
    [("IVF_PQ", "hamming", True), ("IVF_FLAT", "l2", True), ("IVF_FLAT", "hamming", False)],
)
def test_hamming_bad_input_commits_nothing(tmp_path: Path, kind: str, metric: str, binary: bool) -> None:
    from lance_ops.errors import IndexColumnTypeError

    table = _binary_table(_binary(300)) if binary else _table(_data(300))
    lance.write_dataset(table, tmp_path)
    params = {"num_sub_vectors": 4} if kind == "IVF_PQ" else {}
    with pytest.raises(IndexColumnTypeError, match="'vec'"):
        lance_ops.dataset(str(tmp_path)).create_index("vec", kind, metric=metric, num_partitions=2, **params)
    assert lance.dataset(tmp_path).version == 1 and lance.dataset(tmp_path).describe_indices() == []


def test_nearest_on_binary_vectors_is_hamming_only(tmp_path: Path) -> None:
    b = _binary(50)
    lance.write_dataset(_binary_table(b), tmp_path)
    ds = lance_ops.dataset(str(tmp_path))
    got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": b[7], "k": 3})  # hamming by default
    assert got["id"].to_pylist()[0] == 7 and got["_distance"].to_pylist()[0] == 0.0
    with pytest.raises(InvalidArgumentError, match="hamming"):
        ds.to_table(nearest={"column": "vec", "q": b[7], "k": 3, "metric": "l2"})


# ---------------------------------------------------------------- dict projections in nearest scans


@pytest.mark.parametrize("indexed", [True, False])
def test_nearest_with_dict_projection_as_pylance(tmp_path: Path, indexed: bool) -> None:
    x = _data(1500)
    table = _table(x).append_column("tags", pa.array([[1.5, 2.5]] * 1500, pa.list_(pa.float32())))
    lance.write_dataset(table, tmp_path)
    if indexed:
        lance_ops.dataset(str(tmp_path)).create_index(
            "vec", "IVF_PQ", num_partitions=4, num_sub_vectors=8, seed=1
        )
    columns = {"v": "vec", "v16": "_cast_list_f16(vec)", "t16": "_cast_list_f16(tags)", "twice": "id * 2"}
    for q in _queries(x, 5):
        nearest = {"column": "vec", "q": q, "k": 5, "nprobes": 4, "refine_factor": 10}
        theirs = lance.dataset(tmp_path).to_table(nearest=nearest, columns=columns, filter="id > 3")
        ours = lance_ops.dataset(str(tmp_path)).to_table(nearest=nearest, columns=columns, filter="id > 3")
        assert ours.schema == theirs.schema
        assert ours.column_names == ["v", "v16", "t16", "twice", "_distance"]
        assert ours.drop(["_distance"]).equals(theirs.drop(["_distance"]))
        np.testing.assert_allclose(ours["_distance"], theirs["_distance"], rtol=1e-4, atol=1e-4)
        original = np.stack(ours["v"].to_numpy(zero_copy_only=False))
        assert (original.astype(np.float16) == np.stack(ours["v16"].to_numpy(zero_copy_only=False))).all()


def test_cast_list_f16_refuses_what_is_not_a_float_list(tmp_path: Path) -> None:
    from lance_ops.errors import PredicateError

    lance.write_dataset(_table(_data(10)), tmp_path)
    with pytest.raises(PredicateError, match="cast_list_f16 only supports FixedSizeList/List"):
        lance_ops.dataset(str(tmp_path)).to_table(columns={"x": "_cast_list_f16(id)"})
