"""Dagster resources: a Lance dataset handle and the Spark session the assets write with.

``LanceDatasetResource`` follows dagster-deltalake's ``DeltaTableResource``: configuration is the
dataset location (``uri`` + ``storage_options``, optionally a pinned ``version``) and ``load()``
returns the library's dataset object, here a :class:`lance_ops.LanceDataset`. Spark is the stock
``dagster_pyspark.PySparkResource``, configured with the same defaults as :func:`jobs.session.get_spark`
so Python workers run this interpreter.
"""

from __future__ import annotations

import json

import dagster as dg
from dagster_pyspark import PySparkResource
from pydantic import Field

import lance_ops
from jobs.session import DEFAULT_CONFIG, python_worker_config
from lance_ops.errors import DatasetNotFoundError


class LanceDatasetResource(dg.ConfigurableResource):
    """A Lance dataset at ``uri``; ``load()`` opens it (latest version unless ``version`` is set)."""

    uri: str = Field(description="Dataset location: a local directory, file://, memory:// or fsspec URL.")
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="Object-store options passed to lance_ops (credentials, endpoint)."
    )
    version: int | None = Field(default=None, description="Version to open; the latest when unset.")

    def load(self) -> lance_ops.LanceDataset:
        """The dataset (raises ``DatasetNotFoundError`` if nothing was committed at ``uri`` yet)."""
        return lance_ops.dataset(self.uri, version=self.version, storage_options=self.storage_options)

    def load_or_none(self) -> lance_ops.LanceDataset | None:
        """The dataset, or None when nothing has been committed at ``uri`` yet."""
        try:
            return self.load()
        except DatasetNotFoundError:
            return None

    def exists(self) -> bool:
        """Whether a dataset has been committed at ``uri``."""
        return self.load_or_none() is not None

    def writer_options(self) -> dict[str, str]:
        """Options for ``df.write.format("lance")`` that reach the same storage."""
        return {"storage_options": json.dumps(self.storage_options)} if self.storage_options else {}


def spark_resource(master: str = "local[*]", app_name: str = "lance-ops-dagster") -> PySparkResource:
    """``PySparkResource`` with lance-ops' session defaults (small memory, UTC, venv Python workers)."""
    config = {**DEFAULT_CONFIG, **python_worker_config(), "spark.master": master, "spark.app.name": app_name}
    return PySparkResource(spark_config=config)
