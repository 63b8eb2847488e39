"""A column named ``values`` in SQL filters (DataFusion takes it; sqlglot's Spark grammar reads
VALUES as a keyword): parsed as a column, written back quoted, answered as pylance answers it."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.query.parser import parse, to_sql
from lance_ops.query.visitors import columns


@pytest.mark.parametrize(
    "text",
    ["values > 50", "values IN (1, 2)", "values IS NULL", "values BETWEEN 3 AND 9", "(values + 1) * 2 = 8"],
)
def test_values_is_a_column(text: str) -> None:
    tree = parse(text)
    assert columns(tree) == [("values",)]
    assert parse(to_sql(tree)) == tree


def test_scans_and_indices_on_values(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    table = pa.table(
        {"values": pa.array([None if i % 50 == 0 else i for i in range(8193)]), "s": pa.array(["a"] * 8193)}
    )
    ds = lance_ops.write_dataset(table, str(path))
    ds.create_scalar_index("values", "ZONEMAP")
    theirs = lance.dataset(str(path))
    for flt in [
        "values > 50",
        "values = 1234",
        "values IN (7, 8000) AND s = 'a'",
        "values IS NULL",
        "values + 1 < 10",
    ]:
        want = theirs.to_table(filter=flt, use_scalar_index=False)
        assert lance_ops.dataset(str(path)).to_table(filter=flt).equals(want), flt
        assert theirs.to_table(filter=flt).equals(want), flt
    assert lance_ops.dataset(str(path)).count_rows("values > 50") == 8142 - 162
    assert "ZoneMap" in lance_ops.dataset(str(path)).scanner(filter="values > 50").explain_plan()
    # an update and a delete with the name in their SQL
    ds = lance_ops.dataset(str(path))
    ds.delete("values < 10")
    ds.update({"s": "'b'"}, where="values >= 8000")
    assert lance.dataset(str(path)).count_rows("s = 'b'") == 193 - 4
