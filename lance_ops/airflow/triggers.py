"""Triggers polling a Lance dataset from Airflow's triggerer.

* :class:`LanceMaintenanceDueTrigger` fires once the latest version is past a compaction policy's
  thresholds (what a deferred :class:`~lance_ops.airflow.sensors.LanceMaintenanceDueSensor` waits
  for);
* :class:`LanceNewVersionTrigger` fires for each version newer than the last one it saw: an event
  trigger, usable in an ``AssetWatcher`` so a DAG runs when any writer commits.

Both keep only the location in their serialized form: the URI, the ``lance`` connection id and the
storage options as written (``${NAME}`` references unresolved), so no secret is stored with the
trigger; the triggerer resolves them (:class:`~lance_ops.airflow.hook.LanceHook`) when it polls.
Reading the dataset is blocking I/O and runs in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from lance_ops.airflow.hook import LanceLocation, LanceTarget
from lance_ops.datasets_config import CompactionPolicy
from lance_ops.fragmentation import Fragmentation


def maintenance_state(target: LanceTarget, policy: CompactionPolicy) -> dict[str, Any]:
    """Whether compaction is due for the latest version under ``policy``, with the numbers and
    the reasons (JSON-serialisable); a missing dataset is not due."""
    ds = target.open_or_none()
    if ds is None:
        return {"uri": target.uri, "due": False, "version": None, "reasons": ["no dataset yet"]}
    state = Fragmentation.of(ds, policy)
    reasons = state.breaches(policy)
    return {
        "uri": target.uri,
        "due": bool(reasons),
        "version": state.version,
        "fragments": state.fragments,
        "small_files": state.small_files,
        "deleted_rows": state.deleted_rows,
        "deleted_ratio": state.deleted_ratio,
        "reasons": reasons,
    }


def latest_version(target: LanceTarget) -> int | None:
    ds = target.open_or_none()
    return None if ds is None else ds.version


class _LanceTrigger(LanceLocation):
    """How both triggers show and reach their dataset."""

    def __repr__(self) -> str:  # the option names only: a literal value may be a secret
        names = ", ".join(sorted(self.storage_options))
        where = f"uri={self.uri!r} lance_conn_id={self.lance_conn_id!r}"
        return f"<{type(self).__qualname__} {where} options=<{names}>>"

    async def _target(self) -> LanceTarget:
        target: LanceTarget = await sync_to_async(self.lance_target)()
        return target


class LanceMaintenanceDueTrigger(_LanceTrigger, BaseTrigger):
    """Fires (once) when the dataset is past ``policy``'s thresholds: fragments, small files or
    deleted-row ratio (a :class:`~lance_ops.datasets_config.CompactionPolicy` as a dict)."""

    def __init__(
        self,
        *,
        uri: str | None = None,
        lance_conn_id: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        policy: Mapping[str, Any] | None = None,
        poll_interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.set_location(type(self).__name__, uri, lance_conn_id, storage_options)
        self.policy = dict(policy or asdict(CompactionPolicy()))
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = {**self.lance_location(), "policy": self.policy, "poll_interval": self.poll_interval}
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        target = await self._target()
        policy = CompactionPolicy(**self.policy)
        while True:
            state = await asyncio.to_thread(maintenance_state, target, policy)
            if state["due"]:
                yield TriggerEvent(state)
                return
            self.log.info("%s version %s: maintenance not due", target.uri, state["version"])
            await asyncio.sleep(self.poll_interval)


class LanceNewVersionTrigger(_LanceTrigger, BaseEventTrigger):
    """Fires for every version newer than ``after_version`` (default: the latest version when the
    trigger starts; a dataset created later fires with its first version). The event holds the
    URI, the new version and the previous one."""

    def __init__(
        self,
        *,
        uri: str | None = None,
        lance_conn_id: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        after_version: int | None = None,
        poll_interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.set_location(type(self).__name__, uri, lance_conn_id, storage_options)
        self.after_version = after_version
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = {
            **self.lance_location(),
            "after_version": self.after_version,
            "poll_interval": self.poll_interval,
        }
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        target = await self._target()
        seen = self.after_version
        if seen is None:
            seen = await asyncio.to_thread(latest_version, target) or 0
        while True:
            version = await asyncio.to_thread(latest_version, target)
            if version is not None and version > seen:
                yield TriggerEvent({"uri": target.uri, "version": version, "previous": seen})
                seen = version
            await asyncio.sleep(self.poll_interval)
