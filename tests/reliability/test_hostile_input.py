"""Hostile input (see tests/reliability/hostile.py): damaged files of every kind raise typed errors.

Every case runs in a child process with a capped address space and a per-case watchdog: an untyped
error, a hang or an allocation beyond the cap fails the test.
"""

from __future__ import annotations

import collections
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import table_pb2, transaction_pb2
from lance_ops.errors import CorruptFileError, LanceOpsError, MissingFileError
from lance_ops.io import object_store
from lance_ops.table.commit import load_manifest
from lance_ops.table.deletion import encode_deletion_file
from lance_ops.table.manifest import DeletionFileType, Manifest, decode_manifest_file, encode_manifest_file
from lance_ops.table.transaction import Transaction
from tests.reliability.hostile import KINDS, MUTATIONS, corpus, run_cases

pytestmark = pytest.mark.interop


def _bad(outcomes):
    return [o for o in outcomes if o.result in ("untyped", "hang")]


def test_every_kind_and_mutation_raises_typed_errors(tmp_path):
    """One case per kind x mutation and more petabyte length fields, all in one child process."""
    cases = list(corpus(range(1))) + list(corpus(range(1, 2), ("huge_length",)))
    assert {c.kind for c in cases} == set(KINDS) and {c.mutation for c in cases} == set(MUTATIONS)
    outcomes = run_cases(str(tmp_path), cases, timeout=300)
    assert len(outcomes) == len(cases)
    assert _bad(outcomes) == []
    results = collections.Counter(o.result for o in outcomes)
    assert results["typed"] > len(cases) // 2
    # Where the library has a check (manifest framing, tag schema, row-id lengths), nothing is
    # silently wrong; data pages carry no checksums in Lance, so a flipped value there can be.
    assert not [o for o in outcomes if o.result == "wrong" and o.case.kind in ("manifest", "tag", "rowids")]


@pytest.fixture()
def small(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(pa.table({"a": pa.array(range(50), pa.int64())}), uri)
    ds.delete("a < 5")
    return Path(uri)


def test_corrupt_arrow_deletion_file_is_typed(small):
    """Was pyarrow's OSError ("Verification of flatbuffer-encoded Footer failed")."""
    (deletion,) = (small / "_deletions").glob("*.arrow")
    data = bytearray(deletion.read_bytes())
    data[-12] ^= 0xFF
    deletion.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="Arrow IPC"):
        lance_ops.dataset(str(small)).to_table()


def test_manifest_with_damaged_data_path_is_typed(small):
    """Was the builtin FileNotFoundError; now MissingFileError (still a FileNotFoundError)."""
    store, root = object_store(str(small))
    loaded = load_manifest(store, root)
    fragment = loaded.manifest.fragments[0]
    # Data file names start with binary digits: "x" is a one-byte corruption no file has.
    damaged = replace(fragment, files=(replace(fragment.files[0], path="x" + fragment.files[0].path[1:]),))
    manifest = replace(loaded.manifest, fragments=(damaged,))
    store.write(loaded.path, encode_manifest_file(manifest, loaded.transaction))
    with pytest.raises(MissingFileError) as info:
        lance_ops.dataset(str(small)).to_table()
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("doc", [b'{"branch": null}', b"[]", b'{"version": "3"}', b"\xff{"])
def test_tag_file_without_version_is_typed(small, doc):
    """Was KeyError for a tag file without "version"."""
    lance_ops.dataset(str(small)).tags.create("t", 1)
    (small / "_refs" / "tags" / "t.json").write_bytes(doc)
    with pytest.raises(CorruptFileError, match="invalid tag file"):
        lance_ops.dataset(str(small)).tags.list()
    with pytest.raises(CorruptFileError):
        lance_ops.dataset(str(small), version="t")


def test_deletion_file_disagreeing_with_manifest_count_is_refused(small):
    """A vector holding another count than the manifest records would delete the wrong rows."""
    (deletion,) = (small / "_deletions").glob("*.arrow")
    deletion.write_bytes(encode_deletion_file(np.arange(4, dtype=np.uint32), DeletionFileType.ARROW_ARRAY))
    with pytest.raises(CorruptFileError, match="manifest records 5"):
        lance_ops.dataset(str(small)).to_table()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_random_protobuf_bytes_as_transaction(data):
    try:
        Transaction.deserialize(data, "fuzz.txn")
    except LanceOpsError:
        pass


def _manifest_messages():
    """Structurally valid Manifest protobufs with arbitrary field values (paths, enums, numbers)."""
    data_file = st.builds(
        table_pb2.DataFile,
        path=st.text(max_size=20),
        fields=st.lists(st.integers(-5, 50), max_size=4),
        file_major_version=st.integers(0, 5),
        file_minor_version=st.integers(0, 5),
    )
    deletion = st.builds(
        table_pb2.DeletionFile,
        file_type=st.integers(0, 5),
        read_version=st.integers(0, 2**63),
        id=st.integers(0, 2**63),
        num_deleted_rows=st.integers(0, 2**40),
    )
    fragment = st.builds(
        table_pb2.DataFragment,
        id=st.integers(0, 2**63),
        files=st.lists(data_file, max_size=3),
        deletion_file=st.none() | deletion,
        physical_rows=st.integers(0, 2**50),
    )
    base = st.builds(table_pb2.BasePath, id=st.integers(0, 10), path=st.text(max_size=20))
    return st.builds(
        table_pb2.Manifest,
        version=st.integers(0, 2**63),
        fragments=st.lists(fragment, max_size=3),
        transaction_file=st.text(max_size=20),
        base_paths=st.lists(base, max_size=2),
        reader_feature_flags=st.integers(0, 2**10),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_manifest_messages())
def test_generated_manifest_protobufs_decode_or_raise_typed(pb):
    payload = pb.SerializeToString()
    data = encode_manifest_file(Manifest.from_pb(table_pb2.Manifest()), None)
    # Re-frame: replace the manifest section with the generated message.
    framed = len(payload).to_bytes(4, "little") + payload
    footer = (0).to_bytes(8, "little") + data[-8:]
    try:
        manifest, _ = decode_manifest_file(framed + footer, "fuzz.manifest")
    except LanceOpsError:
        return
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            assert not data_file.path.startswith("/") and ".." not in data_file.path.split("/")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_as_transaction_pb_fields(data):
    pb = transaction_pb2.Transaction(read_version=1, uuid="u")
    try:
        pb.append.fragments.add().ParseFromString(data)
    except Exception:  # noqa: BLE001 - the generator only needs *some* message
        return
    try:
        Transaction.deserialize(pb.SerializeToString(), "fuzz.txn")
    except LanceOpsError:
        pass


@pytest.mark.soak
def test_hostile_input_soak(tmp_path, soak_seconds, report):
    started = time.monotonic()
    totals: collections.Counter[str] = collections.Counter()
    wrong: collections.Counter[str] = collections.Counter()
    bad = []
    seed = 1
    while time.monotonic() - started < soak_seconds:
        outcomes = run_cases(str(tmp_path), list(corpus(range(seed, seed + 4))), timeout=1800)
        totals.update(o.result for o in outcomes)
        wrong.update(o.case.kind for o in outcomes if o.result == "wrong")
        bad += _bad(outcomes)
        seed += 4
    figures = {"seconds": round(time.monotonic() - started), "cases": sum(totals.values()), **totals}
    report({**figures, "wrong_by_kind": dict(wrong)})
    assert bad == [], bad[:3]
