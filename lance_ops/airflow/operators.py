"""Airflow operators, one per maintenance operation of a Lance dataset.

Every operator takes the dataset as ``uri`` and/or ``lance_conn_id`` (a ``lance`` connection, see
:class:`~lance_ops.airflow.hook.LanceHook`) plus ``storage_options``, and an ``engine``:

* ``"local"`` (default): the operation runs in the task's process through the library
  (``ds.optimize.compact_files``, :mod:`lance_ops.ops`);
* ``"spark"``: the data work runs on Spark executors through the same job functions the
  ``python -m jobs.<name>`` mains and the Dagster assets run (:func:`jobs.compact`,
  :func:`jobs.delete`, ...), on the session :func:`jobs.session.get_spark` returns for
  ``spark_master`` / ``spark_config`` (an existing session in the process is reused). Tags,
  restore and cleanup are driver-side in both engines.

Each returns its metrics, a JSON-serialisable dict pushed to XCom (``return_value``), and stamps
``airflow.dag_id``, ``airflow.run_id``, ``airflow.task_id`` and ``airflow.try_number`` into the
transaction properties of every commit it makes (each of a compaction's commits with
``commit_every``). Cleanup and tags commit no transaction.

A dataset that is not there, a bad predicate or argument (errors no retry can fix) fail the task
at once (:class:`~airflow.sdk.exceptions.AirflowFailException`) with one line naming the dataset
and the reason; storage errors propagate, so the task's retries apply.

Compaction takes the clustering keys (``cluster_by``, ``cluster_mode``, ``purge``);
:class:`LanceOptimizeIndicesOperator` builds declared indices and catches the indices up with
compaction and appends; :class:`LanceUpsertOperator` merges a source into the dataset by its keys.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from lance_ops.airflow.hook import LanceLocation, LanceTarget
from lance_ops.datasets_config import DeclaredIndex, IngestSource
from lance_ops.errors import (
    CleanupError,
    DatasetNotFoundError,
    InvalidArgumentError,
    PredicateError,
    RefError,
    SchemaError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from lance_ops.ops import columns as columns_op
from lance_ops.ops import delete as delete_op
from lance_ops.ops import encodings as encodings_op
from lance_ops.ops import statistics as statistics_op
from lance_ops.ops.engine import ENCODING_PLAN_KEY
from lance_ops.ops.scalar_index import create_scalar_index

if TYPE_CHECKING:
    import pyarrow as pa
    from airflow.sdk import Context
    from pyspark.sql import DataFrame, SparkSession

    from lance_ops.dataset import LanceDataset

Engine = Literal["local", "spark"]
ENGINES = ("local", "spark")
# Errors that no retry fixes: the task fails at once, with one line.
FAIL_FAST = (
    DatasetNotFoundError,
    SchemaError,
    InvalidArgumentError,
    PredicateError,
    RefError,
    CleanupError,
    UnsupportedFeatureError,
)
# The run configuration key of the factory's DAGs that makes every maintenance step plan only.
DRY_RUN_PARAM = "dry_run"


def airflow_transaction_properties(context: Context) -> dict[str, str]:
    """The transaction properties naming the Airflow task try behind a commit."""
    ti = context["ti"]
    return {
        "airflow.dag_id": ti.dag_id,
        "airflow.run_id": context["run_id"],
        "airflow.task_id": ti.task_id,
        "airflow.try_number": str(ti.try_number),
    }


def _params_dry_run(context: Context) -> bool:
    params = context.get("params") or {}
    return bool(params.get(DRY_RUN_PARAM, False))


class LanceBaseOperator(LanceLocation, BaseOperator):
    """What every Lance operator shares: the dataset, the engine, the properties and the metrics."""

    template_fields: Sequence[str] = ("uri", "lance_conn_id", "storage_options")
    ui_color = "#d7ecfb"

    def __init__(
        self,
        *,
        uri: str | None = None,
        lance_conn_id: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        engine: Engine = "local",
        spark_master: str | None = None,
        spark_config: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.set_location(self.task_id, uri, lance_conn_id, storage_options)
        if engine not in ENGINES:
            raise InvalidArgumentError(f"{self.task_id}: engine must be one of {ENGINES}, got {engine!r}")
        self.engine = engine
        self.spark_master = spark_master
        self.spark_config = dict(spark_config or {})

    def execute(self, context: Context) -> dict[str, Any]:
        target = self.lance_target()
        try:
            metrics = self.run(target, airflow_transaction_properties(context), context)
        except FAIL_FAST as exc:
            # One line: the chained traceback of a known user error helps no one.
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise AirflowFailException(f"{self.task_id} on {target.uri}: {reason}") from None
        metrics = {"uri": target.uri, "engine": self.engine, **metrics}
        self.log.info("%s on %s: %s", self.task_id, target.uri, metrics)
        return metrics

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        raise NotImplementedError

    def spark(self) -> SparkSession:
        """The Spark session of the ``spark`` engine (:func:`jobs.session.get_spark`: an existing
        session of the process, else one on ``spark_master``, ``local[*]`` unless ``spark-submit``
        launched the process), with the ``lance`` data source registered."""
        from jobs.session import get_spark

        return get_spark(f"lance-ops-airflow-{self.task_id}", self.spark_master, self.spark_config)


class LanceCompactOperator(LanceBaseOperator):
    """Compact the latest version: merge small fragments, materialise deletions (one ``Rewrite`` per
    commit; ``commit_every=N`` commits every N groups, so an interrupted run keeps them).

    The plan is made and logged first; ``dry_run`` (or the run configuration ``{"dry_run": true}``)
    stops there. ``compaction_options`` are pylance's ``compact_files`` options; ``cluster_by``
    (with ``cluster_mode`` ``"sort"`` or ``"zorder"``) rewrites the fragments in the order of those
    columns, ``purge`` drops rows no version keeps (see ``compact_files``)."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "target_rows_per_fragment")

    def __init__(
        self,
        *,
        target_rows_per_fragment: int | None = None,
        commit_every: int | None = None,
        dry_run: bool = False,
        compaction_options: Mapping[str, Any] | None = None,
        cluster_by: Sequence[str] | None = None,
        cluster_mode: Literal["sort", "zorder"] | None = None,
        purge: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target_rows_per_fragment = target_rows_per_fragment
        self.cluster_by = None if cluster_by is None else list(cluster_by)
        self.cluster_mode = cluster_mode
        self.purge = purge
        self.commit_every = commit_every
        self.plan_only = dry_run  # BaseOperator.dry_run is a method
        self.compaction_options = dict(compaction_options or {})

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        options = dict(self.compaction_options)
        if self.target_rows_per_fragment is not None:
            options["target_rows_per_fragment"] = int(self.target_rows_per_fragment)
        for name in ("cluster_by", "cluster_mode", "purge"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        plan = ds.optimize.compact_files(dry_run=True, **options)
        before = {"version_before": ds.version, "fragments_before": len(ds.manifest.fragments)}
        planned = {
            "plan_tasks": len(plan.tasks),
            "plan_fragments": sum(len(t.fragments) for t in plan.tasks),
            "plan_rows": sum(t.num_rows for t in plan.tasks),
            "plan_deleted_rows": sum(t.num_deleted_rows for t in plan.tasks),
            "plan_bytes": sum(t.num_bytes for t in plan.tasks),
        }
        self.log.info("compaction plan of %s version %d: %s", target.uri, ds.version, planned)
        dry = self.plan_only or _params_dry_run(context)
        if dry or not plan.tasks:
            return {**before, **planned, "dry_run": dry, "noop": True, "version": ds.version}
        if self.engine == "spark":
            import jobs

            metrics = jobs.compact(
                self.spark(),
                target.uri,
                commit_every=self.commit_every,
                storage_options=target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
                **options,
            )
        else:
            metrics = ds.optimize.compact_files(
                commit_every=self.commit_every, transaction_properties=properties, **options
            )
        after = target.open()
        return {
            **before,
            **planned,
            **asdict(metrics),  # type: ignore[arg-type]  # not a dry run: the metrics
            "dry_run": False,
            "noop": False,
            "version": after.version,
            "fragments": len(after.manifest.fragments),
        }


class LanceCleanupOperator(LanceBaseOperator):
    """Remove untagged versions older than ``older_than_days`` (and beyond the newest
    ``retain_versions``) and the files only they use; tagged versions stay.

    ``dry_run=None`` (the default) is a dry run on the first run of the DAG -- no earlier run
    succeeded, so nobody has seen the list yet -- and a real one afterwards; ``True``/``False``
    decide; the run configuration ``{"dry_run": true}`` forces one. The list is in the metrics."""

    def __init__(
        self,
        *,
        older_than_days: float = 7.0,
        retain_versions: int | None = None,
        dry_run: bool | None = None,
        max_listed_paths: int = 100,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.older_than_days = older_than_days
        self.retain_versions = retain_versions
        self.plan_only = dry_run  # BaseOperator.dry_run is a method
        self.max_listed_paths = max_listed_paths

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        # A lazy proxy: falsy (not ``is None``) when no earlier run of the DAG succeeded.
        first_run = not context.get("prev_start_date_success")
        dry = _params_dry_run(context) or (first_run if self.plan_only is None else self.plan_only)
        if dry and self.plan_only is None and first_run:
            self.log.info("first run of %s: cleanup is a dry run (nothing is removed)", context["ti"].dag_id)
        arguments: dict[str, Any] = {
            "older_than": dt.timedelta(days=self.older_than_days),
            "retain_versions": self.retain_versions,
            "error_if_tagged_old_versions": False,
            "dry_run": dry,
        }
        if self.engine == "spark":
            import jobs

            stats = jobs.cleanup(
                self.spark(),
                target.uri,
                storage_options=target.storage_options,
                manifest_store=target.manifest_store,
                **arguments,
            )
        else:
            stats = target.open().cleanup_old_versions(**arguments)
        fields = asdict(stats)
        paths = fields.pop("paths")
        return {
            **fields,
            "files": len(paths),
            "paths": list(paths[: self.max_listed_paths]),
            "dry_run": dry,
            "noop": not paths,
            "version": target.open().version,
        }


class LanceDeleteOperator(LanceBaseOperator):
    """Delete the rows a SQL ``predicate`` selects (one ``Delete`` commit)."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "predicate")

    def __init__(self, *, predicate: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.predicate = predicate

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        if self.engine == "spark":
            import jobs

            result = jobs.delete(
                self.spark(),
                target.uri,
                self.predicate,
                target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            )
        else:
            handle = ds.handle
            result = delete_op.delete(handle.files, self.predicate, handle.commit_options(properties))
        return {
            "version_before": ds.version,
            "version": result.manifest.version,
            "deleted_rows": result.num_deleted_rows,
        }


class LanceAddColumnsOperator(LanceBaseOperator):
    """Add columns computed from SQL expressions, ``{name: expression}`` (one ``Merge`` commit)."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "columns")

    def __init__(
        self,
        *,
        columns: Mapping[str, str],
        read_columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.columns = dict(columns)
        self.read_columns = None if read_columns is None else list(read_columns)
        self.batch_size = batch_size

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        if self.engine == "spark":
            import jobs

            manifest = jobs.add_columns(
                self.spark(),
                target.uri,
                self.columns,
                self.read_columns,
                self.batch_size,
                target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            )
        else:
            handle = ds.handle
            manifest, _ = columns_op.add_columns(
                handle.files,
                self.columns,
                self.read_columns,
                self.batch_size,
                handle.commit_options(properties),
            )
        return {"version_before": ds.version, "version": manifest.version, "columns": sorted(self.columns)}


class LanceStatisticsOperator(LanceBaseOperator):
    """Compute the column statistics fragments lack (all of them with ``force``) for ``columns``
    (default: every column that can have them); one ``UpdateConfig``, nothing when all are fresh.
    The run configuration ``{"dry_run": true}`` only counts the fragments that lack them."""

    def __init__(self, *, columns: Sequence[str] | None = None, force: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.columns = None if columns is None else list(columns)
        self.force = force

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        if _params_dry_run(context):
            pending = statistics_op.pending_statistics(ds.handle.files, self.columns, self.force)
            return {"version": ds.version, "fragments_pending": len(pending), "dry_run": True, "noop": True}
        if self.engine == "spark":
            import jobs

            result = jobs.rebuild_statistics(
                self.spark(),
                target.uri,
                self.columns,
                self.force,
                target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            )
        else:
            handle = ds.handle
            result = statistics_op.rebuild(
                handle.files, self.columns, self.force, handle.commit_options(properties)
            )
        committed = result.manifest is not None
        return {
            "version_before": ds.version,
            "version": result.manifest.version if result.manifest is not None else ds.version,
            "fragments_rebuilt": len(result.fragment_ids),
            "committed": committed,
            "noop": not committed,
        }


class LanceProfileEncodingsOperator(LanceBaseOperator):
    """Profile the columns (distinct counts, sizes) into an encoding plan and, with ``store``,
    commit it (one ``UpdateConfig``) unless the dataset already stores that plan; compaction and
    later writes then encode with it. The run configuration ``{"dry_run": true}`` profiles without
    storing."""

    def __init__(self, *, columns: Sequence[str] | None = None, store: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.columns = None if columns is None else list(columns)
        self.store = store

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        dry = _params_dry_run(context)
        store = self.store and not dry
        if self.engine == "spark":
            import jobs

            plan = jobs.profile_encodings(
                self.spark(),
                target.uri,
                self.columns,
                store=store,
                storage_options=target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            )
        else:
            handle = ds.handle
            plan = encodings_op.profile(handle.files, self.columns)
            if store and ds.manifest.config.get(ENCODING_PLAN_KEY) != plan.to_json():
                encodings_op.store_plan(handle.files, plan, handle.commit_options(properties))
        after = target.open()
        stored = after.version != ds.version
        return {
            "version_before": ds.version,
            "version": after.version,
            "columns": len(plan.columns),
            "dictionary_columns": sorted(n for n, p in plan.columns.items() if p.dictionary),
            "stored": stored,
            "plan_changed": ds.manifest.config.get(ENCODING_PLAN_KEY) != plan.to_json(),
            "dry_run": dry,
            "noop": not stored,
        }


def index_coverage(ds: LanceDataset) -> dict[str, tuple[int, int]]:
    """Index name -> (unindexed live rows, live rows) of ``ds`` (system indices left out), as
    ``ds.stats.index_stats`` counts them."""
    out = {}
    for description in ds.describe_indices():
        if description.name.startswith("__lance_"):
            continue
        stats = ds.stats.index_stats(description.name)
        indexed, unindexed = stats["num_indexed_rows"], stats["num_unindexed_rows"]
        out[description.name] = (unindexed, indexed + unindexed)
    return out


class LanceOptimizeIndicesOperator(LanceBaseOperator):
    """Catch the indices up (``ds.optimize.optimize_indices``; :func:`jobs.optimize_indices` with
    the ``spark`` engine): indices a deferred compaction left behind are remapped, appended
    fragments are added (``index_names``: only those; ``num_indices_to_merge`` as pylance's). First
    each index of ``declare`` (:class:`~lance_ops.datasets_config.DeclaredIndex`) no index of its
    name exists for is built. One commit each, stamped; nothing when the indices are current. An
    index type no codec extends yet is reported (``unsupported``), not raised. The run
    configuration ``{"dry_run": true}`` only measures the coverage."""

    def __init__(
        self,
        *,
        index_names: Sequence[str] | None = None,
        num_indices_to_merge: int = 1,
        declare: Sequence[DeclaredIndex] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.index_names = None if index_names is None else list(index_names)
        self.num_indices_to_merge = num_indices_to_merge
        self.declare = tuple(declare)

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        dry = _params_dry_run(context)
        created = [] if dry else self._create_declared(target, properties)
        before = index_coverage(target.open())
        remapped: tuple[str, ...] = ()
        extended: tuple[str, ...] = ()
        unsupported = None
        if before and not dry:
            try:
                if self.engine == "spark":
                    import jobs

                    report = jobs.optimize_indices(
                        self.spark(),
                        target.uri,
                        self.index_names,
                        self.num_indices_to_merge,
                        target.storage_options,
                        transaction_properties=properties,
                        manifest_store=target.manifest_store,
                    )
                else:
                    report = target.open().optimize.optimize_indices(
                        self.index_names, self.num_indices_to_merge, transaction_properties=properties
                    )
                remapped, extended = report.remapped, report.extended
            except UnsupportedIndexTypeError as exc:
                unsupported = str(exc)
                self.log.warning("indices of %s not fully optimized: %s", target.uri, exc)
        after_ds = target.open()
        after = index_coverage(after_ds) if not dry else before
        return {
            "version_before": ds.version,
            "version": after_ds.version,
            "indices": len(after),
            "created": created,
            "remapped": list(remapped),
            "extended": list(extended),
            "unindexed_rows_before": sum(u for u, _ in before.values()),
            "unindexed_rows": sum(u for u, _ in after.values()),
            "max_unindexed_ratio": max((u / t for u, t in after.values() if t), default=0.0),
            "unsupported": unsupported,
            "dry_run": dry,
            "noop": after_ds.version == ds.version,
        }

    def _create_declared(self, target: LanceTarget, properties: dict[str, str]) -> list[str]:
        built = []
        for index in self.declare:
            ds = target.open()
            if any(d.name == index.index_name for d in ds.describe_indices()):
                continue
            if index.type.startswith("IVF_"):
                ds.create_index(index.column, index.type, name=index.index_name, **dict(index.params))
            else:
                handle = ds.handle
                create_scalar_index(
                    handle.files,
                    index.column,
                    index.type,
                    index.index_name,
                    False,
                    handle.commit_options(properties),
                    index.params,
                )
            built.append(index.index_name)
        return built


# The ``when_*`` choices of an upsert (jobs.merge_insert's names; None: no such clause).
WHEN_MATCHED = ("update_all", "delete", "fail", None)
WHEN_NOT_MATCHED = ("insert_all", None)
WHEN_NOT_MATCHED_BY_SOURCE = ("delete", None)


class LanceUpsertOperator(LanceBaseOperator):
    """Merge ``source`` into the dataset by the key columns ``on`` (``ds.merge_insert(on)``; with
    the ``spark`` engine :func:`jobs.merge_insert`): one ``Update`` commit, stamped. ``source`` is
    a path (templated) of ``source_format`` (``parquet`` or ``lance``) or a callable returning an
    Arrow table; ``when_matched`` ``"update_all"``/``"delete"``/``"fail"``/None,
    ``when_not_matched`` ``"insert_all"``/None, ``when_not_matched_by_source`` ``"delete"``/None.
    The metrics are pylance's result counts."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "source")

    def __init__(
        self,
        *,
        on: str | Sequence[str],
        source: str | Callable[[], pa.Table],
        source_format: Literal["parquet", "lance"] = "parquet",
        when_matched: str | None = "update_all",
        when_not_matched: str | None = "insert_all",
        when_not_matched_by_source: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value, choices in (
            ("when_matched", when_matched, WHEN_MATCHED),
            ("when_not_matched", when_not_matched, WHEN_NOT_MATCHED),
            ("when_not_matched_by_source", when_not_matched_by_source, WHEN_NOT_MATCHED_BY_SOURCE),
            ("source_format", source_format, ("parquet", "lance")),
        ):
            if value not in choices:
                raise InvalidArgumentError(f"{self.task_id}: {name} must be one of {choices}, got {value!r}")
        self.on = [on] if isinstance(on, str) else list(on)
        # A callable in a templated field would be called by Airflow's templating: kept apart.
        self.source = None if callable(source) else source
        self.source_function = source if callable(source) else None
        self.source_format = source_format
        self.when_matched = when_matched
        self.when_not_matched = when_not_matched
        self.when_not_matched_by_source = when_not_matched_by_source

    def _table(self) -> pa.Table:
        if self.source_function is not None:
            return self.source_function()
        assert self.source is not None
        if self.source_format == "lance":
            import lance_ops

            return lance_ops.dataset(self.source).to_table()
        import pyarrow.parquet as pq

        return pq.read_table(self.source)

    def _frame(self, spark: SparkSession) -> DataFrame:
        if self.source_function is not None:
            return spark.createDataFrame(self.source_function())
        return spark.read.format(self.source_format).load(self.source)

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        if self.engine == "spark":
            import jobs

            spark = self.spark()
            result = jobs.merge_insert(
                spark,
                target.uri,
                self._frame(spark),
                self.on,
                self.when_matched,
                self.when_not_matched,
                self.when_not_matched_by_source,
                storage_options=target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            ).result
        else:
            builder = ds.merge_insert(self.on)
            if self.when_matched == "update_all":
                builder.when_matched_update_all()
            elif self.when_matched == "delete":
                builder.when_matched_delete()
            elif self.when_matched == "fail":
                builder.when_matched_fail()
            if self.when_not_matched == "insert_all":
                builder.when_not_matched_insert_all()
            if self.when_not_matched_by_source == "delete":
                builder.when_not_matched_by_source_delete()
            result = builder.execute(self._table(), transaction_properties=properties)
        return {"version_before": ds.version, "version": target.open().version, **result}


class LanceTagOperator(LanceBaseOperator):
    """Point tag ``tag`` at ``version`` (default: the latest), creating or moving it. Tags are
    refs, not transactions: nothing is committed, so there are no properties to stamp."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "tag", "version")

    def __init__(self, *, tag: str, version: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tag = tag
        self.version = version

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        ds = target.open()
        version = ds.version if self.version in (None, "", "None") else int(self.version)  # type: ignore[arg-type]
        moved = self.tag in ds.tags.list()
        if moved:
            ds.tags.update(self.tag, version)
        else:
            ds.tags.create(self.tag, version)
        return {"tag": self.tag, "tagged_version": version, "moved": moved, "version": ds.version}


class LanceRestoreOperator(LanceBaseOperator):
    """Make ``version`` (a number or a tag) the latest again: one ``Restore`` commit on top."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "version")

    def __init__(self, *, version: int | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.version = version

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        latest = target.open()
        reference = int(self.version) if str(self.version).isdigit() else self.version
        old = latest.checkout_version(reference)
        restored = old.version
        old.restore(transaction_properties=properties)
        return {"version_before": latest.version, "restored_version": restored, "version": old.version}


class LanceIngestOperator(LanceBaseOperator):
    """Write one day of a declared ingest source (``partition``, ``YYYY-MM-DD``, templated; the
    run's ``{{ ds }}`` by default) into the dataset through the ``lance`` Spark data source: the
    first write creates the dataset, later ones replace that day's rows (``replace_where`` on the
    source's ``partition_column``), so re-running or backfilling a day replaces it; with the
    source's ``mode: upsert`` they merge the day's rows in by its ``keys`` instead
    (:func:`jobs.merge_insert`: matched rows updated, the others inserted). One ``Update``
    (or the creating ``Overwrite``/``Append``) per day, stamped with the task's properties. The
    sources are Spark reads, so the engine is always ``spark``."""

    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "partition")

    def __init__(self, *, source: IngestSource, partition: str = "{{ ds }}", **kwargs: Any) -> None:
        if kwargs.setdefault("engine", "spark") != "spark":
            raise InvalidArgumentError("ingest reads its source with Spark: engine must be 'spark'")
        super().__init__(**kwargs)
        self.source = source
        self.partition = partition

    def run(self, target: LanceTarget, properties: dict[str, str], context: Context) -> dict[str, Any]:
        import jobs
        from jobs.ingest import partition_predicate, source_frame

        day = dt.date.fromisoformat(str(self.partition)).isoformat()
        df = source_frame(self.spark(), self.source, [day])
        options = {"transaction_properties": json.dumps(properties)}
        if target.storage_options:
            options["storage_options"] = json.dumps(dict(target.storage_options))
        existing = target.open_or_none()
        result: dict[str, int] = {}
        column = self.source.partition_column
        if existing is None:
            jobs.save(df, target.uri, "append", **options)
        else:
            if column not in existing.schema.names:
                raise SchemaError(
                    f"partition column {column!r} is not in the dataset ({existing.schema.names})"
                )
        if existing is not None and self.source.mode == "upsert":
            self.log.info("upserting %s by %s", day, list(self.source.keys))
            result = jobs.merge_insert(
                self.spark(),
                target.uri,
                df,
                list(self.source.keys),
                storage_options=target.storage_options,
                transaction_properties=properties,
                manifest_store=target.manifest_store,
            ).result
        elif existing is not None:
            start = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)
            field = existing.schema.field(column)
            where = partition_predicate(column, field.type, start, start + dt.timedelta(days=1))
            self.log.info("replacing %s", where)
            jobs.save(
                df,
                target.uri,
                "overwrite",
                fill_missing=self.source.fill_missing,
                replace_where=where,
                **options,
            )
        after = target.open()
        return {
            "partition": day,
            "version_before": None if existing is None else existing.version,
            "version": after.version,
            "rows": after.count_rows(),
            "mode": self.source.mode,
            **result,
        }
