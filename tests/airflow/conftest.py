"""Fixtures of the Airflow tests: a private Airflow home with a SQLite metadata database, a DAGs
folder tests write DAG files into, and pylance-made datasets to maintain.

Airflow reads ``AIRFLOW_HOME`` and its configuration when ``airflow`` is first imported, so they
are set here, when this conftest is imported (collection of tests/airflow, before any test module
imports Airflow). Every pytest process -- each xdist worker -- gets its own temporary home and
database, removed when the process ends; the variables name only ``AIRFLOW*`` settings, which
nothing but Airflow reads, so the other tests of a worker are not affected.
"""

from __future__ import annotations

import atexit
import datetime as dt
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
import yaml

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun

HOME = Path(tempfile.mkdtemp(prefix="lance-ops-airflow-"))
DAGS_FOLDER = HOME / "dags"
DAGS_FOLDER.mkdir()
atexit.register(shutil.rmtree, HOME, True)
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME / 'airflow.db'}",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
)

# Small thresholds: the pylance dataset below (30 fragments of 20 rows, 20 % deleted) is past all.
POLICY = {
    "max_fragments": 8,
    "max_small_files": 4,
    "small_file_rows": 100,
    "max_deleted_ratio": 0.1,
    "target_rows_per_fragment": 10_000,
}


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """The metadata database's tables, created once per process."""
    from airflow.utils import db

    db.initdb()


def fragmented_dataset(path: Path, fragments: int = 30, rows: int = 20) -> Path:
    """A dataset pylance writes: ``fragments`` appends of ``rows`` rows (stable row ids), then a
    delete of every fifth row (20 % deleted)."""
    import lance

    for n in range(fragments):
        ids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
        table = pa.table({"id": ids, "name": pa.array([f"row-{i}" for i in ids.to_pylist()])})
        lance.write_dataset(table, path, mode="append" if n else "create", enable_stable_row_ids=True)
    lance.dataset(path).delete("id % 5 = 0")
    return path


def datasets_file(directory: Path, *entries: dict[str, Any]) -> Path:
    path = directory / "lance_datasets.yaml"
    path.write_text(yaml.safe_dump({"datasets": list(entries)}))
    return path


def entry(name: str, uri: Path | str, **maintenance: Any) -> dict[str, Any]:
    return {
        "name": name,
        "uri": str(uri),
        "maintenance": {
            "cron": "15 2 * * *",
            "compaction": dict(POLICY),
            "cleanup": {"older_than_days": 0, "retain_versions": 1},
            "statistics": {"columns": ["id"]},
            **maintenance,
        },
    }


def write_dag_file(name: str, config: Path, **options: Any) -> Path:
    """A DAG file in the DAGs folder exposing ``dags_from_config(config, **options)``
    (``dag.test()`` runs DAGs the DAGs folder holds)."""
    arguments = "".join(f", {k}={v!r}" for k, v in options.items())
    path = DAGS_FOLDER / f"{name}.py"
    path.write_text(
        "from lance_ops.airflow import dags_from_config\n\n"
        f"globals().update(dags_from_config({str(config)!r}{arguments}))\n"
    )
    return path


def run_dag(dag_file: Path, dag_id: str, logical_date: dt.datetime | None = None, **conf: Any) -> DagRun:
    """One ``dag.test()`` run of ``dag_id`` from ``dag_file`` with run configuration ``conf`` (at
    ``logical_date``, default now)."""
    from airflow.dag_processing.dagbag import DagBag
    from sqlalchemy.exc import SAWarning

    bag = DagBag(dag_folder=str(dag_file))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags[dag_id]
    with warnings.catch_warnings():
        # A re-run at the same logical date after the DAG changed (a new serialized version of
        # it) makes Airflow's own session flush load ``DagRun.serialized_dag`` over two versions
        # and warn; whether it does depends on when its lazy load happens. The run itself is
        # unaffected (the tests check its outcome), so this one Airflow-internal warning is not
        # turned into an error here.
        warnings.filterwarnings("ignore", "Multiple rows returned with uselist=False", SAWarning)
        if logical_date is None:
            return dag.test(run_conf=dict(conf))
        return dag.test(run_conf=dict(conf), logical_date=logical_date)


def states(run: DagRun) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def xcom(run: DagRun, task_id: str) -> Any:
    """The value ``task_id`` returned (its XCom ``return_value``) in ``run``."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=run.run_id, key="return_value", dag_ids=run.dag_id, task_ids=task_id
        )
        row = session.scalars(query).first()
        assert row is not None, f"no XCom from {task_id}"
        return XComModel.deserialize_value(row)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for dag_file in DAGS_FOLDER.glob("*.py"):  # later dag.test() calls parse the folder again
        dag_file.unlink()
