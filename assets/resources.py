"""Dagster resources: a Lance dataset handle and the Spark session the assets write with.

``LanceDatasetResource`` follows dagster-deltalake's ``DeltaTableResource``: configuration is the
dataset location (``uri`` + ``storage_options``, optionally a pinned ``version``) and ``load()``
returns the library's dataset object, here a :class:`lance_ops.LanceDataset`. ``storage_options``
values may refer to environment variables as ``${NAME}``; they stay references in the resource's
configuration (what Dagster displays and records) and are resolved each time the options are used
(:meth:`LanceDatasetResource.resolved_storage_options`), so a secret lives only in the environment
of the process that uses it. Spark is the stock
``dagster_pyspark.PySparkResource``, configured with the same defaults as :func:`jobs.session.get_spark`
so Python workers run this interpreter.
"""

from __future__ import annotations

import json

import dagster as dg
from dagster_pyspark import PySparkResource
from pydantic import Field

import lance_ops
from assets.config import resolve_storage_options
from jobs.session import DEFAULT_CONFIG, python_worker_config
from lance_ops.errors import DatasetNotFoundError


class LanceDatasetResource(dg.ConfigurableResource):
    """A Lance dataset at ``uri``; ``load()`` opens it (latest version unless ``version`` is set)."""

    uri: str = Field(description="Dataset location: a local directory, file://, memory:// or fsspec URL.")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-store options passed to lance_ops (credentials, endpoint); a value may "
        "refer to an environment variable as ${NAME}, resolved when used (write secrets that way: "
        "literal values are shown with the rest of this configuration).",
    )
    version: int | None = Field(default=None, description="Version to open; the latest when unset.")

    def resolved_storage_options(self) -> dict[str, str]:
        """``storage_options`` with their ``${NAME}`` references resolved from the environment."""
        return resolve_storage_options(self.storage_options)

    def load(self) -> lance_ops.LanceDataset:
        """The dataset (raises ``DatasetNotFoundError`` if nothing was committed at ``uri`` yet)."""
        return lance_ops.dataset(
            self.uri, version=self.version, storage_options=self.resolved_storage_options()
        )

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
        options = self.resolved_storage_options()
        return {"storage_options": json.dumps(options)} if options else {}


def spark_resource(master: str = "local[*]", app_name: str = "lance-ops-dagster") -> PySparkResource:
    """``PySparkResource`` with lance-ops' session defaults (small memory, UTC, venv Python workers)."""
    config = {**DEFAULT_CONFIG, **python_worker_config(), "spark.master": master, "spark.app.name": app_name}
    return PySparkResource(spark_config=config)
