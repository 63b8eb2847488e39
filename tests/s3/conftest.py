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
from typing import Any

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


# --- DynamoDB (s3+ddb://) --------------------------------------------------------------------------
KEY_SCHEMA = [
    {"AttributeName": "base_uri", "KeyType": "HASH"},
    {"AttributeName": "version", "KeyType": "RANGE"},
]
ATTRIBUTES = [
    {"AttributeName": "base_uri", "AttributeType": "S"},
    {"AttributeName": "version", "AttributeType": "N"},
]


def _client(s3: S3Location, service: str) -> Any:
    """A boto3 client of ``service`` on the moto endpoint."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=s3.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )


@dataclass(frozen=True)
class DdbLocation:
    """A fresh table on the moto endpoint and the bucket of ``s3``."""

    s3: S3Location
    table: str
    client: Any

    @property
    def storage_options(self) -> dict[str, str]:
        return {**self.s3.storage_options, "dynamodb_endpoint": self.s3.endpoint}

    def uri(self, name: str = "sub/ds.lance") -> str:
        return f"s3+ddb://{self.s3.bucket}/{name}?ddbTableName={self.table}"

    def items(self, base_uri: str = "sub/ds.lance") -> list[dict[str, Any]]:
        answer = self.client.query(
            TableName=self.table,
            KeyConditionExpression="base_uri = :b",
            ExpressionAttributeValues={":b": {"S": base_uri}},
            ConsistentRead=True,
        )
        return sorted(answer["Items"], key=lambda item: int(item["version"]["N"]))

    def keys(self, prefix: str = "sub/ds.lance/_versions/") -> list[str]:
        s3 = _client(self.s3, "s3")
        answer = s3.list_objects_v2(Bucket=self.s3.bucket, Prefix=prefix)
        return sorted(obj["Key"] for obj in answer.get("Contents", []))

    def object_size(self, key: str) -> int:
        return int(_client(self.s3, "s3").head_object(Bucket=self.s3.bucket, Key=key)["ContentLength"])


@pytest.fixture
def ddb(s3: S3Location) -> Iterator[DdbLocation]:
    """A fresh table with pylance's key schema (as pylance's test creates it) on the moto endpoint."""
    client = _client(s3, "dynamodb")
    table = f"lance-ops-{uuid.uuid4().hex[:12]}"
    client.create_table(
        TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES, BillingMode="PAY_PER_REQUEST"
    )
    yield DdbLocation(s3, table, client)
    client.delete_table(TableName=table)
