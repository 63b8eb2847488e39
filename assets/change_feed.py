"""A sensor that starts downstream runs from a dataset's change feed (``LanceDataset.changes``).

``change_feed_sensor(config, job)`` watches one declared dataset. Its cursor is the last Lance
version handed to a downstream run. Each evaluation:

* no dataset yet, or no version after the cursor: ``SkipReason``, cursor unchanged;
* newer versions ``cursor + 1 .. latest``: one ``RunRequest`` of ``job`` (run key
  ``<name>-changes-<start>-<end>``, so a re-evaluated range is not run twice) whose tags name the
  range (``lance/changes.start_version``, ``lance/changes.end_version``, ``lance/changes.mode`` =
  ``incremental``) and carry the change counts of ``changes(start, end)`` (``lance/changes.insert``,
  ``.../update`` (post images), ``.../delete``, ``.../rows``); the cursor moves to ``end``. A
  range whose commits changed no row (compaction, metadata, column changes) advances the cursor
  with a ``SkipReason`` instead of a run;
* the first evaluation (no cursor) starts at version 1, so the first run sees the whole history
  as inserts; a dataset whose early versions were cleaned up is handled as below.

When the range cannot be read as a feed the request is a **full refresh** (``mode`` = ``full``,
``start_version`` = ``end_version`` = the latest version, no counts): the downstream job should
re-read the dataset at that version instead of applying changes. That happens when

* the cursor's version was cleaned up (``cleanup_old_versions``: ``changes`` needs the manifest of
  the version before the range), or the first evaluation finds version 1 gone;
* the latest version is below the cursor: the dataset was deleted and written anew at the same
  location.

An overwrite or a restore inside the range needs nothing special: the feed reports what it removed
as deletes and what it brought back as inserts. Downstream ops read the range with
:func:`change_range` (from their run's tags) and :func:`read_changes`.

No ``from __future__ import annotations`` here (Dagster inspects op and config annotations).
"""

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Union

import dagster as dg
import pyarrow as pa

import lance_ops
from assets.config import DatasetConfig
from assets.lance_assets import resource_key
from lance_ops.errors import VersionNotFoundError
from lance_ops.ops.changes import CHANGE_TYPE

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

TAG = "lance/changes."
START, END, MODE = f"{TAG}start_version", f"{TAG}end_version", f"{TAG}mode"
Mode = Literal["incremental", "full"]
INCREMENTAL: Mode = "incremental"
FULL: Mode = "full"
COUNTED = {"insert": "insert", "update_postimage": "update", "delete": "delete"}


@dataclass(frozen=True)
class ChangeRange:
    """What one downstream run processes: the versions ``start .. end`` of the feed
    (``incremental``) or the whole dataset at ``end`` (``full``)."""

    start: int
    end: int
    mode: Mode

    def tags(self) -> dict[str, str]:
        return {START: str(self.start), END: str(self.end), MODE: self.mode}


def change_range(tags: dict[str, str]) -> ChangeRange:
    """The range a change-feed run was requested for (its run's tags, e.g. ``context.run.tags``)."""
    missing = [t for t in (START, END, MODE) if t not in tags]
    if missing:
        raise dg.Failure(f"not a change-feed run: tags {missing} are missing")
    mode = tags[MODE]
    if mode not in (INCREMENTAL, FULL):
        raise dg.Failure(f"unknown change-feed mode {mode!r}")
    return ChangeRange(int(tags[START]), int(tags[END]), INCREMENTAL if mode == INCREMENTAL else FULL)


def read_changes(ds: lance_ops.LanceDataset, span: ChangeRange) -> pa.Table:
    """The rows of ``span``: its feed (``changes``), or for a full refresh every row of version
    ``end`` as an insert (the feed's columns, ``_commit_version`` = ``end``)."""
    if span.mode == INCREMENTAL:
        return ds.changes(span.start, span.end)
    table = ds.checkout_version(span.end).to_table()
    n = table.num_rows
    return table.append_column(CHANGE_TYPE, pa.array(["insert"] * n, pa.string())).append_column(
        "_commit_version", pa.array([span.end] * n, pa.int64())
    )


def _has_version(ds: lance_ops.LanceDataset, version: int) -> bool:
    return any(v["version"] == version for v in ds.versions())


def next_range(ds: lance_ops.LanceDataset, cursor: int | None) -> ChangeRange | None:
    """The range after ``cursor`` (None: nothing new); a full refresh when it cannot be a feed."""
    latest = ds.version
    seen = cursor if cursor is not None else 0
    if latest == seen:
        return None
    if latest < seen:
        return ChangeRange(latest, latest, FULL)
    # changes(start, ..) reads version start - 1 (none needed for start = 1) and every later one.
    if (seen > 0 and not _has_version(ds, seen)) or (seen == 0 and not _has_version(ds, 1)):
        return ChangeRange(latest, latest, FULL)
    return ChangeRange(seen + 1, latest, INCREMENTAL)


def change_counts(ds: lance_ops.LanceDataset, span: ChangeRange) -> dict[str, int]:
    """Rows per change kind in ``span`` (insert / update / delete; ``rows`` in all)."""
    kinds = Counter(ds.changes(span.start, span.end).column(CHANGE_TYPE).to_pylist())
    counts = {name: kinds.get(kind, 0) for kind, name in COUNTED.items()}
    counts["rows"] = sum(kinds.values())
    return counts


def change_feed_sensor(
    config: DatasetConfig,
    job: Union["UnresolvedAssetJobDefinition", dg.JobDefinition],
    name: str | None = None,
    minimum_interval_seconds: int = 60,
) -> dg.SensorDefinition:
    """A sensor requesting a run of ``job`` for each new range of versions of ``config``'s dataset
    (see the module docstring); the sensor needs the dataset's ``lance_<name>`` resource."""
    sensor_name = name or f"{config.name}_change_feed_sensor"

    @dg.sensor(
        name=sensor_name,
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        required_resource_keys={resource_key(config)},
        description=f"Starts {job.name} for the changes of {config.name} since the last processed version.",
    )
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        ds = getattr(context.resources, resource_key(config)).load_or_none()
        if ds is None:
            return dg.SkipReason(f"no dataset at {config.uri} yet")
        cursor = int(context.cursor) if context.cursor else None
        span = next_range(ds, cursor)
        if span is None:
            return dg.SkipReason(f"version {ds.version} already processed")
        tags = span.tags()
        if span.mode == INCREMENTAL:
            try:
                counts = change_counts(ds, span)
            except VersionNotFoundError as exc:  # a version of the range was cleaned up
                context.log.warning(f"changes {span.start}..{span.end} unreadable ({exc}): full refresh")
                span = ChangeRange(ds.version, ds.version, FULL)
                tags = span.tags()
            else:
                if not counts["rows"]:
                    return dg.SensorResult(
                        skip_reason=f"versions {span.start}..{span.end} changed no row",
                        cursor=str(span.end),
                    )
                tags.update({f"{TAG}{k}": str(v) for k, v in counts.items()})
        request = dg.RunRequest(
            run_key=f"{config.name}-changes-{span.mode}-{span.start}-{span.end}", tags=tags
        )
        return dg.SensorResult(run_requests=[request], cursor=str(span.end))

    return sensor
