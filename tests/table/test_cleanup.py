"""cleanup_old_versions: what is removed and what never is, dry runs, orphans, two-way with pylance."""

from __future__ import annotations

import datetime as dt
import os
import pickle
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops import CleanupStats
from lance_ops.errors import CleanupError, CorruptFileError, TaggedVersionsError
from lance_ops.io.local import TEMP_SUFFIX
from lance_ops.ops import cleanup as cleanup_op
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR, ManifestNamingScheme

ZERO = dt.timedelta(0)
EIGHT_DAYS = 8 * 86_400
REPO = Path(__file__).resolve().parents[2]


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _snapshot(uri: str | lance_ops.LanceDataset) -> dict[int, pa.Table]:
    ds = lance_ops.dataset(uri) if isinstance(uri, str) else uri
    return {v["version"]: ds.checkout_version(v["version"]).to_table() for v in ds.versions()}


def _build(uri: str, lance=None):  # type: ignore[no-untyped-def]
    """Versions 1-5: create, append, delete, overwrite, append (by us, or by pylance if given),
    all through the first write's handle (a memory:// dataset lives in that handle's store)."""
    lib = lance or lance_ops
    ds = lib.write_dataset(_table(10), uri)
    ds = lib.write_dataset(_table(5, 10), ds, mode="append")
    ds.delete("id < 3")
    ds = lib.write_dataset(_table(7, 100), ds, mode="overwrite")
    return lib.write_dataset(_table(2, 200), ds, mode="append")


def _referenced(uri: str) -> set[str]:
    """Relative paths of every data, deletion and transaction file some version references."""
    ds = lance_ops.dataset(uri)
    found = set()
    for v in ds.versions():
        manifest = ds.checkout_version(v["version"]).manifest
        for fragment in manifest.fragments:
            found.update(f"{DATA_DIR}/{d.path}" for d in fragment.files)
            if fragment.deletion_file is not None:
                found.add(f"{DELETIONS_DIR}/{fragment.deletion_file.file_name(fragment.id)}")
        found.add(f"_transactions/{manifest.transaction_file}")
    return found


def _age(root: Path, seconds: float) -> None:
    """Make every file below ``root`` look ``seconds`` older."""
    for path in root.rglob("*"):
        if path.is_file():
            stat = path.stat()
            os.utime(path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def test_removes_old_versions_and_only_their_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    referenced_by_latest = _referenced_latest(uri)
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert isinstance(stats, CleanupStats) and not stats.dry_run
    assert stats.old_versions == 4
    assert stats.data_files_removed == 2 and stats.deletion_files_removed == 1
    assert stats.transaction_files_removed == 4 and stats.index_files_removed == 0
    left = _files(tmp_path / "ds")
    assert referenced_by_latest <= left
    assert not any(p.startswith(("data/", "_deletions/")) and p not in referenced_by_latest for p in left)
    assert [v["version"] for v in lance_ops.dataset(uri).versions()] == [5]
    assert lance_ops.dataset(uri).to_table() == before[5]
    assert stats.bytes_removed > 0 and len(stats.paths) == 4 + 2 + 1 + 4


def test_each_directory_is_listed_once_and_manifests_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning lists every swept directory once (``_versions/`` and the tags a second time after
    planning, for versions committed or tagged meanwhile) and keeps no decoded manifest of the
    versions it removes."""
    from lance_ops.io.local import LocalStore

    uri = str(tmp_path / "ds")
    _build(uri)
    ds = lance_ops.dataset(uri)
    listed: list[str] = []
    for name in ("list", "list_names", "walk"):
        real = getattr(LocalStore, name)

        def counting(self, path, _real=real):  # type: ignore[no-untyped-def]
            listed.append(os.path.relpath(path, uri))
            return _real(self, path)

        monkeypatch.setattr(LocalStore, name, counting)
    plan = cleanup_op._plan(
        ds._storage.store, ds._storage.root, ds.version, cleanup_op.CleanupPolicy.parse(ZERO, None, 5)
    )
    # _versions/ and the tags a second time after planning: what was committed or tagged meanwhile
    twice = ["_versions", "_versions", "_refs/tags", "_refs/tags"]
    assert sorted(listed) == sorted([*twice, *(kind.value for kind in cleanup_op._Kind)])
    assert [old.version for old in plan.old] == [1, 2, 3, 4]
    assert all(
        not isinstance(value, lance_ops.table.manifest.Manifest)
        for old in plan.old
        for value in vars(old).values()
    )
    listed.clear()
    stats = ds.cleanup_old_versions(older_than=ZERO)
    assert stats.old_versions == 4 and listed.count("_versions") == 2


def _referenced_latest(uri: str) -> set[str]:
    manifest = lance_ops.dataset(uri).manifest
    return {f"{DATA_DIR}/{d.path}" for f in manifest.fragments for d in f.files}


def test_memory_store(tmp_path: Path) -> None:
    uri = f"memory://cleanup/{tmp_path.name}"
    ds = _build(uri)
    before = _snapshot(ds)
    ds.tags.create("two", 2)
    dry = ds.cleanup_old_versions(older_than=ZERO, error_if_tagged_old_versions=False, dry_run=True)
    stats = ds.cleanup_old_versions(older_than=ZERO, error_if_tagged_old_versions=False)
    assert dry.paths == stats.paths and stats.old_versions == 3
    assert _snapshot(ds) == {2: before[2], 5: before[5]}


def test_default_keeps_recent_versions(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _files(tmp_path / "ds")
    stats = lance_ops.dataset(uri).cleanup_old_versions()
    assert stats == CleanupStats()
    assert _files(tmp_path / "ds") == before


def test_retain_versions(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    stats = lance_ops.dataset(uri).cleanup_old_versions(retain_versions=2)
    assert stats.old_versions == 3
    assert _snapshot(uri) == {4: before[4], 5: before[5]}


def test_checked_out_version_and_newer_are_kept(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    lance_ops.dataset(uri, version=3).cleanup_old_versions(older_than=ZERO)
    assert _snapshot(uri) == {v: before[v] for v in (3, 4, 5)}


def test_dry_run_lists_exactly_what_the_run_removes(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    root = tmp_path / "ds"
    (root / "data" / "orphan.lance").write_bytes(b"x" * 10)
    _age(root / "data", EIGHT_DAYS)
    before = _files(root)
    dry = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO, dry_run=True)
    assert dry.dry_run and _files(root) == before
    assert "data/orphan.lance" in dry.paths
    real = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert set(dry.paths) == before - _files(root) == set(real.paths)
    assert (dry.bytes_removed, dry.data_files_removed) == (real.bytes_removed, real.data_files_removed)


def test_orphans_and_partial_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(10), uri)
    root = tmp_path / "ds"
    orphans = {
        "data/orphan.lance",
        f"data/.orphan.lance.0123{TEMP_SUFFIX}",
        "data/.tmpAbC123",
        "_deletions/0-1-7.arrow",
        "_transactions/1-00000000-0000-0000-0000-000000000000.txn",
        f"_transactions/.x.txn.99{TEMP_SUFFIX}",
        "_indices/7c12a032-ebeb-4e77-890a-ca3eb8b92e64/page_data.lance",
    }
    for relative in orphans:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"partial")
    ds = lance_ops.dataset(uri)
    # Young files may belong to a commit in flight: kept.
    assert ds.cleanup_old_versions(older_than=ZERO, dry_run=True).paths == ()
    assert ds.cleanup_old_versions(older_than=ZERO).paths == () and orphans <= _files(root)
    # Explicitly unverified: removed regardless of age.
    assert (
        set(ds.cleanup_old_versions(older_than=ZERO, delete_unverified=True, dry_run=True).paths) == orphans
    )
    # Older than 7 days: removed.
    _age(root, EIGHT_DAYS)
    stats = ds.cleanup_old_versions(older_than=ZERO)
    assert set(stats.paths) == orphans
    assert (stats.data_files_removed, stats.deletion_files_removed) == (3, 1)
    assert (stats.transaction_files_removed, stats.index_files_removed) == (2, 1)
    assert stats.bytes_removed == 7 * len(orphans)
    assert not orphans & _files(root)
    assert lance_ops.dataset(uri).to_table() == _table(10)


def test_versions_dir_leftovers(tmp_path: Path) -> None:
    """Temporary and staging files of killed committers in _versions/ follow the 7-day rule; a
    staging manifest of a version newer than the latest (a claim to repair) and anything that is
    not a leftover stay."""
    uri = str(tmp_path / "ds")
    _build(uri)
    root = tmp_path / "ds"
    name = ManifestNamingScheme.V2.manifest_name
    leftovers = {
        "_versions/.tmpAbC123",
        f"_versions/.{name(6)}.0123{TEMP_SUFFIX}",
        f"_versions/{name(3)}#1",
        f"_versions/{name(2)}-{uuid.uuid4().hex}",
    }
    kept = {
        f"_versions/{name(6)}-{uuid.uuid4().hex}",
        "_versions/d9223372036854775809.manifest",
        "_versions/notes",
    }
    for relative in leftovers | kept:
        (root / relative).write_bytes(b"left")
    before = _files(root)
    ds = lance_ops.dataset(uri)
    assert ds.cleanup_old_versions(retain_versions=5).paths == ()
    dry = ds.cleanup_old_versions(retain_versions=5, delete_unverified=True, dry_run=True)
    assert set(dry.paths) == leftovers and dry.bytes_removed == 4 * len(leftovers)
    assert _files(root) == before
    _age(root, EIGHT_DAYS)
    stats = ds.cleanup_old_versions(retain_versions=5)
    assert set(stats.paths) == leftovers and _files(root) == before - leftovers
    assert (stats.old_versions, stats.data_files_removed, stats.transaction_files_removed) == (0, 0, 0)
    assert [v["version"] for v in lance_ops.dataset(uri).versions()] == [1, 2, 3, 4, 5]


def test_tagged_old_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    ds = lance_ops.dataset(uri)
    ds.tags.create("keep", 2)
    files = _files(tmp_path / "ds")
    with pytest.raises(CleanupError, match=r"1 tagged version\(s\).*'keep': 2") as refused:
        ds.cleanup_old_versions(older_than=ZERO)
    assert isinstance(refused.value, TaggedVersionsError) and refused.value.tags == {"keep": 2}
    assert pickle.loads(pickle.dumps(refused.value)).tags == {"keep": 2}
    assert _files(tmp_path / "ds") == files
    stats = ds.cleanup_old_versions(older_than=ZERO, error_if_tagged_old_versions=False)
    assert stats.old_versions == 3
    assert _snapshot(uri) == {2: before[2], 5: before[5]}
    assert lance_ops.dataset(uri, version="keep").to_table() == before[2]
    # The version-3 deletion file is referenced only by removed versions.
    assert stats.deletion_files_removed == 1
    ds.tags.delete("keep")
    ds.cleanup_old_versions(older_than=ZERO)
    assert _snapshot(uri) == {5: before[5]}
    assert {p for p in _files(tmp_path / "ds") if p.startswith("data/")} == _referenced_latest(uri)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"older_than": dt.timedelta(days=-1)}, "negative"),
        ({"older_than": dt.datetime.now(dt.UTC) + dt.timedelta(days=1)}, "future"),
        ({"older_than": 5}, "timedelta"),
        ({"retain_versions": 0}, "positive"),
        ({"retain_versions": -1}, "positive"),
    ],
)
def test_bad_arguments_delete_nothing(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    files = _files(tmp_path / "ds")
    with pytest.raises(CleanupError, match=message):
        lance_ops.dataset(uri).cleanup_old_versions(**kwargs)  # type: ignore[arg-type]
    assert _files(tmp_path / "ds") == files


def test_corrupt_tag_deletes_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    (tmp_path / "ds/_refs/tags").mkdir(parents=True)
    (tmp_path / "ds/_refs/tags/t.json").write_text("{")
    files = _files(tmp_path / "ds")
    with pytest.raises(CorruptFileError, match="t.json"):
        lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert _files(tmp_path / "ds") == files


def test_datetime_cut_off(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    cut = lance_ops.dataset(uri, version=3).manifest.timestamp_ns
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=cut // 1000)
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=stamp)
    assert stats.old_versions == 2


@pytest.mark.interop
def test_same_result_as_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """On copies of one pylance-written dataset, our cleanup and pylance's leave the same files."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _build(str(ours), lance_module)
    lance_module.dataset(str(ours)).tags.create("keep", 2)
    shutil.copytree(ours, theirs, copy_function=shutil.copy2)
    expected = lance_module.dataset(str(theirs)).cleanup_old_versions(
        older_than=ZERO, error_if_tagged_old_versions=False
    )
    stats = lance_ops.dataset(str(ours)).cleanup_old_versions(
        older_than=ZERO, error_if_tagged_old_versions=False
    )
    assert _files(ours) == _files(theirs)
    fields = ("bytes_removed", "old_versions", "data_files_removed", "transaction_files_removed")
    fields += ("deletion_files_removed", "index_files_removed")
    assert {f: getattr(stats, f) for f in fields} == {f: getattr(expected, f) for f in fields}


@pytest.mark.interop
def test_same_index_files_removed_as_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """A replaced scalar index: its old directory goes, the live one stays (as pylance decides)."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance_module.write_dataset(_table(100), str(ours)).create_scalar_index("id", "BTREE")
    lance_module.write_dataset(_table(100, 100), str(ours), mode="append")
    lance_module.dataset(str(ours)).create_scalar_index("id", "BTREE", replace=True)
    lance_module.write_dataset(_table(5, 500), str(ours), mode="append")
    shutil.copytree(ours, theirs, copy_function=shutil.copy2)
    expected = lance_module.dataset(str(theirs)).cleanup_old_versions(older_than=ZERO)
    stats = lance_ops.dataset(str(ours)).cleanup_old_versions(older_than=ZERO)
    assert stats.index_files_removed == expected.index_files_removed == 2
    assert (stats.bytes_removed, stats.old_versions) == (expected.bytes_removed, expected.old_versions)
    assert _files(ours) == _files(theirs)
    assert lance_module.dataset(str(ours)).to_table(filter="id = 150").num_rows == 1


@pytest.mark.interop
def test_pylance_reads_every_retained_version_after_our_cleanup(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _build(uri, lance_module)
    lance_module.dataset(uri).tags.create("two", 2)
    before = {
        v["version"]: lance_module.dataset(uri, version=v["version"]).to_table()
        for v in lance_module.dataset(uri).versions()
    }
    lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO, error_if_tagged_old_versions=False)
    theirs = lance_module.dataset(uri)
    assert [v["version"] for v in theirs.versions()] == [2, 5]
    for version in (2, 5):
        assert lance_module.dataset(uri, version=version).to_table() == before[version]
    assert lance_module.dataset(uri, version="two").to_table() == before[2]
    lance_module.write_dataset(_table(1, 900), uri, mode="append")
    assert lance_module.dataset(uri).count_rows() == 10


@pytest.mark.interop
def test_we_read_every_retained_version_after_pylance_cleanup(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _build(uri)
    lance_ops.dataset(uri).tags.create("three", 3)
    before = _snapshot(uri)
    lance_module.dataset(uri).cleanup_old_versions(older_than=ZERO, error_if_tagged_old_versions=False)
    assert _snapshot(uri) == {3: before[3], 5: before[5]}
    assert lance_ops.dataset(uri, version="three").to_table() == before[3]


def test_commit_landing_during_cleanup_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Restore of a version being removed lands after the plan is made: its files stay."""
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    plan = cleanup_op._plan_files

    def plan_then_restore(*args, **kwargs):  # type: ignore[no-untyped-def]
        files = plan(*args, **kwargs)
        assert any(relative.startswith("data/") for relative, _ in files)
        lance_ops.dataset(uri, version=1).restore()
        return files

    monkeypatch.setattr(cleanup_op, "_plan_files", plan_then_restore)
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert stats.old_versions == 4 and stats.data_files_removed == 1
    latest = lance_ops.dataset(uri)
    assert latest.version == 6 and latest.to_table() == before[1]
    assert _snapshot(uri) == {5: before[5], 6: before[1]}


def test_version_tagged_during_cleanup_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag created on an old version after the plan is made keeps that version and its files."""
    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    plan = cleanup_op._plan_files

    def plan_then_tag(*args, **kwargs):  # type: ignore[no-untyped-def]
        files = plan(*args, **kwargs)
        lance_ops.dataset(uri).tags.create("late", 2)
        return files

    monkeypatch.setattr(cleanup_op, "_plan_files", plan_then_tag)
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert stats.old_versions == 3
    assert _snapshot(uri) == {2: before[2], 5: before[5]}
    assert lance_ops.dataset(uri, version="late").to_table() == before[2]


# A commit whose intermediate versions a cleanup removed cannot be checked against them: it gets a
# RetryableCommitConflictError, and the appender retries it, as the error asks.
_APPENDER = """
import sys, pyarrow as pa, lance_ops
from lance_ops.errors import RetryableCommitConflictError
uri, worker, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def retried(call):
    for _ in range(50):
        try:
            return call()
        except RetryableCommitConflictError:
            pass
    return call()

for i in range(n):
    start = worker * 10_000 + i * 10
    rows = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
    retried(lambda: lance_ops.write_dataset(rows, uri, mode="append"))
    if i % 3 == 2:
        retried(lambda: lance_ops.dataset(uri).delete(f"id = {start}"))
"""


def test_cleanup_during_concurrent_appends_keeps_referenced_files(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(10), uri)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, uri, str(w + 1), "12"], env=env) for w in range(2)
    ]
    runs = 0
    while any(w.poll() is None for w in workers) or runs < 3:
        lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
        lance_ops.dataset(uri).cleanup_old_versions(retain_versions=1)
        runs += 1
        time.sleep(0.05)
    assert [w.wait() for w in workers] == [0, 0]
    ds = lance_ops.dataset(uri)
    left = _files(tmp_path / "ds")
    for v in ds.versions():
        version = ds.checkout_version(v["version"])
        for fragment in version.manifest.fragments:
            assert all(f"data/{d.path}" in left for d in fragment.files)
        version.to_table()
    assert ds.count_rows() == 10 + 2 * (12 * 10 - 4)


@pytest.mark.interop
def test_blob_sidecars_follow_their_data_files(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Sidecars (data/<stem>/*.blob) of a kept data file stay; those of a removed one go with it."""
    uri = str(tmp_path / "ds")
    meta = {
        "lance-encoding:blob": "true",
        "lance-encoding:blob-inline-size-threshold": "10",
        "lance-encoding:blob-dedicated-size-threshold": "100",
    }
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("b", pa.large_binary(), metadata=meta)])

    def blobs(start: int) -> pa.Table:
        values = [bytes([i % 251]) * (50 if i % 2 else 500) for i in range(start, start + 4)]
        return pa.table({"id": range(start, start + 4), "b": values}, schema=schema)

    lance_ops.write_dataset(blobs(0), uri, data_storage_version="2.2")
    lance_ops.write_dataset(blobs(100), uri, mode="overwrite", data_storage_version="2.2")
    sidecars = lambda: sorted(p.relative_to(uri) for p in Path(uri, DATA_DIR).rglob("*.blob"))  # noqa: E731
    before = sidecars()
    assert len({p.parent for p in before}) == 2
    (current,) = lance_ops.dataset(uri).manifest.fragments[0].files
    live = [p for p in before if p.parent.name == Path(current.path).stem]
    assert len(live) == 3  # two dedicated files and one packed file
    want = lance_module.dataset(uri).to_table(columns=["id"])
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO, delete_unverified=True)
    assert stats.old_versions == 1
    assert sidecars() == live
    assert lance_module.dataset(uri).to_table(columns=["id"]) == want
    ours = lance_ops.dataset(uri).to_table()
    column = ours.column("b").combine_chunks()
    if isinstance(column, pa.ExtensionArray):  # pylance registers lance.blob.v2 with pyarrow
        column = column.storage
    assert column.field("data").to_pylist() == blobs(100).column("b").to_pylist()


def test_statistics_files_kept_while_listed(tmp_path: Path) -> None:
    """_stats files listed by a retained version stay; those only removed versions listed go."""
    from lance_ops.table.statistics import STATS_DIR, statistics_files

    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(_table(10), uri, page_statistics=False)  # so the rebuild writes a file
    lance_ops.dataset(uri).stats.rebuild()
    lance_ops.write_dataset(_table(7, 100), uri, mode="overwrite")
    lance_ops.dataset(uri).stats.rebuild(force=True)
    stats_files = lambda: {p for p in _files(tmp_path / "ds") if p.startswith(f"{STATS_DIR}/")}  # noqa: E731
    listed = {f"{STATS_DIR}/{name}" for name in statistics_files(lance_ops.dataset(uri).manifest)}
    assert listed and listed < stats_files()
    dry = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO, dry_run=True)
    assert set(dry.paths) & stats_files() == stats_files() - listed
    lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert stats_files() == listed
    summary = lance_ops.dataset(uri).stats.column_summary("id")
    assert summary["fragments_with_statistics"] == summary["num_fragments"]


@pytest.mark.interop
def test_failed_auto_cleanup_does_not_fail_the_commit(
    tmp_path: Path, lance_module, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    """A cleanup after a commit that fails (here: a corrupt tag file) is logged; the commit stands,
    as in pylance."""
    for lib, name in ((lance_ops, "ours"), (lance_module, "theirs")):
        uri = str(tmp_path / name)
        lib.write_dataset(_table(3), uri, auto_cleanup_options={"interval": 1, "older_than_seconds": 0})
        (tmp_path / name / "_refs/tags").mkdir(parents=True)
        (tmp_path / name / "_refs/tags/bad.json").write_text("{")
        with caplog.at_level("WARNING", logger="lance_ops.ops.auto_cleanup"):
            assert lib.write_dataset(_table(2, 3), uri, mode="append").version == 2
        assert lib.dataset(uri).count_rows() == 5
    assert "automatic cleanup after version 2 skipped" in caplog.text and "bad.json" in caplog.text


_SELECTIONS = [
    {"versions": [2, 4]},
    {"versions": [2], "older_than": dt.timedelta(days=1)},
    {"versions": [2], "retain_versions": 1},
    {"versions": [2], "retain_versions": 5},
    {"versions": [99, 0]},
    {"versions": [5]},
    {"versions": [2, 3], "error_if_tagged_old_versions": False},
    {"versions": [2, 3]},
    {"versions": []},
    {"older_than": ZERO, "delete_rate_limit": 0},
    {"older_than": ZERO, "delete_concurrency": 0},
    {"older_than": ZERO, "delete_concurrency": 2},
]


@pytest.mark.interop
@pytest.mark.parametrize("kwargs", _SELECTIONS, ids=[str(k) for k in _SELECTIONS])
def test_version_selection_and_limits_as_pylance(
    tmp_path: Path, lance_module, kwargs: dict[str, object]
) -> None:  # type: ignore[no-untyped-def]
    """pylance's ``versions`` (narrows the other criteria, no default age on its own, unknown
    versions ignored), ``delete_rate_limit`` and ``delete_concurrency``: same versions left, same
    refusals (typed, OSError as pylance's), nothing deleted on refusal."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _build(str(ours))
    lance_ops.dataset(str(ours)).tags.create("three", 3)
    shutil.copytree(ours, theirs, copy_function=shutil.copy2)
    before = _files(ours)
    try:
        expected = lance_module.dataset(str(theirs), version=4).cleanup_old_versions(**kwargs)
    except OSError as exc:
        with pytest.raises(CleanupError) as raised:
            lance_ops.dataset(str(ours), version=4).cleanup_old_versions(**kwargs)  # type: ignore[arg-type]
        assert isinstance(raised.value, OSError)
        assert str(exc).split(":")[0] in ("Cleanup error", "Invalid user input")
        assert _files(ours) == before
        return
    stats = lance_ops.dataset(str(ours), version=4).cleanup_old_versions(**kwargs)  # type: ignore[arg-type]
    assert (stats.old_versions, stats.bytes_removed) == (expected.old_versions, expected.bytes_removed)
    assert _files(ours) == _files(theirs)


def test_delete_rate_limit_paces_deletes(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    started = time.monotonic()
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO, delete_rate_limit=40)
    assert len(stats.paths) == 11
    assert time.monotonic() - started >= 10 / 40


def test_a_manifest_removed_by_a_concurrent_cleanup_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two cleanups at once: a manifest listed by one and removed by the other before it is read
    is skipped (its files are then unverified, so young ones stay) instead of failing the run."""
    from lance_ops.table import commit as table_commit  # noqa: PLC0415

    uri = str(tmp_path / "ds")
    _build(uri)
    before = _snapshot(uri)
    read = table_commit._read_or_none
    victim = tmp_path / "ds/_versions" / ManifestNamingScheme.V2.manifest_name(2)

    def vanish_then_read(store, path):  # type: ignore[no-untyped-def]
        if path.endswith(victim.name) and victim.exists():
            victim.unlink()
        return read(store, path)

    monkeypatch.setattr(table_commit, "_read_or_none", vanish_then_read)
    stats = lance_ops.dataset(uri).cleanup_old_versions(older_than=ZERO)
    assert stats.old_versions == 3
    monkeypatch.undo()
    assert _snapshot(uri) == {5: before[5]}


@pytest.mark.interop
def test_index_of_a_tagged_old_version_is_kept_as_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """An index replaced later but referenced by a tagged old version stays (counted by neither);
    once the tag is gone both remove it and count its files in index_files_removed."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance_module.write_dataset(_table(100), str(ours)).create_scalar_index("id", "BTREE")  # v1, v2
    lance_module.write_dataset(_table(50, 100), str(ours), mode="append")  # v3
    lance_module.dataset(str(ours)).create_scalar_index("id", "BTREE", replace=True)  # v4
    lance_module.dataset(str(ours)).delete("id < 10")  # v5
    lance_module.dataset(str(ours)).tags.create("indexed", 2)
    shutil.copytree(ours, theirs, copy_function=shutil.copy2)
    indices = {p for p in _files(ours) if p.startswith("_indices/")}
    fields = ("bytes_removed", "old_versions", "index_files_removed", "data_files_removed")
    for allow in (False, True):
        if allow:
            lance_module.dataset(str(theirs)).tags.delete("indexed")
            lance_ops.dataset(str(ours)).tags.delete("indexed")
        expected = lance_module.dataset(str(theirs)).cleanup_old_versions(
            older_than=ZERO, error_if_tagged_old_versions=False
        )
        stats = lance_ops.dataset(str(ours)).cleanup_old_versions(
            older_than=ZERO, error_if_tagged_old_versions=False
        )
        assert {f: getattr(stats, f) for f in fields} == {f: getattr(expected, f) for f in fields}
        assert _files(ours) == _files(theirs)
        left = {p for p in _files(ours) if p.startswith("_indices/")}
        assert (left == indices) if not allow else (left < indices and stats.index_files_removed > 0)
    assert lance_module.dataset(str(ours)).to_table(filter="id = 120").num_rows == 1
    assert lance_ops.dataset(str(ours)).count_rows() == 140


def test_commit_racing_a_cleanup_gets_a_typed_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cleanup removes manifests a commit has just listed: a removed latest is listed again (the
    commit lands on top); a removed version it still had to check against is a retryable conflict."""
    from lance_ops.errors import RetryableCommitConflictError  # noqa: PLC0415
    from lance_ops.table import commit as table_commit  # noqa: PLC0415

    uri = str(tmp_path / "ds")
    _build(uri)
    lance_ops.write_dataset(_table(1, 300), uri, mode="append")  # version 6
    listing = table_commit.list_versions
    race: dict[str, object] = {}

    def listed_then_cleaned(store, root):  # type: ignore[no-untyped-def]
        entries = listing(store, root)
        if race:
            hidden, removed = race.pop("hide"), race.pop("remove")
            entries = [e for e in entries if e.version != hidden]
            (tmp_path / "ds/_versions" / ManifestNamingScheme.V2.manifest_name(removed)).unlink()  # type: ignore[arg-type]
        return entries

    monkeypatch.setattr(table_commit, "list_versions", listed_then_cleaned)
    # Listed before 6 landed, 5 (then the latest) removed by a cleanup right after: listed again.
    race.update(hide=6, remove=5)
    op = lance_ops.LanceOperation.ReserveFragments(1)
    assert lance_ops.LanceDataset.commit(uri, op, read_version=5).version == 7
    # Built on 3; 4 removed before the commit could check it: a retryable conflict, nothing claimed.
    race.update(hide=None, remove=4)
    with pytest.raises(RetryableCommitConflictError, match="version 4 .* removed"):
        lance_ops.LanceDataset.commit(uri, op, read_version=3)
    monkeypatch.undo()
    assert [v["version"] for v in lance_ops.dataset(uri).versions()] == [1, 2, 3, 6, 7]


@pytest.mark.interop
def test_explain_cleanup_as_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """explain_cleanup_old_versions: the same stats and candidate files (by name, kind and size) as
    pylance's, the same refusals, nothing removed."""
    uri = str(tmp_path / "ds")
    _build(uri, lance_module)
    before = _files(tmp_path / "ds")
    kwargs = {"older_than": ZERO, "delete_unverified": True}
    theirs = lance_module.dataset(uri, version=4).explain_cleanup_old_versions(**kwargs, include_files=True)
    ours = lance_ops.dataset(uri, version=4).explain_cleanup_old_versions(**kwargs, include_files=True)
    fields = ("bytes_removed", "old_versions", "data_files_removed", "transaction_files_removed")
    fields += ("deletion_files_removed", "index_files_removed")
    assert {f: getattr(ours.stats, f) for f in fields} == {f: getattr(theirs.stats, f) for f in fields}
    assert (ours.read_version, ours.candidate_file_limit, ours.candidate_files_truncated) == (4, 1000, False)

    def named(files):  # type: ignore[no-untyped-def]
        return sorted((Path(c.path).name, c.kind, c.size_bytes) for c in files)

    assert named(ours.candidate_files) == named(theirs.candidate_files)
    relative = {str(Path(c.path).relative_to(tmp_path / "ds")) for c in ours.candidate_files}
    assert set(ours.stats.paths) == relative
    short = lance_ops.dataset(uri).explain_cleanup_old_versions(
        older_than=ZERO, include_files=True, max_files=2
    )
    assert len(short.candidate_files) == 2 and short.candidate_files_truncated
    assert lance_ops.dataset(uri).explain_cleanup_old_versions(older_than=ZERO).candidate_files == ()
    with pytest.raises(CleanupError, match="max_files"):
        lance_ops.dataset(uri).explain_cleanup_old_versions(max_files=0)
    lance_ops.dataset(uri).tags.create("two", 2)
    with pytest.raises(CleanupError, match="tagged"):
        lance_ops.dataset(uri).explain_cleanup_old_versions(older_than=ZERO)
    assert _files(tmp_path / "ds") == before | {"_refs/tags/two.json"}


@pytest.mark.parametrize("concurrency", [None, 1, 3])
def test_concurrent_deletes_remove_every_manifest_before_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lance_module, concurrency: int | None
) -> None:  # type: ignore[no-untyped-def]
    """Deletes run on threads (``delete_concurrency``), yet an interrupted cleanup still never
    leaves a manifest naming a missing file: the manifests' deletes all finish first."""
    from lance_ops.io.local import LocalStore  # noqa: PLC0415

    uri = str(tmp_path / "ds")
    _build(uri)
    for n in range(40):  # more groups of deletes than threads
        lance_ops.write_dataset(_table(1, 300 + n), uri, mode="append")
    lance_ops.dataset(uri).delete("id < 5")  # a deletion file, referenced by the latest version only
    (tmp_path / "ds" / "_versions" / ".tmp-killed-writer").write_bytes(b"x")  # a leftover
    latest = lance_ops.dataset(uri)
    expected = {latest.version: latest.to_table()}
    deleted: list[str] = []
    real = LocalStore.delete

    def recording(self, path):  # type: ignore[no-untyped-def]
        real(self, path)
        deleted.append(os.path.relpath(path, uri))  # list.append: atomic across threads

    monkeypatch.setattr(LocalStore, "delete", recording)
    stats = lance_ops.dataset(uri).cleanup_old_versions(
        older_than=ZERO, delete_unverified=True, delete_concurrency=concurrency
    )
    assert stats.failed_deletes == 0 and stats.old_versions == 45
    assert sorted(deleted) == sorted(stats.paths)
    manifests = [i for i, p in enumerate(deleted) if p.endswith(".manifest")]
    others = [i for i, p in enumerate(deleted) if not p.endswith(".manifest")]
    assert len(manifests) == 45 and others and max(manifests) < min(others)
    assert _snapshot(uri) == expected
    assert lance_module.dataset(uri).to_table() == expected[latest.version]  # pylance reads what is left
