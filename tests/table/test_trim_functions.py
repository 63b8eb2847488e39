"""``ltrim`` / ``rtrim`` / ``btrim`` take (string, characters) as DataFusion does, checked against
pylance 14 in projections and filters (sqlglot's Spark grammar, which the SQL parser builds on,
reads the two-argument ``ltrim`` / ``rtrim`` the other way round)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.query import parser, visitors

_TABLE = pa.table({"s": ["xxaxx", "axa", "xx", "", None, "abc", "yxay", "  pad  "]})

_EXPRESSIONS = [
    "ltrim(s, 'x')",
    "rtrim(s, 'x')",
    "btrim(s, 'x')",
    "ltrim(s, 'xy')",
    "rtrim(s, 'xy')",
    "btrim(s, 'yx')",
    "ltrim(s)",
    "rtrim(s)",
    "btrim(s)",
    "rtrim(s, '')",
    "LTRIM(upper(s), 'X')",
]


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance_ops.LanceDataset, lance.LanceDataset]:
    root = tmp_path_factory.mktemp("trim")
    ours = lance_ops.write_dataset(_TABLE, str(Path(root, "ours")))
    return ours, lance.dataset(ours.uri)


@pytest.mark.parametrize("expression", _EXPRESSIONS)
def test_trim_projection_as_pylance(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset], expression: str
) -> None:
    ours, theirs = twins
    mine = ours.to_table(columns={"r": expression})["r"].to_pylist()
    assert mine == theirs.to_table(columns={"r": expression})["r"].to_pylist()


@pytest.mark.parametrize("expression", _EXPRESSIONS)
def test_trim_filter_and_its_sql_text_as_pylance(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset], expression: str
) -> None:
    ours, theirs = twins
    condition = f"{expression} IN ('a', 'axx', 'xxa', 'axa', 'ay', 'ya', 'pad', '  pad', 'pad  ')"
    expected = theirs.to_table(filter=condition)["s"].to_pylist()
    assert ours.to_table(filter=condition)["s"].to_pylist() == expected
    # the tree's SQL text is SQL pylance takes, and parses back to the same tree
    text = visitors.to_sql(parser.parse(condition))
    assert parser.parse(text) == parser.parse(condition)
    assert theirs.to_table(filter=text)["s"].to_pylist() == expected


def test_trim_characters_from_a_column_are_refused(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset],
) -> None:
    ours, _ = twins
    with pytest.raises(UnsupportedFeatureError, match="trim characters must be a string literal"):
        ours.to_table(columns={"r": "rtrim('xxbxx', s)"})
