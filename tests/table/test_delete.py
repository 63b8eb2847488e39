"""``LanceDataset.delete``: deletion files as pylance writes them, Delete commits, rebase, bad input."""

from __future__ import annotations

import importlib
import multiprocessing
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pyroaring import BitMap

import lance_ops
from lance_ops import LanceDataset, LanceOperation
from lance_ops.errors import PredicateError, PredicateTypeError, RetryableCommitConflictError, SchemaError
from lance_ops.table.deletion import deletion_file_type, encode_deletion_file, encode_roaring, sorted_unique
from lance_ops.table.manifest import FLAG_DELETION_FILES, DeletionFileType
from lance_ops.table.transaction import Delete, Transaction, Update
from tests.data.golden import DATASETS_DIR
from tests.table.conftest import table

ARROW, BITMAP = DeletionFileType.ARROW_ARRAY, DeletionFileType.BITMAP


def ids_table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"r{i}" for i in ids])})


def deletion_files(uri: str) -> list[str]:
    folder = Path(uri) / "_deletions"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def kinds(ds: LanceDataset) -> dict[int, DeletionFileType | None]:
    return {
        f.id: None if f.deletion_file is None else f.deletion_file.file_type for f in ds.manifest.fragments
    }


# --------------------------------------------------------------------------- the deletion-file rule


@pytest.mark.parametrize(
    ("count", "previous", "expected"),
    [
        (1, None, ARROW),
        (4999, None, ARROW),
        (5000, None, BITMAP),
        (5000, ARROW, ARROW),
        (5001, ARROW, BITMAP),
        (3, BITMAP, BITMAP),
    ],
)
def test_deletion_file_kind_follows_pylance(
    count: int, previous: DeletionFileType | None, expected: str
) -> None:
    assert deletion_file_type(count, previous) is expected


def test_deletion_file_bytes() -> None:
    offsets = np.array([0, 3, 7, 70000], np.uint32)
    reader = pa.ipc.open_file(pa.py_buffer(encode_deletion_file(offsets, ARROW)))
    assert reader.num_record_batches == 1
    assert reader.schema == pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])
    assert reader.get_batch(0).column(0).to_pylist() == offsets.tolist()
    assert list(BitMap.deserialize(encode_deletion_file(offsets, BITMAP))) == offsets.tolist()


def test_bitmaps_are_written_without_run_containers() -> None:
    # pylance writes the no-run form (cookie 12346) even for one long run; pyroaring would not.
    rng = np.random.default_rng(7)
    for offsets in (
        np.arange(6000),
        np.arange(65536),
        np.unique(rng.integers(0, 300_000, 20_000)),
        np.concatenate([np.arange(5000), [70_000, 70_001, 2**32 - 1]]),
    ):
        values = offsets.astype(np.uint32)
        data = encode_roaring(values)
        assert data[:4] == bytes.fromhex("3a300000")
        assert list(BitMap.deserialize(data)) == values.tolist()
    assert len(encode_roaring(np.arange(6000, dtype=np.uint32))) == 8 + 4 + 4 + 8192


@pytest.mark.interop
@pytest.mark.parametrize(
    "predicate", ["id < 6000", "id % 3 = 0 OR (id > 70000 AND id < 70100)", "id >= 100 AND id % 17 <> 0"]
)
def test_bitmap_deletion_files_are_byte_for_byte_pylance_s(
    tmp_path: Path, predicate: str, lance_module
) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    written = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(ids_table(200_000).select(["id"]), uri)
        (lance.dataset if who == "pylance" else lance_ops.dataset)(uri).delete(predicate)
        (name,) = deletion_files(uri)
        assert name.startswith("0-1-") and name.endswith(".bin")
        written[who] = (Path(uri) / "_deletions" / name).read_bytes()
    assert written["ours"] == written["pylance"]


_OFFSETS = hnp.arrays(np.uint32, st.integers(0, 1100), elements=st.integers(0, 2**32 - 1))


@given(st.lists(_OFFSETS, max_size=3), st.booleans())
def test_sorted_unique_is_np_unique_of_the_parts(parts: list[np.ndarray], presort: bool) -> None:
    """The fast paths (one strictly increasing part as it is; sorted parts merged) and the general
    one (any order, repeats) all give ``np.unique`` of the concatenation."""
    if presort:
        parts = [np.unique(p) for p in parts]
    got = sorted_unique(*parts)
    expected = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint32)
    assert got.dtype == np.uint32 and np.array_equal(got, expected)


@pytest.mark.interop
def test_a_second_delete_merges_into_pylance_s_bytes(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """A delete into a fragment that has a deletion vector (the sorted merge of old and new
    offsets) writes the file pylance writes for the same two deletes."""
    lance = lance_module
    written = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(ids_table(200_000).select(["id"]), uri)
        open_ = lance.dataset if who == "pylance" else lance_ops.dataset
        open_(uri).delete("id % 10 = 3")
        open_(uri).delete("id % 7 = 2 OR id < 70000")
        (name,) = [n for n in deletion_files(uri) if n.startswith("0-2-")]
        written[who] = (Path(uri) / "_deletions" / name).read_bytes()
    assert written["ours"] == written["pylance"]
    expected = [i for i in range(70000, 200_000) if i % 10 != 3 and i % 7 != 2]
    assert lance.dataset(str(tmp_path / "ours.lance")).to_table()["id"].to_pylist() == expected


# --------------------------------------------------------------------------- our deletes


def test_delete_writes_files_named_and_typed_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d.lance")
    ds = lance_ops.write_dataset(ids_table(20000), uri, max_rows_per_file=10000)
    assert ds.delete("id < 4000") == 4000
    assert ds.version == 2 and kinds(ds) == {0: ARROW, 1: None}
    (name,) = deletion_files(uri)
    deletion = ds.manifest.fragments[0].deletion_file
    assert deletion is not None and name == f"0-1-{deletion.id}.arrow"
    assert deletion.read_version == 1 and deletion.num_deleted_rows == 4000
    assert ds.manifest.reader_feature_flags & FLAG_DELETION_FILES
    assert ds.manifest.writer_feature_flags & FLAG_DELETION_FILES
    transaction = ds.read_transaction()
    assert transaction is not None and isinstance(transaction.operation, Delete)
    assert transaction.read_version == 1 and transaction.operation.predicate == "id < 4000"
    assert [f.id for f in transaction.operation.updated_fragments] == [0]
    assert transaction.operation.deleted_fragment_ids == ()

    assert ds.delete("id >= 4000 AND id < 5000") == 1000  # merged: 5000 stays an Arrow file
    assert kinds(ds) == {0: ARROW, 1: None}
    assert ds.delete("id = 5000") == 1  # 5001 becomes a bitmap
    assert kinds(ds) == {0: BITMAP, 1: None}
    assert ds.delete("id >= 10000 AND id < 15000") == 5000  # a first delete of 5000 is a bitmap
    assert kinds(ds) == {0: BITMAP, 1: BITMAP}
    assert ds.count_rows() == 20000 - 5001 - 5000
    assert ds.manifest.fragments[0].deletion_file.num_deleted_rows == 5001  # type: ignore[union-attr]
    reopened = lance_ops.dataset(uri)
    assert reopened.version == ds.version == 5
    assert reopened.to_table() == ids_table(20000).filter(
        (pc.field("id") > 5000) & ~((pc.field("id") >= 10000) & (pc.field("id") < 15000))
    )


def test_a_fragment_deleted_whole_is_removed(tmp_path: Path) -> None:
    uri = str(tmp_path / "w.lance")
    ds = lance_ops.write_dataset(ids_table(30), uri, max_rows_per_file=10)
    assert ds.delete("id < 5") == 5
    assert ds.delete("id < 10 OR id >= 25") == 10
    assert [f.fragment_id for f in ds.get_fragments()] == [1, 2]
    transaction = ds.read_transaction()
    assert transaction is not None and isinstance(transaction.operation, Delete)
    assert transaction.operation.deleted_fragment_ids == (0,)
    assert [f.id for f in transaction.operation.updated_fragments] == [2]
    assert ds.to_table().column("id").to_pylist() == list(range(10, 25))
    assert ds.delete("id >= 0") == 15 and ds.count_rows() == 0 and ds.get_fragments() == []
    assert not ds.manifest.reader_feature_flags & FLAG_DELETION_FILES


def test_delete_then_append_and_reads_honour_deletions(tmp_path: Path) -> None:
    uri = str(tmp_path / "a.lance")
    ds = lance_ops.write_dataset(ids_table(100), uri, max_rows_per_file=40)
    assert ds.delete((pc.field("id") < 34) | (pc.field("id") > 90)) == 43
    ds = lance_ops.write_dataset(ids_table(10, 100), uri, mode="append")
    expected = [i for i in range(110) if i >= 100 or 34 <= i <= 90]
    assert ds.to_table().column("id").to_pylist() == expected
    assert ds.count_rows() == len(expected) and ds.count_rows("id < 50") == len(
        [i for i in expected if i < 50]
    )
    assert ds.to_table(filter="id > 95", columns=["s"]).column("s").to_pylist() == [
        f"r{i}" for i in expected if i > 95
    ]
    assert ds.take([0, 1, len(expected) - 1]).column("id").to_pylist() == [34, 35, 109]
    assert ds.to_table(offset=30, limit=3).column("id").to_pylist() == expected[30:33]
    addresses = ds.to_table(with_row_address=True).column("_rowaddr").to_numpy()
    assert ds._take_rows(addresses[:3]).column("id").to_pylist() == expected[:3]
    fragment = ds.get_fragment(0)
    assert fragment is not None and fragment.count_rows() == 40 - 34
    assert fragment.deletion_file() == f"_deletions/{deletion_files(uri)[0]}"


def test_the_count_also_reads_as_pylance_s_dict(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(ids_table(10), str(tmp_path / "c.lance"))
    count = ds.delete("id < 4")
    assert count == 4 and isinstance(count, int) and count["num_deleted_rows"] == 4
    with pytest.raises(KeyError):
        count["rows"]


def test_a_delete_matching_nothing_still_commits(tmp_path: Path) -> None:
    uri = str(tmp_path / "n.lance")
    ds = lance_ops.write_dataset(ids_table(10), uri)
    assert ds.delete("id > 100") == 0
    assert ds.version == 2 and ds.count_rows() == 10 and deletion_files(uri) == []


def test_delete_with_stable_row_ids_keeps_the_ids(tmp_path: Path) -> None:
    uri = str(tmp_path / "s.lance")
    ds = lance_ops.write_dataset(ids_table(50), uri, max_rows_per_file=20, enable_stable_row_ids=True)
    assert ds.delete("id % 2 = 1") == 25
    got = ds.to_table(with_row_id=True)
    assert got.column("_rowid").to_pylist() == got.column("id").to_pylist() == list(range(0, 50, 2))
    assert ds._take_rows([1, 2, 3, 4]).column("id").to_pylist() == [2, 4]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("predicate", "error", "match"),
    [
        ("id <", PredicateError, "cannot parse"),
        ("nope = 1", SchemaError, "nope"),
        ("id + 1", PredicateError, "boolean"),
        (42, PredicateTypeError, "int"),
        (pc.field("nope") == 1, SchemaError, "nope"),
    ],
)
def test_bad_predicates_raise_and_commit_nothing(
    tmp_path: Path, predicate: object, error: type[Exception], match: str
) -> None:
    uri = str(tmp_path / "b.lance")
    ds = lance_ops.write_dataset(ids_table(10), uri)
    with pytest.raises(error, match=match):
        ds.delete(predicate)  # type: ignore[arg-type]
    assert isinstance(error("x"), lance_ops.errors.LanceOpsError)
    assert lance_ops.dataset(uri).version == 1 and ds.version == 1
    assert deletion_files(uri) == []
    assert len(list((Path(uri) / "_transactions").iterdir())) == 1


# --------------------------------------------------------------------------- concurrency


def test_concurrent_deletes_of_one_fragment_are_merged(tmp_path: Path) -> None:
    uri = str(tmp_path / "c.lance")
    lance_ops.write_dataset(ids_table(100), uri, max_rows_per_file=60)
    first, second = lance_ops.dataset(uri, version=1), lance_ops.dataset(uri, version=1)
    assert first.delete("id < 10") == 10
    assert second.delete("id >= 50 AND id < 70") == 20  # fragment 0 shared, fragment 1 only ours
    latest = lance_ops.dataset(uri)
    assert latest.version == 3
    assert latest.to_table().column("id").to_pylist() == [
        i for i in range(100) if not (i < 10 or 50 <= i < 70)
    ]
    transaction = latest.read_transaction()
    assert transaction is not None and isinstance(transaction.operation, Delete)
    merged = {f.id: f.deletion_file for f in transaction.operation.updated_fragments}
    assert merged == {f.id: f.deletion_file for f in latest.manifest.fragments}
    assert merged[0] is not None and merged[0].num_deleted_rows == 20
    txn_file = Path(uri) / "_transactions" / transaction.file_name
    assert Transaction.deserialize(txn_file.read_bytes()) == transaction
    # The superseded file of the rebased delete is gone; the merged one replaced it.
    referenced = {f.deletion_file.file_name(f.id) for f in latest.manifest.fragments if f.deletion_file}
    assert set(deletion_files(uri)) == referenced | {
        f.deletion_file.file_name(f.id)  # type: ignore[union-attr]
        for f in lance_ops.dataset(uri, version=2).manifest.fragments
        if f.deletion_file
    }


def test_a_concurrent_delete_of_a_fragment_removed_meanwhile(tmp_path: Path) -> None:
    uri = str(tmp_path / "r.lance")
    lance_ops.write_dataset(ids_table(40), uri, max_rows_per_file=20)
    stale = lance_ops.dataset(uri)
    lance_ops.dataset(uri).delete("id < 20")
    assert stale.delete("id < 5 OR id = 30") == 1  # ids < 5 were gone already (pylance counts 1 too)
    assert lance_ops.dataset(uri).to_table().column("id").to_pylist() == [i for i in range(20, 40) if i != 30]


def test_a_delete_racing_an_update_of_its_fragment_is_retryable(tmp_path: Path) -> None:
    uri = str(tmp_path / "u.lance")
    ds = lance_ops.write_dataset(ids_table(20), uri, max_rows_per_file=10)
    fragment = ds.get_fragment(0)
    assert fragment is not None
    by_hand = LanceOperation.Delete([fragment.delete("id < 3")], [], "id < 3")  # type: ignore[list-item]
    stale = lance_ops.dataset(uri)
    LanceDataset.commit(uri, Update(removed_fragment_ids=(0,)), read_version=1)
    with pytest.raises(RetryableCommitConflictError):
        LanceDataset.commit(uri, by_hand, read_version=1)
    assert lance_ops.dataset(uri).version == 2 and ds.version == 1
    # The high-level delete runs again on the latest version instead, as pylance's does.
    assert stale.delete("id < 3 OR id = 15") == 1
    assert stale.version == 3 and stale.to_table().column("id").to_pylist() == [
        *range(10, 15),
        *range(16, 20),
    ]
    # Left: the hand-built delete's file and the committed one; the abandoned attempt's are gone.
    committed = stale.manifest.fragments[0].deletion_file
    assert committed is not None and committed.read_version == 2
    hand_built = by_hand.updated_fragments[0].deletion_file
    assert hand_built is not None
    assert set(deletion_files(uri)) == {hand_built.file_name(0), committed.file_name(1)}


@pytest.mark.interop
@pytest.mark.parametrize("meanwhile", ["add_column", "cast", "compact"])
def test_a_stale_delete_runs_again_after_a_retryable_conflict_as_pylance(
    tmp_path: Path,
    meanwhile: str,
    lance_module,  # type: ignore[no-untyped-def]
) -> None:
    lance = lance_module
    outcome = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(ids_table(40).select(["id"]), uri, max_rows_per_file=20)
        module = lance if who == "pylance" else lance_ops
        stale, fresh = module.dataset(uri), module.dataset(uri)
        if meanwhile == "add_column":
            fresh.add_columns({"twice": "id * 2"})
        elif meanwhile == "cast":
            fresh.alter_columns({"path": "id", "data_type": pa.int32()})
        else:
            fresh.optimize.compact_files(target_rows_per_fragment=100)
        count = stale.delete("id < 5")
        latest = lance.dataset(uri)
        outcome[who] = (
            count["num_deleted_rows"] if isinstance(count, dict) else count,
            latest.version,
            latest.schema.names,
            latest.to_table().column("id").to_pylist(),
        )
    assert outcome["ours"] == outcome["pylance"]
    assert outcome["ours"][0] == 5


def test_a_delete_racing_an_append_both_land(tmp_path: Path) -> None:
    uri = str(tmp_path / "p.lance")
    lance_ops.write_dataset(ids_table(20), uri)
    stale = lance_ops.dataset(uri)
    lance_ops.write_dataset(ids_table(5, 20), uri, mode="append")
    assert stale.delete("id < 3 OR id >= 20") == 3  # rows appended meanwhile are not seen
    assert lance_ops.dataset(uri).to_table().column("id").to_pylist() == list(range(3, 25))


@pytest.mark.interop
@pytest.mark.parametrize("first", ["pylance", "ours"])
@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("id < 10", "id >= 5 AND id < 20"),  # rows shared: counted once
        ("id < 10", "id >= 60 AND id < 70"),  # other fragment
        ("id < 50", "id < 10"),  # fragment removed meanwhile: nothing left to delete
        ("id < 10", "id >= 10 AND id < 50"),  # together they empty the fragment
    ],
)
def test_a_stale_delete_counts_and_records_as_pylance(
    tmp_path: Path,
    first: str,
    earlier: str,
    later: str,
    lance_module,  # type: ignore[no-untyped-def]
) -> None:
    lance = lance_module
    outcome = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(ids_table(100).select(["id"]), uri, max_rows_per_file=50)
        opener = lance.dataset if who == "pylance" else lance_ops.dataset
        stale = opener(uri, version=1)
        (lance.dataset if first == "pylance" else lance_ops.dataset)(uri).delete(earlier)
        count = stale.delete(later)
        latest = lance.dataset(uri)
        recorded = latest.read_transaction(latest.version)
        outcome[who] = (
            count["num_deleted_rows"] if isinstance(count, dict) else count,
            latest.version,
            recorded.read_version,
            sorted(latest.to_table().column("id").to_pylist()),
        )
        if who == "ours":
            # The handle holds the transaction the version records (the rebased one), not the submitted one.
            assert stale.read_transaction() == lance_ops.dataset(uri).read_transaction()
            assert stale.read_transaction().read_version == 2  # type: ignore[union-attr]
            txn = Path(uri) / "_transactions" / stale.read_transaction().file_name  # type: ignore[union-attr]
            assert (
                txn.name.startswith("2-")
                and Transaction.deserialize(txn.read_bytes()) == stale.read_transaction()
            )
    assert outcome["ours"] == outcome["pylance"]


@pytest.mark.interop
def test_commit_returns_the_dataset_with_the_recorded_transaction(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    uri = str(tmp_path / "t.lance")
    lance_ops.write_dataset(ids_table(40), uri, max_rows_per_file=20)
    fragment = lance_ops.dataset(uri).get_fragment(1)
    assert fragment is not None
    updated = fragment.delete("id >= 30")
    lance.write_dataset(ids_table(5, 100), uri, mode="append")
    committed = LanceDataset.commit(uri, LanceOperation.Delete([updated], [], "id >= 30"), read_version=1)
    # pylance records a Delete committed over newer versions as read on the latest of them ...
    assert lance.dataset(uri).read_transaction(3).read_version == 2
    assert committed.read_transaction() == lance_ops.dataset(uri).read_transaction()
    assert committed.read_transaction().read_version == 2  # type: ignore[union-attr]
    # ... and an Append as submitted.
    appended = LanceDataset.commit(
        uri, LanceOperation.Append([lance_ops.LanceFragment.create(uri, ids_table(3, 200))]), read_version=1
    )
    assert appended.read_transaction().read_version == 1  # type: ignore[union-attr]
    assert lance.dataset(uri).read_transaction(4).read_version == 1
    assert lance.dataset(uri).count_rows() == 40 - 10 + 5 + 3


def _worker(args: tuple[str, str, int]) -> int:
    uri, kind, n = args
    if kind == "append":
        lance_ops.write_dataset(ids_table(10, 1000 + 10 * n), uri, mode="append")
        return 0
    return lance_ops.dataset(uri).delete(f"id < 400 AND id % 8 = {n}")


def test_concurrent_processes_deleting_and_appending(tmp_path: Path) -> None:
    uri = str(tmp_path / "m.lance")
    lance_ops.write_dataset(ids_table(400), uri, max_rows_per_file=100)
    jobs = [(uri, "delete", n) for n in range(4)] + [(uri, "append", n) for n in range(3)]
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        deleted = pool.map(_worker, jobs, chunksize=1)
        pool.close()  # workers end on their own (the pool's exit would signal them)
        pool.join()
    assert deleted[:4] == [50, 50, 50, 50]
    latest = lance_ops.dataset(uri)
    assert latest.version == 1 + len(jobs)
    survivors = sorted(latest.to_table().column("id").to_pylist())
    assert [i for i in survivors if i < 400] == [i for i in range(400) if i % 8 >= 4]
    assert len([i for i in survivors if i >= 1000]) == 30


def _mixed_worker(args: tuple[str, str, str, int]) -> int:
    uri, who, kind, n = args
    module = importlib.import_module("lance" if who == "pylance" else "lance_ops")
    if kind == "append":
        module.write_dataset(ids_table(10, 1000 + 10 * n).select(["id"]), uri, mode="append")
        return 0
    count = module.dataset(uri).delete(f"id < 400 AND id % 8 = {n}")
    return count["num_deleted_rows"] if isinstance(count, dict) else count


@pytest.mark.interop
def test_pylance_and_our_processes_deleting_and_appending_at_once(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    # Every fragment is hit by every delete: ours rebase (vectors unioned), pylance's retry.
    uri = str(tmp_path / "mixed.lance")
    lance_ops.write_dataset(ids_table(400).select(["id"]), uri, max_rows_per_file=100)
    deletes = [(uri, "pylance" if n % 2 else "ours", "delete", n) for n in range(4)]
    appends = [(uri, who, "append", n) for n, who in enumerate(["pylance", "ours"])]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        counts = pool.map(_mixed_worker, deletes + appends, chunksize=1)
        pool.close()  # workers end on their own (the pool's exit would signal them)
        pool.join()
    assert counts[:4] == [50, 50, 50, 50]  # no delete lost, none counted twice
    survivors = sorted(lance_module.dataset(uri).to_table().column("id").to_pylist())
    assert [i for i in survivors if i < 400] == [i for i in range(400) if i % 8 >= 4]
    assert len([i for i in survivors if i >= 1000]) == 20
    assert sorted(lance_ops.dataset(uri).to_table().column("id").to_pylist()) == survivors
    assert lance_ops.dataset(uri).version == 1 + len(deletes) + len(appends)


# --------------------------------------------------------------------------- pylance interop


@pytest.mark.interop
def test_pylance_reads_our_deletes_and_continues(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    uri = str(tmp_path / "i.lance")
    ds = lance_ops.write_dataset(ids_table(12000), uri, max_rows_per_file=6000)
    ds.delete("id < 10")  # arrow
    ds.delete("id >= 6000 AND id < 11500")  # bitmap
    ds.delete("id < 6000 AND id % 2 = 1")  # merged past 5000: bitmap
    ds.delete("id >= 11500")  # fragment 1 removed
    for version in range(1, ds.version + 1):
        ours = lance_ops.dataset(uri, version=version).to_table()
        theirs = lance.dataset(uri, version=version).to_table()
        assert theirs == ours, version
        assert lance.dataset(uri, version=version).count_rows() == ours.num_rows
    theirs = lance.dataset(uri)
    theirs.delete("id < 100")
    lance.write_dataset(ids_table(5, 50000), uri, mode="append")
    expected = [i for i in range(100, 6000) if i % 2 == 0] + list(range(50000, 50005))
    assert lance_ops.dataset(uri).to_table().column("id").to_pylist() == expected
    assert lance.dataset(uri).to_table().column("id").to_pylist() == expected
    assert lance_ops.dataset(uri).delete("id >= 50003") == 2
    assert lance.dataset(uri).count_rows() == len(expected) - 2


@pytest.mark.interop
@pytest.mark.parametrize("name", ["deletes", "bitmap_deletes"])
def test_we_continue_pylance_datasets_with_deletions(tmp_path: Path, name: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    uri = str(tmp_path / f"{name}.lance")
    shutil.copytree(DATASETS_DIR / f"{name}.lance", uri)
    before = lance.dataset(uri).to_table()
    ds = lance_ops.dataset(uri)
    assert ds.to_table() == before
    id_column = before.column("id")
    cut = int(pc.min(id_column).as_py()) + 50
    expected = before.filter(pc.field("id") >= cut)
    assert ds.delete(f"id < {cut}") == before.num_rows - expected.num_rows
    assert lance.dataset(uri).to_table() == expected == ds.to_table()
    lance.dataset(uri).delete(f"id < {cut + 7}")
    again = lance_ops.dataset(uri)
    assert again.to_table() == expected.filter(pc.field("id") >= cut + 7)
    lance_ops.write_dataset(before.slice(0, 3), uri, mode="append")
    assert lance.dataset(uri).count_rows() == again.count_rows() + 3


@pytest.mark.interop
def test_pylance_stable_row_ids_with_deletions(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    uri = str(tmp_path / "st.lance")
    lance.write_dataset(table(60), uri, max_rows_per_file=25, enable_stable_row_ids=True)
    lance.dataset(uri).delete("id < 5")
    ds = lance_ops.dataset(uri)
    assert ds.delete("id >= 20 AND id < 30") == 10
    theirs = lance.dataset(uri).to_table(with_row_id=True)
    ours = ds.to_table(with_row_id=True)
    assert ours == theirs
    assert ours.column("_rowid").to_pylist() == [i for i in range(60) if i >= 5 and not 20 <= i < 30]
    lance.dataset(uri).delete("id = 40")
    assert lance_ops.dataset(uri)._take_rows([40, 41]).column("id").to_pylist() == [41]


@pytest.mark.interop
def test_pylance_rebases_over_our_delete(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    uri = str(tmp_path / "pr.lance")
    lance_ops.write_dataset(ids_table(50), uri)
    stale = lance.dataset(uri)
    lance_ops.dataset(uri).delete("id < 10")
    stale.delete("id >= 40")
    assert lance_ops.dataset(uri).to_table().column("id").to_pylist() == list(range(10, 40))
    ours = lance_ops.dataset(uri, version=2)
    lance.dataset(uri).delete("id = 20")
    assert ours.delete("id = 30") == 1  # rebased over two newer pylance deletes
    expected = [i for i in range(10, 40) if i not in (20, 30)]
    assert lance.dataset(uri).to_table().column("id").to_pylist() == expected


def test_commit_of_a_hand_built_delete(tmp_path: Path) -> None:
    uri = str(tmp_path / "h.lance")
    ds = lance_ops.write_dataset(ids_table(30), uri, max_rows_per_file=10)
    committed = LanceDataset.commit(uri, LanceOperation.Delete([], [1], "by hand"), read_version=1)
    assert committed.to_table().column("id").to_pylist() == [*range(10), *range(20, 30)]
    assert ds.version == 1


@pytest.mark.interop
@pytest.mark.parametrize("stable", [False, True])
def test_filters_and_deletes_on_row_ids_and_addresses_as_pylance(
    tmp_path: Path,
    stable: bool,
    lance_module,  # type: ignore[no-untyped-def]
) -> None:
    lance = lance_module
    outcome = {}
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(
            ids_table(30).select(["id"]), uri, max_rows_per_file=10, enable_stable_row_ids=stable
        )
        lance.dataset(uri).delete("id % 4 = 0")
        if stable:  # row ids no longer equal addresses
            lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=15)
        ds = (lance.dataset if who == "pylance" else lance_ops.dataset)(uri)
        filters = ["_rowid >= 5 AND _rowid < 12", "_rowaddr > 4294967296", "_rowid = 3 OR id = 29"]
        seen = [(ds.to_table(filter=f).column("id").to_pylist(), ds.count_rows(f)) for f in filters]
        count = ds.delete("_rowid >= 10 AND _rowid < 14")
        count = count["num_deleted_rows"] if isinstance(count, dict) else count
        outcome[who] = (seen, count, sorted(lance.dataset(uri).to_table().column("id").to_pylist()))
    assert outcome["ours"] == outcome["pylance"]
    assert outcome["ours"][1] == (3 if stable else 0)
    ours = lance_ops.dataset(str(tmp_path / "ours.lance"))
    assert ours.to_table(filter=pc.field("_rowid") < 7).column("id").to_pylist() == [1, 2, 3, 5, 6]
    assert "_rowid" not in ours.schema.names
