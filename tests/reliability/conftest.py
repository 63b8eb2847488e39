"""Budgets of the long (``soak``) runs, from the environment, and where their figures go.

``RELIABILITY_SOAK_SECONDS`` (default 120) is the time each soak test runs for;
``RELIABILITY_REPORT`` (optional) a directory receiving one JSON file of figures per soak test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture()
def soak_seconds() -> float:
    return float(os.environ.get("RELIABILITY_SOAK_SECONDS", "120"))


@pytest.fixture()
def report(request):
    def write(figures: dict[str, Any]) -> None:
        directory = os.environ.get("RELIABILITY_REPORT")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            Path(directory, f"{request.node.name}.json").write_text(
                json.dumps(figures, indent=2, default=str)
            )

    return write
