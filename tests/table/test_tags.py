"""Tags: the ``_refs/tags/{name}.json`` files, name rules, checkout by tag, two-way with pylance."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    InvalidArgumentError,
    InvalidTagNameError,
    RefError,
    TagNotFoundError,
    VersionNotFoundError,
)
from lance_ops.ops._ref_chars import is_alphanumeric
from lance_ops.ops.tags import Tags, format_timestamp, parse_timestamp, validate_tag_name


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
    with pytest.raises(InvalidTagNameError, match=message) as raised:
        ds.tags.create(name, 1)
    assert isinstance(raised.value, RefError | OSError)  # pylance raises OSError
    assert not (tmp_path / "ds/_refs").exists()


@pytest.mark.parametrize("name", ["a_b-c.d", "1", "-x", "ü", "a.lock.b", "x.LOCK", "\u0915\u093f", "\u24b6"])
def test_valid_names(name: str) -> None:
    validate_tag_name(name)


# Names whose verdicts differ between a naive str.isalnum() check and Rust's char::is_alphanumeric
# (combining marks with the Alphabetic property, circled letters, characters newer than Python's
# Unicode tables), plus path-like, dotted and control-character names.
_PROBE_NAMES = [
    "",
    "a/b",
    "a\\b",
    "/a",
    "a/",
    "..",
    ".",
    "a..b",
    ".a",
    "a.",
    "a.lock",
    ".lock",
    "a..lock",
    "a.lock.",
    "a/.",
    "x.lock/",
    "a b",
    "a\tb",
    "a\nb",
    "a:b",
    "a@{b",
    "a~b",
    "a^b",
    "a?b",
    "a*b",
    "a[b",
    "a,b",
    "a'b",
    'a"b',
    "a\u200bb",
    "é",
    "日本",
    "٣",
    "Ⅻ",
    "-a",
    "_a",
    "A",
    "1",
    "lock",
    "ab.LOCK",
    "\u0345",
    "\u0915\u093f",
    "\u24b6",
    "\U0001f1e6",
    "\U0001f600",
    "\U00011f00",
    "\u0890",
    "\u00b2",
]


def _pylance_verdict(lance_ds, name: str) -> str:  # type: ignore[no-untyped-def]
    try:
        lance_ds.tags.create(name, 1)
    except OSError as exc:
        return str(exc)
    lance_ds.tags.delete(name)
    return "ok"


def _our_verdict(name: str) -> str:
    try:
        validate_tag_name(name)
    except InvalidTagNameError as exc:
        return str(exc).rsplit(" (tag name", 1)[0]
    return "ok"


@pytest.mark.interop
def test_name_rules_match_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _three_versions(uri)
    theirs = lance_module.dataset(uri)
    ours = {n: _our_verdict(n) for n in _PROBE_NAMES}
    assert ours == {n: _pylance_verdict(theirs, n) for n in _PROBE_NAMES}
    # Character by character: "<c>." is refused for its characters or (valid ones) for the final
    # dot, so nothing is written. Every code point where str.isalnum() and Rust disagree, and a
    # sample of the rest (tests marked soak sweep all of them).
    points = [cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    disagree = [cp for cp in points if chr(cp).isalnum() != is_alphanumeric(chr(cp))]
    assert len(disagree) > 10_000  # the table is needed at all
    sample = sorted(set(disagree) | set(points[::97]))
    assert [_our_verdict(chr(cp) + ".") for cp in sample] == [
        _pylance_verdict(theirs, chr(cp) + ".") for cp in sample
    ]


@pytest.mark.interop
@pytest.mark.soak
def test_every_code_point_judged_as_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _three_versions(uri)
    theirs = lance_module.dataset(uri)
    points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    assert [_our_verdict(chr(cp) + ".") for cp in points] == [
        _pylance_verdict(theirs, chr(cp) + ".") for cp in points
    ]


def test_create_and_update_default_to_latest(tmp_path: Path) -> None:
    ds = _three_versions(str(tmp_path / "ds"))
    ds.tags.create("latest")
    ds.tags.create("old", 1)
    ds.tags.update("old")
    ds.tags.create("pair", (None, None))
    assert {n: t["version"] for n, t in ds.tags.list().items()} == {"latest": 3, "old": 3, "pair": 3}


def test_replace_metadata(tmp_path: Path) -> None:
    ds = _three_versions(str(tmp_path / "ds"))
    path = tmp_path / "ds/_refs/tags/t.json"
    ds.tags.create("t", 1)
    before = json.loads(path.read_text())
    ds.tags.replace_metadata("t", {"owner": 'é/"x', "z": "1"})
    raw = path.read_bytes()
    assert '"owner": "é/\\"x"'.encode() in raw  # UTF-8 as serde writes it, not \u escapes
    after = json.loads(raw)
    assert after["metadata"] == {"owner": 'é/"x', "z": "1"}
    assert after["updatedAt"] == before["updatedAt"]  # pylance keeps both timestamps here
    ds.tags.update("t", 2)
    assert ds.tags.list()["t"]["metadata"] == {"owner": 'é/"x', "z": "1"}
    ds.tags.replace_metadata("t", {})
    assert ds.tags.list()["t"]["metadata"] == {}
    with pytest.raises(TagNotFoundError):
        ds.tags.replace_metadata("nope", {})
    with pytest.raises(InvalidArgumentError, match="strings"):
        ds.tags.replace_metadata("t", {"a": 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidTagNameError):
        ds.tags.replace_metadata("a/b", {})


def test_bad_references_raise_typed_errors(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    ds.tags.create("t", 1)
    before = (tmp_path / "ds/_refs/tags/t.json").read_bytes()
    with pytest.raises(RefError, match="already exists"):
        ds.tags.create("t", 2)
    with pytest.raises(VersionNotFoundError, match="version 99 of dataset"):
        ds.tags.create("u", 99)
    with pytest.raises(VersionNotFoundError):  # the version is checked before the name, as in pylance
        ds.tags.create("t", 99)
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


@pytest.mark.interop
def test_metadata_both_ways(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    ds = _three_versions(uri)
    theirs = lance_module.dataset(uri)
    ds.tags.create("ours", 2)
    ds.tags.replace_metadata("ours", {"k": "ü"})
    theirs.tags.create("theirs", 1)
    theirs.tags.replace_metadata("theirs", {"who": "pylance", "n": "ä"})
    assert theirs.tags.list() == ds.tags.list()
    assert ds.tags.list()["theirs"]["metadata"] == {"who": "pylance", "n": "ä"}
    theirs.tags.update("ours", 3)
    ds.tags.update("theirs", 3)
    assert ds.tags.list() == theirs.tags.list()
    assert ds.tags.list()["ours"]["metadata"] == {"k": "ü"}
    assert theirs.tags.list()["theirs"]["metadata"] == {"who": "pylance", "n": "ä"}
    # The bytes match pylance's for the same content (metadata with one key: no ordering question).
    ours = (tmp_path / "ds/_refs/tags/ours.json").read_bytes()
    doc = json.loads(ours)
    theirs.tags.create("twin", 3)
    theirs.tags.replace_metadata("twin", {"k": "ü"})
    twin = (tmp_path / "ds/_refs/tags/twin.json").read_bytes()
    for key in ("createdAt", "updatedAt"):
        twin = re.sub(rf'"{key}": "[^"]*"'.encode(), f'"{key}": "{doc[key]}"'.encode(), twin)
    assert ours == twin


@pytest.mark.interop
def test_method_signatures_match_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """Keyword calls written for pylance work: same parameter names, same defaults."""
    import importlib  # noqa: PLC0415
    import inspect  # noqa: PLC0415

    theirs = importlib.import_module("lance.dataset").Tags
    for method in ("create", "update", "delete", "get_version", "list", "list_ordered", "replace_metadata"):
        expected = inspect.signature(getattr(theirs, method)).parameters
        ours = inspect.signature(getattr(Tags, method)).parameters
        assert list(ours) == list(expected), method
        assert [p.default for p in ours.values()] == [p.default for p in expected.values()], method
    ds = _three_versions(str(tmp_path / "ds"))
    ds.tags.create(tag="k", reference=1)
    ds.tags.update(tag="k", reference=2)
    ds.tags.replace_metadata(tag="k", metadata={"a": "b"})
    assert ds.tags.get_version(tag="k") == 2
    ds.tags.delete(tag="k")
