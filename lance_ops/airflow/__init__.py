"""The Airflow provider of lance-ops (extra ``airflow``): the same maintenance as the Dagster assets,
orchestrated by Airflow 3 from the same datasets file. See docs/airflow.md.

* :class:`LanceHook` and the ``lance`` connection type (:mod:`lance_ops.airflow.hook`);
* operators, one per maintenance operation (:mod:`lance_ops.airflow.operators`);
* :class:`~lance_ops.airflow.sensors.LanceMaintenanceDueSensor`,
  :class:`~lance_ops.airflow.sensors.LanceNewVersionSensor` and their triggers
  (:mod:`lance_ops.airflow.triggers`; the new-version one is an event trigger for ``AssetWatcher``);
* :func:`dags_from_config`, the DAGs of every dataset in ``lance_datasets.yaml``
  (``dags/lance_maintenance.py`` is the DAG file exposing them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lance_ops.airflow.dags import dags_from_config
    from lance_ops.airflow.hook import LanceHook

__all__ = ["LanceHook", "dags_from_config", "get_provider_info"]


def __getattr__(name: str) -> Any:
    # Lazy: Airflow's providers manager imports this package (the entry point's
    # get_provider_info) while Airflow itself is being imported, so the package must not import
    # Airflow when loaded; the hook and the DAG factory load on first use.
    if name == "LanceHook":
        from lance_ops.airflow.hook import LanceHook

        return LanceHook
    if name == "dags_from_config":
        from lance_ops.airflow.dags import dags_from_config

        return dags_from_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_provider_info() -> dict[str, Any]:
    """What the ``apache_airflow_provider`` entry point tells Airflow's providers manager."""
    modules = {
        "operators": ["lance_ops.airflow.operators"],
        "sensors": ["lance_ops.airflow.sensors"],
        "triggers": ["lance_ops.airflow.triggers"],
        "hooks": ["lance_ops.airflow.hook"],
    }
    return {
        "package-name": "lance-ops",
        "name": "Lance",
        "description": "Maintenance of Lance datasets (compaction, cleanup, statistics, encodings, "
        "tags) with lance-ops: hook, operators, sensors, triggers and a DAG factory.",
        "integrations": [
            {"integration-name": "Lance", "external-doc-url": "https://lancedb.github.io/lance/"}
        ],
        **{kind: [{"integration-name": "Lance", "python-modules": names}] for kind, names in modules.items()},
        "connection-types": [
            {"connection-type": "lance", "hook-class-name": "lance_ops.airflow.hook.LanceHook"}
        ],
    }
