"""Commits at the manifest level, against datasets and data files written by pylance 14."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetNotFoundError,
    RetryableCommitConflictError,
)
from lance_ops.file.schema import schema_to_fields
from lance_ops.io import ObjectStore, object_store
from lance_ops.io.local import LocalStore
from lance_ops.table.commit import (
    READ_AHEAD,
    WRITER_VERSION,
    CommitHandler,
    LockCommitHandler,
    NewDatasetSettings,
    PutIfAbsentCommitHandler,
    _read_ahead,
    commit_transaction,
    list_versions,
    load_manifest,
    load_transaction,
    version_entries,
)
from lance_ops.table.manifest import DataFragment
from lance_ops.table.naming import ManifestNamingScheme
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import Append, Overwrite, ReserveFragments, Transaction
from tests.table.conftest import table

pytestmark = pytest.mark.interop


def pylance_fragments(lance, uri: str, data: pa.Table, **kwargs) -> tuple[DataFragment, ...]:  # type: ignore[no-untyped-def]
    """Data files written by pylance (no commit), as our fragments."""
    from lance.fragment import write_fragments

    return tuple(DataFragment.from_json(f.to_json()) for f in write_fragments(data, uri, **kwargs))


@pytest.fixture
def pylance_ds(tmp_path: Path, lance_module) -> str:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    lance_module.write_dataset(table(50), uri, max_rows_per_file=20)
    return uri


def test_append_to_pylance_dataset(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    fragments = pylance_fragments(lance_module, pylance_ds, table(7, 50))
    manifest = commit_transaction(store, root, Transaction(1, Append(fragments), properties={"who": "us"}))
    assert manifest.version == 2 and manifest.max_fragment_id == 3
    assert [f.id for f in manifest.fragments] == [0, 1, 2, 3]
    assert manifest.writer_version == WRITER_VERSION
    assert (Path(pylance_ds) / "_versions" / "latest_version_hint.json").read_bytes() == b'{"version":2}'
    assert (Path(pylance_ds) / "_transactions" / f"1-{manifest.transaction_file[2:]}").exists()

    ds = lance_module.dataset(pylance_ds)
    assert ds.version == 2 and ds.count_rows() == 57
    assert ds.to_table() == pa.concat_tables([table(50), table(7, 50)])
    assert ds.read_transaction(2).transaction_properties == {"who": "us"}

    # pylance appends on top of our commit, and we read its transaction back.
    lance_module.write_dataset(table(3, 57), pylance_ds, mode="append")
    loaded = load_manifest(store, root)
    assert loaded.manifest.version == 3 and [f.id for f in loaded.manifest.fragments] == [0, 1, 2, 3, 4]
    their = load_transaction(store, root, loaded)
    assert their is not None and isinstance(their.operation, Append) and their.read_version == 2


def test_create_and_overwrite_keep_fragment_ids_growing(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "new")
    store, root = object_store(uri)
    data = table(30)
    fragments = pylance_fragments(lance_module, uri, data, max_rows_per_file=10)
    fields = LanceSchema.from_pb(schema_to_fields(data.schema))
    settings = NewDatasetSettings(naming=ManifestNamingScheme.V1)
    first = commit_transaction(store, root, Transaction(0, Overwrite(fragments, fields)), settings=settings)
    assert first.version == 1 and first.max_fragment_id == 2
    assert sorted(p.name for p in (Path(uri) / "_versions").iterdir()) == [
        "1.manifest",
        "latest_version_hint.json",
    ]
    assert lance_module.dataset(uri).to_table() == data

    again = pylance_fragments(lance_module, uri, table(4), mode="overwrite")
    second = commit_transaction(store, root, Transaction(1, Overwrite(again, fields)))
    assert [f.id for f in second.fragments] == [3] and second.max_fragment_id == 3
    assert [e.name for e in list_versions(store, root)] == ["1.manifest", "2.manifest"]
    assert lance_module.dataset(uri).to_table() == table(4)
    assert lance_module.dataset(uri, version=1).count_rows() == 30


def test_reserve_fragments_then_pylance_appends(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    commit_transaction(store, root, Transaction(1, ReserveFragments(5)))
    lance_module.write_dataset(table(1, 99), pylance_ds, mode="append")
    assert [f.fragment_id for f in lance_module.dataset(pylance_ds).get_fragments()] == [0, 1, 2, 8]


def test_stale_append_is_rebased_over_pylance_append(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    ours = pylance_fragments(lance_module, pylance_ds, table(2, 100))
    lance_module.write_dataset(table(3, 200), pylance_ds, mode="append")
    manifest = commit_transaction(store, root, Transaction(1, Append(ours)))
    assert manifest.version == 3 and [f.id for f in manifest.fragments] == [0, 1, 2, 3, 4]
    assert lance_module.dataset(pylance_ds).count_rows() == 55


def test_pylance_resolves_its_stale_commit_against_ours(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    ours = pylance_fragments(lance_module, pylance_ds, table(2, 100))
    theirs = lance_module.fragment.write_fragments(table(4, 300), pylance_ds)
    commit_transaction(store, root, Transaction(1, Append(ours)))
    ds = lance_module.LanceDataset.commit(
        pylance_ds, lance_module.LanceOperation.Append(theirs), read_version=1
    )
    assert ds.version == 3 and ds.count_rows() == 56


def test_conflicts_are_typed(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    ours = pylance_fragments(lance_module, pylance_ds, table(2, 100))
    lance_module.write_dataset(table(5), pylance_ds, mode="overwrite")
    with pytest.raises(CommitConflictError, match="Incompatible"):
        commit_transaction(store, root, Transaction(1, Append(ours)))
    overwrite = Overwrite(ours, LanceSchema.from_pb(schema_to_fields(table(1).schema)))
    with pytest.raises(RetryableCommitConflictError):
        commit_transaction(store, root, Transaction(1, overwrite))
    with pytest.raises(CommitConflictError, match="newer than the latest"):
        commit_transaction(store, root, Transaction(9, Append(ours)))
    assert lance_module.dataset(pylance_ds).version == 2


def test_missing_dataset_and_mixed_names(tmp_path: Path) -> None:
    store, root = object_store(tmp_path / "nothing")
    with pytest.raises(DatasetNotFoundError):
        load_manifest(store, root)
    with pytest.raises(DatasetNotFoundError):
        commit_transaction(store, root, Transaction(0, Append(())))
    assert not (tmp_path / "nothing").exists()
    versions = tmp_path / "mixed" / "_versions"
    versions.mkdir(parents=True)
    (versions / "1.manifest").write_bytes(b"x")
    (versions / ManifestNamingScheme.V2.manifest_name(2)).write_bytes(b"x")
    store, root = object_store(tmp_path / "mixed")
    with pytest.raises(CorruptFileError, match="multiple manifest naming schemes"):
        list_versions(store, root)


def _entries_by_parsing_each_name(names: list[str], directory: str) -> list[tuple[int, str, object]]:
    """The general path version_entries is a batch form of: ManifestNamingScheme.parse per name."""
    parsed = [(p[1], name, p[0]) for name in names if (p := ManifestNamingScheme.parse(name)) is not None]
    if len({scheme for _, _, scheme in parsed}) > 1:
        raise CorruptFileError(directory, "found multiple manifest naming schemes in the same directory")
    return sorted(parsed, key=lambda e: (e[0], e[1]))


_VERSION = st.sampled_from([0, 1, 2, 9, 10, 11, 1023, 2**32, 2**62, 2**63 - 1])
_NAME = st.one_of(
    _VERSION.map(ManifestNamingScheme.V1.manifest_name),
    _VERSION.map(ManifestNamingScheme.V2.manifest_name),
    _VERSION.map(lambda v: f"0{v}.manifest"),  # a V1 number with a leading zero
    _VERSION.map(lambda v: f"d{v}.manifest"),  # detached
    st.sampled_from(["latest_version_hint.json", ".manifest", "x.manifest", "1.manifest.tmp", "1.txn"]),
)


@given(names=st.lists(_NAME, max_size=30, unique=True))
def test_version_entries_match_parsing_each_name(names: list[str]) -> None:
    try:
        expected = _entries_by_parsing_each_name(names, "dir")
    except CorruptFileError:
        with pytest.raises(CorruptFileError, match="multiple manifest naming schemes"):
            version_entries(names, "dir")
        return
    got = version_entries(names, "dir")
    assert [(e.version, e.name, e.scheme) for e in got] == expected


@pytest.mark.parametrize("count", [0, 1, 2, READ_AHEAD, READ_AHEAD + 1, 3 * READ_AHEAD + 5])
@pytest.mark.parametrize("whole_file_read_size", [0, 1 << 20])  # cheap requests (grouped) / dear ones
def test_read_ahead_gives_every_file_in_order(tmp_path: Path, count: int, whole_file_read_size: int) -> None:
    store = LocalStore()
    store.whole_file_read_size = whole_file_read_size
    paths = [str(tmp_path / f"{n}.bin") for n in range(count)]
    for n, path in enumerate(paths):
        if n % 7 != 3:  # every seventh file missing
            store.write(path, bytes([n % 256]) * n)
    expected = [None if n % 7 == 3 else bytes([n % 256]) * n for n in range(count)]
    assert list(_read_ahead(store, paths)) == expected


class _AlwaysTaken(CommitHandler):
    def __init__(self) -> None:
        self.attempts = 0

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        self.attempts += 1
        return False


def test_retries_are_bounded(pylance_ds: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lance_ops.table.commit.time.sleep", lambda seconds: None)
    store, root = object_store(pylance_ds)
    handler = _AlwaysTaken()
    with pytest.raises(RetryableCommitConflictError, match="after 3 retries"):
        commit_transaction(store, root, Transaction(1, ReserveFragments(1)), handler=handler, max_retries=3)
    assert handler.attempts == 4


def test_lock_commit_handler(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    taken: list[int] = []

    @contextmanager
    def lock(version: int):  # type: ignore[no-untyped-def]
        taken.append(version)
        yield

    store, root = object_store(pylance_ds)
    commit_transaction(store, root, Transaction(1, ReserveFragments(1)), handler=LockCommitHandler(lock))
    assert taken == [2] and lance_module.dataset(pylance_ds).version == 2


def test_concurrent_appends_all_land(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    store, root = object_store(pylance_ds)
    batches = [pylance_fragments(lance_module, pylance_ds, table(1, 1000 + i)) for i in range(6)]
    errors: list[BaseException] = []

    def worker(fragments: tuple[DataFragment, ...]) -> None:
        try:
            commit_transaction(store, root, Transaction(1, Append(fragments)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(b,)) for b in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ds = lance_module.dataset(pylance_ds)
    assert ds.version == 7 and ds.count_rows() == 56
    assert sorted(f.fragment_id for f in ds.get_fragments()) == list(range(9))
    hint = json.loads((Path(pylance_ds) / "_versions" / "latest_version_hint.json").read_text())
    assert 2 <= hint["version"] <= 7


def test_stable_row_ids_are_assigned(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "stable")
    lance_module.write_dataset(table(10), uri, max_rows_per_file=4, enable_stable_row_ids=True)
    store, root = object_store(uri)
    manifest = commit_transaction(
        store, root, Transaction(1, Append(pylance_fragments(lance_module, uri, table(5, 10))))
    )
    assert manifest.next_row_id == 15
    ds = lance_module.dataset(uri)
    got = ds.to_table(columns=["id"], with_row_id=True)
    assert got.column("_rowid").to_pylist() == list(range(15))
    lance_module.write_dataset(table(2, 15), uri, mode="append")
    assert lance_module.dataset(uri).to_table(with_row_id=True).column("_rowid").to_pylist() == list(
        range(17)
    )


class _CleanupRacesClaim(PutIfAbsentCommitHandler):
    """Before the first claim, another writer commits twice and a cleanup removes the version
    being claimed (as ``retain_versions=1`` does), so its name is free again but in the past."""

    def __init__(self, uri: str, lance) -> None:  # type: ignore[no-untyped-def]
        self.uri, self.lance, self.raced = uri, lance, False

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        if not self.raced:
            self.raced = True
            for start in (100, 200):
                self.lance.write_dataset(table(3, start), self.uri, mode="append")
            store.delete(path)
        return super().claim(store, path, data, version)


def test_a_version_freed_by_cleanup_is_not_reclaimed(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Claiming a manifest name cleanup had removed would hide the commit behind newer versions."""
    store, root = object_store(pylance_ds)
    fragments = pylance_fragments(lance_module, pylance_ds, table(7, 50))
    handler = _CleanupRacesClaim(pylance_ds, lance_module)
    manifest = commit_transaction(store, root, Transaction(1, Append(fragments)), handler=handler)
    assert handler.raced and manifest.version == 4
    assert lance_module.dataset(pylance_ds).count_rows() == 50 + 3 + 3 + 7
    assert [v["version"] for v in lance_module.dataset(pylance_ds).versions()] == [1, 3, 4]


class _WriterLandsOnTop(PutIfAbsentCommitHandler):
    """Right after our claim lands, another writer commits on top of it (before we look for
    newer versions), as concurrent appenders do under load."""

    def __init__(self, uri: str, lance) -> None:  # type: ignore[no-untyped-def]
        self.uri, self.lance, self.raced = uri, lance, False

    def claim(self, store: ObjectStore, path: str, data: bytes, version: int) -> bool:
        claimed = super().claim(store, path, data, version)
        if claimed and not self.raced:
            self.raced = True
            self.lance.write_dataset(table(3, 100), self.uri, mode="append")
        return claimed


def test_a_version_another_writer_built_on_is_kept(pylance_ds: str, lance_module) -> None:  # type: ignore[no-untyped-def]
    """A newer version built on ours is no reason to withdraw ours: that left a gap in the history
    and applied our commit twice (the rows of one append came back twice)."""
    store, root = object_store(pylance_ds)
    fragments = pylance_fragments(lance_module, pylance_ds, table(7, 50))
    handler = _WriterLandsOnTop(pylance_ds, lance_module)
    manifest = commit_transaction(store, root, Transaction(1, Append(fragments)), handler=handler)
    assert handler.raced and manifest.version == 2
    ds = lance_module.dataset(pylance_ds)
    assert [v["version"] for v in ds.versions()] == [1, 2, 3]
    assert sorted(ds.to_table().column("id").to_pylist()) == sorted([*range(57), *range(100, 103)])
