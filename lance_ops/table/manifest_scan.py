"""Whole-manifest facts read in one protobuf parse each, without one Python object per fragment;
and the head of a transaction without its operation's body (:func:`transaction_head`).

Two private message types mirror the manifest's fragments with only the fields needed, declared so
that the protobuf parser itself aggregates them: the manifest's repeated ``fragments`` field is
declared *singular* here, and protobuf merges repeated occurrences of a singular message field into
one message, concatenating its repeated fields. So one parse (in C) yields every fragment's data
file paths, external sequence paths, deletion file types and row counts as flat lists, and a second
yields how many data files, deletion files and external sequences there are in all (paths are
proto3 strings: an empty one is not on the wire, so the counts show a missing path).

The lists are a *superset* view of the fragments (a field repeated inside one fragment, which no
writer produces, appears once per occurrence here but once in the decoded fragment): the path
check uses them as a conservative pre-check and falls back to the per-fragment pass when anything
looks off; the sums (rows, deleted rows, file sizes) equal the fragments' for every manifest
without such repeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from lance_ops._proto import transaction_pb2

__all__ = ["FragmentsScan", "TransactionHead", "scan_fragments", "transaction_head"]

_F = descriptor_pb2.FieldDescriptorProto
_EXTERNAL = {
    "external_row_ids": 6,
    "external_last_updated_at_versions": 8,
    "external_created_at_versions": 10,
}


def _message(
    file: descriptor_pb2.FileDescriptorProto, name: str, fields: list[tuple[str, int, int, int, str]]
) -> None:
    msg = file.message_type.add(name=name)
    for field, number, kind, label, type_name in fields:
        added = msg.field.add(name=field, number=number, type=kind, label=label)
        if type_name:
            added.type_name = type_name


@cache
def _classes() -> tuple[Any, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="lance_ops_manifest_scan.proto", package="lance_ops_manifest_scan", syntax="proto3"
    )
    one, many = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    msg, string, u64, i32 = _F.TYPE_MESSAGE, _F.TYPE_STRING, _F.TYPE_UINT64, _F.TYPE_INT32
    p = ".lance_ops_manifest_scan."
    _message(file, "Empty", [])
    # Every field of DataFile / DeletionFile / ExternalFile / DataFragment is declared (as repeated
    # scalars where not needed): undeclared ones would be kept as unknown bytes, and appending those
    # to the one merged message makes the parse several times slower.
    _message(
        file,
        "Paths",
        [("path", 1, string, many, "")]
        + [(f"f{number}", number, u64, many, "") for number in (2, 3, 4, 5, 6, 7)],
    )
    _message(
        file,
        "Deletions",
        [("file_type", 1, i32, many, ""), ("num_deleted_rows", 4, u64, many, "")]
        + [(f"f{number}", number, u64, many, "") for number in (2, 3, 7)],
    )
    _message(
        file,
        "Fragments",
        [
            ("files", 2, msg, one, p + "Paths"),
            ("deletion_file", 3, msg, one, p + "Deletions"),
            ("physical_rows", 4, u64, many, ""),
            ("id", 1, u64, many, ""),
        ]
        + [(f"f{number}", number, _F.TYPE_BYTES, many, "") for number in (5, 7, 9)]
        + [(name, number, msg, one, p + "Paths") for name, number in _EXTERNAL.items()],
    )
    _message(
        file,
        "Counts",
        [("files", 2, msg, many, p + "Empty"), ("deletion_file", 3, msg, many, p + "Empty")]
        + [(f"f{number}", number, u64, many, "") for number in (1, 4)]
        + [(f"f{number}", number, _F.TYPE_BYTES, many, "") for number in (5, 7, 9)]
        + [(name, number, msg, many, p + "Empty") for name, number in _EXTERNAL.items()],
    )
    _message(file, "ManifestFragments", [("fragments", 2, msg, one, p + "Fragments")])
    _message(file, "ManifestCounts", [("fragments", 2, msg, one, p + "Counts")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(file.package + ".ManifestFragments")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName(file.package + ".ManifestCounts")),
    )


@cache
def _transaction_head_class() -> Any:
    """A transaction message declaring only the fields ``history()`` reports: ``read_version``,
    ``transaction_properties`` (a map, as in the real message), which ``operation`` member is set
    (members as opaque bytes, never decoded) and, for ``update``, whether it merges a MemWAL."""
    file = descriptor_pb2.FileDescriptorProto(
        name="lance_ops_transaction_head.proto", package="lance_ops_transaction_head", syntax="proto3"
    )
    string = _F.TYPE_STRING
    _message(file, "Empty", [])
    _message(
        file,
        "UpdateHead",
        [("mem_wal_to_merge", 5, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".lance_ops_transaction_head.Empty")],
    )
    head = file.message_type.add(name="Head")
    head.field.add(name="read_version", number=1, type=_F.TYPE_UINT64, label=_F.LABEL_OPTIONAL)
    entry = head.nested_type.add(name="TransactionPropertiesEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=string, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=string, label=_F.LABEL_OPTIONAL)
    head.field.add(
        name="transaction_properties",
        number=4,
        type=_F.TYPE_MESSAGE,
        label=_F.LABEL_REPEATED,
        type_name=".lance_ops_transaction_head.Head.TransactionPropertiesEntry",
    )
    head.oneof_decl.add(name="operation")
    for member in transaction_pb2.Transaction.DESCRIPTOR.oneofs_by_name["operation"].fields:
        field = head.field.add(name=member.name, number=member.number, label=_F.LABEL_OPTIONAL, oneof_index=0)
        if member.name == "update":
            field.type, field.type_name = _F.TYPE_MESSAGE, ".lance_ops_transaction_head.UpdateHead"
        else:
            field.type = _F.TYPE_BYTES
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("lance_ops_transaction_head.Head"))


@dataclass(frozen=True)
class TransactionHead:
    """What :func:`transaction_head` reads of a serialized transaction."""

    operation: str | None  # the ``operation`` oneof member set (None: none this schema knows)
    read_version: int
    properties: dict[str, str]
    merges_mem_wal: bool  # an ``update`` merging a MemWAL


def transaction_head(data: bytes) -> TransactionHead:
    """The head of the serialized ``Transaction`` ``data``, the operation's body skipped (raises
    protobuf's DecodeError on bytes whose head does not decode)."""
    pb = _transaction_head_class().FromString(data)
    which = pb.WhichOneof("operation")
    return TransactionHead(
        operation=which,
        read_version=pb.read_version,
        properties=dict(pb.transaction_properties),
        merges_mem_wal=which == "update" and pb.update.HasField("mem_wal_to_merge"),
    )


@dataclass(frozen=True)
class FragmentsScan:
    """All fragments' facts, flattened (see the module docstring for the superset caveat)."""

    data_paths: list[str]
    data_files: int
    sequence_paths: list[str]
    sequences: int
    deletion_types: set[int]
    deletion_files: int
    deleted_rows: list[int]
    physical_rows: list[int]
    data_bytes: int  # the data files' file_size_bytes, summed

    @property
    def paths_complete(self) -> bool:
        """Every data file and external sequence has a non-empty path on the wire."""
        return len(self.data_paths) == self.data_files and len(self.sequence_paths) == self.sequences


def scan_fragments(payload: bytes) -> FragmentsScan:
    """The facts of the manifest protobuf bytes ``payload`` (raises protobuf's DecodeError on bytes
    the full parse would refuse as well)."""
    fragments_cls, counts_cls = _classes()
    agg = fragments_cls.FromString(payload).fragments
    counts = counts_cls.FromString(payload).fragments
    sequence_paths: list[str] = []
    sequences = 0
    for name in _EXTERNAL:
        sequence_paths.extend(getattr(agg, name).path)
        sequences += len(getattr(counts, name))
    return FragmentsScan(
        data_paths=list(agg.files.path),
        data_files=len(counts.files),
        sequence_paths=sequence_paths,
        sequences=sequences,
        deletion_types=set(agg.deletion_file.file_type),
        deletion_files=len(counts.deletion_file),
        deleted_rows=list(agg.deletion_file.num_deleted_rows),
        physical_rows=list(agg.physical_rows),
        data_bytes=sum(agg.files.f6),
    )
