# The Airflow DAGs of every dataset in lance_datasets.yaml ($LANCE_OPS_DATASETS): see docs/airflow.md.
from lance_ops.airflow import dags_from_config

globals().update(dags_from_config())
