"""Page statistics inside the data files we write: every writer path, pruning, ds.stats, rebuild, pylance."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.file import writer as file_writer
from lance_ops.file.page_statistics import PAGE_STATISTICS_KEY
from lance_ops.fragment.options import PAGE_STATISTICS_CONFIG_KEY
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.query.predicate import parse_predicate
from lance_ops.table.statistics import statistics_files
from lance_ops.table.transaction import UpdateConfig, UpdateMap
from tests.table.test_statistics import _conditions, _data

ROWS_PER_FILE = 6_000
N = 3 * ROWS_PER_FILE + 777
STATS_COLUMNS = ["id", "f", "d", "s", "t", "b"]  # "l" (a list) has no statistics
DATA_DIR = Path(__file__).parent.parent / "data"


@pytest.fixture(scope="module")
def small_pages() -> Iterator[None]:
    """Writers cut pages of a few KiB, so every column of a data file has many pages."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(file_writer, "DEFAULT_DATA_CACHE_BYTES", 48 * 1024)
        patch.setattr(file_writer, "DEFAULT_MAX_PAGE_BYTES", 16 * 1024)
        yield


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory, small_pages: None) -> str:
    """A dataset we wrote (2.1 files, multi-page columns): it carries page statistics, no stats file."""
    uri = str(tmp_path_factory.mktemp("page_stats") / "ds")
    lance_ops.write_dataset(_data(N), uri, max_rows_per_file=ROWS_PER_FILE, data_storage_version="2.1")
    return uri


@pytest.fixture(scope="module")
def ours_table(ours: str) -> pa.Table:
    return lance_ops.dataset(ours).to_table()


def _bits(table: pa.Table) -> pa.Table:
    """``table`` with floats as their bit patterns (NaN equals NaN, -0.0 differs from 0.0)."""
    for index, field in enumerate(table.schema):
        if pa.types.is_float64(field.type):
            table = table.set_column(index, field.name, table.column(index).combine_chunks().view(pa.int64()))
    return table


def _oracle(ds: lance_ops.LanceDataset, where: str | pc.Expression, full: pa.Table | None = None) -> pa.Table:
    """What the filter selects, evaluated on every row (no statistics involved)."""
    return parse_predicate(where, ds.schema).filter(ds.to_table() if full is None else full)


def _check(ds: lance_ops.LanceDataset, where: str | pc.Expression, full: pa.Table | None = None) -> None:
    """Filtered reads (table, count, batches) equal the filter applied to every row."""
    expected = _oracle(ds, where, full)
    assert _bits(ds.to_table(filter=where)).equals(_bits(expected)), where
    assert ds.count_rows(where) == expected.num_rows, where
    scanned = pa.Table.from_batches(list(ds.to_batches(filter=where, batch_size=5_000)), schema=ds.schema)
    assert _bits(scanned).equals(_bits(expected)), where


def _covered(ds: lance_ops.LanceDataset) -> list[set[str]]:
    """Per fragment, the columns its own data files give statistics for (those with page lengths)."""
    names = {f.id: f.name for f in ds.manifest.schema.fields}
    out = []
    for fragment in ds._files.fragments():
        stats = fragment.statistics()
        out.append(set() if stats is None else {names[i] for i in stats.page_rows})
    return out


def test_files_carry_page_statistics_of_every_page(ours: str) -> None:
    ds = lance_ops.dataset(ours)
    assert ds.manifest.config.get("lance-ops.statistics") is None
    data = _data(N)
    for fragment in ds._files.fragments():
        (data_file,) = fragment.metadata.files
        reader = ds._files.open_file(data_file)
        found = reader.column_statistics()
        assert found is not None and not found.float_max_covers_nan
        assert set(found.columns) == set(STATS_COLUMNS)
        start = fragment.id * ROWS_PER_FILE
        f_stats = found.columns["f"]
        assert f_stats.nan_counts is not None and f_stats.nan_counts.shape == (2, len(f_stats.page_rows))
        floats = data.column("f").slice(start, fragment.physical_rows)
        assert int(f_stats.nan_counts.sum()) == int(pc.sum(pc.is_nan(floats)).as_py())
        assert all(column.nan_counts is None for name, column in found.columns.items() if name != "f")
        for name, column in found.columns.items():
            if fragment.physical_rows == ROWS_PER_FILE and name != "b":
                assert len(column.page_rows) > 1, name  # small pages: several per column
            rows = data.column(name).slice(start, fragment.physical_rows)
            offsets = np.concatenate([[0], np.cumsum(column.page_rows)])
            for k, row in enumerate(column.statistics.to_pylist()):
                page = rows.slice(int(offsets[k]), int(column.page_rows[k]))
                assert row["null_count"] == page.null_count, name
                if name in ("id", "d", "t") and page.null_count < len(page):
                    assert (
                        row["min_value"] == pc.min(page).as_py() and row["max_value"] == pc.max(page).as_py()
                    )
        sketches = reader.column_sketches()
        assert set(sketches) == set(STATS_COLUMNS)
        assert round(sketches["b"].estimate()) == 2


def test_every_writer_path_writes_page_statistics(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(3_000), uri, max_rows_per_file=1_000)
    ds = lance_ops.write_dataset(_data(500, seed=1), uri, mode="append")
    assert _covered(ds) == [set(STATS_COLUMNS)] * 4
    ds.delete("id < 100")
    ds.optimize.compact_files(target_rows_per_fragment=10_000)
    ds = lance_ops.dataset(uri)
    assert len(ds.manifest.fragments) == 1 and _covered(ds) == [set(STATS_COLUMNS)]
    ds.add_columns({"double_id": "id * 2"})
    ds.alter_columns({"path": "d", "data_type": pa.int64()})
    assert _covered(ds) == [{*STATS_COLUMNS, "double_id"}]
    assert ds.stats.rebuild().manifest is None  # nothing to rebuild: the files carry statistics
    summary = ds.stats.column_summary("double_id")
    assert summary["min_value"] == 200 and summary["fragments_with_statistics"] == 1
    assert ds.stats.column_stats("d").schema.field("min_value").type == pa.int64()
    ds = lance_ops.write_dataset(_data(200), uri, mode="overwrite")
    assert _covered(ds) == [set(STATS_COLUMNS)]


def test_page_statistics_can_be_turned_off(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(1_000), uri, page_statistics=False)
    assert _covered(ds) == [set()]
    (data_file,) = ds.manifest.fragments[0].files
    assert ds._files.open_file(data_file).column_statistics() is None
    update = UpdateConfig(config_updates=UpdateMap(((PAGE_STATISTICS_CONFIG_KEY, "false"),)))
    commit(uri, update, CommitOptions(read_version=ds.version))
    ds = lance_ops.write_dataset(_data(100), uri, mode="append")  # follows the dataset's config
    ds = lance_ops.write_dataset(_data(100), uri, mode="append", page_statistics=True)
    assert _covered(ds) == [set(), set(), set(STATS_COLUMNS)]
    assert ds.stats.rebuild().fragment_ids == (0, 1)
    assert ds.count_rows("id < 10") == 30


def test_column_stats_from_page_statistics(ours: str) -> None:
    ds = lance_ops.dataset(ours)
    data = _data(N)
    stats = ds.stats.column_stats("id")
    starts = [0, ROWS_PER_FILE, 2 * ROWS_PER_FILE, 3 * ROWS_PER_FILE]
    assert stats.column("min_value").to_pylist() == starts
    assert stats.column("max_value").to_pylist() == [s - 1 for s in starts[1:]] + [N - 1]
    sizes = [ROWS_PER_FILE] * 3 + [777]
    for estimate, size in zip(stats.column("distinct_count").to_pylist(), sizes, strict=True):
        assert abs(estimate - size) < 0.05 * size
    summary = ds.stats.column_summary("f")
    floats = data.column("f").to_numpy(zero_copy_only=False)
    assert summary["null_count"] == data.column("f").null_count
    assert summary["min_value"] == np.nanmin(floats) and summary["max_value"] == math.inf
    assert ds.stats.column_summary("s")["min_value"] == "k000000"
    assert ds.stats.column_summary("b")["distinct_count"] == 2


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions=st.lists(_conditions(), min_size=1, max_size=3), joiner=st.sampled_from([" AND ", " OR "]))
def test_pruned_scans_equal_full_scans(
    ours: str, ours_table: pa.Table, conditions: list[str], joiner: str
) -> None:
    _check(lance_ops.dataset(ours), joiner.join(conditions), ours_table)


_ARROW_OPS = {"==": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}
_ARROW_LITERALS = {
    "id": st.integers(-5, N + 5),
    "d": st.integers(-1, 5001).map(lambda v: pa.scalar(v, pa.int32())),
    "f": st.sampled_from([0.0, -0.0, 1.5, -250.0, 1e308, math.inf]) | st.floats(-300, 300),
    "s": st.sampled_from(["k000000", "k000600", "x", "zzz", ""]),
}


@st.composite
def _arrow_conditions(draw: st.DrawFn) -> pc.Expression:
    column = draw(st.sampled_from(sorted(_ARROW_LITERALS)))
    kind = draw(st.sampled_from(["cmp", "cmp", "null", "valid", "in"]))
    if kind == "null":
        return pc.field(column).is_null()
    if kind == "valid":
        return pc.field(column).is_valid()
    if kind == "in":
        values = draw(st.lists(_ARROW_LITERALS[column], min_size=1, max_size=3))
        return pc.field(column).isin([v.as_py() if isinstance(v, pa.Scalar) else v for v in values])
    kernel = _ARROW_OPS[draw(st.sampled_from(sorted(_ARROW_OPS)))]
    return kernel(pc.field(column), draw(_ARROW_LITERALS[column]))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions=st.lists(_arrow_conditions(), min_size=1, max_size=3))
def test_pruned_arrow_expression_scans_equal_full_scans(
    ours: str, ours_table: pa.Table, conditions: list[pc.Expression]
) -> None:
    expression = conditions[0]
    for condition in conditions[1:]:
        expression = expression & condition
    _check(lance_ops.dataset(ours), expression, ours_table)


def _data_bytes(reads: list[tuple[str, int, int]]) -> int:
    """Bytes read from data files."""
    return sum(length for path, _, length in reads if Path(path).parent.name == "data")


def _unbounded(where: str | pc.Expression) -> str | pc.Expression:
    """The same filter with no bounds (its top level is an OR): statistics cannot prune it."""
    return where | pc.scalar(False) if isinstance(where, pc.Expression) else f"({where}) OR false"


@pytest.mark.parametrize(
    "where",
    [
        "id < 1000",
        "id BETWEEN 9000 AND 9100",
        "s = 'k000010'",
        pc.field("id") >= 18_100,
        (pc.field("id") > 1_000) & (pc.field("id") < 1_200),
    ],
    ids=str,
)
def test_page_statistics_reduce_bytes_read(
    ours: str, recorded_reads: list[tuple[str, int, int]], where: str | pc.Expression
) -> None:
    ds = lance_ops.dataset(ours)
    expected = ds.to_table(filter=_unbounded(where))
    full = _data_bytes(recorded_reads)
    assert _bits(expected).equals(_bits(_oracle(ds, where)))
    recorded_reads.clear()
    assert _bits(ds.to_table(filter=where)).equals(_bits(expected))
    assert _data_bytes(recorded_reads) * 5 < full, where
    recorded_reads.clear()
    assert ds.count_rows(where) == expected.num_rows
    assert _data_bytes(recorded_reads) * 5 < full, where


_FLOATS = st.none() | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, math.nan])
_FLOAT_LITERALS = st.sampled_from(["0.0", "-0.0", "1.5", "-1.5", "1e308", "-1e308"]) | st.floats(
    -1e6, 1e6, allow_nan=False
).map(repr)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_FLOATS, min_size=1, max_size=24),
    op=st.sampled_from(["=", "<", "<=", ">", ">="]),
    literal=_FLOAT_LITERALS,
    arrow=st.booleans(),
)
def test_float_pruning_with_nan_zeros_and_infinities(
    tmp_path_factory: pytest.TempPathFactory, values: list[float | None], op: str, literal: str, arrow: bool
) -> None:
    uri = str(tmp_path_factory.mktemp("floats") / "ds")
    ds = lance_ops.write_dataset(
        pa.table({"x": pa.array(values, pa.float64())}), uri, max_rows_per_file=3, data_storage_version="2.0"
    )
    assert all(stats == {"x"} for stats in _covered(ds))
    where: str | pc.Expression = f"x {op} {literal}"
    if arrow:
        kernel = {"=": pc.equal, **{k: v for k, v in _ARROW_OPS.items() if k != "=="}}[op]
        where = kernel(pc.field("x"), float(literal))
    _check(ds, where)


@pytest.mark.parametrize(
    "where",
    [
        "id < 300",
        "id >= 1000",
        "score > 0.5 AND id < 800",
        "name = 'name_17'",
        "born IS NULL",
        "id IN (5, 777)",
    ],
)
def test_legacy_page_statistics_prune(recorded_reads: list[tuple[str, int, int]], where: str) -> None:
    uri = str(DATA_DIR / "datasets" / "legacy01_basic.lance")
    ds = lance_ops.dataset(uri)
    assert all(f.statistics() is not None for f in ds._files.fragments())
    columns = ["id", "score", "name"]
    expected = ds.to_table(columns=columns, filter=_unbounded(where))
    full = _data_bytes(recorded_reads)
    assert expected.equals(parse_predicate(where, ds.schema).filter(ds.to_table()).select(columns))
    recorded_reads.clear()
    assert ds.to_table(columns=columns, filter=where).equals(expected)
    assert _data_bytes(recorded_reads) * 2 < full, where
    assert ds.count_rows(where) == expected.num_rows


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_pylance_reads_files_with_page_statistics(tmp_path: Path, version: str) -> None:
    from lance.file import LanceFileReader as TheirReader

    rng = np.random.default_rng(7)
    n = 40_000
    table = pa.table(
        {
            "i": pa.array(rng.integers(-(2**40), 2**40, n)),
            "u8": pa.array(rng.integers(0, 200, n).astype(np.uint8), mask=rng.random(n) < 0.1),
            "f": pa.array(np.where(rng.random(n) < 0.01, np.nan, rng.normal(size=n))),
            "s": pa.array([f"v{i % 997:04d}" for i in range(n)]),
            "bin": pa.array([bytes([i % 256]) * (i % 5) for i in range(n)], pa.binary()),
            "ts": pa.array(rng.integers(0, 2**40, n)).view(pa.timestamp("us")),
            "d": pa.array(rng.integers(0, 20_000, n).astype(np.int32)).view(pa.date32()),
            "b": pa.array(rng.random(n) < 0.5),
            "l": pa.array([[i] for i in range(n)]),
        }
    )
    path = str(tmp_path / "f.lance")
    with LanceFileWriter(
        path, table.schema, version=version, max_page_bytes=16 * 1024, data_cache_bytes=32 * 1024
    ) as writer:
        writer.write_batch(table.slice(0, n // 2))
        writer.write_batch(table.slice(n // 2))
    ours_reader = LanceFileReader(path)
    found = ours_reader.column_statistics()
    assert found is not None and set(found.columns) == set(table.column_names) - {"l"}
    assert len(found.columns["i"].page_rows) > 1 and len(found.columns["s"].page_rows) > 1
    assert all(c.page_rows.sum() == n for c in found.columns.values())
    theirs = TheirReader(path).read_all().to_table()
    assert _bits(theirs).equals(_bits(table))
    assert PAGE_STATISTICS_KEY.encode() in (theirs.schema.metadata or {})


@pytest.mark.interop
def test_pylance_reads_and_continues_datasets_with_page_statistics(tmp_path: Path, small_pages: None) -> None:
    lance = pytest.importorskip("lance")
    from lance_ops.ops.encodings import profile

    uri = str(tmp_path / "ds")
    data = _data(30_000)
    plan = profile(data)
    ds = lance_ops.write_dataset(data, uri, max_rows_per_file=10_000, encoding_plan=plan)
    ds.optimize.compact_files(target_rows_per_fragment=15_000)
    ds = lance_ops.dataset(uri)
    ds.add_columns({"half": "id / 2"})
    ds = lance_ops.dataset(uri)
    theirs = lance.dataset(uri)
    assert _bits(theirs.to_table()).equals(_bits(ds.to_table()))
    assert theirs.count_rows("id < 100") == ds.count_rows("id < 100") == 100
    lance.write_dataset(_data(1_000), uri, mode="append")
    ds = lance_ops.dataset(uri)
    result = ds.stats.rebuild()
    assert result.fragment_ids == (ds.manifest.fragments[-1].id,)  # only pylance's fragment lacks them
    assert len(statistics_files(ds.manifest)) == 1
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == len(ds.manifest.fragments)
    _check(ds, "id < 500 AND s >= 'k000002'")
    assert lance.dataset(uri).count_rows() == 31_000


@pytest.mark.interop
def test_rebuild_on_pylance_dataset_then_force(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    lance.write_dataset(_data(20_000), uri, max_rows_per_file=10_000)
    lance_ops.write_dataset(_data(500), uri, mode="append")
    ds = lance_ops.dataset(uri)
    assert _covered(ds) == [set(), set(), set(STATS_COLUMNS)]
    assert ds.stats.rebuild().fragment_ids == (0, 1)
    assert ds.stats.rebuild().manifest is None
    assert ds.stats.rebuild(force=True).fragment_ids == (0, 1, 2)
    _check(ds, "id >= 19990")
    assert lance.dataset(uri).count_rows("id >= 19990") == 10


def test_reader_ignores_statistics_it_does_not_know(tmp_path: Path) -> None:
    from lance_ops.file.page_statistics import StatisticsLocation
    from lance_ops.file.writer import _lance_file_bytes

    known = pa.StructArray.from_arrays(
        [pa.array([0], pa.int64()), pa.array([1], pa.int64()), pa.array([5], pa.int64()), pa.array([7])],
        names=["null_count", "min_value", "max_value", "nan_count"],
    )
    extra = {
        "0": known,  # field 0 with one child the reader does not know
        "41": pa.array([{"null_count": 0, "min_value": 1, "max_value": 2}]),  # no such field
        "notes": pa.array(["not a field id"]),
        "1": pa.array([3]),  # field 1 but not a statistics struct
    }
    path = str(tmp_path / "x.lance")
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    with LanceFileWriter(path, schema, page_statistics=False) as writer:
        writer.write_batch(pa.table({"x": [1, 5, 3], "y": [1, 2, 3]}))
        location = StatisticsLocation(
            writer.add_global_buffer(_lance_file_bytes(pa.table(extra))), 0, {}, True
        )
        writer.add_schema_metadata(PAGE_STATISTICS_KEY, location.to_json())
    found = LanceFileReader(path).column_statistics()
    assert found is not None and list(found.columns) == ["x"]
    assert found.columns["x"].statistics.to_pylist() == [{"null_count": 0, "min_value": 1, "max_value": 5}]


@pytest.mark.parametrize(
    "nan_counts",
    [{"0": [[1, 2]]}, {"0": [[1], [-1]]}, {"0": "x"}, {"0": [[1], [0], [0]]}, {"0": [[0, 0], [0, 0]]}],
    ids=["one-row", "negative", "not-a-list", "three-rows", "wrong-page-count"],
)
def test_malformed_nan_counts_are_corrupt(tmp_path: Path, nan_counts: Any) -> None:
    """NaN counts that are not two rows of counts, one per page, make the file's statistics corrupt."""
    import json

    from lance_ops.errors import CorruptFileError
    from lance_ops.file.writer import _lance_file_bytes

    path = str(tmp_path / "x.lance")
    stats = pa.table({"0": pa.array([{"null_count": 0, "min_value": 1.0, "max_value": 2.0}])})
    with LanceFileWriter(path, pa.schema([("x", pa.float64())]), page_statistics=False) as writer:
        writer.write_batch(pa.table({"x": [1.0, 2.0, math.nan]}))
        buffer = writer.add_global_buffer(_lance_file_bytes(stats))
        text = {"statistics": buffer, "sketches": 0, "sketch_ranges": {}, "float_max": "ignores-nan"}
        writer.add_schema_metadata(PAGE_STATISTICS_KEY, json.dumps({**text, "nan_counts": nan_counts}))
    with pytest.raises(CorruptFileError):
        LanceFileReader(path).column_statistics()


def test_files_without_rows_or_with_copied_metadata(tmp_path: Path) -> None:
    path = str(tmp_path / "empty.lance")
    with LanceFileWriter(path, pa.schema([("x", pa.int64())])):
        pass
    assert LanceFileReader(path).column_statistics() is None
    # a file whose schema metadata was copied from another file does not claim its statistics
    other = str(tmp_path / "other.lance")
    source = LanceFileReader(str(tmp_path / "empty.lance")).schema
    metadata = {PAGE_STATISTICS_KEY: '{"statistics": 1, "sketches": 2, "sketch_ranges": {}}'}
    with LanceFileWriter(other, source.with_metadata(metadata), page_statistics=False) as writer:
        writer.write_batch(pa.table({"x": [1, 2]}))
    assert LanceFileReader(other).column_statistics() is None


def test_bounds_of_arrow_expressions() -> None:
    schema = pa.schema([("x", pa.float64()), ("i", pa.int32()), ("s", pa.string()), ("bin", pa.binary())])

    def bounds(expression: pc.Expression) -> list[tuple[str, str, list[Any]]]:
        found = parse_predicate(expression, schema).bounds
        return [(b.column, b.op, [v.as_py() for v in b.values]) for b in found]

    assert bounds((pc.field("i") > 3) & (pc.scalar(7) >= pc.field("i"))) == [
        ("i", "gt", [3]),
        ("i", "le", [7]),
    ]
    assert bounds(pc.field("s") == "a and b") == [("s", "eq", ["a and b"])]
    assert bounds(pc.field("s").is_null() & pc.field("x").is_valid()) == [
        ("s", "null", []),
        ("x", "not_null", []),
    ]
    assert bounds(pc.field("i").isin([1, 5])) == [("i", "in", [1, 5])]
    assert bounds(pc.field("x") >= -0.0) == [("x", "ge", [-0.0])]
    # a literal keeps its Arrow type (read from the expression's Substrait form, not its text)
    assert bounds(pc.field("x") > pa.scalar(np.float32(0.3))) == [("x", "gt", [float(np.float32(0.3))])]
    assert bounds(pc.field("x") == pa.scalar(np.float32(0.3))) == [("x", "eq", [float(np.float32(0.3))])]
    assert bounds(pc.field("bin") == b"ab") == [("bin", "eq", [b"ab"])]
    # no bound from ORs, computed operands, NaN, NULL, or expressions with no Substrait form
    for expression in (
        (pc.field("i") > 1) | (pc.field("i") < 0),
        pc.field("i") + 1 > 3,
        pc.field("x") > float("nan"),
        pc.field("i") > 1.5,
        pc.field("i") > 2**40,
        pc.field("x").is_null(nan_is_null=True),
        pc.field("i").isin([1, None]),
    ):
        assert bounds(expression) == [], str(expression)
