"""L20: clustering compaction (sort / z-order), purge, the clustering metric, config keys, bad input."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import ClusterKeyError, InvalidOptionError
from lance_ops.ops import clustering
from lance_ops.optimize import CompactionOptions
from lance_ops.query.predicate import parse_predicate


def arrival(n: int, seed: int = 0) -> pa.Table:
    """Rows in arrival order: ``id`` ascending, ``day`` and ``x`` random, a string and a list."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "day": pa.array(rng.integers(0, 365, n), pa.int32()),
            "x": pa.array(rng.normal(size=n)),
            "s": pa.array([f"k{v:05d}" for v in rng.integers(0, 10_000, n)]),
            "ts": pa.array(rng.integers(0, 10**12, n), pa.timestamp("us")),
            "tags": pa.array([[int(v)] for v in rng.integers(0, 5, n)], pa.list_(pa.int64())),
        }
    )


def build(uri: str, n: int, files: int, stable: bool, data: pa.Table | None = None) -> lance_ops.LanceDataset:
    """``data`` (default: ``arrival(n)``) written as ``files`` fragments, one append each."""
    data = arrival(n) if data is None else data
    step = -(-n // files)
    for i in range(files):
        lance_ops.write_dataset(
            data.slice(i * step, step), uri, mode="create" if i == 0 else "append",
            enable_stable_row_ids=stable, max_rows_per_file=step,
        )  # fmt: skip
    return lance_ops.dataset(uri)


def key_ranges(uri: str, lance_module, column: str) -> list[tuple[object, object]]:  # type: ignore[no-untyped-def]
    out = []
    for fragment in lance_module.dataset(uri).get_fragments():
        found = pc.min_max(fragment.to_table(columns=[column])[column]).as_py()
        out.append((found["min"], found["max"]))
    return out


def fragments_read(ds: lance_ops.LanceDataset, predicate: str) -> int:
    """Fragments whose statistics leave any row for ``predicate`` (the ones a scan reads)."""
    parsed = parse_predicate(predicate, ds.schema)
    count = 0
    for fragment in ds.handle.files.fragments():
        offsets = np.arange(fragment.physical_rows, dtype=np.int64)
        count += len(fragment._prune(parsed, offsets)) > 0
    return count


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("memory", [None, 4096])
def test_sort_keeps_rows_and_ids_and_makes_ranges_disjoint(tmp_path, lance_module, stable, memory) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 4000, 8, stable)
    ds.delete("id % 11 = 0")
    before = lance_module.dataset(uri).to_table(with_row_id=True)
    old = lance_ops.dataset(uri)
    options = CompactionOptions(target_rows_per_fragment=500, cluster_by=("s",), cluster_memory_bytes=memory)
    outcome = ds.optimize.compact_files_with_outcome(options)
    assert outcome is not None
    after = lance_module.dataset(uri).to_table(with_row_id=True)
    assert after.num_rows == before.num_rows == 4000 - len(range(0, 4000, 11))
    assert after["s"].to_pylist() == sorted(before["s"].to_pylist())
    data = [c for c in before.column_names if c != "_rowid"]
    assert after.select(data).sort_by("id").equals(before.select(data).sort_by("id"))
    if stable:  # every row keeps its id
        assert after.sort_by("id")["_rowid"].equals(before.sort_by("id")["_rowid"])
    else:  # the address map sends every old row to where it went
        old_addrs, new_addrs = outcome.row_address_map
        assert old._take_rows(old_addrs, data).equals(ds._take_rows(new_addrs, data))
    ranges = key_ranges(uri, lance_module, "s")
    assert len(ranges) == 7
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))
    # a second run: already clustered, nothing to do
    assert ds.optimize.compact_files(target_rows_per_fragment=500, cluster_by=["s"]).fragments_added == 0


def test_spill_uses_several_buckets(tmp_path, lance_module, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 6000, 6, stable=True)
    written = []
    real = clustering.SpillFile

    def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        written.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(clustering, "SpillFile", counting)
    data_bytes = sum(d.file_size_bytes for f in ds.manifest.fragments for d in f.files)
    ds.optimize.compact_files(
        target_rows_per_fragment=1000, cluster_by=["x"], cluster_memory_bytes=data_bytes // 3 + 1
    )
    # the budget bounds decoded rows (a quarter of it per range), not file bytes: 3 ranges at least
    assert 3 <= len(written) <= clustering.MAX_SPILL_BUCKETS
    assert all(not os.path.exists(p) for p in written)  # the spill directory is gone
    got = lance_module.dataset(uri).to_table()
    assert got["x"].to_pylist() == sorted(arrival(6000)["x"].to_pylist())


def test_zorder_improves_both_keys_and_pruning(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 8000, 16, stable=False)  # arrival order, 16 fragments of 500 rows
    depth = {k: ds.stats.clustering(k)["average_overlap_depth"] for k in ("day", "ts")}
    predicate = "day < 40 AND ts < timestamp '1970-01-02 00:00:00'"
    wide = fragments_read(ds, predicate)
    ds.optimize.compact_files(target_rows_per_fragment=500, cluster_by=["day", "ts"], cluster_mode="zorder")
    assert len(ds.get_fragments()) == 16
    for key in ("day", "ts"):
        assert ds.stats.clustering(key)["average_overlap_depth"] < 0.75 * depth[key], key
    assert fragments_read(ds, predicate) < wide / 2
    assert lance_module.dataset(uri).to_table().sort_by("id").equals(arrival(8000))


def test_sort_prunes_a_selective_filter(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 10_000, 10, stable=False)
    assert fragments_read(ds, "day = 7") == 10
    assert ds.stats.clustering("day")["average_overlap_depth"] == 10.0
    ds.optimize.compact_files(target_rows_per_fragment=1000, cluster_by=["day"])
    assert fragments_read(ds, "day = 7") <= 2
    assert (
        ds.to_table(filter="day = 7").num_rows
        == lance_module.dataset(uri).to_table(filter="day = 7").num_rows
    )


def test_config_keys_apply_to_every_compaction(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 2000, 4, stable=False)
    ds.update_config({"lance-ops.cluster-by": "day, id", "lance-ops.cluster-mode": "sort"})
    ds.optimize.compact_files(target_rows_per_fragment=500)
    got = lance_module.dataset(uri).to_table()
    assert got.equals(arrival(2000).sort_by([("day", "ascending"), ("id", "ascending")]))
    lance_ops.write_dataset(arrival(100), uri, mode="append")  # new rows out of order
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=500)
    days = lance_module.dataset(uri).to_table()["day"].to_numpy()
    assert np.all(np.diff(days) >= 0)
    assert ds.optimize.compact_files(target_rows_per_fragment=500).fragments_added == 0


def test_config_naming_dropped_column_commits_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 1000, 4, stable=False)
    ds.update_config({"lance-ops.cluster-by": "day"})
    ds.drop_columns(["day"])
    version = ds.version
    with pytest.raises(ClusterKeyError, match="'day'"):
        ds.optimize.compact_files(target_rows_per_fragment=500)
    assert lance_ops.dataset(uri).version == version


@pytest.mark.parametrize(
    ("keys", "mode", "error", "match"),
    [
        (["nope"], "sort", ClusterKeyError, "'nope'"),
        (["tags"], "sort", ClusterKeyError, "'tags'"),
        (["day"], "hilbert", InvalidOptionError, "hilbert"),
    ],
)
def test_bad_keys_commit_nothing(tmp_path, keys, mode, error, match) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 1000, 4, stable=False)
    version = ds.version
    with pytest.raises(error, match=match):
        ds.optimize.compact_files(target_rows_per_fragment=500, cluster_by=keys, cluster_mode=mode)
    assert lance_ops.dataset(uri).version == version


def test_purge_rewrites_every_deleted_fragment_and_cleanup_removes_old_files(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, 4000, 4, stable=False)
    ds.delete("id = 5 OR id = 3500")  # far below the 10 % threshold
    assert ds.optimize.compact_files(target_rows_per_fragment=900).fragments_added == 0
    metrics = ds.optimize.compact_files(target_rows_per_fragment=900, purge=True)
    assert metrics.fragments_removed == 2 and metrics.fragments_added == 2
    assert all(f.deletion_file is None for f in ds.manifest.fragments)
    assert list(Path(uri).glob("_deletions/*"))  # the old versions' deletion files, until cleanup
    ds.cleanup_old_versions(older_than=datetime.timedelta(0))
    assert not list(Path(uri).glob("_deletions/*"))
    live = {Path(d.path).name for f in ds.manifest.fragments for d in f.files}
    assert {p.name for p in Path(uri, "data").iterdir()} == live
    got = lance_module.dataset(uri).to_table()
    assert got.num_rows == 3998 and 5 not in got["id"].to_pylist()
    assert ds.optimize.compact_files(target_rows_per_fragment=900, purge=True).fragments_added == 0


@pytest.mark.parametrize(
    "values",
    [
        pa.array([3, -1, None, -(2**62), 2**62, 0], pa.int64()),
        pa.array([0.5, -0.0, -2.5, float("inf"), -float("inf"), 1e-300], pa.float64()),
        pa.array(["b", "", "abcdefgh", "abc", "ab"]),
        pa.array([5, 1, 3], pa.date32()),
        pa.array([True, False, None]),
    ],
)
def test_normalized_form_keeps_order(values) -> None:  # type: ignore[no-untyped-def]
    norm = clustering.normalized(values)
    order = pc.sort_indices(values, sort_keys=[("", "ascending", "at_start")]).to_numpy()
    assert np.all(np.diff(norm[order].astype(object)) >= 0)


# ------------------------------------------------------------------------------ indices (L20 follow-up)


def with_vectors(uri: str, n: int, files: int, stable: bool) -> lance_ops.LanceDataset:
    """``build`` plus a 16-dim vector column (pylance-written, so pylance's index trainers take it)."""
    data = arrival(n).drop_columns(["tags"])
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    data = data.append_column("vec", pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 16))
    return build(uri, n, files, stable, data)


@pytest.mark.parametrize("stable", [False, True])
def test_clustering_keeps_pylance_btree_and_ivf_pq_right(tmp_path, lance_module, stable) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = with_vectors(uri, 3000, 6, stable)
    ds.delete("id % 17 = 0")
    theirs = lance_module.dataset(uri)
    theirs.create_scalar_index("id", "BTREE")
    theirs.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=4)
    ds = lance_ops.dataset(uri)
    outcome = ds.optimize.compact_files_with_outcome(
        CompactionOptions(target_rows_per_fragment=500, cluster_by=("day",), cluster_memory_bytes=20_000)
    )
    assert outcome is not None
    assert set(outcome.indices.remapped) | set(outcome.indices.moved) == {"id_idx", "vec_idx"}
    assert not outcome.indices.deferred
    theirs = lance_module.dataset(uri)
    # both indices cover every row of the new fragments (nothing is left to a flat scan)
    assert {i.name: i.num_rows_indexed for i in theirs.describe_indices()} == {
        "id_idx": theirs.count_rows(),
        "vec_idx": theirs.count_rows(),
    }
    assert theirs.to_table()["day"].to_pylist() == sorted(theirs.to_table()["day"].to_pylist())
    for predicate in ("id >= 1000 AND id < 1300", "id = 2999", "id IN (1, 17, 34, 35)"):
        indexed = theirs.to_table(filter=predicate, columns=["id", "day"])
        plain = theirs.to_table(filter=predicate, columns=["id", "day"], use_scalar_index=False)
        assert indexed.sort_by("id").equals(plain.sort_by("id")), predicate
    assert "ScalarIndexQuery" in theirs.scanner(filter="id = 2999").explain_plan()
    table = theirs.to_table(columns=["id", "vec"])
    for row in range(0, table.num_rows, 290):  # a row's own vector finds that row through the index
        query = np.asarray(table["vec"][row].as_py(), dtype=np.float32)
        found = theirs.to_table(
            nearest={"column": "vec", "q": query, "k": 1, "nprobes": 4, "refine_factor": 50}, columns=["id"]
        )
        assert found["id"].to_pylist() == [table["id"][row].as_py()]
    plan = theirs.scanner(nearest={"column": "vec", "q": query, "k": 1}).explain_plan()
    assert "ANN" in plan


@pytest.mark.parametrize("stable", [False, True])
def test_clustering_remaps_an_inverted_index_that_deleted_rows_leave(tmp_path, lance_module, stable) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    build(uri, 2000, 4, stable=stable).delete("id % 9 = 0")
    lance_module.dataset(uri).create_scalar_index("s", "INVERTED")
    outcome = lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=500, cluster_by=["day"])
    assert outcome.fragments_added == 3
    theirs = lance_module.dataset(uri)
    (index,) = [i for i in theirs.describe_indices() if i.name == "s_idx"]
    assert set(index.segments[0].fragment_ids) == {f.fragment_id for f in theirs.get_fragments()}
    live = theirs.to_table(columns=["id", "s", "day"])
    assert live["day"].to_pylist() == sorted(live["day"].to_pylist())
    deleted = arrival(2000)["s"].to_pylist()[::9]  # ids 0, 9, 18, ...
    gone = sorted(set(deleted) - set(live["s"].to_pylist()))  # words only deleted rows held
    assert len(gone) >= 3
    for word in live["s"].to_pylist()[::97] + gone[:3]:
        expected = sorted(live.filter(pc.equal(live["s"], word))["id"].to_pylist())
        for module in (lance_module, lance_ops):
            found = module.dataset(uri).to_table(full_text_query=word, columns=["id"])["id"].to_pylist()
            assert sorted(found) == expected, (module.__name__, word)


def test_clustering_refuses_what_it_would_leave_stale(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.errors import ClusterIndexError

    uri = str(tmp_path / "d")
    build(uri, 2000, 4, stable=False).delete("id % 9 = 0")
    lance_module.dataset(uri).create_scalar_index("id", "BTREE")
    ds = lance_ops.dataset(uri)
    version = ds.version
    with pytest.raises(ClusterIndexError, match="'id_idx'.*deferred remap") as caught:
        ds.optimize.compact_files(target_rows_per_fragment=500, cluster_by=["day"], defer_index_remap=True)
    assert caught.value.index == "id_idx"
    assert lance_ops.dataset(uri).version == version
    lance_ops.write_dataset(arrival(300, seed=3), uri, mode="append")  # not covered by the index
    ds = lance_ops.dataset(uri)
    version = ds.version
    with pytest.raises(ClusterIndexError, match="'id_idx' covers only some"):
        ds.optimize.compact_files(target_rows_per_fragment=500, cluster_by=["day"])
    assert lance_ops.dataset(uri).version == version
    lance_module.dataset(uri).optimize.optimize_indices()  # the index takes the new fragment in
    lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=500, cluster_by=["day"])
    theirs = lance_module.dataset(uri)
    indexed = theirs.to_table(filter="id < 400", columns=["id", "day"])
    assert indexed.sort_by("id").equals(
        theirs.to_table(filter="id < 400", columns=["id", "day"], use_scalar_index=False).sort_by("id")
    )


# ------------------------------------------------------------------------------------- incremental


def nightly(n: int, lo: int, hi: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {"id": pa.array(rng.integers(0, 2**40, n)), "k": pa.array(rng.integers(lo, hi, n), pa.int32())}
    )


def disjoint(uri: str, lance_module) -> bool:  # type: ignore[no-untyped-def]
    ranges = sorted(key_ranges(uri, lance_module, "k"))
    return all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False))


@pytest.mark.parametrize("stable", [False, True])
def test_incremental_clustering_rewrites_only_the_ranges_new_rows_fall_in(
    tmp_path, lance_module, stable
) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    day1 = nightly(4000, 0, 10_000, seed=1)
    lance_ops.write_dataset(day1, uri, max_rows_per_file=1000, enable_stable_row_ids=stable)
    ds = lance_ops.dataset(uri)
    ds.update_config({"lance-ops.cluster-by": "k", "lance-ops.cluster-incremental": "true"})
    # night 1: nothing is clustered yet (one fragment's range holds everything): all of it is
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    assert len(ds.get_fragments()) == 4 and disjoint(uri, lance_module)
    assert ds.stats.clustering("k")["average_overlap_depth"] <= 1.0
    night1 = {f.id: f.files for f in ds.manifest.fragments}
    before = lance_module.dataset(uri).to_table(with_row_id=stable)
    # day 2: rows in a narrow band of keys, appended as two fragments
    day2 = nightly(200, 6000, 6300, seed=2)  # inside one range (night 1 cut near 2600, 5100, 7600)
    lance_ops.write_dataset(day2, uri, mode="append", max_rows_per_file=100)
    ds = lance_ops.dataset(uri)
    assert ds.stats.clustering("k")["average_overlap_depth"] > 1.0
    metrics = ds.optimize.compact_files(target_rows_per_fragment=1000)
    assert metrics.fragments_removed == 3  # the two new fragments and the one range they fall in
    after = {f.id: f.files for f in ds.manifest.fragments}
    assert sum(1 for i, files in after.items() if night1.get(i) == files) == 3  # left alone
    assert disjoint(uri, lance_module)
    assert ds.stats.clustering("k")["average_overlap_depth"] <= 1.0
    got = lance_module.dataset(uri).to_table(with_row_id=stable)
    assert (
        got.sort_by([("id", "ascending"), ("k", "ascending")])
        .select(["id", "k"])
        .equals(pa.concat_tables([day1, day2]).sort_by([("id", "ascending"), ("k", "ascending")]))
    )
    if stable:  # the rows clustered on night 1 kept their ids
        old = before.sort_by("_rowid")
        assert got.filter(pc.is_in(got["_rowid"], old["_rowid"])).sort_by("_rowid").equals(old)
    # nothing new: nothing to do
    assert lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000).fragments_added == 0
    # day 3: rows everywhere; every range receives some and is rewritten, still disjoint
    lance_ops.write_dataset(nightly(300, 0, 10_000, seed=3), uri, mode="append")
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    assert disjoint(uri, lance_module) and lance_module.dataset(uri).count_rows() == 4500


def test_incremental_clustering_needs_sort(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(nightly(100, 0, 10, seed=1), uri)
    lance_ops.write_dataset(nightly(100, 0, 10, seed=2), uri, mode="append")
    ds = lance_ops.dataset(uri)
    with pytest.raises(InvalidOptionError, match="cluster_incremental"):
        ds.optimize.compact_files(cluster_by=["k", "id"], cluster_mode="zorder", cluster_incremental=True)


# ------------------------------------------------------------------- range partitioning (property)


@given(
    values=st.lists(
        st.one_of(st.none(), st.floats(allow_nan=True, width=64), st.integers(-(2**62), 2**62)), max_size=1025
    ),
    words=st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1025, max_size=1025),
    mode=st.sampled_from(["sort", "zorder"]),
    ranges=st.integers(1, 9),
    seed=st.integers(0, 3),
)
@example(values=[0.0, -0.0, 0.0, -0.0] * 8, words=["a"] * 1025, mode="sort", ranges=4, seed=0)
@example(
    values=[float("nan"), 1.0, None, -float("nan")] * 8, words=["b"] * 1025, mode="sort", ranges=3, seed=1
)
def test_ranges_concatenated_are_the_rows_sorted_as_one_set(values, words, mode, ranges, seed) -> None:  # type: ignore[no-untyped-def]
    """Whatever the sample (hence the split points), sorting each range and concatenating them in
    range order gives the stable sort of the whole set: the routing key never decreases."""
    floats = [None if v is None else float(v) for v in values]
    keys = pa.table({"f": pa.array(floats, pa.float64()), "s": pa.array(words[: len(values)], pa.string())})
    survey = clustering.Survey.of(keys.to_batches(), keys.schema, 0.3, seed)
    layout = clustering.Layout.build(survey, mode, ("f", "s"), ranges)
    whole = clustering.Layout.build(survey, mode, ("f", "s")).order(keys)
    where = layout.range_of(keys)
    pieces = []
    for r in range(layout.ranges):
        rows = np.flatnonzero(where == r)
        pieces.append(rows[layout.order(keys.take(pa.array(rows, pa.int64())))])
    assert np.array_equal(np.concatenate(pieces) if pieces else np.zeros(0, np.int64), whole)


@given(
    columns=st.lists(
        st.lists(st.integers(-(2**63), 2**63 - 1), min_size=40, max_size=40), min_size=1, max_size=9
    ),
)
@example(columns=[[0] * 40, [2**63 - 1] * 20 + [-(2**63)] * 20])
def test_zorder_codes_interleave_the_keys_bits(columns) -> None:  # type: ignore[no-untyped-def]
    """The Morton code holds bit ``b`` of key ``j`` (its ``64 // k`` leading bits over the surveyed
    range, of ``k`` keys) at bit ``b * k + k - 1 - j``: checked bit by bit against that rule."""
    keys = pa.table({f"k{j}": pa.array(c, pa.int64()) for j, c in enumerate(columns)})
    survey = clustering.Survey.of(keys.to_batches(), keys.schema, 0.0)
    layout = clustering.Layout.build(survey, "zorder", tuple(keys.column_names))
    codes = layout.routing(keys)
    width, per = len(columns), 64 // len(columns)
    for row in range(keys.num_rows):
        expected = 0
        for j, (low, shift) in enumerate(zip(layout.lows, layout.shifts, strict=True)):
            value = (columns[j][row] + 2**63) - low  # the normalized form, from the key's lowest
            value = (value >> shift if shift > 0 else value << -shift) & (2**per - 1)
            for b in range(per):
                expected |= ((value >> b) & 1) << (b * width + width - 1 - j)
        assert int(codes[row]) == expected


@pytest.mark.parametrize("deleted", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 1024, 1 << 20])
def test_addresses_in_order_are_the_live_addresses_permuted(tmp_path, deleted, chunk) -> None:  # type: ignore[no-untyped-def]
    """The old addresses of a clustering, computed over its permutation in place (chunk by chunk),
    are the live rows' addresses taken in the permutation's order."""
    from lance_ops.fragment.reader import row_addresses
    from lance_ops.ops.compaction import open_version

    uri = str(tmp_path / "d")
    ds = build(uri, 3000, 4, stable=False)
    if deleted:
        ds.delete("id % 7 = 0 OR id < 10")
    files = open_version(uri, lance_ops.dataset(uri).version, {})
    readers = [files.fragment(f) for f in files.manifest.fragments]
    live = np.concatenate([row_addresses(r.id, r.live_offsets()) for r in readers])
    order = np.random.default_rng(chunk).permutation(len(live)).astype(np.int64)
    got = clustering.addresses_in_order(readers, order.copy(), chunk)
    assert got.dtype == np.uint64 and np.array_equal(got, live[order])
    assert len(clustering.addresses_in_order(readers, np.zeros(0, np.int64), chunk)) == 0
