"""The long (``soak``) runs: opt-in only, their budgets from the environment, where their figures go.

Soak tests run only when the ``-m`` expression names ``soak`` (``pytest -m soak tests/reliability``):
``pyproject.toml`` deselects them by default, and the hook below also deselects them under any other
``-m`` expression (say ``-m "not spark"``), which would otherwise override that default.

``RELIABILITY_SOAK_SECONDS`` (default 120) is the time each soak test runs for;
``RELIABILITY_REPORT`` (optional) a directory receiving one JSON file of figures per soak test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.option.markexpr or "") and "not soak" not in config.option.markexpr:
        return
    soak = [item for item in items if item.get_closest_marker("soak")]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [item for item in items if not item.get_closest_marker("soak")]


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
