"""Compaction: planning rules, execution, commit, dry run, partial progress, races, pylance both ways."""

from __future__ import annotations

import json
import os
import pickle
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import CorruptFileError, RetryableCommitConflictError, UnsupportedFeatureError
from lance_ops.ops import compaction
from lance_ops.optimize import (
    Compaction,
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
)
from lance_ops.table.transaction import ReserveFragments, Rewrite
from tests.table.conftest import table


def listing(root: str) -> list[tuple[str, int]]:
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            out.append((str(path.relative_to(root)), path.stat().st_size))
    return sorted(out)


def build(uri: str, sizes: list[int], stable: bool, deletes: list[str] = ()) -> lance_ops.LanceDataset:  # type: ignore[assignment]
    start = 0
    for n, size in enumerate(sizes):
        lance_ops.write_dataset(
            table(size, start), uri, mode="create" if n == 0 else "append", enable_stable_row_ids=stable
        )
        start += size
    ds = lance_ops.dataset(uri)
    for predicate in deletes:
        ds.delete(predicate)
    return ds


def plan_ids(tasks: object) -> list[list[int]]:
    return [[f.id for f in task.fragments] for task in tasks]  # type: ignore[attr-defined]


LAYOUTS = [
    # (fragment sizes, deletes, options)
    ([5, 5, 100, 5, 5, 5], [], {"target_rows_per_fragment": 50}),
    ([5, 100, 5, 100], [], {"target_rows_per_fragment": 50}),
    ([100, 100, 100], ["id < 20"], {"target_rows_per_fragment": 50, "materialize_deletions_threshold": 0.5}),
    ([100, 100, 100], ["id < 20"], {"target_rows_per_fragment": 50}),
    ([10] * 10, [], {"target_rows_per_fragment": 30}),
    ([10] * 10, ["id % 10 = 3"], {"target_rows_per_fragment": 30}),
    ([40, 10, 40, 5], ["id = 1 or id = 2 or id = 93"], {"target_rows_per_fragment": 30}),
    ([40, 40], ["id < 10"], {"target_rows_per_fragment": 30, "materialize_deletions": False}),
    ([3], [], {}),
    ([1, 2, 3], [], {}),
]


@pytest.mark.interop
@pytest.mark.parametrize(("sizes", "deletes", "options"), LAYOUTS)
def test_plan_matches_pylance(tmp_path, lance_module, sizes, deletes, options) -> None:  # type: ignore[no-untyped-def]
    from lance.optimize import Compaction as PylanceCompaction

    uri = str(tmp_path / "d")
    ds = build(uri, sizes, stable=False, deletes=deletes)
    ours = Compaction.plan(ds, CompactionOptions(**options))
    theirs = PylanceCompaction.plan(lance_module.dataset(uri), options)
    assert ours.read_version == theirs.read_version
    assert plan_ids(ours.tasks) == plan_ids(theirs.tasks)


@pytest.mark.interop
def test_defaults_match_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    from lance.optimize import Compaction as PylanceCompaction

    uri = str(tmp_path / "d")
    build(uri, [3, 3], stable=False)
    theirs = json.loads(PylanceCompaction.plan(lance_module.dataset(uri), {}).json())["options"]
    ours = CompactionOptions()
    for name in (
        "target_rows_per_fragment",
        "max_rows_per_group",
        "max_bytes_per_file",
        "materialize_deletions",
        "materialize_deletions_threshold",
        "num_threads",
        "batch_size",
    ):
        assert getattr(ours, name) == theirs[name], name


def test_options_from_manifest_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = {
        "lance.compaction.target_rows_per_fragment": "7",
        "lance.compaction.materialize_deletions": "false",
    }
    resolved = CompactionOptions.resolve(config, target_rows_per_fragment=None, batch_size=5)
    assert (resolved.target_rows_per_fragment, resolved.materialize_deletions, resolved.batch_size) == (
        7,
        False,
        5,
    )
    assert CompactionOptions.resolve(config, target_rows_per_fragment=9).target_rows_per_fragment == 9
    with pytest.raises(TypeError):
        CompactionOptions.resolve({}, bogus=1)
    with pytest.raises(ValueError):
        CompactionOptions(target_rows_per_fragment=0)


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_compaction_matches_pylance(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    sizes, deletes = [10] * 6 + [40, 3, 3], ["id % 10 = 3", "id = 61"]
    build(ours_uri, sizes, stable, deletes)
    build(theirs_uri, sizes, stable, deletes)
    before = lance_module.dataset(ours_uri).to_table(with_row_id=True)
    metrics = lance_ops.dataset(ours_uri).optimize.compact_files(target_rows_per_fragment=30)
    expected = lance_module.dataset(theirs_uri).optimize.compact_files(target_rows_per_fragment=30)
    assert (
        metrics.fragments_removed,
        metrics.fragments_added,
        metrics.files_removed,
        metrics.files_added,
    ) == (
        expected.fragments_removed,
        expected.fragments_added,
        expected.files_removed,
        expected.files_added,
    )
    ours, theirs = lance_ops.dataset(ours_uri), lance_module.dataset(theirs_uri)
    assert [(f.id, f.physical_rows) for f in ours.manifest.fragments] == [
        (f.fragment_id, f.metadata.physical_rows) for f in theirs.get_fragments()
    ]
    assert ours.version == theirs.version
    assert ours.manifest.max_fragment_id == max(f.fragment_id for f in theirs.get_fragments())
    # pylance reads what we compacted: same rows, same order, row ids unchanged with stable ids
    ours_by_pylance = lance_module.dataset(ours_uri).to_table(with_row_id=True, with_row_address=True)
    theirs_by_pylance = theirs.to_table(with_row_id=True, with_row_address=True)
    assert ours_by_pylance.equals(theirs_by_pylance)
    if stable:
        # the row id sequences are byte for byte pylance's (one re-encoded segment per source segment)
        assert [f.row_ids for f in ours.manifest.fragments] == [
            f.row_ids for f in lance_ops.dataset(theirs_uri).manifest.fragments
        ]
        assert (
            ours_by_pylance.select(["id", "_rowid"])
            .sort_by("id")
            .equals(before.select(["id", "_rowid"]).sort_by("id"))
        )
    # and so do we
    assert (
        lance_ops.dataset(ours_uri)
        .to_table(with_row_id=True, with_row_address=True)
        .equals(theirs_by_pylance)
    )
    # transactions: ReserveFragments then Rewrite on the version read
    reserve, rewrite = ours.read_transaction(ours.version - 1), ours.read_transaction()
    assert reserve is not None and isinstance(reserve.operation, ReserveFragments)
    assert rewrite is not None and isinstance(rewrite.operation, Rewrite)
    assert rewrite.read_version == ours.version - 2


@pytest.mark.interop
def test_pylance_compacted_stable_ids_read_identically(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance = lance_module
    lance.write_dataset(table(60), uri, max_rows_per_file=7, enable_stable_row_ids=True)
    ds = lance.dataset(uri)
    ds.delete("id % 4 = 0")
    ds.update({"s": "'x'"}, where="id = 5 or id = 33")
    lance.write_dataset(table(5, 60), uri, mode="append")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=20)
    theirs = lance.dataset(uri).to_table(with_row_id=True, with_row_address=True)
    ours = lance_ops.dataset(uri).to_table(with_row_id=True, with_row_address=True)
    assert ours.equals(theirs)
    ids = theirs["_rowid"].to_pylist()[::3]
    assert (
        lance_ops.dataset(uri)
        ._take_rows(ids, ["id", "s"])
        .equals(lance.dataset(uri)._take_rows(ids, ["id", "s"]))
    )


@pytest.mark.interop
def test_pylance_continues_after_our_compaction(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 8, stable=True, deletes=["id % 6 = 0"])
    ds.optimize.compact_files(target_rows_per_fragment=25)
    before = lance_module.dataset(uri).to_table(with_row_id=True)
    lance = lance_module
    lance.write_dataset(table(10, 80), uri, mode="append")
    pds = lance.dataset(uri)
    pds.delete("id = 13 or id = 85")
    pds.optimize.compact_files(target_rows_per_fragment=1000)
    after = lance.dataset(uri).to_table(with_row_id=True)
    kept = before.filter(pa.compute.invert(pa.compute.is_in(before["id"], pa.array([13], pa.int64()))))
    assert after.slice(0, kept.num_rows).equals(kept)
    assert after["_rowid"].to_pylist()[kept.num_rows :] == [80 + i for i in range(10) if i != 5]
    assert lance_ops.dataset(uri).to_table(with_row_id=True).equals(after)


def test_plan_task_result_serialise(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 6, stable=True, deletes=["id % 5 = 1"])
    the_plan = Compaction.plan(ds, {"target_rows_per_fragment": 24})
    assert the_plan.summary() == [
        {"fragment_ids": [0, 1, 2], "rows": 24, "deleted_rows": 6, "bytes": the_plan.tasks[0].num_bytes},
        {"fragment_ids": [3, 4, 5], "rows": 24, "deleted_rows": 6, "bytes": the_plan.tasks[1].num_bytes},
    ]
    for copy in (pickle.loads(pickle.dumps(the_plan)), CompactionPlan.from_json(the_plan.json())):
        assert copy == the_plan
    task = the_plan.tasks[0]
    assert type(task).from_json(task.json()) == task
    # executors only need the uri
    results = [pickle.loads(pickle.dumps(t)).execute(uri) for t in the_plan.tasks]
    results = [RewriteResult.from_json(pickle.loads(pickle.dumps(r)).json()) for r in results]
    metrics = Compaction.commit(ds, results)
    assert metrics == CompactionMetrics(
        fragments_removed=6, fragments_added=2, files_removed=12, files_added=2
    )
    assert ds.count_rows() == 48
    assert Compaction.commit(ds, []) == CompactionMetrics()


def test_address_map_without_stable_ids(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 5, stable=False, deletes=["id % 3 = 0"])
    old = lance_ops.dataset(uri)
    outcome = ds.optimize.compact_files_with_outcome(CompactionOptions(target_rows_per_fragment=100))
    assert outcome is not None and outcome.row_address_map is not None
    old_addrs, new_addrs = outcome.row_address_map
    assert len(old_addrs) == len(new_addrs) == ds.count_rows()
    assert old._take_rows(old_addrs, ["id"]).equals(ds._take_rows(new_addrs, ["id"]))
    assert ds.to_table(with_row_id=True)["_rowid"].equals(ds.to_table(with_row_address=True)["_rowaddr"])


def test_stable_ids_keep_versions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.table.rowids import decode_versions

    uri = str(tmp_path / "d")
    ds = build(uri, [4, 4, 4], stable=True, deletes=["id = 5"])
    ds.optimize.compact_files(target_rows_per_fragment=100)
    (fragment,) = ds.manifest.fragments
    assert isinstance(fragment.created_at_versions, bytes)
    assert decode_versions(fragment.created_at_versions, 11).tolist() == [1] * 4 + [2] * 3 + [3] * 4
    assert ds.to_table(columns=["id"], with_row_id=True)["_rowid"].to_pylist() == [
        *range(5),
        *range(6, 12),
    ]


def test_dry_run_writes_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 4 + [3], stable=True, deletes=["id < 4"])
    before = listing(uri)
    result = ds.optimize.compact_files(target_rows_per_fragment=16, dry_run=True)
    assert isinstance(result, CompactionPlan)
    assert result.num_tasks() == 2
    assert result.num_deleted_rows == 4
    assert result.num_rows == 39
    assert listing(uri) == before
    assert ds.version == lance_ops.dataset(uri).version


def test_nothing_to_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10], stable=False)
    before = listing(uri)
    assert ds.optimize.compact_files() == CompactionMetrics()
    assert listing(uri) == before


def test_partial_progress(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [5] * 10, stable=True, deletes=["id % 7 = 0"])
    expected = ds.to_table(with_row_id=True)
    real = compaction.execute_task
    calls = []

    def failing(files, task):  # type: ignore[no-untyped-def]
        # every task from the third on fails: with one worker thread, the task after the first
        # failure may otherwise finish (and be committed) while the second result is committed
        calls.append(task.fragment_ids)
        if len(calls) >= 3:
            raise KeyboardInterrupt("killed")
        return real(files, task)

    monkeypatch.setattr(compaction, "execute_task", failing)
    with pytest.raises(KeyboardInterrupt):
        ds.optimize.compact_files(target_rows_per_fragment=8, commit_every=1, num_threads=1)
    after = lance_ops.dataset(uri)
    rewrites = [
        t
        for v in range(2, after.version + 1)
        if isinstance((t := after.read_transaction(v)).operation, Rewrite)
    ]
    assert len(rewrites) == 2
    assert after.to_table(with_row_id=True).sort_by("_rowid").equals(expected.sort_by("_rowid"))
    monkeypatch.setattr(compaction, "execute_task", real)
    rest = after.optimize.compact_files(target_rows_per_fragment=8)
    assert rest.fragments_removed == 10 - sum(
        len(g.old_fragments) for r in rewrites for g in r.operation.groups
    )
    assert after.to_table(with_row_id=True).sort_by("_rowid").equals(expected.sort_by("_rowid"))


@pytest.mark.parametrize("stable", [True, False])
def test_racing_delete_never_resurrects(tmp_path, stable: bool) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 4 + [150], stable=stable, deletes=["id = 1"])
    the_plan = Compaction.plan(ds, {"target_rows_per_fragment": 100})
    assert plan_ids(the_plan.tasks) == [[0, 1, 2, 3]]
    results = [t.execute(uri) for t in the_plan.tasks]
    lance_ops.dataset(uri).delete("id = 15 or id = 60")  # 15 is in a compacted fragment
    lance_ops.dataset(uri).delete("id >= 20 and id < 30")  # removes compacted fragment 2 whole
    lance_ops.dataset(uri).delete("id = 33")
    expected = [i for i in range(190) if i not in (1, 15, 60, 33) and not 20 <= i < 30]
    if stable:
        # the deletes are carried into the rewritten fragment
        Compaction.commit(ds, results)
        (group,) = lance_ops.dataset(uri).read_transaction().operation.groups
        assert group.new_fragments[0].deletion_file is not None
    else:
        with pytest.raises(RetryableCommitConflictError):
            Compaction.commit(ds, results)
    latest = lance_ops.dataset(uri)
    got = latest.to_table(columns=["id"], with_row_id=True).sort_by("id")
    assert got["id"].to_pylist() == expected
    if stable:
        assert got["_rowid"].to_pylist() == expected
    # compacting again (a fresh plan) keeps the deletes
    latest.optimize.compact_files(target_rows_per_fragment=100)
    assert sorted(latest.to_table(columns=["id"])["id"].to_pylist()) == expected


@pytest.mark.interop
def test_carried_delete_read_by_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 4, stable=True)
    results = [t.execute(uri) for t in Compaction.plan(ds, {"target_rows_per_fragment": 100}).tasks]
    lance_module.dataset(uri).delete("id = 5 or id = 17")
    Compaction.commit(ds, results)
    theirs = lance_module.dataset(uri).to_table(with_row_id=True)
    assert theirs["id"].to_pylist() == [i for i in range(40) if i not in (5, 17)]
    assert theirs.equals(lance_ops.dataset(uri).to_table(with_row_id=True))
    lance_module.dataset(uri).delete("id = 6")
    assert lance_ops.dataset(uri).count_rows() == 37


def test_racing_delete_elsewhere_and_append_both_land(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 4 + [150], stable=True)
    the_plan = Compaction.plan(ds, {"target_rows_per_fragment": 100})
    results = [t.execute(uri) for t in the_plan.tasks]
    lance_ops.dataset(uri).delete("id = 60")
    lance_ops.write_dataset(table(5, 190), uri, mode="append")
    Compaction.commit(ds, results)
    got = lance_ops.dataset(uri).to_table(columns=["id"], with_row_id=True).sort_by("id")
    assert got["id"].to_pylist() == [i for i in range(195) if i != 60]
    assert got["_rowid"].to_pylist() == got["id"].to_pylist()


def test_unique_row_ids_survive_many_rounds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    rng = np.random.default_rng(0)
    ds = build(uri, [37, 1, 64, 5, 100], stable=True)
    expected = ds.to_table(columns=["id"], with_row_id=True)
    for round_ in range(3):
        doomed = rng.choice(expected["id"].to_numpy(), size=9, replace=False)
        ds.delete(f"id IN ({', '.join(map(str, doomed))})")
        expected = expected.filter(pa.compute.invert(pa.compute.is_in(expected["id"], pa.array(doomed))))
        ds.optimize.compact_files(target_rows_per_fragment=40 + round_ * 30)
        got = ds.to_table(columns=["id"], with_row_id=True)
        assert got.sort_by("_rowid").equals(expected.sort_by("_rowid"))


def _execute_json(args: tuple[str, str]) -> str:
    """An executor: a task's JSON in, its result's JSON out (another process, as in Spark)."""
    uri, task = args
    return CompactionTask.from_json(task).execute(uri).json()


def test_tasks_execute_in_other_processes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import multiprocessing

    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 8, stable=True, deletes=["id % 4 = 0"])
    expected = ds.to_table(with_row_id=True)
    the_plan = Compaction.plan(ds, {"target_rows_per_fragment": 20})
    assert the_plan.num_tasks() == 2
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        texts = pool.map(_execute_json, [(uri, t.json()) for t in the_plan.tasks], chunksize=1)
        pool.close()  # workers end on their own (the pool's exit would signal them)
        pool.join()
    metrics = Compaction.commit(ds, [RewriteResult.from_json(t) for t in texts])
    assert metrics.fragments_removed == 8
    assert (
        lance_ops.dataset(uri).to_table(with_row_id=True).sort_by("_rowid").equals(expected.sort_by("_rowid"))
    )


@pytest.mark.interop
def test_output_split_by_bytes_keeps_row_ids(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Files are cut by the bytes they flushed (~8 MiB pages): wide rows, so a cap of 200 bytes splits."""
    uri = str(tmp_path / "d")
    wide = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(3000 * 1024, dtype=np.int64)), 1024)
    data = pa.table({"id": pa.array(range(3000), pa.int64()), "v": wide})
    lance_ops.write_dataset(data, uri, max_rows_per_file=1000, enable_stable_row_ids=True)
    ds = lance_ops.dataset(uri)
    ds.delete("id % 3 = 1")
    expected = ds.to_table(with_row_id=True)
    ds.optimize.compact_files(target_rows_per_fragment=5000, max_bytes_per_file=200, batch_size=128)
    assert len(ds.manifest.fragments) > 1
    assert ds.to_table(with_row_id=True).equals(expected)
    assert lance_module.dataset(uri).to_table(with_row_id=True).equals(expected)
    ids = expected["_rowid"].to_pylist()[::2]
    assert ds._take_rows(ids, ["id"]).equals(lance_module.dataset(uri)._take_rows(ids, ["id"]))


@pytest.mark.interop
@pytest.mark.parametrize(
    ("sizes", "deletes"),
    [([1, 1, 1], []), ([1, 2], ["id = 1"]), ([1023, 1025, 1], ["id % 97 = 0"]), ([300, 300], ["id >= 1"])],
)
def test_edge_shapes(tmp_path, lance_module, sizes: list[int], deletes: list[str]) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, sizes, stable=True, deletes=deletes)
    expected = ds.to_table(with_row_id=True)
    ds.optimize.compact_files(target_rows_per_fragment=5000)
    assert len(ds.manifest.fragments) == 1
    assert ds.to_table(with_row_id=True).equals(expected)
    assert lance_module.dataset(uri).to_table(with_row_id=True).equals(expected)


def _pylance_history(lance, uri: str) -> None:  # type: ignore[no-untyped-def]
    """Fragments with every shape of row id sequence: ranges, holes from deletes, an update's moved
    rows (ids out of order), a later compaction's multi-segment fragment, clean neighbours."""
    lance.write_dataset(table(20), uri, enable_stable_row_ids=True, max_rows_per_file=12)
    lance.dataset(uri).update({"s": "'u'"}, where="id < 3 or (id >= 8 and id < 11)")
    lance.write_dataset(table(10, 20), uri, mode="append")
    lance.write_dataset(table(10, 30), uri, mode="append")
    lance.dataset(uri).optimize.compact_files(
        target_rows_per_fragment=1000, materialize_deletions_threshold=0.0
    )
    lance.write_dataset(table(9, 40), uri, mode="append")
    lance.write_dataset(table(3, 49), uri, mode="append")
    lance.dataset(uri).delete("id = 22 or id = 5 or id = 41")


@pytest.mark.interop
@pytest.mark.parametrize(
    "options",
    [
        {"target_rows_per_fragment": 1000},
        {"target_rows_per_fragment": 7, "materialize_deletions_threshold": 0.0},
        {"target_rows_per_fragment": 10},
        {"target_rows_per_fragment": 3, "materialize_deletions": False},
    ],
)
def test_split_and_sequences_match_pylance(tmp_path, lance_module, options) -> None:  # type: ignore[no-untyped-def]
    """pylance 14 writes ``live // target`` balanced fragments per task, and its row id / version
    sequences: segments lose their deleted rows one by one, are re-encoded when cut, and touching
    ranges merge. Ours are byte for byte the same, and the rows keep their ids."""
    import shutil

    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _pylance_history(lance_module, theirs_uri)
    shutil.copytree(theirs_uri, ours_uri)
    before = lance_module.dataset(ours_uri).to_table(with_row_id=True).sort_by("_rowid")
    ours = lance_ops.dataset(ours_uri).optimize.compact_files(**options)
    theirs = lance_module.dataset(theirs_uri).optimize.compact_files(**options)
    assert (ours.fragments_removed, ours.fragments_added, ours.files_removed, ours.files_added) == (
        theirs.fragments_removed,
        theirs.fragments_added,
        theirs.files_removed,
        theirs.files_added,
    )
    mine, other = lance_ops.dataset(ours_uri).manifest, lance_ops.dataset(theirs_uri).manifest
    assert [(f.id, f.physical_rows) for f in mine.fragments] == [
        (f.id, f.physical_rows) for f in other.fragments
    ]
    for name in ("row_ids", "created_at_versions", "last_updated_at_versions"):
        assert [getattr(f, name) for f in mine.fragments] == [getattr(f, name) for f in other.fragments], name
    read = lance_module.dataset(ours_uri).to_table(with_row_id=True, with_row_address=True)
    assert read.equals(lance_module.dataset(theirs_uri).to_table(with_row_id=True, with_row_address=True))
    assert read.drop_columns(["_rowaddr"]).sort_by("_rowid").equals(before)


def test_output_row_counts() -> None:
    assert compaction.output_row_counts(53, 10) == [11, 11, 11, 10, 10]
    assert compaction.output_row_counts(800, 500) == [800]
    assert compaction.output_row_counts(1000, 500) == [500, 500]
    assert compaction.output_row_counts(7, 100) == [7]
    assert compaction.output_row_counts(0, 100) == []


@pytest.mark.interop
def test_compact_files_signature_matches_pylance(lance_module) -> None:  # type: ignore[no-untyped-def]
    """Every argument of pylance's ``compact_files`` and key of its ``CompactionOptions`` exists
    here, keyword-only, defaulting to None (= pylance's default) in ``compact_files``."""
    import inspect

    from lance.dataset import DatasetOptimizer as PylanceOptimizer
    from lance.optimize import CompactionOptions as PylanceOptions

    theirs = inspect.signature(PylanceOptimizer.compact_files).parameters
    ours = inspect.signature(lance_ops.optimize.DatasetOptimizer.compact_files).parameters
    for name in theirs:
        if name == "self":
            continue
        assert name in ours, name
        assert ours[name].kind is inspect.Parameter.KEYWORD_ONLY and ours[name].default is None, name
    option_fields = set(CompactionOptions.__dataclass_fields__)
    assert set(PylanceOptions.__annotations__) <= option_fields


@pytest.mark.interop
@pytest.mark.parametrize(
    "options",
    [
        {"max_source_fragments": 3},
        {"max_source_fragments": 2},
        {"max_source_fragments": 7},
        {"max_source_rows": 30},
        {"max_source_rows": 29},
        {"max_source_rows": 65},
        {"excluded_fragment_ids": [4]},
        {"excluded_fragment_ids": [1, 99, 1]},
        {"excluded_fragment_ids": [2, 3], "max_source_fragments": 5},
    ],
)
def test_source_caps_and_exclusions_plan_as_pylance(tmp_path, lance_module, options) -> None:  # type: ignore[no-untyped-def]
    from lance.optimize import Compaction as PylanceCompaction

    uri = str(tmp_path / "d")
    build(uri, [10] * 4 + [100] + [10] * 6, stable=False, deletes=["id = 3"])
    options = {"target_rows_per_fragment": 30, **options}
    ours = Compaction.plan(lance_ops.dataset(uri), options)
    theirs = PylanceCompaction.plan(lance_module.dataset(uri), options)
    assert plan_ids(ours.tasks) == plan_ids(theirs.tasks)
    # the same plan when compacting
    lance_ops.dataset(uri).optimize.compact_files(**options)
    assert [f.id for f in lance_ops.dataset(uri).manifest.fragments if f.id < 11] == sorted(
        {*range(11)} - {i for task in plan_ids(theirs.tasks) for i in task}
    )


@pytest.mark.interop
def test_max_source_bytes_plans_as_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    from lance.optimize import Compaction as PylanceCompaction

    uri = str(tmp_path / "d")
    lance_module.write_dataset(table(60), uri, max_rows_per_file=10)
    size = lance_module.dataset(uri).get_fragments()[0].metadata.files[0].file_size_bytes
    assert {f.metadata.files[0].file_size_bytes for f in lance_module.dataset(uri).get_fragments()} == {size}
    for cap in (3 * size, 3 * size - 1, 6 * size, 6 * size - 1):
        options = {"target_rows_per_fragment": 30, "max_source_bytes": cap}
        ours = Compaction.plan(lance_ops.dataset(uri), options)
        theirs = PylanceCompaction.plan(lance_module.dataset(uri), options)
        assert plan_ids(ours.tasks) == plan_ids(theirs.tasks), cap


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.2", "stable"])
def test_data_storage_version_of_the_output(tmp_path, lance_module, version: str) -> None:  # type: ignore[no-untyped-def]
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    build(ours_uri, [10] * 3, stable=True)
    build(theirs_uri, [10] * 3, stable=True)
    lance_ops.dataset(ours_uri).optimize.compact_files(data_storage_version=version)
    lance_module.dataset(theirs_uri).optimize.compact_files(data_storage_version=version)
    (mine,) = lance_ops.dataset(ours_uri).manifest.fragments
    (other,) = lance_ops.dataset(theirs_uri).manifest.fragments
    assert (mine.files[0].file_major_version, mine.files[0].file_minor_version) == (
        other.files[0].file_major_version,
        other.files[0].file_minor_version,
    )
    assert (
        lance_module.dataset(ours_uri)
        .to_table(with_row_id=True)
        .equals(lance_module.dataset(theirs_uri).to_table(with_row_id=True))
    )


def _flags_and_versions(uri: str) -> tuple[object, ...]:
    m = lance_ops.dataset(uri).manifest
    return (
        m.reader_feature_flags,
        m.writer_feature_flags,
        m.data_storage_version,
        [[d.file_version for d in f.files] for f in m.fragments],
    )


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_other_file_version_as_pylance(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    """``data_storage_version`` picks the compacted files' version; another V2 version than the
    dataset's sets feature flag 0x100 (kept afterwards) and the dataset's default stays: the same
    steps by us and by pylance give the same flags, file versions and rows, and each library
    reads the other's dataset."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    steps = [
        lambda m, u: m.dataset(u).optimize.compact_files(data_storage_version="2.1"),
        lambda m, u: m.write_dataset(table(5, 100), u, mode="append"),
        lambda m, u: m.dataset(u).delete("id = 101"),
        lambda m, u: m.dataset(u).optimize.compact_files(
            data_storage_version="2.0", target_rows_per_fragment=10
        ),
        lambda m, u: m.dataset(u).optimize.compact_files(data_storage_version="stable"),
    ]
    build(ours, [5] * 3, stable=stable)
    build(theirs, [5] * 3, stable=stable)
    kwargs = {"with_row_id": True, "with_row_address": True}
    for n, step in enumerate(steps):
        step(lance_ops, ours)
        step(lance_module, theirs)
        assert _flags_and_versions(ours) == _flags_and_versions(theirs), n
        expected = lance_module.dataset(theirs).to_table(**kwargs)
        assert lance_module.dataset(ours).to_table(**kwargs).equals(expected), n
        assert lance_ops.dataset(theirs).to_table(**kwargs).equals(expected), n
    assert _flags_and_versions(ours)[0] & 0x100  # type: ignore[operator]


@pytest.mark.interop
def test_pylance_continues_on_mixed_file_versions(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    build(uri, [10] * 3, stable=True, deletes=["id = 4"])
    lance_ops.dataset(uri).optimize.compact_files(data_storage_version="2.1")
    lance_module.write_dataset(table(5, 30), uri, mode="append")
    lance_module.dataset(uri).delete("id = 31")
    ours = lance_ops.dataset(uri)
    assert ours.to_table(with_row_id=True).equals(lance_module.dataset(uri).to_table(with_row_id=True))
    assert ours._take_rows([0, 32], columns=["id"])["id"].to_pylist() == [0, 32]
    ours.delete("id = 0")
    assert lance_module.dataset(uri).count_rows() == 32


@pytest.mark.interop
def test_compaction_modes(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    build(uri, [10] * 3, stable=False, deletes=["id = 4"])
    before = listing(uri)
    with pytest.raises(UnsupportedFeatureError, match="force_binary_copy"):
        lance_ops.dataset(uri).optimize.compact_files(compaction_mode="force_binary_copy")
    assert listing(uri) == before
    metrics = lance_ops.dataset(uri).optimize.compact_files(compaction_mode="try_binary_copy")
    assert metrics == CompactionMetrics(
        fragments_removed=3, fragments_added=1, files_removed=4, files_added=1
    )
    assert lance_module.dataset(uri).to_table()["id"].to_pylist() == [i for i in range(30) if i != 4]


@pytest.mark.interop
@pytest.mark.parametrize(
    "bad",
    [
        {"max_source_fragments": 0},
        {"max_source_rows": 0},
        {"max_source_bytes": 0},
        {"compaction_mode": "copy"},
        {"data_storage_version": "bogus"},
        {"data_storage_version": "0.1"},
    ],
)
def test_bad_options_refused_like_pylance(tmp_path, lance_module, bad) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.errors import InvalidArgumentError

    uri = str(tmp_path / "d")
    build(uri, [10] * 3, stable=False)
    before = listing(uri)
    with pytest.raises((ValueError, OSError)) as theirs:
        lance_module.dataset(uri).optimize.compact_files(**bad)
    with pytest.raises(InvalidArgumentError) as ours:
        lance_ops.dataset(uri).optimize.compact_files(**bad)
    assert isinstance(ours.value, type(theirs.value))  # catchable as pylance's error
    assert listing(uri) == before


_COMPACTOR = """
import json, sys, time
from pathlib import Path
import lance_ops
from lance_ops.errors import RetryableCommitConflictError
from lance_ops.optimize import Compaction
uri, flags = sys.argv[1], Path(sys.argv[2])
ds = lance_ops.dataset(uri)
results = [t.execute(uri) for t in Compaction.plan(ds, {"target_rows_per_fragment": 100}).tasks]
(flags / "executed").touch()
while not (flags / "go").exists():
    time.sleep(0.02)
try:
    metrics = Compaction.commit(ds, results)
    print(json.dumps({"outcome": "committed", "removed": metrics.fragments_removed}))
except RetryableCommitConflictError as exc:
    print(json.dumps({"outcome": "conflict", "error": str(exc)}))
"""

_RACER = """
import sys, time
from pathlib import Path
import pyarrow as pa
import lance
uri, flags, action = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
while not (flags / "executed").exists():
    time.sleep(0.02)
if action == "delete":
    lance.dataset(uri).delete("id = 15 or id = 33 or id = 170")
else:
    ids = pa.array(range(1000, 1007), pa.int64())
    data = pa.table({"id": ids, "s": pa.array([f"r{i}" for i in range(1000, 1007)]),
                     "st": pa.array([{"a": i, "b": float(i)} for i in range(1000, 1007)])})
    lance.write_dataset(data, uri, mode="append")
(flags / "go").touch()
"""


@pytest.mark.interop
@pytest.mark.parametrize(("stable", "action"), [(True, "delete"), (False, "delete"), (True, "append")])
def test_compaction_racing_pylance_in_another_process(
    tmp_path, lance_module, stable: bool, action: str
) -> None:  # type: ignore[no-untyped-def]
    """A compaction (its own process) executes its tasks; pylance (another process) deletes from or
    appends to the dataset; then the compaction commits. A delete on compacted fragments is carried
    (stable row ids) or makes the commit a retryable conflict; an append lands beside it. No deleted
    row ever comes back, and the next compaction finishes the job."""
    import subprocess
    import sys

    uri, flags = str(tmp_path / "d"), tmp_path / "flags"
    flags.mkdir()
    build(uri, [10] * 6 + [150], stable=stable)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    compactor = subprocess.Popen(
        [sys.executable, "-c", _COMPACTOR, uri, str(flags)], stdout=subprocess.PIPE, text=True, env=env
    )
    racer = subprocess.run([sys.executable, "-c", _RACER, uri, str(flags), action], env=env, timeout=120)
    out, _ = compactor.communicate(timeout=120)
    assert racer.returncode == 0 and compactor.returncode == 0
    outcome = json.loads(out.strip().splitlines()[-1])
    gone = {15, 33, 170} if action == "delete" else set()
    added = set(range(1000, 1007)) if action == "append" else set()
    expected = sorted(({*range(210)} - gone) | added)
    if action == "delete" and not stable:
        assert outcome["outcome"] == "conflict"
    else:
        assert outcome == {"outcome": "committed", "removed": 6}
    for reader in (lance_ops.dataset(uri), lance_module.dataset(uri)):
        got = reader.to_table(columns=["id"], with_row_id=True).sort_by("id")
        assert got["id"].to_pylist() == expected
        if stable:  # ids were assigned in id order: 0..209, then the append's 210..216
            assert got["_rowid"].to_pylist() == [i if i < 1000 else 210 + i - 1000 for i in expected]
    lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=100)
    assert sorted(lance_module.dataset(uri).to_table(columns=["id"])["id"].to_pylist()) == expected


_KILLED_AFTER = """
import os, signal, sys
import lance_ops
uri, groups = sys.argv[1], int(sys.argv[2])

def progress(event):
    # the (groups + 1)-th task has finished: the first `groups` are committed, this one is not yet
    if event.done == groups + 1:
        os.kill(os.getpid(), signal.SIGKILL)

lance_ops.dataset(uri).optimize.compact_files(
    target_rows_per_fragment=8, commit_every=1, num_threads=1, progress=progress
)
"""


@pytest.mark.interop
def test_killed_compaction_keeps_the_groups_it_committed(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """A compaction process killed (SIGKILL) after k groups leaves k Rewrite commits and a dataset
    both libraries read unchanged; the next run compacts only the rest."""
    import signal
    import subprocess
    import sys

    uri = str(tmp_path / "d")
    ds = build(uri, [5] * 10, stable=True, deletes=["id % 7 = 0"])
    expected = ds.to_table(with_row_id=True).sort_by("_rowid")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER, uri, "2"], env=env, timeout=120)
    assert done.returncode == -signal.SIGKILL
    after = lance_ops.dataset(uri)
    rewrites = [
        after.read_transaction(v)
        for v in range(ds.version + 1, after.version + 1)
        if isinstance(after.read_transaction(v).operation, Rewrite)
    ]
    assert len(rewrites) == 2
    assert after.to_table(with_row_id=True).sort_by("_rowid").equals(expected)
    assert lance_module.dataset(uri).to_table(with_row_id=True).sort_by("_rowid").equals(expected)
    compacted = {f.id for r in rewrites for g in r.operation.groups for f in g.old_fragments}
    rest = after.optimize.compact_files(target_rows_per_fragment=8)
    assert rest.fragments_removed == 10 - len(compacted)
    assert lance_module.dataset(uri).to_table(with_row_id=True).sort_by("_rowid").equals(expected)


def test_new_options_serialise_and_come_from_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.errors import InvalidArgumentError

    uri = str(tmp_path / "d")
    ds = build(uri, [10] * 8, stable=False)
    options = CompactionOptions(
        target_rows_per_fragment=20,
        excluded_fragment_ids=[3, 3],
        max_source_fragments=4,
        compaction_mode="TRY_BINARY_COPY",
        data_storage_version="stable",
    )
    assert (options.excluded_fragment_ids, options.compaction_mode, options.data_storage_version) == (
        (3, 3),
        "try_binary_copy",
        "2.2",
    )
    the_plan = Compaction.plan(ds, options)
    assert plan_ids(the_plan.tasks) == [[0, 1, 2]]
    for copy in (pickle.loads(pickle.dumps(the_plan)), CompactionPlan.from_json(the_plan.json())):
        assert copy == the_plan
    config = {
        "lance.compaction.excluded_fragment_ids": "1, 5",
        "lance.compaction.max_source_rows": "30",
        "lance.compaction.defer_index_remap": "true",
    }
    resolved = CompactionOptions.resolve(config)
    assert (resolved.excluded_fragment_ids, resolved.max_source_rows, resolved.defer_index_remap) == (
        (1, 5),
        30,
        True,
    )
    with pytest.raises(InvalidArgumentError):
        CompactionOptions(excluded_fragment_ids=[-1])
    with pytest.raises(InvalidArgumentError):
        CompactionOptions(target_rows_per_fragment=0)


def test_bad_commit_arguments_are_typed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.errors import InvalidArgumentError

    uri = str(tmp_path / "d")
    ds = build(uri, [5] * 4, stable=False)
    with pytest.raises(InvalidArgumentError, match="commit_every"):
        ds.optimize.compact_files(commit_every=0)
    with pytest.raises(InvalidArgumentError, match="no compaction results"):
        compaction.commit_compaction(uri, [], ds._commit_options(None))
    first = [t.execute(uri) for t in Compaction.plan(ds, {"target_rows_per_fragment": 10}).tasks]
    ds.delete("id = 19")  # fragment 3: a new version, whose plan compacts it alone
    later = [
        t.execute(uri)
        for t in Compaction.plan(lance_ops.dataset(uri), {"target_rows_per_fragment": 10}).tasks
    ]
    with pytest.raises(InvalidArgumentError, match="different read versions"):
        Compaction.commit(ds, [first[0], later[-1]])
    assert lance_ops.dataset(uri).version == ds.version


def _numbered_batches(count: int, produced: list[int], closed: list[bool], fail_at: int | None = None):  # type: ignore[no-untyped-def]
    try:
        for n in range(count):
            if n == fail_at:
                raise CorruptFileError("<test>", f"batch {n} is damaged")
            produced.append(n)
            yield pa.record_batch({"x": pa.array(np.full(1000, n, np.int64))})  # 8,000 bytes
    finally:
        closed.append(True)


def test_read_ahead_keeps_order_and_a_bounded_lead() -> None:
    produced: list[int] = []
    closed: list[bool] = []
    everything = compaction._read_ahead(_numbered_batches(40, [], []), budget=16_000)
    assert [b["x"][0].as_py() for b in everything] == list(range(40))
    ahead = compaction._read_ahead(_numbered_batches(40, produced, closed), budget=16_000)
    assert next(ahead)["x"][0].as_py() == 0
    time.sleep(0.3)  # the reading thread runs ahead until two batches (16,000 bytes) wait
    assert len(produced) <= 4  # the one taken, two waiting, one blocked in the hand-over
    ahead.close()  # the consumer leaves: the reading thread stops and closes its source
    assert closed == [True]
    assert len(produced) <= 4


def test_read_ahead_raises_the_readers_failure_in_order() -> None:
    got = []
    with pytest.raises(CorruptFileError, match="batch 3 is damaged"):
        for batch in compaction._read_ahead(_numbered_batches(10, [], [], fail_at=3), budget=1):
            got.append(batch["x"][0].as_py())
    assert got == [0, 1, 2]


@pytest.mark.interop
def test_damaged_source_fragment_fails_with_nothing_committed(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    ds = build(uri, [100] * 4, stable=False, deletes=["id % 7 = 0"])
    version, rows = ds.version, ds.count_rows()
    victim = Path(uri) / "data" / ds.manifest.fragments[2].files[0].path
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    with pytest.raises(CorruptFileError):
        ds.optimize.compact_files()
    assert lance_ops.dataset(uri).version == version
    assert len(lance_module.dataset(uri).get_fragments()) == 4
    victim.write_bytes(data)  # repaired: the same compaction goes through
    lance_ops.dataset(uri).optimize.compact_files()
    assert lance_module.dataset(uri).count_rows() == rows
    assert len(lance_module.dataset(uri).get_fragments()) == 1


@pytest.mark.interop
def test_row_addresses_left_out_without_index_are_computed_at_commit(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """With stable row ids, tasks over fragments no index covers hold no row addresses (memory
    flat in the rows moved); a commit that needs them (an index covers the fragments) computes
    them from the original fragments, and pylance's BTREE stays right."""
    uri = str(tmp_path / "d")
    build(uri, [50] * 6, stable=True, deletes=["id % 7 = 3"])
    plain = lance_ops.dataset(uri)
    assert all(
        t.execute(uri).row_addrs is None
        for t in Compaction.plan(plain, {"target_rows_per_fragment": 120}).tasks
    )
    lance_module.dataset(uri).create_scalar_index("id", "BTREE")
    ds = lance_ops.dataset(uri)
    results = [t.execute(uri) for t in Compaction.plan(ds, {"target_rows_per_fragment": 120}).tasks]
    assert len(results) == 2 and all(r.row_addrs is not None for r in results)
    stripped = [replace(r, row_addrs=None) for r in results]
    assert compaction._with_row_addrs(ds._storage, ds.manifest, stripped) == results
    Compaction.commit(ds, stripped)
    theirs = lance_module.dataset(uri)
    assert len(theirs.get_fragments()) == 2
    assert theirs.stats.index_stats("id_idx")["num_unindexed_rows"] == 0
    for predicate in ("id = 10", "id >= 40 AND id < 260", "id = 3"):
        indexed = theirs.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = theirs.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned)
