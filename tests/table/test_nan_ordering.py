"""NaN in filters and statistics: ordered by its sign bit as pylance orders it, pruned exactly.

pylance (DataFusion / arrow-rs) orders floats with ``-NaN`` below ``-inf`` and ``NaN`` above
``+inf``; a NaN equals a NaN of its own sign only; ``-0.0 = 0`` against a constant. Filters here
must select the same rows, and statistics (bounds that ignore NaN, as the format says, with NaN
counts by sign kept beside them) must never prune a row the filter selects — on datasets written
here, by pylance, and by the older rule that recorded ``+inf`` as the max of a zone with NaN.
"""

from __future__ import annotations

import math
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.fragment.pruning import row_mask
from lance_ops.query.predicate import parse_predicate

pytestmark = pytest.mark.interop

NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
NAN = math.nan
INF = math.inf
VALUES = [1.0, -1.0, NAN, NEG_NAN, INF, -INF, 0.0, -0.0, 5.0, None]
OLD_RULE = Path(__file__).parent.parent / "data" / "statistics" / "nan_inf_rule.lance"

PREDICATES = [
    "x > 0", "x >= 0", "x < 0", "x <= 0", "x = 0", "x != 0", "x = -0.0", "x > -0.0",
    "x BETWEEN -1 AND 1", "x NOT BETWEEN -1 AND 1", "x IN (1.0, 5.0)", "x NOT IN (1.0, 2.0)",
    "isnan(x)", "NOT isnan(x)", "x > 1e308", "x < -1e308", "x != x", "x = x", "NOT (x > 0)",
    "x < cast('NaN' as double)", "x > cast('NaN' as double)", "x = cast('NaN' as double)",
    "x >= cast('NaN' as double)", "x < y", "x = y", "x >= y", "x <> y", "x IS NULL",
    "0 < x", "-1 >= x", "1e308 < x", "0 = x", "x > 0 AND y < 0", "x IN (y, 1.0)",
]  # fmt: skip


@pytest.fixture(scope="module")
def lance() -> Any:
    return pytest.importorskip("lance")


def _ids(ds: Any, where: Any) -> list[int]:
    return sorted(ds.to_table(columns=["i"], filter=where).column("i").to_pylist())


def _unbounded(where: str) -> str:
    """The same filter with no bounds (top-level OR): statistics cannot prune it."""
    return f"({where}) OR false"


@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()], ids=str)
def test_filters_order_nan_by_sign_as_pylance(tmp_path: Path, lance: Any, type_: pa.DataType) -> None:
    table = pa.table(
        {"i": pa.array(range(len(VALUES))), "x": pa.array(VALUES, type_), "y": pa.array(VALUES[::-1], type_)}
    )
    theirs = lance.write_dataset(table, str(tmp_path / "theirs"))
    ours_uri = str(tmp_path / "ours")
    lance_ops.write_dataset(table, ours_uri, max_rows_per_file=3)
    ours, pylance_on_ours = lance_ops.dataset(str(tmp_path / "theirs")), lance.dataset(ours_uri)
    written_here = lance_ops.dataset(ours_uri)
    for where in PREDICATES:
        expected = _ids(theirs, where)
        assert _ids(ours, where) == expected, where
        assert _ids(pylance_on_ours, where) == expected, where
        assert _ids(written_here, where) == expected, where  # pruned by statistics
        assert _ids(written_here, _unbounded(where)) == expected, where


def test_greater_than_zero_skips_negative_nan(tmp_path: Path, lance: Any) -> None:
    """pylance's test_nan_handling case: ``x > 0`` over numbers, NaN and -NaN selects no -NaN."""
    values = [1.0, 2.0, NAN, NEG_NAN, 3.0, INF, -2.0]
    table = pa.table({"i": pa.array(range(len(values))), "x": pa.array(values)})
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(table, uri)
    assert _ids(lance_ops.dataset(uri), "x > 0") == [0, 1, 2, 4, 5] == _ids(lance.dataset(uri), "x > 0")
    assert _ids(lance_ops.dataset(uri), "x < 0") == [3, 6] == _ids(lance.dataset(uri), "x < 0")


_FLOATS = st.none() | st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, NAN, NEG_NAN, INF, -INF])
_LITERALS = st.sampled_from(["0", "0.0", "-0.0", "1.5", "-1.5", "1e308", "-1e308"]) | st.floats(
    -1e6, 1e6, allow_nan=False
).map(repr)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_FLOATS, min_size=0, max_size=30),
    rows_per_file=st.sampled_from([1, 2, 3, 7, 1024]),
    op=st.sampled_from(["=", "<", "<=", ">", ">=", "!="]),
    literal=_LITERALS,
    second=st.sampled_from(["", " AND x < 1e300", " AND x > -1e300", " AND x IS NOT NULL"]),
)
def test_pruned_equals_unpruned_equals_pylance(
    tmp_path_factory: pytest.TempPathFactory,
    lance: Any,
    values: list[float | None],
    rows_per_file: int,
    op: str,
    literal: str,
    second: str,
) -> None:
    root = tmp_path_factory.mktemp("nan")
    table = pa.table({"i": pa.array(range(len(values)), pa.int64()), "x": pa.array(values, pa.float64())})
    ours_uri, theirs_uri = str(root / "ours"), str(root / "theirs")
    ours = lance_ops.write_dataset(table, ours_uri, max_rows_per_file=rows_per_file)
    lance.write_dataset(table, theirs_uri, max_rows_per_file=rows_per_file)
    where = f"x {op} {literal}{second}"
    expected = _ids(lance.dataset(theirs_uri), where)
    assert _ids(lance.dataset(ours_uri), where) == expected
    assert _ids(ours, where) == expected
    assert _ids(ours, _unbounded(where)) == expected
    assert ours.count_rows(where) == len(expected)
    assert _ids(lance_ops.dataset(theirs_uri), where) == expected


def test_nan_counts_prune_where_bounds_alone_could_not(tmp_path: Path, lance: Any) -> None:
    """Zones with NaN of one sign are kept only for the ranges that NaN falls in."""
    pages = [[1.0, 2.0], [1.0, NAN], [1.0, NEG_NAN], [NAN, NEG_NAN], [None, None]]
    values = [v for page in pages for v in page]
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(
        pa.table({"i": pa.array(range(len(values))), "x": pa.array(values)}), uri, max_rows_per_file=2
    )
    kept = {where: _kept_fragments(ds, where) for where in ("x > 5", "x < 0", "x = 1", "x >= 2")}
    assert kept == {"x > 5": [1, 3], "x < 0": [2, 3], "x = 1": [0, 1, 2, 3], "x >= 2": [0, 1, 3]}
    for where in kept:
        assert _ids(ds, where) == _ids(lance.dataset(uri), where), where


def _kept_fragments(ds: lance_ops.LanceDataset, where: str) -> list[int]:
    """Fragments whose statistics say ``where`` may select a row."""
    predicate = parse_predicate(where, ds.schema)
    ids = {b.column: ds.manifest.schema.field(b.column).id for b in predicate.bounds}
    kept = []
    for fragment in ds._files.fragments():
        stats = fragment.statistics()
        assert stats is not None
        mask = row_mask(stats, predicate.bounds, ids, np.arange(fragment.physical_rows))
        if mask is None or mask.any():
            kept.append(fragment.id)
    return kept


@pytest.fixture
def old_rule(tmp_path: Path) -> str:
    """A copy of the dataset written by the older rule (tests/data/datagen_nan_inf_rule.py)."""
    target = tmp_path / "old.lance"
    shutil.copytree(OLD_RULE, target)
    return str(target)


def test_older_rule_datasets_stay_readable_and_prune_exactly(old_rule: str, lance: Any) -> None:
    ds = lance_ops.dataset(old_rule)
    fragments = ds._files.fragments()
    field_id = ds.manifest.schema.field("x").id
    stats = [f.statistics() for f in fragments]
    # data files (fragments 0-6) and a statistics file (7-8) of the older rule, no NaN counts
    assert all(s is not None and field_id in s.nan_aware and not s.nan_counts for s in stats)
    theirs = lance.dataset(old_rule)
    for literal in ["0", "-0.0", "0.5", "-1", "2", "4", "7", "50", "150", "-10", "1e308", "-1e308"]:
        for op in ["=", "<", "<=", ">", ">=", "!="]:
            where = f"x {op} {literal}"
            expected = _ids(theirs, where)
            assert _ids(ds, where) == expected == _ids(ds, _unbounded(where)), where
    # the max still prunes where no NaN can be: fragment 0 holds 1..4, fragment 6 holds -0.5..0.5
    assert _kept_fragments(ds, "x > 50") == [1, 2, 3, 5, 7, 8]
    assert _kept_fragments(ds, "x < -10") == [1, 2, 3, 5, 7, 8]
    # the dataset continues: an append here writes the new rule, both read together
    more = pa.table({"i": pa.array([36, 37], pa.int64()), "x": pa.array([NEG_NAN, 9.0])})
    ds = lance_ops.write_dataset(more, old_rule, mode="append")
    (new,) = [f.statistics() for f in ds._files.fragments() if f.id == 9]
    assert new is not None and new.nan_counts[field_id].tolist() == [[0], [1]]
    theirs = lance.dataset(old_rule)
    for where in ["x < -10", "x > 8", "x = 9", "x < 0"]:
        assert _ids(ds, where) == _ids(theirs, where) == _ids(ds, _unbounded(where)), where


def test_statistics_files_keep_nan_counts(tmp_path: Path, lance: Any) -> None:
    """A rebuild on a pylance dataset records NaN counts per zone beside its statistics."""
    values = [1.0, NAN, -3.0, NEG_NAN, None, 7.0]
    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"i": pa.array(range(6)), "x": pa.array(values)}), uri, max_rows_per_file=2)
    ds = lance_ops.dataset(uri)
    assert ds.stats.rebuild().fragment_ids == (0, 1, 2)
    field_id = ds.manifest.schema.field("x").id
    counts = [f.statistics().nan_counts[field_id].tolist() for f in ds._files.fragments()]  # type: ignore[union-attr]
    assert counts == [[[1], [0]], [[0], [1]], [[0], [0]]]
    assert _kept_fragments(ds, "x > 5") == [0, 2] and _kept_fragments(ds, "x < -5") == [1]
    summary = ds.stats.column_summary("x")
    assert (summary["min_value"], summary["max_value"]) == (-3.0, 7.0)  # NaN ignored, as the format says
    theirs = lance.dataset(uri)
    for where in ["x > 5", "x < -5", "x > 0", "x <= -3"]:
        assert _ids(ds, where) == _ids(theirs, where), where


def test_statistics_file_with_nan_counts_of_other_zones_is_corrupt(tmp_path: Path, lance: Any) -> None:
    from dataclasses import replace

    from lance_ops.errors import CorruptFileError
    from lance_ops.ops.statistics import fragment_statistics
    from lance_ops.table.statistics import load_statistics, write_statistics_file

    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"x": pa.array([1.0, NAN, NEG_NAN])}), uri)
    ds = lance_ops.dataset(uri)
    field_id = ds.manifest.schema.field("x").id
    (fragment,) = ds._files.fragments()
    good = fragment_statistics(fragment, {field_id: "x"})
    assert good.nan_counts[field_id].tolist() == [[1], [1]]
    bad = replace(good, nan_counts={field_id: np.zeros((2, 3), dtype=np.int64)})  # 3 zones of 1
    name = write_statistics_file(ds.storage, [bad])
    manifest = replace(ds.manifest, config={**ds.manifest.config, "lance-ops.statistics": f'["{name}"]'})
    with pytest.raises(CorruptFileError, match="NaN counts"):
        load_statistics(ds.storage, manifest)


def test_pylance_nan_handling_case(tmp_path: Path, lance: Any) -> None:
    """pylance's test_scalar_index.py::test_nan_handling, without its indexes (ours have none)."""
    values = [1.0, float("-nan"), INF, -INF, 2.0, float("nan"), 3.0]
    uri = str(tmp_path / "dataset")
    ds = lance_ops.write_dataset(pa.table({"x": values}), uri)
    expected = {"x IS NULL": 0, "x IS NOT NULL": 7, "x > 0": 5, "x < 5": 5, "x IN (1, 2)": 2}
    assert {where: ds.to_table(filter=where).num_rows for where in expected} == expected
    assert {where: lance.dataset(uri).to_table(filter=where).num_rows for where in expected} == expected
