"""Tags: the ``_refs/tags/{name}.json`` files, name rules, checkout by tag, two-way with pylance."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    RefError,
    TagNotFoundError,
    VersionNotFoundError,
)
from lance_ops.ops.tags import format_timestamp, parse_timestamp, validate_tag_name


def _three_versions(uri: str) -> lance_ops.LanceDataset:
    t = pa.table({"id": pa.array(range(10), pa.int64())})
    lance_ops.write_dataset(t, uri)
    lance_ops.write_dataset(t, uri, mode="append")
    ds = lance_ops.dataset(uri)
    ds.delete("id < 3")
    return ds


def test_tag_file_shape_and_checkout(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    ds.tags.create("first", 1)
    doc = json.loads((tmp_path / "ds/_refs/tags/first.json").read_text())
    assert list(doc) == ["branch", "version", "createdAt", "updatedAt", "manifestSize", "metadata"]
    assert doc["branch"] is None and doc["version"] == 1 and doc["metadata"] == {}
    assert doc["createdAt"] == doc["updatedAt"] and doc["createdAt"].endswith("Z")
    manifest = next(
        p for p in (tmp_path / "ds/_versions").iterdir() if p.name == "18446744073709551614.manifest"
    )
    assert doc["manifestSize"] == manifest.stat().st_size
    assert (tmp_path / "ds/_refs/tags/first.json").read_text().startswith('{\n  "branch": null,')
    assert lance_ops.dataset(uri, version="first").version == 1
    assert ds.checkout_version("first").count_rows() == 10
    ds.tags.update("first", 2)
    updated = json.loads((tmp_path / "ds/_refs/tags/first.json").read_text())
    assert updated["version"] == 2 and updated["createdAt"] == doc["createdAt"]
    assert updated["updatedAt"] >= doc["updatedAt"]
    assert ds.tags.get_version("first") == 2
    ds.tags.create("alias", "first")
    assert ds.tags.get_version("alias") == 2
    ds.tags.delete("first")
    assert set(ds.tags.list()) == {"alias"}


def test_list_shapes_and_order(tmp_path: Path) -> None:
    ds = _three_versions(str(tmp_path / "ds"))
    ds.tags.create("b", 3)
    ds.tags.create("a", 1)
    ds.tags.create("c", 2)
    ds.tags.update("b", 1)
    listed = ds.tags.list()
    assert set(listed) == {"a", "b", "c"}
    entry = listed["c"]
    assert set(entry) == {"branch", "version", "created_at", "updated_at", "manifest_size", "metadata"}
    assert entry["version"] == 2 and entry["created_at"].tzinfo == dt.UTC
    assert [n for n, _ in ds.tags.list_ordered()] == ["c", "a", "b"]
    assert [n for n, _ in ds.tags.list_ordered("asc")] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="order"):
        ds.tags.list_ordered("sideways")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a/b", "alphanumeric"),
        ("../x", "alphanumeric"),
        ("a..b", "two consecutive dots"),
        ("", "empty"),
        (".x", "begin with a dot"),
        ("x.", "end with a dot"),
        ("x.lock", "end with .lock"),
        ("a b", "alphanumeric"),
    ],
)
def test_invalid_names(tmp_path: Path, name: str, message: str) -> None:
    ds = _three_versions(str(tmp_path / "ds"))
    with pytest.raises(RefError, match=message):
        ds.tags.create(name, 1)
    assert not (tmp_path / "ds/_refs").exists()


@pytest.mark.parametrize("name", ["a_b-c.d", "1", "-x", "ü"])
def test_valid_names(name: str) -> None:
    validate_tag_name(name)


def test_bad_references_raise_typed_errors(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    ds.tags.create("t", 1)
    before = (tmp_path / "ds/_refs/tags/t.json").read_bytes()
    with pytest.raises(RefError, match="already exists"):
        ds.tags.create("t", 2)
    with pytest.raises(VersionNotFoundError, match="no version 99"):
        ds.tags.create("u", 99)
    with pytest.raises(VersionNotFoundError):
        ds.tags.update("t", 99)
    with pytest.raises(TagNotFoundError, match="nope"):
        ds.tags.delete("nope")
    with pytest.raises(TagNotFoundError):
        ds.tags.update("nope", 1)
    with pytest.raises(TagNotFoundError):
        lance_ops.dataset(uri, version="nope")
    with pytest.raises(TagNotFoundError):
        ds.checkout_version("nope")
    with pytest.raises(VersionNotFoundError):
        lance_ops.dataset(uri, version=99)
    assert isinstance(TagNotFoundError("x"), DatasetNotFoundError | ValueError)
    assert (tmp_path / "ds/_refs/tags/t.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "ds/_refs/tags").iterdir()) == ["t.json"]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        b'{"branch": null}',
        b'{"version": "3"}',
        b'{"version": -1}',
        b'{"version": 1, "createdAt": "yesterday"}',
    ],
)
def test_corrupt_tag_file(tmp_path: Path, content: bytes) -> None:
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    (tmp_path / "ds/_refs/tags").mkdir(parents=True)
    (tmp_path / "ds/_refs/tags/bad.json").write_bytes(content)
    with pytest.raises(CorruptFileError, match="bad.json"):
        ds.tags.list()
    with pytest.raises(CorruptFileError, match="invalid tag file"):
        lance_ops.dataset(uri, version="bad")
    ds.tags.delete("bad")
    assert ds.tags.list() == {}


def test_timestamps_round_trip() -> None:
    ns = 1_795_294_251_123_456_789
    text = format_timestamp(ns)
    assert text.endswith(".123456789Z") and len(text) == len("2026-11-21T20:49:46.052726342Z")
    assert parse_timestamp(text) == dt.datetime.fromtimestamp(ns // 1000 / 1e6, dt.UTC).replace(
        microsecond=123456
    )
    assert parse_timestamp("2026-01-01T00:00:00+02:00") == dt.datetime(2025, 12, 31, 22, tzinfo=dt.UTC)


@pytest.mark.interop
def test_pylance_reads_our_tags(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    ds.tags.create("one", 1)
    ds.tags.create("two", 2)
    ds.tags.update("two", 3)
    theirs = lance_module.dataset(uri)
    listed = theirs.tags.list()
    ours = ds.tags.list()
    assert listed == ours
    assert theirs.tags.list_ordered() == ds.tags.list_ordered()
    assert lance_module.dataset(uri, version="one").to_table() == ds.checkout_version("one").to_table()
    assert theirs.checkout_version("two").version == 3
    theirs.tags.delete("one")
    assert set(ds.tags.list()) == {"two"}


@pytest.mark.interop
def test_we_read_pylance_tags(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _three_versions(uri)
    theirs = lance_module.dataset(uri)
    theirs.tags.create("one", 1)
    theirs.tags.create("three", 3)
    theirs.tags.update("one", 2)
    ds = lance_ops.dataset(uri)
    assert ds.tags.list() == theirs.tags.list()
    assert ds.tags.list_ordered("asc") == theirs.tags.list_ordered("asc")
    assert lance_ops.dataset(uri, version="one").version == 2
    assert ds.checkout_version("three").to_table() == theirs.checkout_version("three").to_table()
    ds.tags.update("three", 1)
    assert lance_module.dataset(uri, version="three").version == 1
    ds.tags.delete("one")
    assert set(theirs.tags.list()) == {"three"}
