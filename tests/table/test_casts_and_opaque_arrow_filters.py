"""SQL ``CAST`` and Arrow expressions' unsafe casts truncate as DataFusion does (pylance 14 as the
oracle), and Arrow filters with no Substrait form, which pylance 14 refuses, are evaluated by Arrow
(the documented decision in docs/compatibility.md: they include plain comparisons Arrow binds with
an implicit safe cast, and filters on ``_rowid`` / ``_rowaddr``)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops

_TABLE = pa.table(
    {
        "id": pa.array(range(6), pa.int64()),
        "x": [1.5, 2.5, 3.0, -1.7, None, -0.2],
        "i": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
        "u": pa.array([1, 2, 3, 4, 5, 6], pa.uint64()),
        "s": ["ab", "cd", None, "abc", "", "xa"],
    }
)


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance_ops.LanceDataset, lance.LanceDataset]:
    root = tmp_path_factory.mktemp("casts")
    ours = lance_ops.write_dataset(_TABLE, str(Path(root, "ours")))
    return ours, lance.dataset(ours.uri)


def _ids(ds: lance_ops.LanceDataset | lance.LanceDataset, condition: str | pc.Expression) -> list[int]:
    return sorted(ds.to_table(filter=condition)["id"].to_pylist())


@pytest.mark.parametrize(
    "condition",
    [
        "CAST(x AS BIGINT) > 1",
        "CAST(x AS INT) = -1",
        "CAST(x AS TINYINT) = 0",
        "CAST(x AS SMALLINT) >= 2",
        "CAST(1.7 AS INT) = i",
        "CAST(-1.7 AS BIGINT) = -1",
        pc.field("x").cast(pa.int64(), safe=False) > 1,
        pc.field("x").cast(pa.int32(), safe=False) == 0,
    ],
    ids=str,
)
def test_casts_to_integers_truncate_as_pylance(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset], condition: str | pc.Expression
) -> None:
    ours, theirs = twins
    assert _ids(ours, condition) == _ids(theirs, condition)


def test_cast_projection_truncates_as_pylance(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset],
) -> None:
    ours, theirs = twins
    columns = {"t": "CAST(x AS BIGINT)", "r": "arrow_cast(x, 'Int32')"}
    assert ours.to_table(columns=columns).equals(theirs.to_table(columns=columns))


def test_casts_out_of_range_are_refused_by_both(tmp_path: Path) -> None:
    table = pa.table({"big": [1e30, 2.0]})
    ours = lance_ops.write_dataset(table, str(tmp_path / "d"))
    with pytest.raises(pa.ArrowInvalid):
        lance.dataset(ours.uri).to_table(filter="CAST(big AS BIGINT) > 1")
    with pytest.raises(pa.ArrowInvalid):
        ours.to_table(filter="CAST(big AS BIGINT) > 1")


# Arrow filters pylance 14 refuses (no Substrait form), with the rows Arrow's own semantics select.
_OPAQUE = [
    (pc.match_like(pc.field("s"), "a%"), [0, 3]),
    (pc.utf8_length(pc.field("s")) > 1, [0, 1, 3, 5]),
    (pc.field("i") > 1.5, [1, 2, 3, 4, 5]),  # int32 against a double: an implicit safe cast
    (pc.field("u") < 3, [0, 1]),  # uint64 against an int64 literal: the same
    (pc.field("x").is_null(nan_is_null=True), [4]),
    (pc.field("x").cast(pa.int64(), safe=True) == 3, None),  # 1.5 cannot be cast safely: an error
]


@pytest.mark.parametrize(("condition", "expected"), _OPAQUE, ids=[str(c) for c, _ in _OPAQUE])
def test_arrow_filters_without_substrait_form_are_evaluated_by_arrow(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset],
    condition: pc.Expression,
    expected: list[int] | None,
) -> None:
    ours, theirs = twins
    with pytest.raises((pa.ArrowNotImplementedError, pa.ArrowInvalid), match="Substrait"):
        theirs.to_table(filter=condition)
    if expected is None:
        with pytest.raises(pa.ArrowInvalid, match="truncated"):
            ours.to_table(filter=condition)
        return
    assert _ids(ours, condition) == expected
    assert sorted(_TABLE.filter(condition)["id"].to_pylist()) == expected


def test_arrow_filters_on_virtual_columns_pylance_cannot_bind(
    twins: tuple[lance_ops.LanceDataset, lance.LanceDataset],
) -> None:
    ours, theirs = twins
    condition = pc.field("_rowid") < pa.scalar(2, pa.uint64())
    with pytest.raises(pa.ArrowInvalid, match="No match for FieldRef"):
        theirs.to_table(filter=condition)
    assert _ids(ours, condition) == [0, 1]
