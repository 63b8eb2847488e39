"""pylance API parity: one scenario per call, run against pylance and lance_ops side by side.

Each scenario is a function ``(module, tmp_path) -> value`` written once against pylance's API and
run with ``module`` = ``lance`` and ``module`` = ``lance_ops``: both must return the same
(normalised) value, or both raise; then our exception must be an instance of the builtin class
pylance raised and a :class:`LanceOpsError`. Calls whose results are implementation-specific
(plan text, schema reprs) are compared on their shape. Two-way scenarios check that what one
implementation writes (fragments, config edits, checkpoints) the other reads.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import lance.file
import lance.schema
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

import lance_ops
import lance_ops.file
import lance_ops.schema
from lance_ops.errors import LanceOpsError

pytestmark = pytest.mark.interop

Scenario = Callable[[Any, Path], Any]

TABLE = pa.table(
    {
        "id": pa.array(range(12), pa.int64()),
        "s": [f"x{i}" for i in range(12)],
        "st": pa.array([{"a": i, "b": str(i)} for i in range(12)]),
        "tags": pa.array([["a", "b"] if i % 2 else ["c"] for i in range(12)]),
    }
)


def _dataset(mod: Any, tmp_path: Path, **kwargs: Any) -> Any:
    """Three fragments of four rows, rows 1 and 5 deleted."""
    ds = mod.write_dataset(TABLE, str(tmp_path / "ds"), max_rows_per_file=4, **kwargs)
    ds.delete("id IN (1, 5)")
    return ds


def _rows(table: pa.Table) -> dict[str, list[Any]]:
    return table.to_pydict()


def _file(mod: Any) -> Any:
    return lance.file if mod is lance else lance_ops.file


def _schema_module(mod: Any) -> Any:
    return lance.schema if mod is lance else lance_ops.schema


# ---------------------------------------------------------------- scanner

SCANNER: dict[str, Scenario] = {
    "scanner.to_table": lambda m, p: _rows(
        _dataset(m, p).scanner(columns=["id"], filter="id > 5").to_table()
    ),
    "scanner.to_batches": lambda m, p: [
        b.num_rows for b in _dataset(m, p).scanner(columns=["id"], batch_size=3).to_batches()
    ],
    "scanner.to_reader": lambda m, p: _rows(_dataset(m, p).scanner(columns=["s"]).to_reader().read_all()),
    "scanner.count_rows": lambda m, p: _dataset(m, p).scanner(filter="id % 2 = 0").count_rows(),
    "scanner.count_rows with limit": lambda m, p: (
        _dataset(m, p).scanner(filter="id > 1", limit=3).count_rows()
    ),
    "scanner.projected_schema": lambda m, p: str(
        _dataset(m, p).scanner(columns=["id", "st.a"], with_row_id=True).projected_schema
    ),
    "scanner.dataset_schema": lambda m, p: _dataset(m, p).scanner(columns=["id"]).dataset_schema.names,
    "scanner.explain_plan": lambda m, p: isinstance(
        _dataset(m, p).scanner(filter="id > 1").explain_plan(), str
    ),
    "columns dict of SQL": lambda m, p: _rows(
        _dataset(m, p).to_table(columns={"double": "id * 2", "up": "upper(s)", "id": "id"}, limit=4)
    ),
    "columns virtual": lambda m, p: _rows(
        _dataset(m, p).to_table(columns=["id", "_rowid", "_rowaddr", "_rowoffset"], filter="id > 2")
    ),
    "columns virtual in SQL": lambda m, p: _rows(
        _dataset(m, p).to_table(columns={"r": "_rowaddr", "i": "id"})
    ),
    "columns struct path": lambda m, p: _rows(_dataset(m, p).to_table(columns=["st.b", "id"], limit=3)),
    "with_row_id and address": lambda m, p: _rows(
        _dataset(m, p).to_table(columns=["id"], with_row_id=True, with_row_address=True, offset=2, limit=3)
    ),
    "limit offset filter": lambda m, p: _rows(_dataset(m, p).to_table(filter="id > 2", offset=2, limit=4)),
    "fragments=": lambda m, p: _rows(
        (ds := _dataset(m, p))
        .scanner(columns=["id", "_rowoffset"], fragments=ds.get_fragments()[1:])
        .to_table()
    ),
    "tuning arguments": lambda m, p: _rows(
        _dataset(m, p).to_table(
            columns=["id"], batch_readahead=4, scan_in_order=True, prefilter=True, use_stats=True
        )
    ),
    "to_batches batch_size": lambda m, p: [b.num_rows for b in _dataset(m, p).to_batches(batch_size=5)],
    "head": lambda m, p: _rows(_dataset(m, p).head(3, columns=["id"])),
    "get_fragments": lambda m, p: [(f.fragment_id, f.count_rows()) for f in _dataset(m, p).get_fragments()],
}


# ---------------------------------------------------------------- write_dataset inputs


def _write(data: Any, **kwargs: Any) -> Scenario:
    def scenario(mod: Any, tmp_path: Path) -> Any:
        source = data(mod, tmp_path) if callable(data) else data
        return _rows(mod.write_dataset(source, str(tmp_path / "w"), **kwargs).to_table())

    return scenario


def _relative(mod: Any, tmp_path: Path) -> Any:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        mod.write_dataset(TABLE, "rel")
        return mod.dataset("rel").count_rows(), mod.dataset(str(tmp_path / "rel")).count_rows()
    finally:
        os.chdir(cwd)


def _home(mod: Any, tmp_path: Path) -> Any:
    """``~`` is the home directory for every file of the dataset (data files included), on write
    and read; the other implementation opens the result by its absolute path."""
    home, cwd = os.environ.get("HOME"), os.getcwd()
    os.environ["HOME"] = str(tmp_path / "home")
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")  # a path left unexpanded would land here
    try:
        mod.write_dataset(TABLE, "~/in_home")
        other = lance_ops if mod is lance else lance
        return (
            mod.dataset("~/in_home").count_rows(),
            other.dataset(str(tmp_path / "home" / "in_home")).count_rows(),
            sorted(p.name for p in (tmp_path / "home" / "in_home").iterdir()),
            list((tmp_path / "elsewhere").iterdir()),
        )
    finally:
        os.chdir(cwd)
        if home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = home


INPUTS: dict[str, Scenario] = {
    "Table": _write(TABLE),
    "RecordBatch": _write(TABLE.to_batches()[0]),
    "RecordBatchReader": _write(lambda m, p: TABLE.to_reader(max_chunksize=5)),
    "iterable of batches + schema": _write(
        lambda m, p: iter(TABLE.to_batches(max_chunksize=5)), schema=TABLE.schema
    ),
    "pandas": _write(pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})),
    "list of dicts": _write([{"a": 1, "b": "x"}, {"a": 2, "b": None}]),
    "dict of lists": _write({"a": [1, 2], "b": ["x", "y"]}),
    "LanceDataset": _write(lambda m, p: _dataset(m, p)),
    "pyarrow dataset": _write(pads.dataset(TABLE)),
    "LanceScanner": _write(lambda m, p: _dataset(m, p).scanner(columns=["id", "s"], filter="id > 3")),
    "pyarrow scanner": _write(lambda m, p: pads.dataset(TABLE).scanner(columns=["id"])),
    "relative path": _relative,
    "~ path": _home,
}


# ---------------------------------------------------------------- fragments


def _fragment_create(mod: Any, tmp_path: Path) -> Any:
    uri = str(tmp_path / "frag")
    first = mod.LanceFragment.create(uri, TABLE.slice(0, 5))
    ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Overwrite(TABLE.schema, [first]))
    second = mod.LanceFragment.create(uri, TABLE.slice(5), fragment_id=3)
    ds = mod.LanceDataset.commit(uri, mod.LanceOperation.Append([second]), read_version=ds.version)
    return first.id, second.id, [f.fragment_id for f in ds.get_fragments()], _rows(ds.to_table())


def _merge_columns(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    fragments, schema = [], None
    for fragment in ds.get_fragments():
        metadata, schema = fragment.merge_columns({"double": "id * 2"}, ["id"])
        fragments.append(metadata)
    ds = mod.LanceDataset.commit(ds.uri, mod.LanceOperation.Merge(fragments, schema), read_version=ds.version)
    return _rows(ds.to_table(columns=["id", "double"])), [f.name() for f in schema.fields()]


def _merge_udf(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    fragment = ds.get_fragments()[0]

    def negate(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pc.negate(batch["id"])], ["neg"])

    metadata, schema = fragment.merge_columns(negate, ["id"])
    return len(metadata.files), schema.field("neg").id()


def _update_columns(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    fragment = ds.get_fragments()[1]
    ids = fragment.to_table(columns=["_rowid"])["_rowid"].to_pylist()
    updates = pa.table({"_rowid": pa.array(ids[:2], pa.uint64()), "s": ["new0", "new1"]})
    metadata, fields = fragment.update_columns(updates)
    operation = mod.LanceOperation.Update(updated_fragments=[metadata], fields_modified=fields)
    ds = mod.LanceDataset.commit(ds.uri, operation, read_version=ds.version)
    return fields, _rows(ds.to_table(columns=["id", "s"]))


def _fragment_delete(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    fragment = ds.get_fragments()[0]
    updated = fragment.delete("id = 2")
    gone = ds.get_fragments()[1].delete("id >= 0")
    ds = mod.LanceDataset.commit(
        ds.uri,
        mod.LanceOperation.Delete(
            [updated], [ds.get_fragments()[1].fragment_id], "id = 2 OR id >= 4 AND id < 8"
        ),
        read_version=ds.version,
    )
    return gone, updated.deletion_file.num_deleted_rows, _rows(ds.to_table(columns=["id"]))


FRAGMENTS: dict[str, Scenario] = {
    "LanceFragment.create + commit": _fragment_create,
    "merge_columns (SQL) + Merge": _merge_columns,
    "merge_columns (UDF)": _merge_udf,
    "update_columns + Update": _update_columns,
    "fragment.delete + Delete": _fragment_delete,
    "fragment.to_table": lambda m, p: _rows(
        _dataset(m, p).get_fragments()[1].to_table(columns=["id"], filter="id > 4")
    ),
    "fragment.to_batches": lambda m, p: [
        b.num_rows for b in _dataset(m, p).get_fragments()[0].to_batches(columns=["id"], batch_size=2)
    ],
    "fragment.count_rows": lambda m, p: [f.count_rows("id % 2 = 0") for f in _dataset(m, p).get_fragments()],
    "fragment.take": lambda m, p: _rows(_dataset(m, p).get_fragments()[1].take([0, 2], columns=["id"])),
    "fragment.scanner": lambda m, p: _rows(
        _dataset(m, p).get_fragments()[2].scanner(columns=["id", "_rowoffset"], filter="id < 11").to_table()
    ),
    "fragment.head": lambda m, p: _rows(_dataset(m, p).get_fragments()[2].head(2)),
    "fragment properties": lambda m, p: [
        (f.fragment_id, f.physical_rows, f.num_deletions, f.metadata.num_rows)
        for f in _dataset(m, p).get_fragments()
    ],
    "fragment files": lambda m, p: [
        (len(f.data_files()), f.deletion_file() is not None) for f in _dataset(m, p).get_fragments()
    ],
    "top-level LanceFragment": lambda m, p: isinstance(_dataset(m, p).get_fragments()[0], m.LanceFragment),
    "FragmentMetadata JSON keys": lambda m, p: sorted(_dataset(m, p).get_fragments()[0].metadata.to_json()),
}


@pytest.mark.parametrize(
    ("writer", "reader"), [(lance, lance_ops), (lance_ops, lance)], ids=["ours-read", "theirs-read"]
)
def test_fragment_metadata_json_round_trips_across(writer: Any, reader: Any, tmp_path: Path) -> None:
    """Fragments written and serialised by one implementation commit through the other."""
    uri = str(tmp_path / "x")
    writer.write_dataset(TABLE.slice(0, 2), uri)
    fragment = writer.LanceFragment.create(uri, TABLE.slice(2, 5))
    text = json.dumps(fragment.to_json())
    parsed = reader.FragmentMetadata.from_json(text)
    assert parsed.to_json() == json.loads(text)
    ds = reader.LanceDataset.commit(uri, reader.LanceOperation.Append([parsed]), read_version=1)
    assert writer.dataset(uri).to_table() == TABLE.slice(0, 7)
    assert ds.count_rows() == 7


# ---------------------------------------------------------------- UDFs


def _udf(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)

    @mod.batch_udf(output_schema=pa.schema([("sq", pa.int64())]))
    def square(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pc.multiply(batch["id"], batch["id"])], ["sq"])

    ds.add_columns(square, read_columns=["id"])
    return _rows(ds.to_table(columns=["id", "sq"]))


def _checkpoint(mod: Any, tmp_path: Path) -> Any:
    ds = mod.write_dataset(TABLE, str(tmp_path / "ck"), max_rows_per_file=4)
    calls: list[int] = []
    failing = [True]
    path = str(tmp_path / "checkpoint.sqlite")

    @mod.batch_udf(output_schema=pa.schema([("z", pa.int64())]), checkpoint_file=path)
    def double(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch["id"][0].as_py())
        if failing[0] and batch["id"][0].as_py() >= 8:
            raise RuntimeError("interrupted")
        return pa.record_batch([pc.multiply(batch["id"], 2)], ["z"])

    with pytest.raises(Exception, match="interrupted"):
        ds.add_columns(double, batch_size=2)
    first = list(calls)
    failing[0] = False
    calls.clear()
    ds = mod.dataset(ds.uri)
    ds.add_columns(double, batch_size=2)
    return first, calls, os.path.exists(path), ds.to_table()["z"].to_pylist()


def _add_values(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    ds.add_columns(pa.table({"z": pa.array(range(100, 110))}).to_reader())
    return _rows(ds.to_table(columns=["id", "z"]))


def _add_too_few_values(mod: Any, tmp_path: Path) -> Any:
    _dataset(mod, tmp_path).add_columns(pa.table({"z": pa.array(range(3))}).to_reader())


UDFS: dict[str, Scenario] = {
    "batch_udf(output_schema=)": _udf,
    "batch_udf(checkpoint_file=) resumes": _checkpoint,
    "add_columns(reader)": _add_values,
    "add_columns(reader) too few rows": _add_too_few_values,
}


# ---------------------------------------------------------------- config and metadata


def _config(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    first = ds.update_config({"a": "1", "b": "2"})
    ds.delete_config_keys(["a", "missing"])
    replaced = ds.update_config({"c": "3"}, replace=True)
    return first, replaced, ds.config(), ds.version


def _metadata(mod: Any, tmp_path: Path) -> Any:
    ds = _dataset(mod, tmp_path)
    out = [ds.update_metadata({"owner": "me", "x": "1"}), ds.update_metadata({"x": None})]
    out.append(ds.update_schema_metadata({"k": "v"}))
    ds.update_field_metadata({"st.a": {"unit": "m"}, "id": {"pk": "yes"}})
    reopened = mod.dataset(ds.uri)
    return (
        out,
        reopened.metadata,
        reopened.schema.metadata,
        reopened.schema.field("st").type.field("a").metadata,
        reopened.schema.field("id").metadata,
        reopened.version,
    )


def _auto_cleanup(mod: Any, tmp_path: Path) -> Any:
    uri = str(tmp_path / "ac")
    ds = mod.write_dataset(TABLE, uri, auto_cleanup_options={"interval": 3, "older_than_seconds": 0})
    history = [ds.config()]
    for n in range(5):
        ds = mod.write_dataset(TABLE.slice(n, 1), uri, mode="append")
        history.append([v["version"] for v in ds.versions()])
    return history


CONFIG: dict[str, Scenario] = {
    "update_config / delete_config_keys": _config,
    "update_metadata / schema / field metadata": _metadata,
    "auto_cleanup_options": _auto_cleanup,
}


@pytest.mark.parametrize(
    ("writer", "reader"), [(lance, lance_ops), (lance_ops, lance)], ids=["ours-read", "theirs-read"]
)
def test_update_config_transactions_are_wire_compatible(writer: Any, reader: Any, tmp_path: Path) -> None:
    ds = _dataset(writer, tmp_path)
    ds.update_config({"lance.auto_cleanup.interval": "5", "k": "v"})
    ds.update_metadata({"owner": "me"})
    ds.update_schema_metadata({"sk": "sv"})
    ds.update_field_metadata({"st.a": {"unit": "m"}})
    other = reader.dataset(ds.uri)
    assert other.config() == {"lance.auto_cleanup.interval": "5", "k": "v"}
    assert other.metadata == {"owner": "me"}
    assert other.schema.metadata == {b"sk": b"sv"}
    assert other.schema.field("st").type.field("a").metadata == {b"unit": b"m"}
    transaction = other.read_transaction(ds.version)
    assert type(transaction.operation).__name__ == "UpdateConfig"
    # ... and the reader's own edits land on top of the writer's.
    other.update_config({"k2": "v2"})
    assert writer.dataset(ds.uri).config() == {"lance.auto_cleanup.interval": "5", "k": "v", "k2": "v2"}


# ---------------------------------------------------------------- schema


SCHEMA: dict[str, Scenario] = {
    "LanceSchema.from_pyarrow / to_pyarrow": lambda m, p: (
        _schema_module(m).LanceSchema.from_pyarrow(TABLE.schema).to_pyarrow().equals(TABLE.schema)
    ),
    "LanceSchema field ids": lambda m, p: [
        (f.name(), f.id(), [(c.name(), c.id()) for c in f.children()])
        for f in _schema_module(m).LanceSchema.from_pyarrow(TABLE.schema).fields()
    ],
    "LanceSchema.field(path)": lambda m, p: (
        _schema_module(m).LanceSchema.from_pyarrow(TABLE.schema).field("st.b").id()
    ),
    "field_case_insensitive": lambda m, p: (
        _schema_module(m).LanceSchema.from_pyarrow(TABLE.schema).field_case_insensitive("ST").id()
    ),
    "LanceField.to_arrow": lambda m, p: (
        _schema_module(m).LanceSchema.from_pyarrow(TABLE.schema).field("st").to_arrow()
    ),
}


# ---------------------------------------------------------------- errors (same builtin class)

ERRORS: dict[str, Scenario] = {
    "take out of range": lambda m, p: _dataset(m, p).take([100]),
    "fragment take out of range": lambda m, p: _dataset(m, p).get_fragments()[0].take([10]),
    "open a missing dataset": lambda m, p: m.dataset(str(p / "missing")),
    "create over an existing dataset": lambda m, p: (_dataset(m, p), m.write_dataset(TABLE, str(p / "ds"))),
    "unknown write mode": lambda m, p: m.write_dataset(TABLE, str(p / "x"), mode="upsert"),
    "unknown version": lambda m, p: m.dataset(_dataset(m, p).uri, version=99),
    "unknown column": lambda m, p: _dataset(m, p).to_table(columns=["nope"]),
    "unknown column in a filter": lambda m, p: _dataset(m, p).to_table(filter="nope > 1"),
    "unknown field for metadata": lambda m, p: _dataset(m, p).update_field_metadata({"nope": {"k": "v"}}),
    "file read_range out of range": lambda m, p: _written_file(m, p).read_range(5, 10).to_table(),
}


# ---------------------------------------------------------------- files


def _written_file(mod: Any, tmp_path: Path, table: pa.Table | None = None) -> Any:
    table = TABLE.slice(0, 8) if table is None else table
    path = str(tmp_path / "f.lance")
    # lance_ops's own page statistics (a schema-metadata key and two global buffers) left out:
    # the scenario compares the metadata objects, not what each writer adds to a file
    extra = {"page_statistics": False} if mod is lance_ops else {}
    with _file(mod).LanceFileWriter(path, table.schema, version="2.1", **extra) as writer:
        writer.write_batch(table)
        writer.add_schema_metadata("k", "v")
    return _file(mod).LanceFileReader(path)


def _tensor_table() -> pa.Table:
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 3], dim_names=["r", "c"])
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(60, dtype=np.float32)), 6)
    return pa.table({"t": pa.ExtensionArray.from_storage(tensor_type, storage)})


FILES: dict[str, Scenario] = {
    "reader.read_all(batch_size=)": lambda m, p: [
        b.num_rows for b in _written_file(m, p).read_all(batch_size=3).to_batches()
    ],
    "reader.read_range": lambda m, p: _rows(_written_file(m, p).read_range(2, 3).to_table()),
    "reader.take_rows": lambda m, p: _rows(_written_file(m, p).take_rows([1, 4, 6]).to_table()),
    "reader(columns=)": lambda m, p: (
        _written_file(m, p),
        _rows(_file(m).LanceFileReader(str(p / "f.lance"), columns=["s"]).read_all().to_table()),
    )[1],
    "reader.num_rows()": lambda m, p: _written_file(m, p).num_rows(),
    "metadata()": lambda m, p: (
        (md := _written_file(m, p).metadata()).num_rows,
        md.major_version,
        md.minor_version,
        len(md.columns),
        [len(c.pages) for c in md.columns],
        md.schema.metadata,
    ),
    "metadata() page and buffer objects": lambda m, p: (
        isinstance((md := _written_file(m, p).metadata()).columns[0].pages[0].encoding, str),
        [type(b.position) for b in md.global_buffers],
        len(md.columns[0].pages[0].buffers) > 0,
    ),
    "file_statistics()": lambda m, p: [c.num_pages for c in _written_file(m, p).file_statistics().columns],
    "global buffers": lambda m, p: _global_buffer(m, p),
    "fixed_shape_tensor round trip": lambda m, p: (
        _written_file(m, p, _tensor_table()).read_all().to_table() == _tensor_table()
    ),
}


def _global_buffer(mod: Any, tmp_path: Path) -> Any:
    path = str(tmp_path / "g.lance")
    writer = _file(mod).LanceFileWriter(path, TABLE.schema)
    writer.write_batch(TABLE)
    index = writer.add_global_buffer(b"hello")
    writer.close()
    return index, _file(mod).LanceFileReader(path).read_global_buffer(index)


def _session(mod: Any, tmp_path: Path) -> Any:
    session = _file(mod).LanceFileSession(str(tmp_path / "base"))
    with session.open_writer("a/b.lance", schema=TABLE.schema) as writer:
        writer.write_batch(TABLE)
    read = session.open_reader("a/b.lance", columns=["id"]).read_all().to_table()
    head = session.read_range("a/b.lance", 0, 4)
    (tmp_path / "local.bin").write_bytes(b"payload")
    session.upload_file(str(tmp_path / "local.bin"), "c/up.bin")
    session.download_file("c/up.bin", str(tmp_path / "down.bin"))
    listed = sorted(session.list())
    session.delete_file("c/up.bin")
    return (
        session.contains("a/b.lance"),
        session.contains("a/none.lance"),
        listed,
        sorted(session.list("a")),
        head,
        (tmp_path / "down.bin").read_bytes(),
        _rows(read),
    )


FILES["LanceFileSession"] = _session
FILES["LanceFileSession missing file"] = lambda m, p: (
    _file(m).LanceFileSession(str(p)).read_range("nope", 0, 4)
)


@pytest.mark.parametrize(
    ("writer", "reader"), [(lance, lance_ops), (lance_ops, lance)], ids=["ours-read", "theirs-read"]
)
def test_fixed_shape_tensor_files_and_datasets_cross(writer: Any, reader: Any, tmp_path: Path) -> None:
    table = _tensor_table()
    path = str(tmp_path / "t.lance")
    with _file(writer).LanceFileWriter(path, table.schema) as w:
        w.write_batch(table)
    assert _file(reader).LanceFileReader(path).read_all().to_table() == table
    writer.write_dataset(table, str(tmp_path / "ds"))
    assert reader.dataset(str(tmp_path / "ds")).to_table() == table


# ---------------------------------------------------------------- SQL functions in filters

FILTER_TABLE = pa.table(
    {
        "id": pa.array(range(6), pa.int64()),
        "x": [0.5, 1.5, -2.25, None, 4.0, 9.0],
        "s": [" x1", "Ab", "abc", None, "a.b.c", "xyz"],
        "tags": pa.array([["a", "b"], ["c"], [], None, ["a"], ["b", "a"]]),
        "t": pa.array([dt.datetime(2024, 1, d + 1, d) for d in range(6)], pa.timestamp("us")),
        "b": [b"A", b"B", None, b"AB", b"", b"\x00"],
        "d": pa.array([dt.date(2024, d + 1, 1) for d in range(6)], pa.date32()),
    }
)

FILTERS = [
    "CURRENT_DATE > date '2000-01-01'",
    "now() > t",
    "current_timestamp > t",
    "b = X'41'",
    "b = X'4142'",
    "array_has_any(tags, ['a', 'z'])",
    "array_has_all(tags, ['a', 'b'])",
    "array_contains(tags, 'a')",
    "array_has(tags, 'a')",
    "list_has_any(tags, ['c'])",
    "array_length(tags) = 2",
    "cardinality(tags) = 1",
    "array_position(tags, 'a') = 2",
    "array_empty(tags)",
    "tags[1] = 'a'",
    "tags[-1] = 'a'",
    "btrim(s) = 'x1'",
    "ltrim(s) = 'x1'",
    "rtrim(s) = 'xyz'",
    "replace(s, 'a', 'z') = 'zbc'",
    "strpos(s, 'b') = 2",
    "instr(s, 'b') = 2",
    "left(s, 2) = 'Ab'",
    "right(s, 1) = 'c'",
    "reverse(s) = 'cba'",
    "lpad(s, 4, '-') = '-abc'",
    "rpad(s, 2, '-') = 'ab'",
    "repeat(s, 2) = 'AbAb'",
    "initcap(s) = 'Abc'",
    "split_part(s, '.', 2) = 'b'",
    "concat_ws('-', s, s) = 'Ab-Ab'",
    "bit_length(s) = 16",
    "regexp_replace(s, 'b', 'B') = 'aBc'",
    "regexp_count(s, 'b') = 1",
    "regexp_like(s, '^a')",
    "regexp_match(s, '^a')",
    "lower(s) = 'ab'",
    "upper(s) = 'AB'",
    "starts_with(s, 'a')",
    "ends_with(s, 'c')",
    "char_length(s) = 3",
    "octet_length(s) = 2",
    "round(x) = 2",
    "round(x, 1) = 1.5",
    "sqrt(x) = 3",
    "power(x, 2) = 81",
    "ln(x) > 2",
    "log(x) > 2",
    "log10(x) > 0.5",
    "log2(x) > 2",
    "log(2, x) > 2",
    "exp(x) > 100",
    "signum(x) = -1",
    "sin(x) > 0.9",
    "degrees(x) > 200",
    "radians(x) > 0.1",
    "pi() > x",
    "abs(x) = 2.25",
    "iszero(x)",
    "greatest(id, 3) = 3",
    "least(id, 3) = 3",
    "nullif(id, 3) IS NULL",
    "coalesce(x, 0) = 0",
    "nvl2(x, 1, 0) = 0",
    "id IS DISTINCT FROM 3",
    "x IS NOT DISTINCT FROM NULL",
    "date_trunc('day', t) = timestamp '2024-01-02 00:00:00'",
    "date_trunc('month', t) = timestamp '2024-01-01 00:00:00'",
    "date_part('day', t) = 3",
    "date_part('year', d) = 2024",
    "to_date('2024-03-01') = d",
    "to_timestamp('2024-01-03T02:00:00') = t",
    # refused by both
    "substr(s, 1, 1) = 'a'",
    "trim(s) = 'x1'",
    "floor(x) = 1",
    "CASE WHEN id > 3 THEN true ELSE false END",
    "extract(day from t) = 3",
]


# ---------------------------------------------------------------- the side-by-side runner

ALL: dict[str, Scenario] = {**SCANNER, **INPUTS, **FRAGMENTS, **UDFS, **CONFIG, **SCHEMA, **ERRORS, **FILES}


def _outcome(mod: Any, scenario: Scenario, tmp_path: Path) -> tuple[str, Any]:
    tmp_path.mkdir()
    try:
        return "ok", scenario(mod, tmp_path)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return "raised", exc


def _compare(name: str, theirs: tuple[str, Any], ours: tuple[str, Any]) -> None:
    if theirs[0] == "raised":
        assert ours[0] == "raised", f"{name}: pylance raised {theirs[1]!r}, we returned {ours[1]!r}"
        builtin = next(c for c in type(theirs[1]).__mro__ if c.__module__ == "builtins")
        assert isinstance(ours[1], builtin), (
            f"{name}: pylance raised {builtin.__name__}, we raised {ours[1]!r}"
        )
        assert isinstance(ours[1], LanceOpsError), f"{name}: {ours[1]!r} is not a LanceOpsError"
    else:
        assert ours[0] == "ok", f"{name}: pylance returned {theirs[1]!r}, we raised {ours[1]!r}"
        assert ours[1] == theirs[1]


@pytest.mark.parametrize("name", list(ALL))
def test_same_as_pylance(name: str, tmp_path: Path) -> None:
    theirs = _outcome(lance, ALL[name], tmp_path / "pylance")
    ours = _outcome(lance_ops, ALL[name], tmp_path / "lance_ops")
    _compare(name, theirs, ours)


@pytest.fixture(scope="module")
def filter_datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    root = tmp_path_factory.mktemp("filters")
    return {mod: mod.write_dataset(FILTER_TABLE, str(root / mod.__name__)) for mod in (lance, lance_ops)}


@pytest.mark.parametrize("sql", FILTERS)
def test_filter_functions_same_as_pylance(sql: str, filter_datasets: dict[Any, Any]) -> None:
    outcomes = []
    for mod in (lance, lance_ops):
        try:
            outcomes.append(
                ("ok", filter_datasets[mod].to_table(columns=["id"], filter=sql)["id"].to_pylist())
            )
        except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
            outcomes.append(("raised", exc))
    theirs, ours = outcomes
    _compare(sql, theirs, ours)
