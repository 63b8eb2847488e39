"""``lance_ops.schema``: pylance's public Lance schema objects (``lance.schema``).

A Lance schema is an Arrow schema whose every field (nested ones included) carries an integer id;
ids follow fields across versions (renames keep them, new columns get fresh ones). Here
:class:`LanceSchema` and :class:`LanceField` wrap the table layer's frozen dataclasses
(:mod:`lance_ops.table.schema`) with pylance's method names: ``fields()``, ``field(path)``,
``field_case_insensitive(path)``, ``from_pyarrow`` / ``to_pyarrow`` and, on fields, ``id()``,
``name()``, ``children()``, ``to_arrow()`` and the ``metadata`` property. Operations built with
:class:`~lance_ops.LanceOperation` accept either form.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lance_ops.table import schema as table_schema

__all__ = ["LanceField", "LanceSchema"]


class LanceField:
    """One field of a :class:`LanceSchema`: name, id, children, metadata."""

    def __init__(self, schema: table_schema.LanceSchema, field: table_schema.LanceField) -> None:
        self._schema = schema
        self._field = field

    def id(self) -> int:
        return self._field.id

    def name(self) -> str:
        return self._field.name

    def children(self) -> list[LanceField]:
        return [LanceField(self._schema, f) for f in self._schema.fields if f.parent_id == self._field.id]

    @property
    def metadata(self) -> dict[str, str]:
        """The field's metadata (a property, as pylance's; its other accessors are methods)."""
        return {k: v.decode() if isinstance(v, bytes) else v for k, v in self._field.metadata.items()}

    def to_arrow(self) -> pa.Field:
        """The Arrow field (with its children), as it appears in the dataset's Arrow schema."""
        path = _path(self._schema, self._field)
        arrow: pa.Field = self._schema.to_arrow().field(path[0])
        for name in path[1:]:
            arrow = arrow.type.field(name)
        return arrow

    def is_unenforced_primary_key(self) -> bool:
        return self._field.unenforced_primary_key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LanceField) and other._field == self._field

    def __hash__(self) -> int:
        return hash(self._field)

    def __repr__(self) -> str:
        return (
            f"LanceField(name={self._field.name!r}, id={self._field.id}, type={self._field.logical_type!r})"
        )


class LanceSchema:
    """A schema whose fields carry Lance field ids (pylance's ``lance.schema.LanceSchema``)."""

    def __init__(self, schema: table_schema.LanceSchema) -> None:
        self._schema = schema

    @staticmethod
    def from_pyarrow(schema: pa.Schema) -> LanceSchema:
        """Number ``schema``'s fields in pre-order from 0, as a new dataset would."""
        return LanceSchema(table_schema.LanceSchema.from_arrow(schema))

    def to_pyarrow(self) -> pa.Schema:
        return self._schema.to_arrow()

    def to_internal(self) -> table_schema.LanceSchema:
        """The table layer's schema (what manifests and operations hold)."""
        return self._schema

    def fields(self) -> list[LanceField]:
        """The top-level fields."""
        return [LanceField(self._schema, f) for f in self._schema.fields if f.parent_id == -1]

    def field(self, name: str) -> LanceField | None:
        """The field at a dotted path (``"a"``, ``"a.b"``); None when there is none."""
        return self._lookup(name, str.__eq__)

    def field_case_insensitive(self, name: str) -> LanceField | None:
        return self._lookup(name, lambda a, b: a.lower() == b.lower())

    def _lookup(self, path: str, same: Callable[[str, str], bool]) -> LanceField | None:
        parent = -1
        found = None
        for part in path.split("."):
            found = next(
                (f for f in self._schema.fields if f.parent_id == parent and same(f.name, part)), None
            )
            if found is None:
                return None
            parent = found.id
        return None if found is None else LanceField(self._schema, found)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LanceSchema) and other._schema == self._schema

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}:{f.id}" for f in self._schema.fields)
        return f"LanceSchema({fields})"


def _path(schema: table_schema.LanceSchema, field: table_schema.LanceField) -> list[str]:
    by_id = {f.id: f for f in schema.fields}
    path = [field.name]
    while field.parent_id != -1:
        field = by_id[field.parent_id]
        path.append(field.name)
    return path[::-1]
