"""Calls pylance's own tests use that lance_ops lacked (L17): each against pylance, two-way where
data is written."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.dataset import AutoCleanupConfig
from lance_ops.progress import FileSystemFragmentWriteProgress

# --- LanceFragment.create(progress=) -------------------------------------------------------------


@pytest.mark.interop
def test_fragment_create_progress_files_as_pylance(tmp_path: Path) -> None:
    """``begin`` names the fragment's id and data file (the ``fragment_{id}.json`` pylance writes)."""
    data = pa.table({"a": range(100)})
    written = {}
    for name, module, tracker in (
        ("ours", lance_ops, FileSystemFragmentWriteProgress),
        ("theirs", lance, lance.progress.FileSystemFragmentWriteProgress),
    ):
        progress = tracker(str(tmp_path / f"{name}-progress"), metadata={"k": "v"})
        fragment = module.LanceFragment.create(str(tmp_path / name), data, fragment_id=3, progress=progress)
        assert not (tmp_path / f"{name}-progress" / "fragment_3.in_progress").exists()
        recorded = json.loads((tmp_path / f"{name}-progress" / "fragment_3.json").read_text())
        assert recorded["id"] == 3
        assert [f["path"] for f in recorded["files"]] == [f.path for f in fragment.files]
        written[name] = fragment
    lance_ops.LanceDataset.commit(
        str(tmp_path / "ours"), lance_ops.LanceOperation.Overwrite(data.schema, [written["ours"]])
    )
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(data)


# --- update_columns errors ------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize(
    ("column", "words"),
    [
        ("nonexistent_column", "does not exist"),
        ("_rowaddr", "reserved metadata column and cannot be updated"),
    ],
)
def test_update_columns_errors_as_pylance(tmp_path: Path, column: str, words: str) -> None:
    data = pa.table({"id": [1, 2, 3], "value": [10, 20, 30]})
    update = pa.table({"_rowid": pa.array([0, 1], pa.uint64()), column: pa.array([9, 8], pa.uint64())})
    for module in (lance_ops, lance):
        fragment = module.write_dataset(data, str(tmp_path / module.__name__)).get_fragment(0)
        with pytest.raises(ValueError, match=words):
            fragment.update_columns(update)


# --- auto cleanup on / off, transactions, sample, default scan options ----------------------------


@pytest.mark.interop
def test_enable_disable_auto_cleanup_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": range(10)})
    config = AutoCleanupConfig(interval=2, older_than_seconds=60)
    seen = {}
    for module in (lance_ops, lance):
        ds = module.write_dataset(data, str(tmp_path / module.__name__))
        ds.optimize.enable_auto_cleanup(config)
        enabled = dict(ds.config())
        ds.optimize.disable_auto_cleanup()
        seen[module.__name__] = (enabled, dict(ds.config()), ds.version)
    assert seen["lance_ops"] == seen["lance"]
    assert seen["lance"][0] == {"lance.auto_cleanup.interval": "2", "lance.auto_cleanup.older_than": "60s"}
    assert lance.dataset(str(tmp_path / "lance_ops")).config() == {}


@pytest.mark.interop
def test_get_transactions_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": [1]})
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        module.write_dataset(data, uri, commit_message="first")
        module.write_dataset(data, uri, mode="append", transaction_properties={"k": "v"})
        module.dataset(uri).delete("a > 100")
    ours, theirs = lance_ops.dataset(str(tmp_path / "lance_ops")), lance.dataset(str(tmp_path / "lance"))
    for recent in (10, 2):
        got = [t.transaction_properties for t in ours.get_transactions(recent)]
        assert got == [t.transaction_properties for t in theirs.get_transactions(recent)]
    assert [t.transaction_properties for t in ours.get_transactions()] == [
        {},
        {"k": "v"},
        {"__lance_commit_message": "first"},
    ]
    # pylance reads the transactions lance_ops wrote
    assert lance.dataset(str(tmp_path / "lance_ops")).read_transaction(1).transaction_properties == {
        "__lance_commit_message": "first"
    }


def test_sample(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"x": range(0, 60, 10), "y": range(6)}), str(tmp_path / "d"))
    ds.delete("y = 2")
    sampled = ds.sample(3)
    assert (sampled.num_rows, sampled.num_columns) == (3, 2)
    assert set(sampled["y"].to_pylist()) <= {0, 1, 3, 4, 5}
    ordered = ds.sample(5, columns=["x"], randomize_order=False, seed=1)
    assert ordered["x"].to_pylist() == [0, 10, 30, 40, 50]
    assert ds.sample(2, seed=7).equals(ds.sample(2, seed=7))
    with pytest.raises(ValueError, match="cannot sample 6 rows"):
        ds.sample(6)


@pytest.mark.interop
def test_default_scan_options_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(pa.table({"a": range(10), "b": range(10)}), uri, max_rows_per_file=4)
    for options in ({"with_row_id": True}, {"with_row_address": True}, {"columns": ["b"], "filter": "a > 6"}):
        ours = lance_ops.dataset(
            uri, default_scan_options=options, read_params={"cache_repetition_index": True}
        )
        theirs = lance.dataset(uri, default_scan_options=options)
        assert ours.schema == theirs.schema
        assert ours.to_table().equals(theirs.to_table())
        # explicit arguments win over the defaults
        assert ours.to_table(columns=["a"], filter="a < 2").equals(
            theirs.to_table(columns=["a"], filter="a < 2")
        )
        assert ours.checkout_version(1).schema == theirs.schema
    assert lance_ops.dataset(uri).schema.names == ["a", "b"]


# --- commit-level API: UpdateMap / UpdateConfig, Transaction, DataReplacementGroup, DeletionFile ---


@pytest.mark.interop
def test_update_config_transaction_as_pylance(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("a", pa.int64(), metadata={"fa": "0"}), pa.field("b", pa.int64())])
    data = pa.table({"a": [1, 2], "b": [3, 4]}, schema=schema)
    results = {}
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        ds = module.write_dataset(data, uri)
        op = module.LanceOperation
        steps = [
            op.UpdateConfig(config_updates=op.UpdateMap({"k1": "v1", "k2": "v2"})),
            op.UpdateConfig(config_updates=op.UpdateMap({"k1": None})),
            op.UpdateConfig(schema_metadata_updates=op.UpdateMap({"s": "x"})),
            op.UpdateConfig(field_metadata_updates={0: op.UpdateMap({"fa": "1", "n": "y"}, replace=True)}),
            op.UpdateConfig(table_metadata_updates=op.UpdateMap({"t": "z"})),
        ]
        for step in steps:
            transaction = module.Transaction(
                read_version=ds.version, operation=step, transaction_properties={"p": "q"}
            )
            ds = module.LanceDataset.commit(uri, transaction)
        results[module.__name__] = (ds.version, ds.config(), ds.schema_metadata, ds.metadata, ds.schema)
        assert ds.read_transaction(ds.version).transaction_properties == {"p": "q"}
    assert results["lance_ops"] == results["lance"]
    assert lance.dataset(str(tmp_path / "lance_ops")).schema.field("a").metadata == {b"fa": b"1", b"n": b"y"}


@pytest.mark.interop
def test_data_replacement_group_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(pa.table({"a": range(100), "b": [str(i) for i in range(100)]}), uri)
    new = pa.table({"a": range(100, 200), "b": [str(i) for i in range(100, 200)]})
    data_file = lance_ops.LanceFragment.create(uri, new).files[0]
    group = lance_ops.LanceOperation.DataReplacementGroup(0, data_file)
    assert (group.fragment_id, group.new_file) == (0, data_file)
    ds = lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.DataReplacement([group]), read_version=1)
    assert ds.to_table().equals(new)
    assert lance.dataset(uri).to_table().equals(new)


def test_deletion_file_and_row_id_meta_as_pylance(tmp_path: Path) -> None:
    from lance.fragment import DeletionFile as TheirDeletionFile

    from lance_ops.fragment import DeletionFile, FragmentMetadata

    ours = DeletionFile(read_version=1, id=123, file_type="array", num_deleted_rows=10, base_id=456)
    theirs = TheirDeletionFile(read_version=1, id=123, file_type="array", num_deleted_rows=10, base_id=456)
    assert ours.asdict() == theirs.asdict()
    assert ours.path(0) == theirs.path(0) == "_deletions/0-1-123.arrow"
    assert ours.path(3, base_uri="/x/y") == theirs.path(3, base_uri="/x/y")
    with pytest.raises(ValueError, match="'array' or 'bitmap'"):
        DeletionFile(read_version=1, id=1, file_type="csv")
    metadata = FragmentMetadata(id=1, files=[], physical_rows=1000, deletion_file=ours)
    assert FragmentMetadata.from_json(json.dumps(metadata.to_json())).deletion_file == ours
    for stable in (False, True):
        ds = lance_ops.write_dataset(
            pa.table({"a": range(10)}), str(tmp_path / f"s{stable}"), enable_stable_row_ids=stable
        )
        ds.delete("a < 5")
        meta = ds.get_fragments()[0].metadata
        assert (meta.row_id_meta is not None) == stable
        assert meta.deletion_file.path(meta.id).startswith("_deletions/0-1-")
        assert (
            lance.dataset(str(tmp_path / f"s{stable}")).get_fragments()[0].metadata.row_id_meta is not None
        ) == stable


def test_format_fragment(tmp_path: Path) -> None:
    from lance_ops.debug import format_fragment, format_manifest, format_schema, list_transactions

    ds = lance_ops.write_dataset(pa.table({"a": range(3), "s": [{"x": 1}] * 3}), str(tmp_path / "d"))
    text = format_fragment(ds.get_fragments()[0].metadata, ds)
    assert "major_version: 2" in text and "minor_version: 2" in text and "physical_rows: 3" in text
    assert "name: 'x'" in text  # a 2.2 file lists leaf ids; the struct is shown with its child
    assert format_fragment(ds.get_fragments()[0], ds) == text
    assert "name: 's'" in format_schema(ds)
    assert text.strip().splitlines()[1] in format_manifest(ds)
    assert list_transactions(ds) == ["version 1: Overwrite on version 0, properties {}"]


# --- LanceFragment.create_from_file / merge / open_session ----------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("nested", [False, True])
def test_create_from_file_as_pylance(tmp_path: Path, nested: bool) -> None:
    """Flat columns: the fragment pylance makes. A struct in a 2.2 file: pylance 14 lists every
    field id against the file's leaf columns and its own commit refuses that; lance_ops lists the
    leaves, which pylance reads."""
    import uuid

    from lance_ops.file import LanceFileWriter

    data = pa.table({"a": range(800), "b": range(800)})
    if nested:
        data = data.append_column("s", pa.array([{"x": i} for i in range(800)]))
    uri = str(tmp_path / "d")
    ds = lance_ops.write_dataset([], uri, schema=data.schema)
    for expected_id in (0, 1):
        name = f"{uuid.uuid4()}.lance"
        with LanceFileWriter(str(tmp_path / "d" / "data" / name), page_statistics=False) as writer:
            writer.write_batch(data)
        fragment = lance_ops.LanceFragment.create_from_file(name, ds, 0)
        if not nested:
            theirs = lance.fragment.LanceFragment.create_from_file(name, lance.dataset(uri), 0)
            assert fragment.files[0].fields == tuple(theirs.files[0].fields)
            assert fragment.physical_rows == theirs.physical_rows
        ds = lance_ops.LanceDataset.commit(
            uri, lance_ops.LanceOperation.Append([fragment]), read_version=ds.version
        )
        assert ds.get_fragments()[-1].fragment_id == expected_id
    assert lance.dataset(uri).to_table().equals(pa.concat_tables([data, data]))
    with pytest.raises(FileNotFoundError):
        lance_ops.LanceFragment.create_from_file("missing.lance", ds, 0)


@pytest.mark.interop
def test_fragment_merge_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"x": [1, 2, 3, 4], "y": ["a", "b", "c", "d"]})
    new = pa.table({"x": [3, 1, 9], "z": ["C", "A", "N"]})
    tables = {}
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        ds = module.write_dataset(data, uri, max_rows_per_file=2)
        ds.delete("x = 2")
        merged, schema = [], None
        for fragment in ds.get_fragments():
            metadata, schema = fragment.merge(new, "x")
            merged.append(metadata)
        ds = module.LanceDataset.commit(
            uri, module.LanceOperation.Merge(merged, schema), read_version=ds.version
        )
        by_rowid = []
        for fragment in ds.get_fragments():
            keys = fragment.scanner(with_row_id=True, columns=[]).to_table()
            keys = keys.add_column(0, "w", [[i * 10 for i in range(len(keys))]])
            metadata, schema = fragment.merge(keys, "_rowid")
            by_rowid.append(metadata)
        ds = module.LanceDataset.commit(
            uri, module.LanceOperation.Merge(by_rowid, schema), read_version=ds.version
        )
        tables[module.__name__] = ds.to_table()
    assert tables["lance_ops"].equals(tables["lance"])
    assert tables["lance"].column("z").to_pylist() == ["A", "C", None]
    assert lance.dataset(str(tmp_path / "lance_ops")).to_table().equals(tables["lance"])
    with pytest.raises(ValueError, match="already in the dataset"):
        lance_ops.dataset(str(tmp_path / "lance_ops")).get_fragments()[0].merge(
            new.rename_columns(["x", "y"]), "x"
        )


def test_open_session(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"a": range(100), "b": range(100, 200)}), str(tmp_path / "d"))
    fragment = ds.get_fragments()[0]
    session = fragment.open_session(columns=["a", "b"], with_row_address=False)
    assert session.take(range(1, 50)).equals(fragment.take(indices=range(1, 50), columns=["a", "b"]))
    with_address = fragment.open_session(columns=["b"], with_row_address=True).take([3, 1])
    assert with_address.to_pydict() == {"b": [103, 101], "_rowaddr": [3, 1]}


# --- error classes and the words callers match --------------------------------------------------


def _udf_wrong_schema(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch([pa.array([1] * batch.num_rows)], names=["other"])


@pytest.mark.interop
@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (
            lambda ds, m: ds.alter_columns({"path": "x", "data_type": pa.int8()}),
            Exception,
            "Can't cast value 1024 to type Int8",
        ),
        (
            lambda ds, m: ds.alter_columns({"path": "x", "data_type": pa.string()}),
            Exception,
            'Cannot cast column "x" from Int32 to Utf8',
        ),
        (lambda ds, m: ds.alter_columns({"path": "q", "name": "z"}), Exception, 'Column "q" does not exist'),
        (lambda ds, m: ds.alter_columns({"path": "x", "type": "string"}), ValueError, "Unknown key: type"),
        (
            lambda ds, m: ds.alter_columns({"path": "x"}),
            ValueError,
            "At least one of name, nullable, or data_type must be specified",
        ),
        (
            lambda ds, m: ds.add_columns(pa.field("x", pa.int32())),
            Exception,
            "Column x already exists in the dataset",
        ),
        (
            lambda ds, m: ds.add_columns(
                m.batch_udf(output_schema=pa.schema([pa.field("z", pa.int64())]))(_udf_wrong_schema)
            ),
            Exception,
            "Output schema of function does not match the expected schema",
        ),
        (
            lambda ds, m: ds.add_columns(
                iter([pa.record_batch([pa.array([1])], ["f"])]),
                reader_schema=pa.schema([pa.field("f", pa.int64())]),
            ),
            OSError,
            "Stream ended before producing values for all rows in dataset",
        ),
        (
            lambda ds, m: ds.add_columns(
                iter([pa.record_batch([pa.array(range(5))], ["f"])]),
                reader_schema=pa.schema([pa.field("f", pa.int64())]),
            ),
            OSError,
            "Stream produced more values than expected for dataset",
        ),
        (lambda ds, m: ds.to_table(filter="y BETWEEN 10 AND 20"), ValueError, "Invalid user input: "),
        (lambda ds, m: ds.to_table(filter="y > 10"), ValueError, "Invalid user input: "),
    ],
)
def test_errors_as_pylance(tmp_path: Path, call, error: type, words: str) -> None:  # type: ignore[no-untyped-def]
    data = pa.table({"x": pa.array([1, 2, 1024], pa.int32()), "y": ["a", "b", "c"]})
    for module in (lance_ops, lance):
        ds = module.write_dataset(data, str(tmp_path / module.__name__))
        with pytest.raises(error, match=words):
            call(ds, module)
        assert module.dataset(str(tmp_path / module.__name__)).version == 1  # nothing committed


@pytest.mark.interop
def test_stale_overwrite_is_an_oserror_naming_the_version(tmp_path: Path) -> None:
    table = pa.table({"a": range(10)})
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        operation = module.LanceOperation.Overwrite(table.schema, [module.LanceFragment.create(uri, table)])
        first = module.LanceDataset.commit(uri, operation, max_retries=0)
        module.LanceDataset.commit(uri, operation, read_version=first.version, max_retries=0)
        with pytest.raises(OSError, match=f"Commit conflict for version {first.version + 1}"):
            module.LanceDataset.commit(uri, operation, read_version=first.version, max_retries=0)


def test_merge_columns_refuses_a_checkpoint(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"a": range(10)}), str(tmp_path / "d"))

    @lance_ops.batch_udf(checkpoint_file=tmp_path / "cache.sqlite")
    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch

    with pytest.raises(ValueError, match="A checkpoint file cannot be used"):
        ds.get_fragments()[0].merge_columns(udf, columns=["a"])


@pytest.mark.interop
def test_rewrite_group_assigns_ids_as_pylance(tmp_path: Path) -> None:
    """A hand-made compaction (pylance's create_from_file example): a new fragment with id 0 gets
    the next id, as in pylance."""
    results = {}
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        ds = module.write_dataset(pa.table({"a": range(20)}), uri, max_rows_per_file=10)
        new = module.LanceFragment.create(uri, ds.to_table())
        group = module.LanceOperation.RewriteGroup(
            old_fragments=[f.metadata for f in ds.get_fragments()], new_fragments=[new]
        )
        ds = module.LanceDataset.commit(
            uri, module.LanceOperation.Rewrite(groups=[group], rewritten_indices=[]), read_version=ds.version
        )
        results[module.__name__] = ([f.fragment_id for f in ds.get_fragments()], ds.to_table())
    assert results["lance_ops"][0] == results["lance"][0] == [2]
    assert results["lance_ops"][1].equals(results["lance"][1])
    assert lance.dataset(str(tmp_path / "lance_ops")).to_table().equals(results["lance"][1])


@pytest.mark.interop
def test_fragment_create_of_no_rows_is_an_oserror(tmp_path: Path) -> None:
    for module in (lance_ops, lance):
        with pytest.raises(OSError):
            module.LanceFragment.create(
                str(tmp_path / module.__name__), pa.table({"a": pa.array([], pa.int64())})
            )


def test_default_scan_options_keep_strict_batches(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(pa.table({"a": range(10)}), uri, max_rows_per_file=4)
    ds = lance_ops.dataset(uri, default_scan_options={"batch_size": 3})
    assert [b.num_rows for b in ds.to_batches()] == [3, 1, 3, 1, 2]
    assert [b.num_rows for b in ds.to_batches(strict_batch_size=True)] == [3, 3, 3, 1]
