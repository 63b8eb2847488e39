"""Concurrency soak (see tests/reliability/concurrency.py): racing workers, checked by serial replay."""

from __future__ import annotations

import pytest

from tests.reliability.concurrency import run_soak

pytestmark = pytest.mark.interop


def _assert_clean(stats) -> None:
    assert stats.errors == []
    assert stats.duplicate_versions == 0
    assert stats.replay_mismatches == []


def test_racing_workers_match_serial_replay(tmp_path):
    stats = run_soak(str(tmp_path), workers=2, seconds=1.5, seed=3)
    _assert_clean(stats)
    assert stats.calls >= 8 and stats.landed >= 1  # min_calls=4 per worker


@pytest.mark.soak
def test_concurrency_soak(tmp_path, soak_seconds, report):
    stats = run_soak(str(tmp_path), workers=3, seconds=soak_seconds, seed=11)
    _assert_clean(stats)
    report(
        {
            "workers": 3,
            "seconds": soak_seconds,
            "calls": stats.calls,
            "landed": stats.landed,
            "conflicts": stats.conflicts,
            "final_version": stats.final_version,
            "duplicate_versions": 0,
            "untyped_errors": 0,
            "replay_mismatches": 0,
        }
    )
