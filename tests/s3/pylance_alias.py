"""pytest plugin: run pylance's own test files with ``import lance`` answered by lance_ops.

Loaded with ``-p tests.s3.pylance_alias`` in a pytest subprocess started by
``tests/s3/test_pylance_own_s3_ddb.py`` (never in the main test process, where ``lance`` is the real
pylance, the oracle). Before the upstream file is collected:

* ``lance``, ``lance.file`` and ``lance.fragment`` in ``sys.modules`` answer with lance_ops,
  ``lance_ops.file`` and ``lance_ops.fragment`` (plus ``lance_ops.LanceFragment`` in
  ``lance.fragment``, where pylance has it), so the file's ``import lance`` / ``from lance.file
  import ...`` / ``from lance.fragment import ...`` get lance_ops (the file itself is not changed);
* its ``CONFIG`` dict (storage options and endpoints, which the file hard-codes for a local S3
  emulator at port 4566) gets the endpoints of the moto server named by ``LANCE_OPS_S3_ENDPOINT``
  (every other key is kept: the file's own credentials, region and ``allow_http``);
* its ``delete_bucket`` (called by its bucket fixture before the bucket is removed) first has
  every dataset left in the bucket read by the real pylance, in another process, version by
  version, and compared with what lance_ops reads: a difference fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

import lance_ops
import lance_ops.file
import lance_ops.fragment

ENDPOINT_VARIABLE = "LANCE_OPS_S3_ENDPOINT"
ENDPOINT_KEYS = ("aws_endpoint", "dynamodb_endpoint")


class _Alias(types.ModuleType):
    """A module answering with ``target``'s attributes, plus ``extra`` ones of its own."""

    def __init__(self, name: str, target: types.ModuleType, **extra: Any) -> None:
        super().__init__(name, target.__doc__)
        self._target = target
        self.__dict__.update(extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


# pylance's ``lance.fragment`` also holds ``LanceFragment``, which lance_ops keeps at its top level
# (its fragment layer sits below the dataset layer that defines it): the alias adds it.
FRAGMENT = _Alias("lance.fragment", lance_ops.fragment, LanceFragment=lance_ops.LanceFragment)
LANCE = _Alias("lance", lance_ops, file=lance_ops.file, fragment=FRAGMENT)
sys.modules["lance"] = LANCE
sys.modules["lance.file"] = lance_ops.file
sys.modules["lance.fragment"] = FRAGMENT

# Run by the real pylance in a clean interpreter: every dataset under the bucket, every version,
# its row count (from the manifest) and its rows, keyed by dataset key and version. Rows are
# "unreadable" where the data files are not there: pylance's distributed-commit test commits
# fragments written under another dataset; lance_ops must then fail to read them too.
_PYLANCE_READ = r"""
import json, sys
import boto3, lance
bucket, options = sys.argv[1], json.loads(sys.argv[2])
s3 = boto3.client("s3", endpoint_url=options["aws_endpoint"], region_name=options["aws_region"],
                  aws_access_key_id=options["aws_access_key_id"],
                  aws_secret_access_key=options["aws_secret_access_key"])
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])]
roots = sorted({k.split("/_versions/")[0] for k in keys if "/_versions/" in k})

def rows(ds):
    try:
        return ds.to_table().to_pylist()
    except Exception:
        return "unreadable"

out = {}
for root in roots:
    ds = lance.dataset(f"s3://{bucket}/{root}", storage_options=options)
    out[root] = {str(v["version"]): [ds.checkout_version(v["version"]).count_rows(),
                                     rows(ds.checkout_version(v["version"]))]
                 for v in ds.versions()}
print(json.dumps(out, sort_keys=True, default=str))
"""


def _rows(ds: lance_ops.LanceDataset) -> Any:
    try:
        return ds.to_table().to_pylist()
    except OSError:
        return "unreadable"


def _lance_ops_read(bucket: str, roots: list[str], options: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for root in roots:
        ds = lance_ops.dataset(f"s3://{bucket}/{root}", storage_options=options)
        versions = {str(v["version"]): ds.checkout_version(v["version"]) for v in ds.versions()}
        out[root] = {number: [at.count_rows(), _rows(at)] for number, at in versions.items()}
    return json.loads(json.dumps(out, sort_keys=True, default=str))


Deleter = Callable[[Any, str], None]


def _checked_delete(original: Deleter, config: dict[str, str]) -> Deleter:
    options = {k: v for k, v in config.items() if k != "dynamodb_endpoint"}

    def delete_bucket(s3: Any, bucket_name: str) -> None:
        if s3.list_objects(Bucket=bucket_name).get("Contents"):  # NoSuchBucket before the first run
            answer = subprocess.run(
                [sys.executable, "-c", _PYLANCE_READ, bucket_name, json.dumps(options)],
                capture_output=True,
                text=True,
                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            )
            assert answer.returncode == 0, f"pylance could not read the bucket:\n{answer.stderr[-3000:]}"
            by_pylance = json.loads(answer.stdout)
            by_lance_ops = _lance_ops_read(bucket_name, sorted(by_pylance), options)
            assert by_pylance, "no dataset left in the bucket to check with pylance"
            assert by_lance_ops == by_pylance, "pylance reads the datasets differently"
            print(f"\npylance read {len(by_pylance)} datasets alike: {sorted(by_pylance)}")
        original(s3, bucket_name)

    return delete_bucket


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: pylance's integration tests (need S3)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    endpoint = os.environ[ENDPOINT_VARIABLE]
    modules: dict[str, types.ModuleType] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            modules[module.__name__] = module
    for module in modules.values():
        assert module.lance is LANCE, "the upstream file did not get lance_ops as `lance`"
        config = getattr(module, "CONFIG", None)
        if isinstance(config, dict):
            config.update({key: endpoint for key in ENDPOINT_KEYS if key in config})
            if callable(getattr(module, "delete_bucket", None)):
                module.delete_bucket = _checked_delete(module.delete_bucket, config)
