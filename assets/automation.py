"""Jobs, schedules and sensors of a declared dataset, and the version/tag job.

* ``<name>_maintenance``: the four maintenance assets in order; scheduled by the policy's cron
  (``<name>_maintenance_schedule``, in the policy's time zone).
* ``<name>_compaction``: compaction alone, requested by ``<name>_compaction_sensor`` when the
  latest version has more fragments or small files than the policy allows or too many deleted rows
  (once per version: the run key is the version).
* ``<name>_versions_sensor``: records each new Lance version Dagster has not recorded yet as a
  materialization of the dataset asset (data version = Lance version) and counts those committed
  outside Dagster (no ``dagster/run_id`` in their transaction), so the UI shows every version and
  downstream assets go stale whoever wrote it.
* ``default_automation_condition_sensor`` (one for all datasets, running by default): evaluates
  the dataset asset's ``eager`` condition, so it is recorded after each ingest.
* ``<name>_versions``: a job whose config tags a version, restores a version or tag, or checks
  out a tag; each is recorded as a materialization of the dataset asset.

No ``from __future__ import annotations`` here (Dagster inspects op and config annotations).
"""

import json
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg
from pydantic import Field

from assets import maintenance
from assets.checks import latest_recorded_version
from assets.config import DatasetConfig
from assets.lance_assets import (
    DATA_VERSION_TAG,
    committed_by,
    dagster_transaction_properties,
    dataset_key,
    dataset_metadata,
    dataset_resource,
    resource_key,
)
from assets.maintenance_assets import MAINTENANCE_ORDER, maintenance_key
from lance_ops.fragmentation import Fragmentation

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


def maintenance_job(config: DatasetConfig) -> "UnresolvedAssetJobDefinition":
    return dg.define_asset_job(
        f"{config.name}_maintenance",
        selection=dg.AssetSelection.assets(*(maintenance_key(config, op) for op in MAINTENANCE_ORDER)),
        description=f"Maintenance of {config.name}: encoding profile, compaction, statistics, cleanup.",
    )


def compaction_job(config: DatasetConfig) -> "UnresolvedAssetJobDefinition":
    return dg.define_asset_job(
        f"{config.name}_compaction",
        selection=dg.AssetSelection.assets(maintenance_key(config, "compaction")),
        description=f"Compaction of {config.name}.",
    )


def maintenance_schedule(config: DatasetConfig, job: "UnresolvedAssetJobDefinition") -> dg.ScheduleDefinition:
    policy = config.maintenance
    return dg.ScheduleDefinition(
        name=f"{config.name}_maintenance_schedule",
        job=job,
        cron_schedule=policy.cron,
        execution_timezone=policy.timezone,
        description=f"Maintenance of {config.name} at '{policy.cron}' ({policy.timezone}).",
    )


AUTOMATION_SENSOR = "default_automation_condition_sensor"


def automation_sensor() -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates automation conditions (the dataset asset's ``eager``), running by
    default: Dagster's implicit one starts stopped, so an ``eager`` asset would never act."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Evaluates the assets' automation conditions (lance/<name> follows its ingest).",
    )


def compaction_sensor(config: DatasetConfig, job: "UnresolvedAssetJobDefinition") -> dg.SensorDefinition:
    policy = config.maintenance.compaction

    @dg.sensor(
        name=f"{config.name}_compaction_sensor",
        job=job,
        minimum_interval_seconds=300,
        required_resource_keys={resource_key(config)},
        description=f"Requests compaction of {config.name} past {policy.max_fragments} fragments, "
        f"{policy.max_small_files} small files or a deleted-row ratio of {policy.max_deleted_ratio}.",
    )
    def sensor(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        ds = getattr(context.resources, resource_key(config)).load_or_none()
        if ds is None:
            return dg.SkipReason(f"no dataset at {config.uri} yet")
        state = Fragmentation.of(ds, policy)
        breaches = state.breaches(policy)
        if not breaches:
            return dg.SkipReason(
                f"version {ds.version}: {state.fragments} fragments, {state.small_files} small files, "
                f"deleted-row ratio {state.deleted_ratio:.3f}: within the policy"
            )
        return dg.RunRequest(
            run_key=f"{config.name}-compaction-v{ds.version}",
            tags={"lance/version": str(ds.version), "lance/reason": "; ".join(breaches)},
        )

    return sensor


def versions_sensor(config: DatasetConfig) -> dg.SensorDefinition:
    key = dataset_key(config)
    name = f"{config.name}_versions_sensor"

    @dg.sensor(
        name=name,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        required_resource_keys={resource_key(config)},
        description=f"Records new versions of {config.name}, including those committed outside Dagster.",
    )
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        ds = getattr(context.resources, resource_key(config)).load_or_none()
        if ds is None:
            return dg.SkipReason(f"no dataset at {config.uri} yet")
        known = [v for v in (context.cursor, latest_recorded_version(context.instance, key)) if v is not None]
        seen = max((int(v) for v in known), default=0)
        if ds.version <= seen:
            return dg.SkipReason(f"version {ds.version} already recorded")
        new = [v["version"] for v in ds.versions() if v["version"] > seen]
        outside = [v for v in new if committed_by(ds, v) is None]
        metadata: dict[str, Any] = {
            **dataset_metadata(ds, config.maintenance.compaction.small_file_rows),
            "lance/new_versions": len(new),
            "lance/outside_versions": len(outside),
            "lance/outside_version_list": json.dumps(outside),
        }
        event = dg.AssetMaterialization(
            asset_key=key,
            description=f"version {ds.version} noticed by {name}",
            metadata=metadata,
            tags={DATA_VERSION_TAG: str(ds.version)},
        )
        return dg.SensorResult(asset_events=[event], cursor=str(ds.version))

    return sensor


class VersionAction(dg.Config):
    """What the versions job does.

    ``tag``: point tag ``tag`` at ``version`` (default: the latest); ``restore``: make ``version``
    (or the version tagged ``tag``) the latest again, committing ``Restore``; ``checkout``: open the
    version tagged ``tag`` (or ``version``) and record what it holds.
    """

    action: Literal["tag", "restore", "checkout"] = Field(description="tag, restore or checkout")
    version: int | None = Field(default=None, description="A version number.")
    tag: str | None = Field(default=None, description="A tag name.")


def versions_job(dataset: DatasetConfig) -> dg.JobDefinition:
    key = dataset_key(dataset)
    small = dataset.maintenance.compaction.small_file_rows

    @dg.op(
        name=f"{dataset.name}_version_action",
        required_resource_keys={resource_key(dataset)},
        description=f"Tag, restore or check out a version of {dataset.name}.",
    )
    def version_action(context: dg.OpExecutionContext, config: VersionAction) -> None:
        resource = dataset_resource(context, dataset)
        options = resource.resolved_storage_options()
        extra: dict[str, Any] = {"lance/action": config.action}
        if config.action == "tag":
            if not config.tag:
                raise dg.Failure("action 'tag' needs a tag name")
            tagged = maintenance.create_tag(resource.uri, config.tag, config.version, storage_options=options)
            extra.update({"lance/tag": config.tag, "lance/tagged_version": tagged})
        else:
            target = config.tag if config.tag else config.version
            if target is None or (config.tag and config.version is not None):
                raise dg.Failure(f"action {config.action!r} needs exactly one of version and tag")
            if config.action == "restore":
                restored = resource.load().checkout_version(target).version
                maintenance.restore(
                    resource.uri,
                    restored,
                    storage_options=options,
                    transaction_properties=dagster_transaction_properties(context),
                )
                extra["lance/restored_version"] = restored
            else:
                checked = resource.load().checkout_version(target)
                extra.update(
                    {
                        "lance/checkout/target": str(target),
                        "lance/checkout/version": checked.version,
                        "lance/checkout/rows": checked.count_rows(),
                        "lance/checkout/fragments": len(checked.manifest.fragments),
                    }
                )
        ds = resource.load()
        context.log_event(
            dg.AssetMaterialization(
                asset_key=key,
                description=f"{config.action} on {dataset.name}",
                metadata={**dataset_metadata(ds, small), **extra},
                tags={DATA_VERSION_TAG: str(ds.version)},
            )
        )

    @dg.job(
        name=f"{dataset.name}_versions", description=f"Tag, restore or check out versions of {dataset.name}."
    )
    def job() -> None:
        version_action()

    return job
