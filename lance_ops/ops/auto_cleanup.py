"""Automatic cleanup after commits, configured by the ``lance.auto_cleanup.*`` table config keys.

pylance 14 behaviour, reproduced here: when a dataset's config holds both
``lance.auto_cleanup.interval`` (an integer N) and ``lance.auto_cleanup.older_than`` (a duration
such as ``"14d"``, ``"3600s"`` or ``"1h 30m"``), every commit that writes a version divisible by N
then removes the versions older than that duration, as ``cleanup_old_versions(older_than=...)``
run from the version the commit read (so that one and the new one are always kept). A tagged
old version makes that cleanup refuse (as ``error_if_tagged_old_versions`` does); the refusal, like
any other failure of that cleanup (a corrupt tag file, a storage error), is logged and the commit
still succeeds. ``write_dataset(auto_cleanup_options={"interval": N,
"older_than_seconds": S})`` stores the two keys when it creates a dataset.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from lance_ops.errors import CleanupError, LanceOpsError
from lance_ops.io import ObjectStore
from lance_ops.ops.cleanup import CleanupPolicy, CleanupStats, cleanup_old_versions
from lance_ops.table.manifest import Manifest

__all__ = ["INTERVAL_KEY", "OLDER_THAN_KEY", "AutoCleanupConfig", "after_commit", "parse_duration"]

INTERVAL_KEY = "lance.auto_cleanup.interval"
OLDER_THAN_KEY = "lance.auto_cleanup.older_than"

_log = logging.getLogger(__name__)

# Units of the ``humantime`` durations Lance parses (months and years as humantime counts them).
_UNIT_SECONDS = {
    **dict.fromkeys(("ns", "nsec"), 1e-9),
    **dict.fromkeys(("us", "usec"), 1e-6),
    **dict.fromkeys(("ms", "msec"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400.0),
    **dict.fromkeys(("M", "month", "months"), 2_630_016.0),
    **dict.fromkeys(("y", "year", "years"), 31_557_600.0),
}
_PART = re.compile(r"\s*(\d+)\s*([A-Za-z]+)")


def parse_duration(text: str) -> dt.timedelta:
    """A duration in humantime's notation (``"14d"``, ``"1h 30m"``, ``"3600s"``)."""
    seconds, position = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != position or match.group(2) not in _UNIT_SECONDS:
            break
        seconds += int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position == 0 or text[position:].strip():
        raise CleanupError(f"invalid duration {text!r} (expected e.g. '14d', '3600s', '1h 30m')")
    return dt.timedelta(seconds=seconds)


@dataclass(frozen=True)
class AutoCleanupConfig:
    """Clean up every ``interval`` versions, removing versions older than ``older_than``."""

    interval: int
    older_than: dt.timedelta

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise CleanupError(f"the auto cleanup interval must be positive, not {self.interval}")

    @classmethod
    def from_options(cls, options: Mapping[str, int]) -> AutoCleanupConfig:
        """From pylance's ``AutoCleanupConfig`` dict: ``{"interval", "older_than_seconds"}``."""
        try:
            return cls(int(options["interval"]), dt.timedelta(seconds=int(options["older_than_seconds"])))
        except KeyError as exc:
            raise CleanupError(
                f"auto_cleanup_options needs 'interval' and 'older_than_seconds': {exc}"
            ) from exc

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> AutoCleanupConfig | None:
        """The dataset's setting (None unless both keys are set); bad values raise :class:`CleanupError`."""
        if INTERVAL_KEY not in config or OLDER_THAN_KEY not in config:
            return None
        try:
            interval = int(config[INTERVAL_KEY])
        except ValueError as exc:
            raise CleanupError(f"{INTERVAL_KEY} must be an integer, not {config[INTERVAL_KEY]!r}") from exc
        return cls(interval, parse_duration(config[OLDER_THAN_KEY]))

    def to_config(self) -> dict[str, str]:
        """The config keys, written as pylance writes them."""
        return {INTERVAL_KEY: str(self.interval), OLDER_THAN_KEY: f"{int(self.older_than.total_seconds())}s"}


def after_commit(store: ObjectStore, root: str, manifest: Manifest) -> CleanupStats | None:
    """Run the configured cleanup if ``manifest`` (just committed) is due for one; None otherwise."""
    try:
        config = AutoCleanupConfig.from_config(manifest.config)
        if config is None or manifest.version % config.interval:
            return None
        policy = CleanupPolicy.parse(config.older_than, None, manifest.version)
        return cleanup_old_versions(store, root, max(manifest.version - 1, 1), policy)
    except (LanceOpsError, OSError) as exc:
        # The version has landed: a failed cleanup must not make its commit look failed.
        _log.warning("automatic cleanup after version %d skipped: %s", manifest.version, exc)
        return None
