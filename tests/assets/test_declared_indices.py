"""L18: indices declared in the datasets YAML are built by the ``indices`` maintenance step when
missing (once: a second run builds nothing), then kept up to date; pylance answers from them.

No ``from __future__ import annotations`` here, to match the asset modules.
"""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from assets.config import DatasetsConfigError, load_datasets
from tests.assets.conftest import dataset_entry, write_datasets_file
from tests.assets.test_assets import ingest, key, metadata, uri_of

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.interop]


def test_declared_indices_built_when_missing(
    spark: SparkSession,
    make_defs: Callable[..., dg.Definitions],
    instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    import lance

    entry = dataset_entry()
    entry["maintenance"]["indices"] = {
        "declare": [
            {"column": "id", "type": "btree"},
            {"column": "category", "type": "BITMAP", "name": "by_category"},
            {"column": "id", "type": "ZONEMAP", "name": "id_zones", "params": {"rows_per_zone": 16}},
            {"column": "category", "type": "bloomfilter", "name": "category_bloom"},
        ]
    }
    defs, uri = make_defs(entry), uri_of(tmp_path)
    ingest(defs, instance, "2026-11-01")
    ingest(defs, instance, "2026-11-02")
    result = defs.resolve_job_def("sales_maintenance").execute_in_process(instance=instance)
    assert result.success
    step = metadata(result, key("indices"))
    assert step["lance/indices/created"] == 4
    assert step["lance/indices/unindexed_rows"] == 0
    ds = lance.dataset(uri)
    assert sorted((d.name, d.index_type) for d in ds.describe_indices()) == [
        ("by_category", "Bitmap"),
        ("category_bloom", "BloomFilter"),
        ("id_idx", "BTree"),
        ("id_zones", "ZoneMap"),
    ]
    row = ds.to_table(columns=["id", "category"]).slice(7, 1).to_pylist()[0]
    for predicate, name in (
        (f"id = {row['id']}", "id_idx"),
        (f"category = '{row['category']}'", "by_category"),
    ):
        assert f"@{name}" in ds.scanner(filter=predicate).explain_plan()
        indexed = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned) != [], predicate
    ingest(defs, instance, "2026-11-03")
    again = defs.resolve_job_def("sales_maintenance").execute_in_process(instance=instance)
    step = metadata(again, key("indices"))
    assert step["lance/indices/created"] == 0  # built once; now extended over the new day
    assert step["lance/indices/extended"] == 4
    assert step["lance/indices/unindexed_rows"] == 0


@pytest.mark.parametrize(
    ("declare", "match"),
    [
        ([{"column": "id", "type": "HASH"}], "must be one of"),
        ([{"type": "BTREE"}], "column"),
        ([{"column": "id", "type": "BTREE"}, {"column": "id", "type": "BITMAP"}], "more than once"),
        ([{"column": "id", "type": "BTREE", "colour": 1}], "unknown field"),
    ],
)
def test_bad_declarations(tmp_path: Path, declare: list, match: str) -> None:
    entry = dataset_entry()
    entry["maintenance"]["indices"] = {"declare": declare}
    with pytest.raises(DatasetsConfigError, match=match):
        load_datasets(write_datasets_file(tmp_path, entry))
