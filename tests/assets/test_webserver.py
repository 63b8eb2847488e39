"""``dagster-webserver -w workspace.yaml`` on the loopback address answers GraphQL with the demo
dataset's assets, checks, schedules and sensors (what ``dagster dev`` shows on a fresh machine)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 240

QUERY = """
{
  repositoriesOrError {
    __typename
    ... on RepositoryConnection {
      nodes {
        assetNodes {
          assetKey { path }
          assetChecksOrError { ... on AssetChecks { checks { name } } }
        }
        schedules { name cronSchedule }
        sensors { name }
      }
    }
  }
}
"""

pytestmark = pytest.mark.dagster


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def graphql(port: int) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": QUERY}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


def test_webserver_answers_graphql(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LANCE_OPS_DATASETS"}
    env["DAGSTER_HOME"] = str(home)
    port = free_port()
    log = (tmp_path / "webserver.log").open("wb")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-webserver"),
            "-w",
            "workspace.yaml",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        answer: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "webserver.log").read_text()
            try:
                answer = graphql(port)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)
                continue
            if (
                answer.get("data", {}).get("repositoriesOrError", {}).get("__typename")
                == "RepositoryConnection"
            ):
                break
            time.sleep(1)
        else:
            pytest.fail(f"no repository within {STARTUP_SECONDS}s: {answer}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()

    (repository,) = answer["data"]["repositoriesOrError"]["nodes"]
    assets = {"/".join(n["assetKey"]["path"]): n for n in repository["assetNodes"]}
    assert set(assets) == {
        f"lance/demo{suffix}"
        for suffix in ("", "/ingest", "/encodings", "/compaction", "/indices", "/statistics", "/cleanup")
    }
    checks = {c["name"] for c in assets["lance/demo"]["assetChecksOrError"]["checks"]}
    assert checks == {
        "fragmentation",
        "deleted_rows",
        "statistics_fresh",
        "version_seen",
        "feature_flags",
        "indices_coverage",
    }
    assert {(s["name"], s["cronSchedule"]) for s in repository["schedules"]} == {
        ("demo_maintenance_schedule", "0 3 * * *")
    }
    assert {s["name"] for s in repository["sensors"]} >= {"demo_compaction_sensor", "demo_versions_sensor"}
