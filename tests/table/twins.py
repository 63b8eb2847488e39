"""Twin datasets for the row-level mutation tests: the same data written and mutated by pylance 14
and by lance_ops, then both read back by pylance (rows, row versions, transactions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import lance_ops

ROW_VERSION_COLUMNS = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([float(i) for i in ids]),
            "s": pa.array([f"s{i}" for i in ids]),
        }
    )


@dataclass
class Twins:
    """The pylance-written dataset (``theirs``) and ours, at the same root names."""

    lance: Any
    theirs: str
    ours: str
    stable: bool

    def run(self, action: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
        """``action(dataset, module)`` on both (pylance's dataset, then ours); returns both results."""
        return action(self.lance.dataset(self.theirs), self.lance), action(
            lance_ops.dataset(self.ours), lance_ops
        )

    def table(self, uri: str, key: str = "id") -> pa.Table:
        """The dataset as pylance reads it, sorted by ``key`` (row versions too with stable ids)."""
        ds = self.lance.dataset(uri)
        columns = ds.schema.names + (ROW_VERSION_COLUMNS if self.stable else [])
        return ds.to_table(columns=columns).sort_by([(key, "ascending")])

    def assert_same(self, key: str = "id") -> None:
        ours, theirs = self.table(self.ours, key), self.table(self.theirs, key)
        assert ours.to_pydict() == theirs.to_pydict()
        assert self.lance.dataset(self.ours).version == self.lance.dataset(self.theirs).version

    def transactions(self, uri: str) -> list[Any]:
        ds = self.lance.dataset(uri)
        return [ds.read_transaction(v) for v in range(2, ds.version + 1)]

    def assert_same_transaction(self) -> None:
        """The latest transactions agree on what pylance records of an Update."""
        mine, other = (self.lance.dataset(u) for u in (self.ours, self.theirs))
        mine, other = mine.read_transaction(mine.version), other.read_transaction(other.version)
        assert type(mine.operation).__name__ == type(other.operation).__name__
        op, ref = mine.operation, other.operation
        if type(ref).__name__ == "Update":
            assert sorted(op.removed_fragment_ids) == sorted(ref.removed_fragment_ids)
            deleted = [
                {f.id: f.deletion_file.num_deleted_rows for f in o.updated_fragments} for o in (op, ref)
            ]
            assert deleted[0] == deleted[1]
            assert sum(f.physical_rows for f in op.new_fragments) == sum(
                f.physical_rows for f in ref.new_fragments
            )
            assert op.fields_modified == ref.fields_modified
            assert sorted(op.fields_for_preserving_frag_bitmap) == sorted(
                ref.fields_for_preserving_frag_bitmap
            )
            assert op.update_mode == ref.update_mode


def make_twins(
    lance: Any, tmp_path: Path, data: pa.Table, stable: bool = False, max_rows_per_file: int = 5
) -> Twins:
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(data, theirs, max_rows_per_file=max_rows_per_file, enable_stable_row_ids=stable)
    lance_ops.write_dataset(data, ours, max_rows_per_file=max_rows_per_file, enable_stable_row_ids=stable)
    return Twins(lance, theirs, ours, stable)
