"""Shared test configuration.

Sections: hypothesis profiles (lead), Spark session fixture (jobs/assets).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

# --- hypothesis profiles -------------------------------------------------------------------------
# "ci" keeps the suite inside the CI budget on 2 cores; "dev" explores more.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "dev",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# --- Spark session fixture (jobs/assets) ---------------------------------------------------------
# ONE local Spark session for the whole run (per xdist worker); tests using it are marked
# ``@pytest.mark.spark``. pyspark is imported lazily so tests that never ask for it stay fast.
if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_TEST_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "768m",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from jobs.session import get_spark

    session = get_spark("lance-ops-tests", master="local[2]", config=SPARK_TEST_CONFIG)
    yield session
    session.stop()


# --- recorded reads ------------------------------------------------------------------------------
@pytest.fixture
def recorded_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int, int]]]:
    """Every span the local store reads, as ``(path, start, length)``."""
    from lance_ops.io.local import LocalStore

    reads: list[tuple[str, int, int]] = []
    original = LocalStore._read_spans

    def recording(self: LocalStore, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        reads.extend((path, start, length) for start, length in spans)
        return original(self, path, spans)

    monkeypatch.setattr(LocalStore, "_read_spans", recording)
    yield reads
