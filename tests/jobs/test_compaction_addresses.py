"""The compaction commit builds the old -> new row address map only when asked, and the Spark
compaction ships a task's old row addresses only when the commit needs them (L19): without an
index the commit writes what it wrote before; with an index (present at the plan, or created by
another writer before the commit) the index is remapped and answers as a scan does. Answers and
data checked with pylance."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.compact import needs_addresses
from lance_ops.errors import RetryableCommitConflictError
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.compaction import (
    CompactionOptions,
    CompactionTask,
    RewriteResult,
    commit_compaction,
    open_version,
    plan,
)
from lance_ops.progress import ProgressEvent
from lance_ops.table.manifest import Manifest
from lance_ops.table.transaction import Rewrite

pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PREDICATES = ("id = 343", "id = 344", "id >= 100 AND id < 180", "id > 2990")


def _dataset(path: Path, rows: int = 3000, per_file: int = 400, stable: bool = False) -> str:
    ids = np.arange(rows, dtype=np.int64)
    table = pa.table({"id": ids, "x": ids * 3 - 7, "s": pa.array([f"s{i % 13}" for i in range(rows)])})
    lance.write_dataset(table, str(path), max_rows_per_file=per_file, enable_stable_row_ids=stable)
    lance.dataset(str(path)).delete("id % 7 = 2")
    return str(path)


def _tasks(uri: str, target: int = 1500) -> tuple[CompactionTask, ...]:
    files = open_version(uri, lance_ops.dataset(uri).version, None)
    tasks = plan(files.manifest, CompactionOptions.resolve({}, target_rows_per_fragment=target)).tasks
    assert tasks and all(len(t.fragments) > 1 for t in tasks)
    return tasks


def _addresses(uri: str) -> dict[int, int]:
    """Row address of every live row, by id (pylance's)."""
    table = lance.dataset(uri).to_table(columns=["id"], with_row_address=True)
    return dict(zip(table["id"].to_pylist(), table["_rowaddr"].to_pylist(), strict=True))


def _indexed_answers_agree(uri: str) -> None:
    ds = lance.dataset(uri)
    for predicate in PREDICATES:
        plan_text = ds.scanner(filter=predicate, columns=["id"]).explain_plan(True)
        assert "ScalarIndexQuery" in plan_text or "MaterializeIndex" in plan_text, plan_text
        indexed = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned) and scanned, predicate


def _stripped(results: list[RewriteResult]) -> list[RewriteResult]:
    return [replace(r, row_addrs=None) for r in results]


def test_address_map_is_built_on_demand_and_equal_with_or_without_shipped_addresses(
    tmp_path: Path,
) -> None:
    """Two twins compacted by the same tasks, one committing the tasks' old addresses and one
    without them: the same Rewrite groups and fragments; neither commit builds the map; both maps
    (the second read back from the old fragments' deletion files) equal pylance's addresses before
    and after."""
    uri = _dataset(tmp_path / "a")
    twin = str(tmp_path / "b")
    shutil.copytree(uri, twin)
    before = _addresses(uri)
    tasks = _tasks(uri)
    results = [t.execute(uri, {}) for t in tasks]
    assert all(r.row_addrs is not None for r in results)
    kept = commit_compaction(uri, results, CommitOptions())
    left_out = commit_compaction(twin, _stripped([t.execute(twin, {}) for t in tasks]), CommitOptions())
    assert "row_address_map" not in vars(kept) and "row_address_map" not in vars(left_out)
    ours, theirs = kept.transaction.operation, left_out.transaction.operation
    assert isinstance(ours, Rewrite) and isinstance(theirs, Rewrite)
    assert [g.old_fragments for g in ours.groups] == [g.old_fragments for g in theirs.groups]
    assert ours.rewritten_indices == theirs.rewritten_indices == ()

    def shape(manifest: Manifest) -> list[tuple[int, int, int]]:
        return [(f.id, f.physical_rows, len(f.files)) for f in manifest.fragments]

    assert shape(kept.manifest) == shape(left_out.manifest)
    after = _addresses(uri)
    assert after == _addresses(twin)
    assert lance.dataset(uri).to_table().equals(lance.dataset(twin).to_table())
    expected = {before[i]: after[i] for i in before}
    for outcome in (kept, left_out):
        assert outcome.row_address_map is not None
        old, new = outcome.row_address_map
        assert old.dtype == new.dtype == np.uint64 and len(old) == len(expected) == 3000 - 429
        assert dict(zip(old.tolist(), new.tolist(), strict=True)) == expected
    # a second compaction has nothing to do
    assert lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=1500).fragments_removed == 0


def test_stable_row_ids_have_no_address_map(tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "a", stable=True)
    results = [t.execute(uri, {}) for t in _tasks(uri)]
    outcome = commit_compaction(uri, results, CommitOptions())
    assert outcome.moves == () and outcome.row_address_map is None
    assert lance.dataset(uri).count_rows() == 3000 - 429


def _index_dirs(uri: str) -> set[str]:
    root = Path(uri) / "_indices"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def test_index_created_after_the_tasks_conflicts_and_a_rerun_remaps_it(tmp_path: Path) -> None:
    """Tasks that left their addresses out (no index when they ran); another writer indexes the
    dataset before the commit: the Rewrite conflicts with that CreateIndex (as pylance's does),
    nothing is committed and the remap's files are removed; a rerun then ships the addresses and
    remaps the index, which answers as a scan does (pylance)."""
    uri = _dataset(tmp_path / "a")
    results = _stripped([t.execute(uri, {}) for t in _tasks(uri)])
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    version, dirs = lance.dataset(uri).version, _index_dirs(uri)
    with pytest.raises(RetryableCommitConflictError):
        commit_compaction(uri, results, CommitOptions())
    assert lance.dataset(uri).version == version + 1  # only the ReserveFragments
    assert _index_dirs(uri) == dirs
    _indexed_answers_agree(uri)
    tasks = _tasks(uri)
    manifest = lance_ops.dataset(uri).manifest
    assert all(needs_addresses(manifest, t) for t in tasks)
    outcome = commit_compaction(uri, [t.execute(uri, {}) for t in tasks], CommitOptions())
    assert outcome.indices.remapped == ("id_idx",)
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_indexed_rows"] == 3000 - 429
    _indexed_answers_agree(uri)


def test_which_tasks_ship_their_addresses(tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "a")
    tasks = _tasks(uri)
    manifest = lance_ops.dataset(uri).manifest
    assert not any(needs_addresses(manifest, t) for t in tasks)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    indexed = lance_ops.dataset(uri).manifest
    assert all(needs_addresses(indexed, t) for t in tasks)
    clustered = replace(tasks[0], options=replace(tasks[0].options, cluster_by=("x",)))
    assert needs_addresses(manifest, clustered)


def _append(uri: str, start: int, rows: int = 200) -> None:
    ids = np.arange(start, start + rows, dtype=np.int64)
    table = pa.table(
        {"id": ids, "x": ids * 3 - 7, "s": pa.array([f"s{i % 13}" for i in range(start, start + rows)])}
    )
    lance.write_dataset(table, uri, mode="append", max_rows_per_file=100)


@pytest.mark.spark
@pytest.mark.parametrize("indexed", [False, True])
def test_compact_job_twice_with_another_writer_between(
    spark: SparkSession, tmp_path: Path, indexed: bool
) -> None:
    """The Spark compaction with and without an index: another writer appends while its tasks run
    (before the commit) and again between two runs; each run commits one Rewrite, pylance reads
    every row once, the index (if any) answers as a scan does; runs until one has nothing to do,
    which commits nothing."""
    uri = _dataset(tmp_path / "a")
    if indexed:
        lance.dataset(uri).create_scalar_index("id", "BTREE")
    appended: list[int] = []

    def other_writer(event: ProgressEvent) -> None:
        if event.done == event.total and not appended:  # the tasks finished, nothing committed yet
            _append(uri, 3000)
            appended.append(lance.dataset(uri).version)

    metrics = jobs.compact(spark, uri, target_rows_per_fragment=1500, progress=other_writer)
    assert appended and metrics.fragments_removed == 8
    ds = lance.dataset(uri)
    assert ds.version == appended[0] + 2  # ReserveFragments and the Rewrite on top of the append
    assert isinstance(lance_ops.dataset(uri).read_transaction().operation, Rewrite)
    _append(uri, 3200)
    second = jobs.compact(spark, uri, target_rows_per_fragment=1500)
    assert second.fragments_removed == 4  # the appended fragments of 100 rows
    ds = lance.dataset(uri)
    ids = ds.to_table(columns=["id"])["id"].to_numpy()
    expected = np.concatenate([np.arange(3000)[np.arange(3000) % 7 != 2], np.arange(3000, 3400)])
    assert np.array_equal(np.sort(ids), expected)
    x = ds.to_table(columns=["id", "x"]).sort_by("id")
    assert np.array_equal(x["x"].to_numpy(), x["id"].to_numpy() * 3 - 7)
    if indexed:
        _indexed_answers_agree(uri)
        assert ds.stats.index_stats("id_idx")["num_indexed_rows"] == 3000 - 429
    for _ in range(3):  # compacted again until a run has nothing to do: that run commits nothing
        version = lance.dataset(uri).version
        if jobs.compact(spark, uri, target_rows_per_fragment=1500).fragments_removed == 0:
            break
    else:
        pytest.fail("three more compactions still found fragments to merge")
    assert lance.dataset(uri).version == version
    assert np.array_equal(np.sort(lance.dataset(uri).to_table(columns=["id"])["id"].to_numpy()), expected)
    if indexed:
        _indexed_answers_agree(uri)


@pytest.mark.spark
def test_compact_job_conflicting_with_a_new_index_commits_nothing_then_reruns(
    spark: SparkSession, tmp_path: Path
) -> None:
    """No index at the plan (the tasks ship no addresses); another writer creates one while the
    tasks run: the job's Rewrite conflicts, nothing is committed and no index file is left; the
    job run again remaps the new index, which answers as a scan does."""
    uri = _dataset(tmp_path / "a")
    created: list[int] = []

    def indexer(event: ProgressEvent) -> None:
        if event.done == event.total and not created:
            lance.dataset(uri).create_scalar_index("id", "BTREE")
            created.append(lance.dataset(uri).version)

    with pytest.raises(RetryableCommitConflictError):
        jobs.compact(spark, uri, target_rows_per_fragment=1500, progress=indexer)
    assert created and lance.dataset(uri).version == created[0] + 1  # the ReserveFragments
    dirs = _index_dirs(uri)
    assert len(dirs) == 1
    metrics = jobs.compact(spark, uri, target_rows_per_fragment=1500)
    assert metrics.fragments_removed == 8
    operation = lance_ops.dataset(uri).read_transaction().operation
    assert isinstance(operation, Rewrite) and len(operation.rewritten_indices) == 1
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_indexed_rows"] == 3000 - 429
    _indexed_answers_agree(uri)
