"""Column statistics of a dataset: rebuild, ds.stats, freshness, and pruning that never changes results."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.io.local import LocalStore
from lance_ops.table.statistics import CONFIG_KEY, STATS_DIR, ZONE_ROWS, load_statistics, statistics_files

ROWS_PER_FILE = 20_000
N = 3 * ROWS_PER_FILE + 777


def _data(n: int = N, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    floats = rng.normal(size=n) * 100
    floats[rng.random(n) < 0.01] = np.nan
    floats[::997] = -0.0
    floats[5] = np.inf
    float_mask = rng.random(n) < 0.05
    # whole zones of nulls in "d"
    d = pa.array(np.where((ids // ZONE_ROWS) % 3 == 1, 0, ids % 5000), mask=(ids // ZONE_ROWS) % 3 == 1)
    long_prefix = "x" * 70
    strings = [f"{long_prefix if i % 7 == 0 else ''}k{i // 100:06d}" for i in range(n)]
    return pa.table(
        {
            "id": ids,
            "f": pa.array(floats, mask=float_mask),
            "d": d.cast(pa.int32()),
            "s": pa.array(strings),
            "t": pa.array(ids * 1_000_000, pa.int64()).view(pa.timestamp("us")),
            "b": pa.array((ids % 11) == 0),
            "l": pa.array([[int(i)] for i in range(n)]),
        }
    )


@pytest.fixture(scope="module")
def lance_mod() -> Any:
    return pytest.importorskip("lance")


@pytest.fixture(scope="module")
def stats_dataset(tmp_path_factory: pytest.TempPathFactory, lance_mod: Any) -> tuple[str, int, int]:
    """A pylance-written dataset, rebuilt by us: (uri, version without stats, version with stats)."""
    uri = str(tmp_path_factory.mktemp("stats") / "ds")
    lance_mod.write_dataset(_data(), uri, max_rows_per_file=ROWS_PER_FILE)
    ds = lance_ops.dataset(uri)
    before = ds.version
    result = ds.stats.rebuild()
    assert result.fragment_ids == (0, 1, 2, 3)
    return uri, before, ds.version


@pytest.mark.interop
def test_rebuild_on_pylance_dataset(stats_dataset: tuple[str, int, int], lance_mod: Any) -> None:
    uri, before, after = stats_dataset
    ds = lance_ops.dataset(uri, version=after)
    assert ds.read_transaction().operation.__class__.__name__ == "UpdateConfig"
    table = _data()
    stats = ds.stats.column_stats("id")
    assert stats.column("fragment_id").to_pylist() == [0, 1, 2, 3]
    assert stats.column("min_value").to_pylist() == [0, 20_000, 40_000, 60_000]
    assert stats.column("max_value").to_pylist() == [19_999, 39_999, 59_999, N - 1]
    for row, low, high in zip(
        stats.column("distinct_count").to_pylist(),
        [0, 20_000, 40_000, 60_000],
        [20_000, 40_000, 60_000, N],
        strict=True,
    ):
        assert abs(row - (high - low)) < 0.05 * (high - low)
    summary = ds.stats.column_summary("f")
    floats = table.column("f").to_numpy(zero_copy_only=False)
    assert summary["null_count"] == table.column("f").null_count
    assert summary["min_value"] == np.nanmin(floats) and summary["max_value"] == math.inf
    strings = ds.stats.column_summary("s")
    assert strings["min_value"] == "k000000" and strings["max_value"] is not None
    assert strings["max_value"] >= max(table.column("s").to_pylist())
    ts = ds.stats.column_stats("t")
    assert ts.schema.field("min_value").type == pa.timestamp("us")
    assert ds.stats.column_summary("b")["distinct_count"] == 2
    with pytest.raises(lance_ops.errors.SchemaError):
        ds.stats.column_stats("l")
    # pylance opens the version, keeps the config and continues the history
    theirs = lance_mod.dataset(uri, version=after)
    assert CONFIG_KEY in theirs.config()
    assert theirs.stats.dataset_stats() == ds.stats.dataset_stats()
    assert theirs.count_rows("id < 10") == 10


@pytest.mark.interop
def test_pylance_reads_statistics_files(stats_dataset: tuple[str, int, int], lance_mod: Any) -> None:
    from lance.file import LanceFileReader

    uri, _, after = stats_dataset
    ds = lance_ops.dataset(uri, version=after)
    (name,) = statistics_files(ds.manifest)
    table = LanceFileReader(str(Path(uri) / STATS_DIR / name)).read_all().to_table()
    ids = {f.name: f.id for f in ds.manifest.schema.fields}
    assert sorted(table.column_names, key=int) == sorted(
        (str(ids[c]) for c in ["id", "f", "d", "s", "t", "b"]), key=int
    )
    column = table.column(str(ids["id"]))
    assert column.type == pa.struct(
        [("null_count", pa.int64()), ("min_value", pa.int64()), ("max_value", pa.int64())]
    )
    assert table.num_rows == sum(-(-f.physical_rows // ZONE_ROWS) for f in ds.manifest.fragments)
    assert column.combine_chunks().field("min_value")[0].as_py() == 0


def test_rebuild_is_incremental_and_force_recomputes(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(30_000), uri, max_rows_per_file=10_000, page_statistics=False)
    assert ds.stats.rebuild(columns=["id"]).fragment_ids == (0, 1, 2)
    assert ds.stats.rebuild(columns=["id"]).manifest is None  # nothing to do, nothing committed
    assert ds.stats.rebuild(columns=["id", "s"]).fragment_ids == (0, 1, 2)
    ds = lance_ops.write_dataset(_data(5_000), uri, mode="append", page_statistics=False)
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == 3
    result = ds.stats.rebuild()
    assert result.fragment_ids == (0, 1, 2, 3)  # f, d, t, b were missing everywhere
    assert ds.stats.rebuild().manifest is None
    assert len(statistics_files(ds.manifest)) == 3
    ds.stats.rebuild(force=True)
    assert len(statistics_files(ds.manifest)) == 1  # older files describe nothing the new one lacks
    assert ds.stats.column_summary("id") | {"distinct_count": None} == {
        "null_count": 0,
        "min_value": 0,
        "max_value": 29_999,
        "distinct_count": None,
        "fragments_with_statistics": 4,
        "num_fragments": 4,
    }


@pytest.mark.interop
def test_stale_statistics_are_never_used(tmp_path: Path, lance_mod: Any) -> None:
    uri = str(tmp_path / "ds")
    lance_mod.write_dataset(_data(30_000), uri, max_rows_per_file=10_000)
    ds = lance_ops.dataset(uri)
    ds.stats.rebuild(columns=["id"])
    lance_mod.dataset(uri).delete("id < 5")  # deletions keep bounds valid
    ds = lance_ops.dataset(uri)
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == 3
    assert ds.count_rows("id < 100") == 95
    # a fragment whose column now lives in another data file is not described any more
    fragment = ds.manifest.fragments[0]
    moved = replace(fragment, files=tuple(replace(f, path="other.lance") for f in fragment.files))
    entry = load_statistics(uri, ds.manifest)[fragment.id]
    assert entry.fresh_for(moved) is None
    assert entry.fresh_for(replace(fragment, physical_rows=fragment.physical_rows + 1)) is None
    lance_mod.dataset(uri).optimize.compact_files(target_rows_per_fragment=100_000)
    ds = lance_ops.dataset(uri)
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == 0
    assert ds.stats.column_stats("id").column("min_value").to_pylist() == [None]
    assert ds.count_rows("id < 100") == 95
    ds.stats.rebuild()
    assert statistics_files(ds.manifest) and len(statistics_files(ds.manifest)) == 1


def _bits(table: pa.Table) -> pa.Table:
    """``table`` with its floats as their bit patterns (NaN equals NaN, -0.0 differs from 0.0)."""
    index = table.schema.get_field_index("f")
    return table.set_column(index, "f", table.column("f").combine_chunks().view(pa.int64()))


def _compare(ds_stats: lance_ops.LanceDataset, ds_plain: lance_ops.LanceDataset, where: str) -> None:
    expected = ds_plain.to_table(filter=where)
    got = ds_stats.to_table(filter=where)
    assert _bits(got).equals(_bits(expected)), where
    assert ds_stats.count_rows(where) == expected.num_rows


_LITERALS = {
    "id": st.integers(-5, N + 5).map(str),
    "d": st.integers(-1, 5001).map(str),
    "f": st.sampled_from(["0.0", "-0.0", "1.5", "-250.0", "1e308"]) | st.floats(-300, 300).map(repr),
    "s": st.sampled_from(["'k000000'", "'k000600'", "'x'", "'" + "x" * 70 + "k000300'", "''", "'zzz'"]),
    "t": st.integers(0, N).map(lambda i: f"timestamp '{np.datetime64(i, 's')}'".replace("T", " ")),
    "b": st.sampled_from(["true", "false"]),
}
_OPS = ["=", "<", "<=", ">", ">="]


@st.composite
def _conditions(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(_LITERALS)))
    kind = draw(st.sampled_from(["cmp", "cmp", "between", "in", "null", "notnull"]))
    if kind == "cmp":
        return f"{column} {draw(st.sampled_from(_OPS))} {draw(_LITERALS[column])}"
    if kind == "between":
        return f"{column} BETWEEN {draw(_LITERALS[column])} AND {draw(_LITERALS[column])}"
    if kind == "in":
        return f"{column} IN ({', '.join(draw(st.lists(_LITERALS[column], min_size=1, max_size=3)))})"
    return f"{column} IS {'NOT ' if kind == 'notnull' else ''}NULL"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions=st.lists(_conditions(), min_size=1, max_size=3), joiner=st.sampled_from([" AND ", " OR "]))
def test_pruned_scans_equal_full_scans(
    stats_dataset: tuple[str, int, int], conditions: list[str], joiner: str
) -> None:
    uri, before, after = stats_dataset
    _compare(
        lance_ops.dataset(uri, version=after), lance_ops.dataset(uri, version=before), joiner.join(conditions)
    )


@pytest.fixture
def data_bytes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Bytes read from data files through the io layer."""
    counter = [0]
    original = LocalStore._read_spans

    def counting(self: LocalStore, path: str, spans: Any) -> list[memoryview]:
        out = original(self, path, spans)
        if "/data/" in path:
            counter[0] += sum(len(v) for v in out)
        return out

    monkeypatch.setattr(LocalStore, "_read_spans", counting)
    yield counter


def test_pruning_reads_fewer_bytes(stats_dataset: tuple[str, int, int], data_bytes: list[int]) -> None:
    uri, before, after = stats_dataset
    for where in ("id < 1000", "id BETWEEN 45000 AND 45100", "d IS NULL AND id > 70000", "s = 'k000010'"):
        plain, pruned = lance_ops.dataset(uri, version=before), lance_ops.dataset(uri, version=after)
        data_bytes[0] = 0
        expected = plain.to_table(filter=where)
        full = data_bytes[0]
        data_bytes[0] = 0
        assert _bits(pruned.to_table(filter=where)).equals(_bits(expected))
        assert data_bytes[0] * 3 < full, where
        data_bytes[0] = 0
        assert pruned.count_rows(where) == expected.num_rows
        assert data_bytes[0] * 3 < full, where


def test_delete_with_statistics(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(30_000), uri, max_rows_per_file=10_000, page_statistics=False)
    ds.stats.rebuild()
    assert ds.delete("id >= 9000 AND id < 11000") == 2000
    assert ds.count_rows("id >= 8000 AND id < 12000") == 2000
    assert ds.stats.dataset_stats() == {"num_deleted_rows": 2000, "num_fragments": 3, "num_small_files": 0}
    assert json.loads(ds.manifest.config[CONFIG_KEY])


@pytest.mark.parametrize(
    "where",
    [
        "f > 1e308",  # NaN sorts above every number: zones holding NaN are kept by their NaN count
        "f >= 1e300 AND id > 100",
        "f = -0.0",
        "f < -1e308",
        "d IS NULL",
        "d IS NOT NULL AND d < 3",
        "d = 4999",
        "s > '" + "x" * 70 + "k000500'",
        "s <= 'k000000'",
        "t >= timestamp '1970-01-01 16:00:00' AND t < timestamp '1970-01-01 16:00:02'",
        "b = false AND id IN (3, 33, 60776)",
        "id < 0",
        "id >= 60776",
    ],
)
def test_pruning_edge_predicates(stats_dataset: tuple[str, int, int], where: str) -> None:
    uri, before, after = stats_dataset
    _compare(lance_ops.dataset(uri, version=after), lance_ops.dataset(uri, version=before), where)


def test_rebuild_from_an_older_version_commits_over_an_append(tmp_path: Path) -> None:
    from lance_ops.ops.statistics import rebuild

    uri = str(tmp_path / "ds")
    old = lance_ops.write_dataset(_data(20_000), uri, max_rows_per_file=10_000, page_statistics=False)
    lance_ops.write_dataset(_data(1_000), uri, mode="append", page_statistics=False)
    result = rebuild(old, columns=["id"])
    assert result.manifest is not None and result.fragment_ids == (0, 1)
    latest = lance_ops.dataset(uri)
    assert latest.version == result.manifest.version and len(latest.manifest.fragments) == 3
    assert latest.stats.column_summary("id")["fragments_with_statistics"] == 2
    assert rebuild(latest, columns=["id"]).fragment_ids == (2,)


@pytest.mark.interop
def test_pylance_cleanup_keeps_statistics(tmp_path: Path, lance_mod: Any) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(10_000), uri, page_statistics=False)
    ds.stats.rebuild(columns=["id"])
    lance_mod.write_dataset(_data(100), uri, mode="append")
    theirs = lance_mod.dataset(uri)
    theirs.cleanup_old_versions(older_than=datetime.timedelta(0))
    ds = lance_ops.dataset(uri)
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == 1
    assert ds.count_rows("id < 10") == 20


def test_missing_statistics_file_only_disables_pruning(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lance_ops.write_dataset(_data(10_000), uri, page_statistics=False)
    ds.stats.rebuild(columns=["id"])
    for path in (Path(uri) / STATS_DIR).iterdir():
        path.unlink()
    ds = lance_ops.dataset(uri)
    assert ds.count_rows("id < 10") == 10
    assert ds.stats.column_summary("id")["fragments_with_statistics"] == 0
    assert ds.stats.rebuild(columns=["id"]).fragment_ids == (0,)
    assert ds.count_rows("id < 10") == 10
