"""Transactions: every operation pylance 14 commits parses and re-serializes byte for byte."""

from __future__ import annotations

import pytest

from lance_ops._proto import transaction_pb2
from lance_ops.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.table.manifest import DataFile, DataFragment
from lance_ops.table.transaction import (
    COMMIT_MESSAGE_KEY,
    OPERATIONS,
    Append,
    Clone,
    DataReplacement,
    Overwrite,
    Transaction,
    UpdateBases,
    UpdateConfig,
    UpdateMap,
)
from tests.table.conftest import transaction_files


@pytest.mark.interop
def test_pylance_transactions_round_trip(pylance_history: dict[str, str]) -> None:
    kinds = set()
    for root in pylance_history.values():
        for path in transaction_files(root):
            data = path.read_bytes()
            transaction = Transaction.deserialize(data, str(path))
            assert path.name == transaction.file_name
            # Field for field; bytes too, modulo the (unspecified) order of map entries.
            original = transaction_pb2.Transaction.FromString(data)
            assert transaction.to_pb() == original, path
            ours = transaction.to_pb().SerializeToString(deterministic=True)
            assert ours == original.SerializeToString(deterministic=True), path
            if len(original.transaction_properties) < 2:
                assert transaction.serialize() == data, path
            kinds.add(transaction.operation.name)
    assert kinds == {
        "Overwrite",
        "Append",
        "Delete",
        "Update",
        "Merge",
        "Project",
        "UpdateConfig",
        "ReserveFragments",
        "Rewrite",
        "Restore",
        "CreateIndex",
    }


@pytest.mark.interop
def test_commit_message_and_properties(pylance_history: dict[str, str]) -> None:
    first = transaction_files(pylance_history["basic"])
    created = [Transaction.deserialize(p.read_bytes()) for p in first if p.name.startswith("0-")]
    assert len(created) == 1
    assert created[0].commit_message == "first"
    assert created[0].properties == {"k": "v", COMMIT_MESSAGE_KEY: "first"}
    assert isinstance(created[0].operation, Overwrite)


def test_every_operation_round_trips() -> None:
    fragment = DataFragment(0, (DataFile("f.lance", (0, 1), (0, 1), 2, 2, 100),), 10)
    samples = [
        Append((fragment,)),
        DataReplacement(((3, fragment.files[0]),)),
        Clone(is_shallow=True, ref_version=2, ref_path="/x", branch_name="b"),
        UpdateConfig(
            config_updates=UpdateMap((("a", "1"), ("b", None))),
            field_metadata_updates={0: UpdateMap((("k", "v"),), replace=True)},
        ),
    ]
    for op in samples:
        transaction = Transaction(read_version=4, operation=op, properties={"p": "q"})
        assert Transaction.deserialize(transaction.serialize()) == transaction
    assert len(OPERATIONS) == 14 and "update_bases" in OPERATIONS and UpdateBases.oneof == "update_bases"


def test_update_map_semantics() -> None:
    update = UpdateMap((("a", "2"), ("gone", None)))
    assert update.apply({"a": "1", "gone": "x", "kept": "y"}) == {"a": "2", "kept": "y"}
    assert UpdateMap((("a", "2"),), replace=True).apply({"b": "1"}) == {"a": "2"}


def test_bad_transactions() -> None:
    with pytest.raises(CorruptFileError):
        Transaction.deserialize(b"\xff\xff\xff", "bad.txn")
    empty = transaction_pb2.Transaction(read_version=1, uuid="u").SerializeToString()
    with pytest.raises(UnsupportedFeatureError):
        Transaction.deserialize(empty)
    mem_wal = transaction_pb2.Transaction(read_version=1, uuid="u")
    mem_wal.update_mem_wal_state.SetInParent()
    with pytest.raises(UnsupportedFeatureError):
        Transaction.deserialize(mem_wal.SerializeToString())
