"""The one ``Definitions`` of lance-ops, loaded by ``workspace.yaml`` (``dagster dev`` in the repo root).

The demo dataset lives at ``data/demo.lance`` under the repository unless ``LANCE_OPS_DEMO_URI``
names another location.
"""

from __future__ import annotations

import os

import dagster as dg

from assets.lance_assets import demo_lance_dataset, demo_lance_dataset_stamped
from assets.resources import LanceDatasetResource, spark_resource
from jobs.pipeline import DEFAULT_URI

defs = dg.Definitions(
    assets=[demo_lance_dataset],
    asset_checks=[demo_lance_dataset_stamped],
    resources={
        "pyspark": spark_resource(),
        "lance_dataset": LanceDatasetResource(uri=os.environ.get("LANCE_OPS_DEMO_URI", DEFAULT_URI)),
    },
)
