"""A real S3 server on loopback for the ``s3`` tests: moto's server, one per xdist worker.

The server runs in a subprocess (``python -m moto.server``), not in a thread of the test process:
the suite turns warnings into errors process-wide, which would break a server thread on its first
deprecation warning, and the server would compete with the tests for the GIL. It listens on
127.0.0.1 at a free port, lives for the session (of this worker) and is stopped at its end.

Every test gets a fresh bucket and ONE storage-options dict with pylance's key names, which both
lance_ops and pylance take as is (spec api.md, "Object storage").
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ACCESS_KEY = "lance-ops-test-access-key"
SECRET_KEY = "lance-ops-test-secret-0123456789"  # tests check that it never shows in reprs or errors
REGION = "us-east-1"
STARTUP_SECONDS = 30.0


@dataclass(frozen=True)
class S3Location:
    """A fresh bucket: ``uri_prefix`` is ``s3://bucket``; ``storage_options`` use pylance's keys."""

    uri_prefix: str
    storage_options: dict[str, str]
    endpoint: str
    bucket: str

    def uri(self, name: str = "ds.lance") -> str:
        return f"{self.uri_prefix}/{name}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server() -> tuple[subprocess.Popen[bytes], str]:
    """Start moto's server at a free port; retried when another process took the port meanwhile."""
    for _ in range(3):
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
                    return process, endpoint
            except OSError:
                time.sleep(0.05)
        process.kill()
        process.wait()
    raise RuntimeError("moto's S3 server did not start")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint of this worker's S3 server (started on first use, stopped at session end)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    process, endpoint = _start_server()
    try:
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def storage_options(endpoint: str) -> dict[str, str]:
    """pylance's keys, as a user would pass them to both libraries."""
    return {
        "aws_endpoint": endpoint,
        "allow_http": "true",
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "aws_region": REGION,
    }


@pytest.fixture
def s3(s3_endpoint: str) -> S3Location:
    """A fresh, empty bucket on the server."""
    import boto3

    bucket = f"lance-ops-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    client.create_bucket(Bucket=bucket)
    client.close()
    return S3Location(f"s3://{bucket}", storage_options(s3_endpoint), s3_endpoint, bucket)
