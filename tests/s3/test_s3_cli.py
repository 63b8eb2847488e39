"""The ``lance-ops`` command line on an ``s3://`` dataset (moto on loopback) with
``--storage-option KEY=VALUE``, checked by pylance reading the same bucket; the secret is never
printed, not even when an option is wrong."""

from __future__ import annotations

import json
from typing import Any

import lance
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import lance_ops
from lance_ops.cli import cli
from tests.s3.conftest import SECRET_KEY, S3Location

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def _options(options: dict[str, str]) -> list[str]:
    return [arg for key, value in options.items() for arg in ("--storage-option", f"{key}={value}")]


def _invoke(s3: S3Location, *argv: str, options: dict[str, str] | None = None) -> Result:
    args = [*argv, *_options(s3.storage_options if options is None else options)]
    result = CliRunner().invoke(cli, args)
    assert SECRET_KEY not in result.stdout + result.stderr
    return result


def _json(s3: S3Location, *argv: str) -> Any:
    result = _invoke(s3, *argv, "--json")
    assert (result.exit_code, result.stderr) == (0, ""), result.stderr or result.exception
    return json.loads(result.stdout)


def _pylance(s3: S3Location) -> lance.LanceDataset:
    return lance.dataset(s3.uri(), storage_options=s3.storage_options)


def _operation(ds: lance.LanceDataset) -> str:
    return type(ds.read_transaction(ds.version).operation).__name__


def test_commands_on_s3(s3: S3Location) -> None:
    uri = s3.uri()
    for start in range(0, 40, 10):
        table = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
        mode = "create" if start == 0 else "append"
        lance_ops.write_dataset(table, uri, mode=mode, storage_options=s3.storage_options)
    assert [row["version"] for row in _json(s3, "versions", uri)] == [1, 2, 3, 4]
    assert len(_json(s3, "history", uri)) == 4
    assert _json(s3, "inspect", uri)["version"] == 4

    deleted = _json(s3, "delete", uri, "--where", "id % 4 = 0")
    assert deleted["deleted_rows"] == 10
    assert _pylance(s3).count_rows() == 30

    planned = _json(s3, "compact", uri, "--dry-run")
    assert _pylance(s3).version == 5 and planned
    metrics = _json(s3, "compact", uri)
    compacted = _pylance(s3)
    assert compacted.version == metrics["version"] and _operation(compacted) == "Rewrite"
    assert (len(compacted.get_fragments()), compacted.count_rows()) == (1, 30)
    assert sorted(compacted.to_table().column("id").to_pylist()) == [i for i in range(40) if i % 4]

    cleanup = _json(s3, "cleanup", uri, "--dry-run", "--older-than", "0s")
    assert cleanup["old_versions"] == compacted.version - 1 and cleanup["dry_run"] is True
    assert len(_pylance(s3).versions()) == compacted.version
    stats = _json(s3, "stats", uri, "--rebuild", "--force")
    assert [row["column"] for row in stats["columns"]] == ["id"]
    assert _operation(_pylance(s3)) == "UpdateConfig"  # the statistics were committed

    text = _invoke(s3, "history", uri)
    assert text.exit_code == 0 and "Delete" in text.stdout


def test_wrong_options_never_print_the_secret(s3: S3Location) -> None:
    uri = s3.uri()
    lance_ops.write_dataset(pa.table({"id": [1]}), uri, storage_options=s3.storage_options)
    misspelt = {**s3.storage_options}
    misspelt["aws_secret_acess_key"] = misspelt.pop("aws_secret_access_key")
    result = _invoke(s3, "versions", uri, options=misspelt)
    assert result.exit_code == 1 and "aws_secret_acess_key" in result.stderr
    unreachable = {**s3.storage_options, "aws_endpoint": "http://127.0.0.1:9"}
    result = _invoke(s3, "versions", uri, options=unreachable)
    assert result.exit_code == 1 and "127.0.0.1:9" in result.stderr
    malformed = CliRunner().invoke(cli, ["versions", uri, "--storage-option", f"secret:{SECRET_KEY}"])
    assert malformed.exit_code == 2 and "KEY=VALUE" in malformed.stderr
    assert SECRET_KEY not in malformed.stdout + malformed.stderr
