"""Paths in manifests and transactions, and tag names, that would leave the dataset: refused before I/O."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import CorruptFileError, RefError, UnsafePathError
from lance_ops.fragment.reader import VersionFiles
from lance_ops.io import object_store
from lance_ops.table.commit import load_manifest
from lance_ops.table.manifest import BasePath, DataFragment, ExternalFile, encode_manifest_file
from lance_ops.table.paths import check_base_path, check_relative_path
from lance_ops.table.transaction import Append, Transaction

BAD_RELATIVE = [
    "../escape.lance",
    "a/../../escape.lance",
    "./x.lance",
    "/etc/passwd",
    "s3://bucket/x.lance",
    "file:///tmp/x.lance",
    "C:/x.lance",
    "a\\..\\x.lance",
    "x\x00.lance",
    "",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("template") / "ds")
    lance_ops.write_dataset(pa.table({"a": pa.array(range(10), pa.int64())}), uri)
    return uri


@pytest.fixture()
def dataset_uri(template, tmp_path):
    """A fresh copy of a 10-row dataset (copied: writing one per case is slower)."""
    uri = str(tmp_path / "ds")
    shutil.copytree(template, uri)
    return uri


def _rewrite_latest(uri: str, change) -> None:
    """Replace the latest manifest by ``change(manifest)`` (as a hostile writer could)."""
    store, root = object_store(uri)
    loaded = load_manifest(store, root)
    store.write(loaded.path, encode_manifest_file(change(loaded.manifest), loaded.transaction))


@pytest.fixture()
def no_file_io(monkeypatch):
    """Fail the test if any data file is opened."""

    def refuse(self, data_file):
        raise AssertionError(f"opened {data_file.path}")

    monkeypatch.setattr(VersionFiles, "open_file", refuse)


@pytest.mark.parametrize("bad", BAD_RELATIVE)
def test_data_file_paths_leaving_the_dataset_are_refused(dataset_uri, tmp_path, bad, no_file_io):
    (tmp_path / "escape.lance").write_bytes(b"not yours")

    def change(manifest):
        fragment = manifest.fragments[0]
        files = (replace(fragment.files[0], path=bad),)
        return replace(manifest, fragments=(replace(fragment, files=files),))

    _rewrite_latest(dataset_uri, change)
    with pytest.raises(UnsafePathError) as info:
        lance_ops.dataset(dataset_uri).to_table()
    assert isinstance(info.value, CorruptFileError) and info.value.path.endswith(".manifest")


@pytest.mark.parametrize("bad", ["../../x.txn", "/x.txn", "gs://b/x.txn"])
def test_transaction_file_paths_are_refused(dataset_uri, bad):
    _rewrite_latest(dataset_uri, lambda m: replace(m, transaction_file=bad))
    with pytest.raises(UnsafePathError):
        lance_ops.dataset(dataset_uri)


@pytest.mark.parametrize("bad", ["../rowids.bin", "/rowids.bin", "memory://x/rowids.bin"])
def test_external_row_id_paths_are_refused(dataset_uri, bad):
    def change(manifest):
        fragment = replace(manifest.fragments[0], row_ids=ExternalFile(bad, 0, 8))
        return replace(manifest, fragments=(fragment,))

    _rewrite_latest(dataset_uri, change)
    with pytest.raises(UnsafePathError):
        lance_ops.dataset(dataset_uri)


@pytest.mark.parametrize("bad", ["relative/dir", "/data/../../etc", "s3://bucket/../x", "/x\x00y"])
def test_malformed_base_paths_are_refused(dataset_uri, bad):
    _rewrite_latest(dataset_uri, lambda m: replace(m, base_paths=(BasePath(1, bad),)))
    with pytest.raises(UnsafePathError):
        lance_ops.dataset(dataset_uri)


@pytest.mark.parametrize("other", ["s3://bucket/elsewhere", "memory://elsewhere", "http://host/x"])
def test_base_paths_on_another_scheme_are_refused_before_io(dataset_uri, other, no_file_io):
    def change(manifest):
        fragment = manifest.fragments[0]
        files = (replace(fragment.files[0], base_id=1),)
        return replace(
            manifest, base_paths=(BasePath(1, other),), fragments=(replace(fragment, files=files),)
        )

    _rewrite_latest(dataset_uri, change)
    with pytest.raises(UnsafePathError, match="another scheme"):
        lance_ops.dataset(dataset_uri).to_table()


def test_same_scheme_base_paths_still_work(dataset_uri, tmp_path):
    """An absolute local base of a local dataset is fine (multi-base datasets keep working)."""
    assert check_base_path(str(tmp_path / "other")) == str(tmp_path / "other")
    assert check_base_path("s3://bucket/base") == "s3://bucket/base"
    assert check_relative_path("sub/dir/x.lance", "data file") == "sub/dir/x.lance"


@pytest.mark.parametrize("bad", BAD_RELATIVE[:5])
def test_transactions_and_fragment_metadata_with_bad_paths_are_refused(dataset_uri, bad):
    fragment = lance_ops.dataset(dataset_uri).manifest.fragments[0]
    hostile = replace(fragment, files=(replace(fragment.files[0], path=bad),))
    data = Transaction(read_version=1, operation=Append((hostile,))).serialize()
    with pytest.raises(UnsafePathError):
        Transaction.deserialize(data, "hostile.txn")
    with pytest.raises(UnsafePathError):
        DataFragment.from_json(hostile.to_json())


@pytest.mark.parametrize("name", ["../escape", "../../_versions/x", "a/b", "/abs", "..", ".hidden", "x.lock"])
def test_tag_names_cannot_escape_refs_tags(dataset_uri, tmp_path, name):
    ds = lance_ops.dataset(dataset_uri)
    with pytest.raises(RefError):
        ds.tags.create(name, 1)
    with pytest.raises(RefError):
        ds.tags.get(name)
    with pytest.raises(RefError):
        ds.tags.delete(name)
    with pytest.raises(RefError):
        ds.checkout_version(name)
    with pytest.raises(RefError):
        lance_ops.dataset(dataset_uri, version=name)
    outside = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert not [p for p in outside if not p.startswith("ds/")]
    assert not list((tmp_path / "ds").glob("_refs/**/*.json"))
