"""Sensors on a Lance dataset: maintenance due, and a new version committed.

:class:`LanceMaintenanceDueSensor` applies the Dagster compaction sensor's thresholds
(:class:`lance_ops.fragmentation.Fragmentation`: more fragments than ``max_fragments``, more small
files -- fragments under ``small_file_rows`` rows -- than ``max_small_files``, or a deleted-row
ratio above ``max_deleted_ratio``) and succeeds when any is passed, pushing the numbers and the
reasons to XCom. :class:`LanceNewVersionSensor` succeeds when the dataset has a version newer than
``after_version``. With ``deferrable=True`` both hand the waiting to the triggerer
(:mod:`lance_ops.airflow.triggers`) after one check in the worker.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from lance_ops.airflow.hook import LanceLocation, LanceTarget
from lance_ops.airflow.triggers import (
    LanceMaintenanceDueTrigger,
    LanceNewVersionTrigger,
    latest_version,
    maintenance_state,
)
from lance_ops.datasets_config import CompactionPolicy

if TYPE_CHECKING:
    from airflow.sdk import Context


class _LanceSensor(LanceLocation, BaseSensorOperator):
    template_fields: Sequence[str] = ("uri", "lance_conn_id", "storage_options")
    ui_color = "#d7ecfb"

    def __init__(
        self,
        *,
        uri: str | None = None,
        lance_conn_id: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        deferrable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.set_location(self.task_id, uri, lance_conn_id, storage_options)
        self.deferrable = deferrable

    def _defer_timeout(self) -> dt.timedelta | None:
        return dt.timedelta(seconds=self.timeout) if self.timeout else None

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The trigger's event is the sensor's result (and XCom value)."""
        return event


class LanceMaintenanceDueSensor(_LanceSensor):
    """Succeeds when compaction is due: the latest version is past one of the thresholds (the
    defaults are the datasets file's compaction defaults)."""

    def __init__(
        self,
        *,
        max_fragments: int = 64,
        max_small_files: int = 8,
        small_file_rows: int = 1024,
        max_deleted_ratio: float = 0.1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy = CompactionPolicy(
            max_fragments=max_fragments,
            max_small_files=max_small_files,
            small_file_rows=small_file_rows,
            max_deleted_ratio=max_deleted_ratio,
        )

    def poke(self, context: Context) -> PokeReturnValue:
        state = maintenance_state(self.lance_target(), self.policy)
        self.log.info(
            "%s version %s: due=%s %s", state["uri"], state["version"], state["due"], state["reasons"]
        )
        return PokeReturnValue(is_done=state["due"], xcom_value=state)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        state = maintenance_state(self.lance_target(), self.policy)
        if state["due"]:
            return state
        trigger = LanceMaintenanceDueTrigger(
            **self.lance_location(), policy=asdict(self.policy), poll_interval=self.poke_interval
        )
        self.defer(trigger=trigger, method_name="execute_complete", timeout=self._defer_timeout())


class LanceNewVersionSensor(_LanceSensor):
    """Succeeds when the dataset has a version newer than ``after_version`` (templated; default:
    the version at the first poke, so the sensor waits for the next commit)."""

    template_fields: Sequence[str] = (*_LanceSensor.template_fields, "after_version")

    def __init__(self, *, after_version: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.after_version = after_version

    def _baseline(self, target: LanceTarget) -> int:
        if self.after_version in (None, "", "None"):
            self.after_version = latest_version(target) or 0
        return int(self.after_version)  # type: ignore[arg-type]

    def poke(self, context: Context) -> PokeReturnValue:
        target = self.lance_target()
        seen = self._baseline(target)
        version = latest_version(target)
        done = version is not None and version > seen
        return PokeReturnValue(
            is_done=done, xcom_value={"uri": target.uri, "version": version, "previous": seen}
        )

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        target = self.lance_target()
        seen = self._baseline(target)
        version = latest_version(target)
        if version is not None and version > seen:
            return {"uri": target.uri, "version": version, "previous": seen}
        trigger = LanceNewVersionTrigger(
            **self.lance_location(), after_version=seen, poll_interval=self.poke_interval
        )
        self.defer(trigger=trigger, method_name="execute_complete", timeout=self._defer_timeout())
