"""A dataset encoding plan: per-column encoding choices every writer of the dataset applies.

A plan is decided once for a whole column (see :func:`lance_ops.ops.encodings.profile`), so all
fragments of a column are encoded alike whichever process or Spark partition wrote them. Writers
apply it as ``lance-encoding:*`` field metadata on the schema of the data files they write (never on
the dataset schema); :mod:`lance_ops.encoding.options` reads those keys like any other::

    {"columns": {"city": {"dictionary": true, "compression": null, "bss": "auto", "rle_threshold": null}}}
      -> field "city" gets lance-encoding:dictionary=always

``dictionary`` False gives ``never``; ``compression``, ``bss`` and ``rle_threshold`` map to the
keys of the same names when set. The plan is stored as JSON under the dataset config key
:data:`CONFIG_KEY`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from lance_ops.errors import SchemaError

__all__ = ["CONFIG_KEY", "ColumnPlan", "EncodingPlan"]

CONFIG_KEY = "lance-ops.encoding-plan"
_PREFIX = "lance-encoding:"


@dataclass(frozen=True)
class ColumnPlan:
    """Encoding choices of one top-level column (``None`` / ``"auto"``: the strategy's default)."""

    dictionary: bool
    compression: str | None = None
    bss: str = "auto"
    rle_threshold: float | None = None

    def metadata(self) -> dict[str, str]:
        keys = {"dictionary": "always" if self.dictionary else "never", "bss": self.bss}
        if self.compression is not None:
            keys["compression"] = self.compression
        if self.rle_threshold is not None:
            keys["rle-threshold"] = repr(self.rle_threshold)
        return {_PREFIX + k: v for k, v in keys.items()}


@dataclass(frozen=True)
class EncodingPlan:
    """Column name -> :class:`ColumnPlan`; columns not named keep the strategy's defaults."""

    columns: Mapping[str, ColumnPlan] = field(default_factory=dict)

    def apply(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` with each planned column's field metadata set (explicit field keys win)."""
        fields = []
        for item in schema:
            plan = self.columns.get(item.name)
            if plan is not None:
                explicit = {k.decode(): v.decode() for k, v in (item.metadata or {}).items()}
                item = item.with_metadata({**plan.metadata(), **explicit})
            fields.append(item)
        return pa.schema(fields, metadata=schema.metadata)

    def to_json(self) -> str:
        return json.dumps({"columns": {name: asdict(plan) for name, plan in sorted(self.columns.items())}})

    @classmethod
    def from_json(cls, text: str) -> EncodingPlan:
        try:
            columns: dict[str, Any] = json.loads(text)["columns"]
            return cls({name: ColumnPlan(**spec) for name, spec in columns.items()})
        except (ValueError, KeyError, TypeError) as exc:
            raise SchemaError(f"not an encoding plan: {text[:80]!r} ({exc})") from exc

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> EncodingPlan | None:
        """The plan a dataset's config stores, if any."""
        text = config.get(CONFIG_KEY)
        return None if text is None else cls.from_json(text)
