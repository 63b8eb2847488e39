"""Crash at any point (see tests/reliability/crash.py): SIGKILL a worker looping every operation."""

from __future__ import annotations

import time

import pytest

from tests.reliability.crash import final_cleanup_check, run_crashes

pytestmark = pytest.mark.interop


def _assert_clean(stats) -> None:
    assert stats.lost_commits == 0, stats.child_errors
    assert stats.partial_versions == 0, stats.child_errors
    assert stats.untyped_errors == 0, stats.child_errors
    assert stats.hangs == 0


def test_killed_worker_loses_nothing_and_cleanup_reclaims(tmp_path):
    stats = run_crashes(str(tmp_path), kills=3, seed=7, max_delay=1.5)
    _assert_clean(stats)
    assert stats.kills >= 2 and stats.commits > 0
    assert final_cleanup_check(str(tmp_path / "ds")) == []


@pytest.mark.soak
def test_crash_soak(tmp_path, soak_seconds, report):
    started = time.monotonic()
    total = None
    seed = 1
    while time.monotonic() - started < soak_seconds:
        stats = run_crashes(str(tmp_path / f"round{seed}"), kills=25, seed=seed)
        _assert_clean(stats)
        assert final_cleanup_check(str(tmp_path / f"round{seed}" / "ds")) == []
        if total is None:
            total = stats
        else:
            total.kills += stats.kills
            total.commits += stats.commits
            total.versions_checked += stats.versions_checked
            total.killed_during.update(stats.killed_during)
        seed += 1
    assert total is not None
    report(
        {
            "seconds": round(time.monotonic() - started),
            "rounds": seed - 1,
            "kills": total.kills,
            "commits_journaled": total.commits,
            "versions_checked": total.versions_checked,
            "killed_during": dict(total.killed_during),
            "lost_commits": 0,
            "partial_versions": 0,
            "untyped_errors": 0,
            "hangs": 0,
            "leftovers_after_cleanup": 0,
        }
    )
