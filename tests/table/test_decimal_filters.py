"""Decimals meeting integers in filters and projections, as pylance (DataFusion) evaluates them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops

FILTERS = [
    "CAST(x AS DECIMAL(10,2)) > 1",
    "CAST(i AS DECIMAL(10,2)) > 1",
    "CAST(s AS DECIMAL(10,2)) > 1",
    "1 < CAST(x AS DECIMAL(10,2))",
    "CAST(x AS DECIMAL(3,1)) < 1000",
    "CAST(x AS DECIMAL(10,2)) = 1.5",
    "CAST(i AS DECIMAL(10,2)) IN (1, 2)",
    "CAST(i AS DECIMAL(10,2)) BETWEEN 1 AND 2",
    "CAST(i AS DECIMAL(10,2)) + 1 > 2",
    "CAST(i AS DECIMAL(10,2)) * i > 2",
    "i - CAST(x AS DECIMAL(5,1)) > -0.4",
    "CAST(b AS DECIMAL(4,1)) >= 2",
]
PROJECTIONS = [
    "CAST(i AS DECIMAL(10,2)) + 1",
    "CAST(i AS DECIMAL(10,2)) * i",
    "i - CAST(x AS DECIMAL(5,1))",
    "CAST(f AS DECIMAL(5,1))",
    "CAST(f AS DECIMAL(6,2))",
    "CAST(f AS DECIMAL(10,0))",
]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(Path(tmp_path_factory.mktemp("decimal")) / "ds.lance")
    # f: floats a decimal cast rounds (to the nearest, halves away from zero), as DataFusion.
    data = {
        "x": [0.5, 1.5, 2.25, None],
        "i": [0, 1, 2, 3],
        "b": pa.array([0, 1, 2, -3], pa.int8()),
        "s": ["0.5", "1.5", "2", "3"],
        "f": [-2.25, 2.675, -0.125, 99.95],
    }
    lance_ops.write_dataset(pa.table(data), path)
    return path


@pytest.mark.interop
@pytest.mark.parametrize("predicate", FILTERS)
def test_decimal_against_integer_filters_as_pylance(uri: str, predicate: str) -> None:
    import lance

    expected = lance.dataset(uri).to_table(filter=predicate).column("i").to_pylist()
    assert lance_ops.dataset(uri).to_table(filter=predicate).column("i").to_pylist() == expected


@pytest.mark.interop
@pytest.mark.parametrize("expression", PROJECTIONS)
def test_decimal_integer_arithmetic_typed_as_pylance(uri: str, expression: str) -> None:
    import lance

    expected = lance.dataset(uri).to_table(columns={"y": expression})
    assert lance_ops.dataset(uri).to_table(columns={"y": expression}) == expected
