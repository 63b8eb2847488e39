"""L20: a clustering of a dataset on S3 spills where it is told: the local temporary directory by
default (what a Spark executor or a Dagster run has), or an object-store prefix given by
``cluster_spill_location`` / config ``lance-ops.cluster-spill-location`` (for workers without local
disk), reached with the dataset's storage options; the spill files are gone afterwards."""

from __future__ import annotations

from typing import Any

import lance
import numpy as np
import pytest

import lance_ops
from lance_ops.io import LocalStore, object_store
from lance_ops.ops import clustering
from tests.s3.conftest import S3Location
from tests.table.test_clustering import arrival

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def spills(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str]]:
    """Records (store, path) of every spill file the clustering opens."""
    opened: list[tuple[Any, str]] = []
    real = clustering.SpillFile

    def recording(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append((kwargs.get("store"), path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(clustering, "SpillFile", recording)
    return opened


@pytest.mark.parametrize("how", ["default", "option", "config"])
def test_spill_location(s3: S3Location, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    uri = s3.uri()
    data = arrival(3000).drop_columns(["tags"])
    ds = lance_ops.write_dataset(data, uri, storage_options=s3.storage_options, max_rows_per_file=500)
    prefix = f"{s3.uri_prefix}/spill"
    options: dict[str, Any] = {}
    if how == "option":
        options["cluster_spill_location"] = prefix
    elif how == "config":
        ds.update_config({"lance-ops.cluster-spill-location": prefix})
    opened = spills(monkeypatch)
    ds.optimize.compact_files(
        target_rows_per_fragment=500, cluster_by=["x"], cluster_memory_bytes=20_000, **options
    )
    assert len(opened) >= 2
    store, root = object_store(prefix, s3.storage_options)
    if how == "default":
        assert all(isinstance(s, LocalStore) for s, _ in opened)
    else:
        assert all(not isinstance(s, LocalStore) and path.startswith(root) for s, path in opened)
    assert not store.walk(root)  # nothing left behind
    got = lance.dataset(uri, storage_options=s3.storage_options).to_table()
    assert np.all(np.diff(got["x"].to_numpy()) >= 0)
    assert got.sort_by("id").equals(data)
