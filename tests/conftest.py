"""Shared test configuration.

Sections: hypothesis profiles (lead), Spark session fixture (jobs/assets).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# --- hypothesis profiles -------------------------------------------------------------------------
# "ci" keeps the suite inside the CI budget on 2 cores; "dev" explores more.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "dev",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
