"""Transactions and their operations (``transaction.proto``).

A transaction is what one commit did: the version it read (``read_version``, 0 when creating), a
UUID, user properties (``__lance_commit_message`` holds the commit message) and exactly one
operation, the ``Transaction.operation`` oneof::

    100 Append   101 Delete   102 Overwrite   103 CreateIndex   104 Rewrite   105 Merge
    106 Restore  107 ReserveFragments  108 Update  109 Project  110 UpdateConfig
    111 DataReplacement  112 UpdateMemWalState (unsupported)  113 Clone  114 UpdateBases

It is stored raw in ``_transactions/{read_version}-{uuid}.txn`` and inline in the manifest file.
Each operation is a frozen dataclass named after its oneof member; applying one to a manifest lives
in :mod:`lance_ops.table.apply`, conflict rules in :mod:`lance_ops.table.conflicts`.
"""

from __future__ import annotations

import uuid as uuid_module
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lance_ops._proto import table_pb2, transaction_pb2
from lance_ops.errors import CorruptFileError, LanceOpsError, UnsupportedFeatureError
from lance_ops.table.manifest import BasePath, DataFile, DataFragment, IndexFile, IndexMetadata, add_fragments
from lance_ops.table.naming import transaction_file_name
from lance_ops.table.schema import LanceSchema

COMMIT_MESSAGE_KEY = "__lance_commit_message"

_pb = transaction_pb2.Transaction


def _fragments(pbs: Any) -> tuple[DataFragment, ...]:
    return tuple(DataFragment.from_pb(f) for f in pbs)


def _fragments_pb(fragments: tuple[DataFragment, ...]) -> list[table_pb2.DataFragment]:
    return [f.to_pb() for f in fragments]


class Operation(ABC):
    """Base of the operation dataclasses; ``oneof`` is the member name in ``Transaction.operation``."""

    oneof: ClassVar[str]

    @abstractmethod
    def to_pb(self) -> Any:
        """The operation's message (the ``Transaction.operation`` member)."""

    def fill_pb(self, pb: Any) -> None:
        """Write the operation into its empty ``Transaction.operation`` member ``pb`` (operations
        that carry many fragments build them there in place rather than copying a built message)."""
        pb.CopyFrom(self.to_pb())

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Append(Operation):
    """New fragments (ids 0 are assigned at commit)."""

    oneof: ClassVar[str] = "append"
    fragments: tuple[DataFragment, ...]

    @classmethod
    def from_pb(cls, pb: _pb.Append) -> Append:
        return cls(fragments=_fragments(pb.fragments))

    def to_pb(self) -> _pb.Append:
        return _pb.Append(fragments=_fragments_pb(self.fragments))


@dataclass(frozen=True)
class Delete(Operation):
    """Fragments given new deletion files, fragments removed entirely, and the predicate used."""

    oneof: ClassVar[str] = "delete"
    updated_fragments: tuple[DataFragment, ...] = ()
    deleted_fragment_ids: tuple[int, ...] = ()
    predicate: str = ""

    @classmethod
    def from_pb(cls, pb: _pb.Delete) -> Delete:
        return cls(_fragments(pb.updated_fragments), tuple(pb.deleted_fragment_ids), pb.predicate)

    def to_pb(self) -> _pb.Delete:
        return _pb.Delete(
            updated_fragments=_fragments_pb(self.updated_fragments),
            deleted_fragment_ids=self.deleted_fragment_ids,
            predicate=self.predicate,
        )


@dataclass(frozen=True)
class Overwrite(Operation):
    """Replace the schema and every fragment (also how a dataset is created)."""

    oneof: ClassVar[str] = "overwrite"
    fragments: tuple[DataFragment, ...]
    schema: LanceSchema
    config_upsert_values: Mapping[str, str] = field(default_factory=dict)
    initial_bases: tuple[BasePath, ...] = ()

    @classmethod
    def from_pb(cls, pb: _pb.Overwrite) -> Overwrite:
        return cls(
            fragments=_fragments(pb.fragments),
            schema=LanceSchema.from_pb(pb.schema, pb.schema_metadata),
            config_upsert_values=dict(pb.config_upsert_values),
            initial_bases=tuple(BasePath.from_pb(b) for b in pb.initial_bases),
        )

    def to_pb(self) -> _pb.Overwrite:
        return _pb.Overwrite(
            fragments=_fragments_pb(self.fragments),
            schema=self.schema.to_pb(),
            schema_metadata=dict(self.schema.metadata),
            config_upsert_values=dict(self.config_upsert_values),
            initial_bases=[b.to_pb() for b in self.initial_bases],
        )


@dataclass(frozen=True)
class CreateIndex(Operation):
    """Add indices (replacing same-named ones) and remove others by uuid."""

    oneof: ClassVar[str] = "create_index"
    new_indices: tuple[IndexMetadata, ...] = ()
    removed_indices: tuple[IndexMetadata, ...] = ()

    @classmethod
    def from_pb(cls, pb: _pb.CreateIndex) -> CreateIndex:
        return cls(
            tuple(IndexMetadata.from_pb(i) for i in pb.new_indices),
            tuple(IndexMetadata.from_pb(i) for i in pb.removed_indices),
        )

    def to_pb(self) -> _pb.CreateIndex:
        return _pb.CreateIndex(
            new_indices=[i.to_pb() for i in self.new_indices],
            removed_indices=[i.to_pb() for i in self.removed_indices],
        )


@dataclass(frozen=True)
class RewriteGroup:
    old_fragments: tuple[DataFragment, ...]
    new_fragments: tuple[DataFragment, ...]


@dataclass(frozen=True)
class RewrittenIndex:
    old_id: bytes
    new_id: bytes
    new_index_details: tuple[str, bytes] | None = None
    new_index_version: int = 0
    new_index_files: tuple[IndexFile, ...] = ()


@dataclass(frozen=True)
class Rewrite(Operation):
    """Compaction: groups of old fragments replaced by new ones (ids pre-reserved).

    ``frag_reuse_index`` is the Fragment Reuse Index a deferred remap installs (replacing the one
    of the same name). As in pylance 14 it is not part of the transaction's protobuf: it only
    reaches the manifest of the commit that carries it in memory.
    """

    oneof: ClassVar[str] = "rewrite"
    groups: tuple[RewriteGroup, ...] = ()
    rewritten_indices: tuple[RewrittenIndex, ...] = ()
    frag_reuse_index: IndexMetadata | None = None

    @classmethod
    def from_pb(cls, pb: _pb.Rewrite) -> Rewrite:
        groups = [RewriteGroup(_fragments(g.old_fragments), _fragments(g.new_fragments)) for g in pb.groups]
        if pb.old_fragments or pb.new_fragments:
            groups.append(RewriteGroup(_fragments(pb.old_fragments), _fragments(pb.new_fragments)))
        indices = tuple(
            RewrittenIndex(
                old_id=r.old_id.uuid,
                new_id=r.new_id.uuid,
                new_index_details=(
                    (r.new_index_details.type_url, r.new_index_details.value)
                    if r.HasField("new_index_details")
                    else None
                ),
                new_index_version=r.new_index_version,
                new_index_files=tuple(IndexFile(f.path, f.size_bytes) for f in r.new_index_files),
            )
            for r in pb.rewritten_indices
        )
        return cls(tuple(groups), indices)

    def to_pb(self) -> _pb.Rewrite:
        pb = _pb.Rewrite()
        self.fill_pb(pb)
        return pb

    def fill_pb(self, pb: Any) -> None:
        for g in self.groups:
            group = pb.groups.add()
            add_fragments(group.old_fragments, g.old_fragments)
            add_fragments(group.new_fragments, g.new_fragments)
        for r in self.rewritten_indices:
            out = pb.rewritten_indices.add(
                old_id=table_pb2.UUID(uuid=r.old_id),
                new_id=table_pb2.UUID(uuid=r.new_id),
                new_index_version=r.new_index_version,
                new_index_files=[
                    table_pb2.IndexFile(path=f.path, size_bytes=f.size_bytes) for f in r.new_index_files
                ],
            )
            if r.new_index_details is not None:
                out.new_index_details.type_url, out.new_index_details.value = r.new_index_details


@dataclass(frozen=True)
class Merge(Operation):
    """New schema plus the complete new fragment list (add / re-typed columns)."""

    oneof: ClassVar[str] = "merge"
    fragments: tuple[DataFragment, ...]
    schema: LanceSchema
    preserves_nullability: bool = False

    @classmethod
    def from_pb(cls, pb: _pb.Merge) -> Merge:
        schema = LanceSchema.from_pb(pb.schema, pb.schema_metadata)
        return cls(_fragments(pb.fragments), schema, pb.preserves_nullability)

    def to_pb(self) -> _pb.Merge:
        return _pb.Merge(
            fragments=_fragments_pb(self.fragments),
            schema=self.schema.to_pb(),
            schema_metadata=dict(self.schema.metadata),
            preserves_nullability=self.preserves_nullability,
        )


@dataclass(frozen=True)
class Restore(Operation):
    """Make an old version's content the new latest version."""

    oneof: ClassVar[str] = "restore"
    version: int

    @classmethod
    def from_pb(cls, pb: _pb.Restore) -> Restore:
        return cls(pb.version)

    def to_pb(self) -> _pb.Restore:
        return _pb.Restore(version=self.version)


@dataclass(frozen=True)
class ReserveFragments(Operation):
    """Raise ``max_fragment_id`` by ``num_fragments`` (ids for a later Rewrite)."""

    oneof: ClassVar[str] = "reserve_fragments"
    num_fragments: int

    @classmethod
    def from_pb(cls, pb: _pb.ReserveFragments) -> ReserveFragments:
        return cls(pb.num_fragments)

    def to_pb(self) -> _pb.ReserveFragments:
        return _pb.ReserveFragments(num_fragments=self.num_fragments)


@dataclass(frozen=True)
class Update(Operation):
    """Rows rewritten: fragments removed / updated in place / added."""

    oneof: ClassVar[str] = "update"
    removed_fragment_ids: tuple[int, ...] = ()
    updated_fragments: tuple[DataFragment, ...] = ()
    new_fragments: tuple[DataFragment, ...] = ()
    fields_modified: tuple[int, ...] = ()
    fields_for_preserving_frag_bitmap: tuple[int, ...] = ()
    update_mode: int = 0

    @classmethod
    def from_pb(cls, pb: _pb.Update) -> Update:
        if pb.HasField("mem_wal_to_merge"):
            raise UnsupportedFeatureError("Update transactions merging a MemWAL are not supported")
        return cls(
            tuple(pb.removed_fragment_ids),
            _fragments(pb.updated_fragments),
            _fragments(pb.new_fragments),
            tuple(pb.fields_modified),
            tuple(pb.fields_for_preserving_frag_bitmap),
            pb.update_mode,
        )

    def to_pb(self) -> _pb.Update:
        return _pb.Update(
            removed_fragment_ids=self.removed_fragment_ids,
            updated_fragments=_fragments_pb(self.updated_fragments),
            new_fragments=_fragments_pb(self.new_fragments),
            fields_modified=self.fields_modified,
            fields_for_preserving_frag_bitmap=self.fields_for_preserving_frag_bitmap,
            update_mode=transaction_pb2.Transaction.UpdateMode.ValueType(self.update_mode),
        )


@dataclass(frozen=True)
class Project(Operation):
    """New schema that keeps a subset of fields (drop / rename); the schema metadata is kept."""

    oneof: ClassVar[str] = "project"
    schema: LanceSchema
    preserves_nullability: bool = False

    @classmethod
    def from_pb(cls, pb: _pb.Project) -> Project:
        return cls(LanceSchema.from_pb(pb.schema), pb.preserves_nullability)

    def to_pb(self) -> _pb.Project:
        return _pb.Project(schema=self.schema.to_pb(), preserves_nullability=self.preserves_nullability)


@dataclass(frozen=True)
class UpdateMap:
    """Map edits: ``entries`` of (key, value or None = delete); ``replace`` drops other keys."""

    entries: tuple[tuple[str, str | None], ...] = ()
    replace: bool = False

    def apply(self, current: Mapping[str, Any], encode: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.replace else dict(current)
        for key, value in self.entries:
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value.encode("utf-8") if encode else value
        return out

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.entries)

    @classmethod
    def from_pb(cls, pb: _pb.UpdateMap) -> UpdateMap:
        return cls(
            tuple((e.key, e.value if e.HasField("value") else None) for e in pb.update_entries), pb.replace
        )

    def to_pb(self) -> _pb.UpdateMap:
        return _pb.UpdateMap(
            update_entries=[_pb.UpdateMapEntry(key=k, value=v) for k, v in self.entries], replace=self.replace
        )


@dataclass(frozen=True)
class UpdateConfig(Operation):
    """Edit table config, table metadata, schema metadata or field metadata (by field id)."""

    oneof: ClassVar[str] = "update_config"
    config_updates: UpdateMap | None = None
    table_metadata_updates: UpdateMap | None = None
    schema_metadata_updates: UpdateMap | None = None
    field_metadata_updates: Mapping[int, UpdateMap] = field(default_factory=dict)

    @classmethod
    def from_pb(cls, pb: _pb.UpdateConfig) -> UpdateConfig:
        config = UpdateMap.from_pb(pb.config_updates) if pb.HasField("config_updates") else None
        if config is None and (pb.upsert_values or pb.delete_keys):
            config = UpdateMap(
                tuple(dict(pb.upsert_values).items()) + tuple((k, None) for k in pb.delete_keys)
            )
        schema_md = (
            UpdateMap.from_pb(pb.schema_metadata_updates) if pb.HasField("schema_metadata_updates") else None
        )
        if schema_md is None and pb.schema_metadata:
            schema_md = UpdateMap(tuple(dict(pb.schema_metadata).items()), replace=True)
        fields = {k: UpdateMap.from_pb(v) for k, v in pb.field_metadata_updates.items()}
        for k, v in pb.field_metadata.items():
            fields.setdefault(k, UpdateMap(tuple(dict(v.metadata).items()), replace=True))
        return cls(
            config_updates=config,
            table_metadata_updates=(
                UpdateMap.from_pb(pb.table_metadata_updates)
                if pb.HasField("table_metadata_updates")
                else None
            ),
            schema_metadata_updates=schema_md,
            field_metadata_updates=fields,
        )

    def to_pb(self) -> _pb.UpdateConfig:
        pb = _pb.UpdateConfig()
        for name in ("config_updates", "table_metadata_updates", "schema_metadata_updates"):
            value = getattr(self, name)
            if value is not None:
                getattr(pb, name).CopyFrom(value.to_pb())
        for key, value in self.field_metadata_updates.items():
            pb.field_metadata_updates[key].CopyFrom(value.to_pb())
        return pb


@dataclass(frozen=True)
class DataReplacement(Operation):
    """Swap one data file of a fragment for another covering the same fields."""

    oneof: ClassVar[str] = "data_replacement"
    replacements: tuple[tuple[int, DataFile], ...]

    @classmethod
    def from_pb(cls, pb: _pb.DataReplacement) -> DataReplacement:
        return cls(tuple((r.fragment_id, DataFile.from_pb(r.new_file)) for r in pb.replacements))

    def to_pb(self) -> _pb.DataReplacement:
        return _pb.DataReplacement(
            replacements=[
                _pb.DataReplacementGroup(fragment_id=fid, new_file=f.to_pb()) for fid, f in self.replacements
            ]
        )


@dataclass(frozen=True)
class Clone(Operation):
    """Create a (shallow) clone or branch of another dataset version."""

    oneof: ClassVar[str] = "clone"
    is_shallow: bool
    ref_version: int
    ref_path: str
    ref_name: str | None = None
    branch_name: str | None = None

    @classmethod
    def from_pb(cls, pb: _pb.Clone) -> Clone:
        return cls(
            is_shallow=pb.is_shallow,
            ref_version=pb.ref_version,
            ref_path=pb.ref_path,
            ref_name=pb.ref_name if pb.HasField("ref_name") else None,
            branch_name=pb.branch_name if pb.HasField("branch_name") else None,
        )

    def to_pb(self) -> _pb.Clone:
        return _pb.Clone(
            is_shallow=self.is_shallow,
            ref_version=self.ref_version,
            ref_path=self.ref_path,
            ref_name=self.ref_name,
            branch_name=self.branch_name,
        )


@dataclass(frozen=True)
class UpdateBases(Operation):
    """Add storage roots to ``Manifest.base_paths``."""

    oneof: ClassVar[str] = "update_bases"
    new_bases: tuple[BasePath, ...]

    @classmethod
    def from_pb(cls, pb: _pb.UpdateBases) -> UpdateBases:
        return cls(tuple(BasePath.from_pb(b) for b in pb.new_bases))

    def to_pb(self) -> _pb.UpdateBases:
        return _pb.UpdateBases(new_bases=[b.to_pb() for b in self.new_bases])


OPERATIONS: dict[str, Any] = {
    cls.oneof: cls
    for cls in (
        Append,
        Delete,
        Overwrite,
        CreateIndex,
        Rewrite,
        Merge,
        Restore,
        ReserveFragments,
        Update,
        Project,
        UpdateConfig,
        DataReplacement,
        Clone,
        UpdateBases,
    )
}


@dataclass(frozen=True, init=False)
class Transaction:
    """One commit's change: ``operation`` built on ``read_version``.

    Made as pylance's ``lance.Transaction(read_version, operation, uuid=, transaction_properties=)``
    too: ``transaction_properties`` is another name for ``properties``; ``uuid`` defaults to a
    fresh one.
    """

    read_version: int
    operation: Operation
    uuid: str
    properties: Mapping[str, str]
    tag: str

    def __init__(
        self,
        read_version: int,
        operation: Operation,
        uuid: str | None = None,
        properties: Mapping[str, str] | None = None,
        tag: str = "",
        *,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> None:
        if properties is not None and transaction_properties is not None:
            raise TypeError("give properties or transaction_properties, not both")
        chosen = properties if properties is not None else transaction_properties
        object.__setattr__(self, "read_version", read_version)
        object.__setattr__(self, "operation", operation)
        object.__setattr__(self, "uuid", uuid or str(uuid_module.uuid4()))
        object.__setattr__(self, "properties", dict(chosen or {}))
        object.__setattr__(self, "tag", tag)

    @property
    def file_name(self) -> str:
        """Name under ``_transactions/``."""
        return transaction_file_name(self.read_version, self.uuid)

    @property
    def commit_message(self) -> str | None:
        return self.properties.get(COMMIT_MESSAGE_KEY)

    @property
    def transaction_properties(self) -> Mapping[str, str]:
        """pylance's name for :attr:`properties`."""
        return self.properties

    @classmethod
    def from_pb(cls, pb: transaction_pb2.Transaction) -> Transaction:
        which = pb.WhichOneof("operation")
        if which is None:
            raise UnsupportedFeatureError(f"transaction {pb.uuid} has no operation this reader knows")
        if which not in OPERATIONS:
            raise UnsupportedFeatureError(f"transaction operation {which!r} is not supported")
        return cls(
            read_version=pb.read_version,
            operation=OPERATIONS[which].from_pb(getattr(pb, which)),
            uuid=pb.uuid,
            properties=dict(pb.transaction_properties),
            tag=pb.tag,
        )

    def to_pb(self) -> transaction_pb2.Transaction:
        pb = transaction_pb2.Transaction(
            read_version=self.read_version,
            uuid=self.uuid,
            tag=self.tag,
            transaction_properties=dict(self.properties),
        )
        member = getattr(pb, self.operation.oneof)
        member.SetInParent()  # set even when the operation has no field set
        self.operation.fill_pb(member)
        return pb

    def serialize(self) -> bytes:
        return self.to_pb().SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes, path: str = "<transaction>") -> Transaction:
        pb = transaction_pb2.Transaction()
        try:
            pb.ParseFromString(data)
        except Exception as exc:  # protobuf DecodeError
            raise CorruptFileError(path, f"undecodable transaction: {exc}") from exc
        try:
            return cls.from_pb(pb)
        except CorruptFileError as exc:
            raise exc.located(path) from exc
        except LanceOpsError:
            raise
        except Exception as exc:  # unknown enum values (ValueError), inconsistent fields: damaged bytes
            raise CorruptFileError(path, f"invalid transaction: {exc}") from exc
