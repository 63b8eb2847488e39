"""Fixtures of the Dagster tests: a datasets file in a temporary directory and its Definitions.

Spark comes from the ONE session-scoped ``spark`` fixture of ``tests/conftest.py``: the ``pyspark``
resource is built with an empty config, so ``getOrCreate`` hands back that session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster_pyspark import PySparkResource

from assets.definitions import build_definitions

# Small thresholds, so a handful of appends is past them.
COMPACTION = {
    "max_fragments": 3,
    "max_small_files": 100,
    "small_file_rows": 10,
    "max_deleted_ratio": 0.2,
    "target_rows_per_fragment": 100_000,
}


def dataset_entry(name: str = "sales", **overrides: Any) -> dict[str, Any]:
    """One datasets-file entry with the demo ingest source and the small thresholds above."""
    entry: dict[str, Any] = {
        "name": name,
        "uri": f"{name}.lance",
        "ingest": {"kind": "demo", "start_date": "2026-11-01", "rows_per_partition": 50},
        "maintenance": {
            "cron": "15 2 * * *",
            "compaction": dict(COMPACTION),
            "cleanup": {"older_than_days": 0, "retain_versions": 1},
            "statistics": {"columns": ["id", "score"]},
        },
    }
    entry.update(overrides)
    return entry


def write_datasets_file(directory: Path, *entries: Mapping[str, Any]) -> Path:
    path = directory / "lance_datasets.yaml"
    path.write_text(yaml.safe_dump({"datasets": list(entries or [dataset_entry()])}))
    return path


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """A Dagster instance in a temporary directory, removed after the test."""
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def make_defs(tmp_path: Path) -> Callable[..., dg.Definitions]:
    """``make_defs(*entries)``: the Definitions of a datasets file in ``tmp_path`` (test Spark)."""

    def make(*entries: Mapping[str, Any]) -> dg.Definitions:
        return build_definitions(write_datasets_file(tmp_path, *entries), PySparkResource(spark_config={}))

    return make
