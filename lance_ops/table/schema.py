"""The dataset schema as domain objects: :class:`LanceField` and :class:`LanceSchema`.

A Lance schema is a pre-order list of fields, each with an id and its parent's id (-1 for
top-level fields), plus schema metadata. Ids are never reused: a field keeps its id through
renames, and new fields are numbered after :attr:`LanceSchema.max_field_id`. Only
:meth:`LanceField.from_pb` / :meth:`LanceField.to_pb` (and the schema-level pair) touch the
protobuf ``lance.file.Field`` messages; Arrow conversions go through :mod:`lance_ops.file.schema`.

A column added from a SQL expression (``add_columns({"c": "a * 10"})``) records that expression in
its field metadata under :data:`EXPRESSION_KEY`, so it follows the column through renames and drops
and writers can compute the column for new rows that lack it (``fill_missing="compute"``,
:mod:`lance_ops.fragment.conform`). pylance keeps field metadata it does not know.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import pyarrow as pa

from lance_ops._proto import file_pb2
from lance_ops.errors import FieldNotFoundError, SchemaChangeError
from lance_ops.file.schema import (
    fields_to_schema,
    is_blob_v2_description,
    leaf_field_ids,
    schema_metadata_to_pb,
    table_fields,
)

EXPRESSION_KEY = "lance-ops:expression"


@dataclass(frozen=True)
class LanceField:
    """One field of a Lance schema (a node of the field tree, identified by ``id``)."""

    id: int
    parent_id: int
    name: str
    logical_type: str
    nullable: bool = True
    metadata: Mapping[str, bytes] = field(default_factory=dict, hash=False)
    extension_name: str = ""
    kind: int = file_pb2.Field.LEAF
    encoding: int = file_pb2.NONE
    dictionary: tuple[int, int] | None = None
    unenforced_primary_key: bool = False
    unenforced_primary_key_position: int = 0
    unenforced_clustering_key_position: int = 0
    # A legacy (0.1) dataset's dictionary values, kept in its manifest file (``dictionary`` locates
    # them there); see :func:`lance_ops.table.manifest.encode_manifest_file`.
    dictionary_values: pa.Array | None = field(default=None, compare=False, hash=False, repr=False)

    @classmethod
    def from_pb(cls, pb: file_pb2.Field) -> LanceField:
        return cls(
            id=pb.id,
            parent_id=pb.parent_id,
            name=pb.name,
            logical_type=pb.logical_type,
            nullable=pb.nullable,
            metadata=dict(pb.metadata),
            extension_name=pb.extension_name,
            kind=pb.type,
            encoding=pb.encoding,
            dictionary=(pb.dictionary.offset, pb.dictionary.length) if pb.HasField("dictionary") else None,
            unenforced_primary_key=pb.unenforced_primary_key,
            unenforced_primary_key_position=pb.unenforced_primary_key_position,
            unenforced_clustering_key_position=pb.unenforced_clustering_key_position,
        )

    def to_pb(self) -> file_pb2.Field:
        out = file_pb2.Field(
            type=self.kind,  # type: ignore[arg-type]
            name=self.name,
            id=self.id,
            parent_id=self.parent_id,
            logical_type=self.logical_type,
            nullable=self.nullable,
            encoding=self.encoding,  # type: ignore[arg-type]
            extension_name=self.extension_name,
            metadata=dict(self.metadata),
            unenforced_primary_key=self.unenforced_primary_key,
            unenforced_primary_key_position=self.unenforced_primary_key_position,
            unenforced_clustering_key_position=self.unenforced_clustering_key_position,
        )
        if self.dictionary is not None:
            out.dictionary.offset, out.dictionary.length = self.dictionary
        return out

    @property
    def expression(self) -> str | None:
        """The SQL expression this column was added from (:data:`EXPRESSION_KEY`), if recorded."""
        value = self.metadata.get(EXPRESSION_KEY)
        return None if value is None else bytes(value).decode("utf-8")

    @property
    def is_blob_v2_description(self) -> bool:
        """A data file's ``lance.blob.v2`` description column (its children have id -1)."""
        return is_blob_v2_description(self.to_pb())


@dataclass(frozen=True)
class LanceSchema:
    """A dataset's fields (pre-order, parents before children) and schema metadata."""

    fields: tuple[LanceField, ...]
    metadata: Mapping[str, bytes] = field(default_factory=dict, hash=False)

    # ------------------------------------------------------------------ conversions

    @classmethod
    def from_pb(
        cls, fields: Iterable[file_pb2.Field], metadata: Mapping[str, bytes] | None = None
    ) -> LanceSchema:
        return cls(tuple(LanceField.from_pb(f) for f in fields), dict(metadata or {}))

    def to_pb(self) -> tuple[file_pb2.Field, ...]:
        """The ``lance.file.Field`` messages (schema metadata travels separately in Lance messages)."""
        return tuple(f.to_pb() for f in self.fields)

    @classmethod
    def from_arrow(cls, schema: pa.Schema | Iterable[pa.Field], start_id: int = 0) -> LanceSchema:
        """Number an Arrow schema's fields in pre-order from ``start_id``."""
        metadata = schema_metadata_to_pb(schema.metadata) if isinstance(schema, pa.Schema) else {}
        return cls.from_pb(table_fields(schema, start_id), metadata)

    def to_arrow(self) -> pa.Schema:
        return self._arrow

    @cached_property
    def _arrow(self) -> pa.Schema:
        return fields_to_schema(self.to_pb(), self.metadata)

    # ------------------------------------------------------------------ queries

    def __iter__(self) -> Iterator[LanceField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def names(self) -> list[str]:
        """Top-level field names, in order."""
        return [f.name for f in self.fields if f.parent_id == -1]

    @property
    def max_field_id(self) -> int:
        """The largest id (-1 when empty); new fields start at ``max_field_id + 1``."""
        return max((f.id for f in self.fields), default=-1)

    @property
    def field_ids(self) -> tuple[int, ...]:
        return tuple(f.id for f in self.fields)

    @property
    def leaf_ids(self) -> tuple[int, ...]:
        """Ids of fields without children (the fields that own columns in 2.1+ files)."""
        return tuple(leaf_field_ids(self.to_pb()))

    def field(self, name: str) -> LanceField:
        """The top-level field called ``name``."""
        for f in self.fields:
            if f.parent_id == -1 and f.name == name:
                return f
        raise FieldNotFoundError(f"no such column {name!r}; the schema has {self.names}")

    def field_at(self, path: str) -> LanceField:
        """The field at dotted ``path`` (``"a"``, ``"a.b"`` for a struct's child)."""
        parent, found = -1, None
        for name in path.split("."):
            found = next((f for f in self.fields if f.parent_id == parent and f.name == name), None)
            if found is None:
                raise FieldNotFoundError(f"no such column {path!r}; the schema has {self.names}")
            parent = found.id
        assert found is not None
        return found

    def subtree(self, field_id: int) -> tuple[LanceField, ...]:
        """The field ``field_id`` and its descendants, in pre-order."""
        wanted = {field_id}
        out = []
        for f in self.fields:
            if f.id in wanted or f.parent_id in wanted:
                wanted.add(f.id)
                out.append(f)
        return tuple(out)

    def top_level_of(self) -> dict[int, int]:
        """Field id -> index of the top-level field it belongs to (itself or an ancestor)."""
        index = {f.id: n for n, f in enumerate(f for f in self.fields if f.parent_id == -1)}
        out: dict[int, int] = {}
        for f in self.fields:
            out[f.id] = index[f.id] if f.parent_id == -1 else out[f.parent_id]
        return out

    # ------------------------------------------------------------------ derived schemas

    def project(self, names: Sequence[str]) -> LanceSchema:
        """The top-level fields ``names`` (in that order) with their subtrees; metadata kept."""
        return replace(self, fields=tuple(f for n in names for f in self.subtree(self.field(n).id)))

    def with_new_fields(self, new: pa.Schema | Iterable[pa.Field]) -> LanceSchema:
        """This schema plus Arrow fields appended at the top level, ids after :attr:`max_field_id`."""
        added = LanceSchema.from_arrow(new, start_id=self.max_field_id + 1)
        clash = set(self.names) & set(added.names)
        if clash:
            raise SchemaChangeError(f"Column {sorted(clash)[0]} already exists in the dataset")
        return replace(self, fields=(*self.fields, *added.fields))

    def without_expressions(self) -> LanceSchema:
        """This schema without the SQL expressions its fields record (:data:`EXPRESSION_KEY`)."""
        if not any(EXPRESSION_KEY in f.metadata for f in self.fields):
            return self
        return replace(
            self,
            fields=tuple(
                replace(f, metadata={k: v for k, v in f.metadata.items() if k != EXPRESSION_KEY})
                for f in self.fields
            ),
        )

    def without(self, field_ids: Iterable[int]) -> LanceSchema:
        """This schema minus the fields ``field_ids`` and their descendants."""
        dropped: set[int] = set()
        for fid in field_ids:
            dropped.update(f.id for f in self.subtree(fid))
        return replace(self, fields=tuple(f for f in self.fields if f.id not in dropped))
