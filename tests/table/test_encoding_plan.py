"""Dataset encoding plans: profiled from mergeable HLL sketches, stored in the config, honoured by writers."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.encoding.plan import CONFIG_KEY, ColumnPlan, EncodingPlan
from lance_ops.errors import SchemaError
from lance_ops.file import LanceFileReader
from lance_ops.fragment.writer import write_fragments
from lance_ops.ops.encodings import merge_profiles, profile, profile_data, store_plan

ROWS = 50_000


def _straddling(parts: int = 4) -> pa.Table:
    """Files whose own distinct counts fall either side of rows / 2 (24k, 26k, ...), drawn from one
    shared set of 26k long strings: per page the exact rule flips, per column the answer is clear."""
    rng = np.random.default_rng(0)
    pool = np.array([f"{'x' * 90}-{i:06d}" for i in range(26_000)])
    chunks = []
    for k in range(parts):
        distinct = 24_000 if k % 2 == 0 else 26_000
        chunks.append(pool[np.concatenate([np.arange(distinct), rng.integers(0, distinct, ROWS - distinct)])])
    return pa.table({"s": np.concatenate(chunks), "n": np.arange(parts * ROWS) % 7_000})


def _page_kinds(uri: str, column: int = 0) -> list[str]:
    """Encoding kind of every page of ``column`` in the dataset's data files."""
    kinds = []
    for path in sorted(glob.glob(f"{uri}/data/*.lance")):
        for page in LanceFileReader(path).metadata().columns[column].pages:
            kinds.append("dictionary" if "dictionary" in page.encoding else "plain")
    return kinds


def test_plan_is_stable_where_per_page_choice_flips(tmp_path: Path) -> None:
    table = _straddling()
    plan = profile(table)
    assert plan.columns["s"].dictionary and plan.columns["n"].dictionary
    auto = lance_ops.write_dataset(table, tmp_path / "auto", max_rows_per_file=ROWS)
    planned = lance_ops.write_dataset(table, tmp_path / "plan", max_rows_per_file=ROWS, encoding_plan=plan)
    assert sorted(set(_page_kinds(auto.uri))) == ["dictionary", "plain"]  # the exact per-page rule flips
    assert set(_page_kinds(planned.uri)) == {"dictionary"}
    assert EncodingPlan.from_config(planned.manifest.config) == plan
    assert planned.to_table().equals(table)
    never = EncodingPlan({"s": ColumnPlan(dictionary=False)})
    off = lance_ops.write_dataset(table, tmp_path / "off", max_rows_per_file=ROWS, encoding_plan=never)
    assert set(_page_kinds(off.uri)) == {"plain"}


@pytest.mark.interop
def test_pylance_reads_planned_datasets_and_appends_follow_the_plan(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    table = _straddling(2)
    plan = profile(table)
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(table, uri, max_rows_per_file=ROWS, encoding_plan=plan)
    second = _straddling(4).slice(2 * ROWS)
    ds = lance_ops.write_dataset(second, uri, mode="append", max_rows_per_file=ROWS)
    assert set(_page_kinds(uri)) == {"dictionary"}
    theirs = lance.dataset(uri)
    assert theirs.to_table().equals(ds.to_table())
    assert theirs.config()[CONFIG_KEY] == plan.to_json()
    lance.write_dataset(table.slice(0, 10), uri, mode="append")  # pylance continues the history
    assert lance_ops.dataset(uri).count_rows() == 4 * ROWS + 10


def test_profiles_merge_like_the_union(tmp_path: Path) -> None:
    table = _straddling()
    whole = profile_data(table)
    parts = merge_profiles(profile_data(table.slice(i * ROWS, ROWS)) for i in range(4))
    for name in ("s", "n"):
        assert parts.columns[name].sketch.estimate() == whole.columns[name].sketch.estimate()
        assert parts.columns[name].num_values == whole.columns[name].num_values
        assert parts.columns[name].value_bytes == whole.columns[name].value_bytes
    assert parts.plan() == whole.plan()
    low, high = whole.columns["s"].sketch.bounds(3)
    assert low <= 26_000 <= high


def test_profile_of_a_dataset_reuses_statistics_and_is_stored(tmp_path: Path) -> None:
    table = _straddling(2)
    ds = lance_ops.write_dataset(table, tmp_path / "ds", max_rows_per_file=ROWS)
    before = profile(ds)
    ds.stats.rebuild(columns=["s"])
    assert profile(ds) == before == profile(table)
    manifest, _ = store_plan(ds._files, before)
    assert EncodingPlan.from_config(manifest.config) == before
    fragments = write_fragments(
        table.slice(0, 1000),
        ds.uri,
        fields=ds.manifest.schema,
        encoding_plan=EncodingPlan({"s": ColumnPlan(dictionary=False)}),
    )
    assert len(fragments) == 1


def test_plan_json_and_explicit_field_metadata() -> None:
    plan = EncodingPlan({"a": ColumnPlan(True, "zstd", "off", 0.5)})
    assert EncodingPlan.from_json(plan.to_json()) == plan
    schema = pa.schema(
        [
            pa.field("a", pa.string(), metadata={"lance-encoding:dictionary": "never"}),
            pa.field("b", pa.int32()),
        ]
    )
    applied = plan.apply(schema)
    assert applied.field("a").metadata == {
        b"lance-encoding:dictionary": b"never",
        b"lance-encoding:bss": b"off",
        b"lance-encoding:compression": b"zstd",
        b"lance-encoding:rle-threshold": b"0.5",
    }
    assert applied.field("b").metadata is None
    with pytest.raises(SchemaError):
        EncodingPlan.from_json('{"columns": {"a": {"bogus": 1}}}')


def test_compaction_rewrites_with_the_stored_plan(tmp_path: Path) -> None:
    """Compaction is a writer of the dataset: the rewritten files follow the stored plan, here one
    that overrides what the merged data alone would choose (a dictionary)."""
    n = 2000
    keys = [i % 10 for i in range(n)] + [i % 1000 for i in range(n)]
    table = pa.table({"id": pa.array(range(2 * n), pa.int64()), "s": [f"{'x' * 40}-{k:05d}" for k in keys]})
    ds = lance_ops.write_dataset(table, tmp_path / "ds", max_rows_per_file=n)
    assert sorted(_page_kinds(ds.uri, 1)) == ["dictionary", "plain"]
    assert profile(ds).columns["s"].dictionary
    store_plan(ds._files, EncodingPlan({"s": ColumnPlan(dictionary=False)}))
    compacted = lance_ops.dataset(ds.uri)
    compacted.optimize.compact_files(target_rows_per_fragment=2 * n)
    (fragment,) = compacted.get_fragments()
    (data_file,) = fragment.data_files()
    column = LanceFileReader(f"{ds.uri}/data/{data_file.path}").metadata().columns[1]
    assert not any("dictionary" in page.encoding for page in column.pages)
    assert compacted.to_table().equals(table)
