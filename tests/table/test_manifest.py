"""Manifest objects and framing: names, round trips of pylance-written manifests, corruption."""

from __future__ import annotations

import pickle
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import table_pb2
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.io import object_store
from lance_ops.table.commit import list_versions, load_manifest
from lance_ops.table.manifest import (
    FOOTER,
    DataFile,
    DataFragment,
    DeletionFile,
    DeletionFileType,
    ExternalFile,
    Manifest,
    decode_manifest_file,
    encode_manifest_file,
)
from lance_ops.table.naming import ManifestNamingScheme, data_file_name, transaction_file_name
from lance_ops.table.schema import LanceSchema
from tests.table.conftest import manifest_files

V2 = ManifestNamingScheme.V2
V1 = ManifestNamingScheme.V1


def test_manifest_names_match_pylance_examples() -> None:
    assert V2.manifest_name(1) == "18446744073709551614.manifest"
    assert V2.manifest_name(2) == "18446744073709551613.manifest"
    assert V1.manifest_name(1) == "1.manifest"
    assert V2.manifest_name(0x8000000000000005) == "d9223372036854775813.manifest"
    assert ManifestNamingScheme.parse("d9223372036854775813.manifest") is None
    assert ManifestNamingScheme.parse("latest_version_hint.json") is None
    assert ManifestNamingScheme.parse("18446744073709551614.manifest#1") is None
    assert transaction_file_name(1, "2ba3fe18-a957-4e97-a8fb-d49d52b4ddda") == (
        "1-2ba3fe18-a957-4e97-a8fb-d49d52b4ddda.txn"
    )


@given(st.integers(min_value=0, max_value=2**63 - 1), st.sampled_from([V1, V2]))
def test_manifest_name_round_trip(version: int, scheme: ManifestNamingScheme) -> None:
    name = scheme.manifest_name(version)
    parsed = ManifestNamingScheme.parse(name)
    # A V1 name with exactly 20 digits is indistinguishable from a V2 name (as in pylance).
    if scheme is V1 and len(str(version)) == 20:
        return
    assert parsed == (scheme, version)


def test_v2_names_sort_newest_first() -> None:
    names = [V2.manifest_name(v) for v in (1, 2, 9, 10, 11, 100)]
    assert sorted(names) == names[::-1]


def test_data_file_name_shape() -> None:
    name = data_file_name()
    assert len(name) == 50 + len(".lance") and name.endswith(".lance")
    assert set(name[:24]) <= {"0", "1"}
    int(name[24:50], 16)


def _all_manifests(roots: dict[str, str]) -> list[Path]:
    return [path for root in roots.values() for path in manifest_files(root)]


@pytest.mark.interop
def test_pylance_manifests_round_trip_byte_for_byte(pylance_history: dict[str, str]) -> None:
    paths = _all_manifests(pylance_history)
    assert len(paths) >= 20
    seen_index = False
    for path in paths:
        data = path.read_bytes()
        manifest, transaction = decode_manifest_file(data, str(path))
        assert transaction is not None
        seen_index |= bool(manifest.indices)
        pos = struct.unpack_from("<q", data, len(data) - FOOTER.size)[0]
        original = table_pb2.Manifest.FromString(data[pos + 4 : len(data) - FOOTER.size])
        assert manifest.to_pb() == original, path
        # Byte for byte, except where pylance's map order (unspecified) differs from ours.
        maps = max(len(original.schema_metadata), len(original.config), len(original.table_metadata))
        if maps < 2:
            assert encode_manifest_file(manifest, transaction) == data, path
    assert seen_index


@pytest.mark.interop
def test_pylance_manifest_fields(pylance_history: dict[str, str]) -> None:
    store, root = object_store(pylance_history["stable"])
    manifest = load_manifest(store, root).manifest
    assert manifest.writer_version is not None and manifest.writer_version.library == "lance"
    assert manifest.uses_stable_row_ids and manifest.next_row_id == 15
    assert manifest.transaction_section == 0
    assert manifest.data_format is not None and manifest.data_format.version == "2.2"
    assert [f.id for f in manifest.fragments] == sorted(f.id for f in manifest.fragments)
    assert manifest.feature_flags() == (manifest.reader_feature_flags, manifest.writer_feature_flags)
    assert any(f.deletion_file is not None for f in manifest.fragments)
    assert manifest.num_rows == 13

    store, root = object_store(pylance_history["v1_21"])
    entries = list_versions(store, root)
    assert [(e.version, e.scheme) for e in entries] == [(1, V1), (2, V1)]
    assert load_manifest(store, root, 1).manifest.data_storage_version == "2.1"


@pytest.mark.interop
def test_manifest_without_inline_transaction_and_with_field_21(pylance_history: dict[str, str]) -> None:
    path = manifest_files(pylance_history["basic"])[0]
    manifest, transaction = decode_manifest_file(path.read_bytes(), str(path))
    bare = encode_manifest_file(manifest, None)
    parsed, inline = decode_manifest_file(bare, "bare")
    assert inline is None and parsed.transaction_section is None
    assert replace(parsed, transaction_section=0) == manifest
    # The older position field (21) is honoured when 23 is absent.
    assert transaction is not None
    pb = manifest.to_pb()
    pb.ClearField("transaction_section_position")
    pb.transaction_section = 0
    payload = pb.SerializeToString()
    old_style = struct.pack("<I", len(transaction)) + transaction + struct.pack("<I", len(payload)) + payload
    old_style += FOOTER.pack(4 + len(transaction), 0, 2, b"LANC")
    assert decode_manifest_file(old_style, "old")[1] == transaction


def _minimal(version: int = 1) -> Manifest:
    fragment = DataFragment(0, (DataFile("a.lance", (0,), (0,), 2, 2, 10),), 3)
    return Manifest(schema=LanceSchema(()), fragments=(fragment,), version=version, max_fragment_id=0)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:-4] + b"LANX", "magic"),
        (lambda b: b[:10], "too short"),
        (lambda b: b[:-16] + struct.pack("<qhh", 10_000, 0, 2) + b"LANC", "outside"),
        (lambda b: b[:7] + b"\xff\xff\xff\x7f" + b[11:], "past the footer"),
        (lambda b: b[:-16] + b"\x00" + b[-16:], "does not end"),
    ],
)
def test_corrupt_manifest_files(mutate, reason: str) -> None:  # type: ignore[no-untyped-def]
    data = encode_manifest_file(_minimal(), b"txn")
    with pytest.raises(CorruptFileError, match=reason):
        decode_manifest_file(mutate(data), "m")


def test_unknown_reader_flag_is_refused(tmp_path: Path) -> None:
    store, root = object_store(tmp_path / "ds")
    manifest = replace(_minimal(), reader_feature_flags=64, writer_feature_flags=64)
    store.write(store.join(root, "_versions", V2.manifest_name(1)), encode_manifest_file(manifest, None))
    with pytest.raises(UnsupportedFeatureError, match="reader feature flags 0x40"):
        load_manifest(store, root)


def test_fragment_json_and_pickle_round_trip() -> None:
    fragment = DataFragment(
        id=7,
        files=(DataFile("x.lance", (0, 2, 3), (0, 1, 2), 2, 1, 1234, base_id=3),),
        physical_rows=1025,
        deletion_file=DeletionFile(DeletionFileType.BITMAP, 4, 99, 5000),
        row_ids=b"\x0a\x04\x0a\x02\x08\x01",
        created_at_versions=ExternalFile("_rowids/x", 10, 20),
    )
    assert DataFragment.from_json(fragment.to_json()) == fragment
    assert pickle.loads(pickle.dumps(fragment)) == fragment
    assert DataFragment.from_pb(fragment.to_pb()) == fragment
    assert fragment.num_rows == 1025 - 5000 or fragment.num_deleted_rows == 5000


@pytest.mark.interop
def test_fragment_json_is_read_by_pylance(pylance_history: dict[str, str], lance_module) -> None:  # type: ignore[no-untyped-def]
    import json

    fragments = []
    for name in ("evolved", "stable"):
        store, root = object_store(pylance_history[name])
        fragments += load_manifest(store, root).manifest.fragments
    for fragment in fragments:
        theirs = lance_module.FragmentMetadata.from_json(json.dumps(fragment.to_json()))
        assert theirs.id == fragment.id and theirs.physical_rows == fragment.physical_rows
        assert [f.path for f in theirs.files] == [f.path for f in fragment.files]
        assert DataFragment.from_json(theirs.to_json()) == fragment
