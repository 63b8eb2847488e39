"""Shared test configuration.

Sections: hypothesis profiles (lead), Spark session fixture (jobs/assets).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
# ONE local Spark session for the whole run (per xdist worker, and the xdist group below keeps every
# Spark test on one worker); tests using it are marked ``@pytest.mark.spark``. pyspark is imported
# lazily so tests that never ask for it stay fast.
if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_TEST_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "768m",
}


# --- one Spark worker under pytest-xdist ---------------------------------------------------------
# ``scripts/test.sh`` runs ``-n 2 --dist loadgroup``. Every test that may start Spark -- marked
# ``spark`` or ``dagster``, or asking for the ``spark`` fixture -- is ONE work unit, so one worker
# runs them all and only one JVM starts per run; the other tests spread over the workers.
#
# xdist's own ``xdist_group`` mark does not group on pytest >= 9.2 (it renames node ids, which pytest
# 9.2 no longer lets it do: pytest-dev/pytest-xdist#1386), so the grouping travels another way: each
# worker writes the node ids of its Spark tests to a file the controller names, and the controller's
# scheduler (``loadgroup``, with those ids as the group ``spark``) reads them. ``xdist_group`` marks,
# where xdist honours them, still group as usual.
SPARK_GROUP = "spark"
_GROUP_FILE = "lance_ops_spark_group_file"  # the workerinput key naming a worker's file
_group_dir_key = pytest.StashKey[str]()  # the controller's directory of those files


def _needs_spark(item: pytest.Item) -> bool:
    return bool(
        item.get_closest_marker("spark")
        or item.get_closest_marker("dagster")
        or "spark" in getattr(item, "fixturenames", ())
    )


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: the file may list more ids, never fewer
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = getattr(config, "workerinput", {}).get(_GROUP_FILE)
    if path:  # an xdist worker: tell the controller (it reads the file once every worker collected)
        ids = [item.nodeid for item in items if _needs_spark(item)]
        Path(f"{path}.part").write_text(json.dumps(ids))
        os.replace(f"{path}.part", path)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:  # controller: one file per worker
    config = node.config
    if config.getvalue("dist") != "loadgroup":
        return
    directory = config.stash.get(_group_dir_key, None)
    if directory is None:
        directory = config.stash[_group_dir_key] = tempfile.mkdtemp(prefix="lance-ops-xdist-")
    node.workerinput[_GROUP_FILE] = os.path.join(directory, f"{node.gateway.id}.json")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SparkGroupScheduling(LoadGroupScheduling):
        """``loadgroup`` plus the group ``spark``: the ids the workers wrote."""

        spark_ids: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.spark_ids is None and self.collection is not None:  # every worker collected
                directory = config.stash.get(_group_dir_key, None)
                files = Path(directory).glob("*.json") if directory else ()
                self.spark_ids = {i for f in files for i in json.loads(f.read_text())}
            if nodeid in (self.spark_ids or ()):
                return SPARK_GROUP
            return str(super()._split_scope(nodeid))

    return SparkGroupScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_group_dir_key, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


class _KeepOpen:
    """The test session for the ``python -m jobs.<name>`` mains (``jobs.common.run_main``), which
    stop the session they were given when done."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def stop(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


@pytest.fixture
def main_session(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The job mains run on the test session (left open) instead of starting their own."""
    import jobs.common

    monkeypatch.setattr(jobs.common, "get_spark", lambda *args, **kwargs: _KeepOpen(spark))
    yield


@pytest.fixture(autouse=True)
def _sigterm_kept() -> Iterator[None]:
    """Each test leaves SIGTERM's handler as it found it.

    Dagster's in-process runs map SIGTERM to SIGINT's handler (``setup_interrupt_handlers``). Under a
    runner that ignores SIGINT (a job started in the background) that leaves SIGTERM ignored, and
    every process started later inherits the ignored signal: a multiprocessing pool's workers then
    outlive its ``terminate()``, whose join waits for them forever."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and before is not None and signal.getsignal(signal.SIGTERM) is not before:
        signal.signal(signal.SIGTERM, before)


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
