"""Generate the golden Lance 2.0 files and dataset under ``tests/data/files/2.0/`` with pylance 14.0.2.

    .venv/bin/python tests/data/datagen_legacy20.py

Layout written (everything under ``files/2.0/`` is regenerated; ``datagen.py`` leaves it alone):

``files/2.0/<name>.lance``
    A data file written by ``lance.file.LanceFileWriter(version="2.0")`` (footer 0.3), one per
    type family (see :func:`golden_files`).
``files/2.0/expected/<name>.arrow``
    What pylance reads back from it, as an Arrow IPC file (zstd): exact types, and unlike Parquet
    it holds dictionaries with null entries.
``files/2.0/encodings.json``
    Per file, per column (Lance field path, parents included, in column order), per page: the sorted
    ``ArrayEncoding`` / ``ColumnEncoding`` oneof names pylance chose, e.g. ``["binary",
    "dictionary", "flat", "nullable"]``. :data:`REQUIRED` asserts the cases each file exists
    for, so a pylance upgrade cannot silently weaken a golden file.
``files/2.0/dataset.lance`` and ``files/2.0/expected/dataset.arrow``
    A pylance dataset with ``data_storage_version="2.0"``: two appends, three fragments.

Data are deterministic (fixed seeds); pylance's bytes are not always (FSST samples, zstd frames,
field metadata order, dataset timestamps and file names).
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
from datagen import _words
from datagen import primitives as all_primitives
from golden import FILES_DIR, PYLANCE_VERSION
from google.protobuf import any_pb2
from lance.file import LanceFileReader, LanceFileWriter

from lance_ops._proto import encodings_v2_0_pb2 as enc20
from lance_ops._proto import file2_pb2

LEGACY_DIR = FILES_DIR / "2.0"
LEGACY_EXPECTED_DIR = LEGACY_DIR / "expected"
BLOB = {"lance-encoding:blob": "true"}

# file -> column path -> encodings every page of that column must use
REQUIRED: dict[str, dict[str, set[str]]] = {
    "primitives": {"bool": {"flat", "nullable"}, "decimal256": {"flat"}},
    "strings": {
        "dict_string": {"dictionary", "binary"},
        "plain_string": {"binary"},
        "large_string": {"binary"},
        "zstd_binary": {"binary", "flat"},
        "fsst_string": {"fsst"},
    },
    "lists": {"l": {"list"}, "large": {"list"}, "fsl": {"fixed_size_list"}},
    "structs": {"s": {"struct"}, "packed": {"packed_struct"}},
    "dictionaries": {"dict_string": {"dictionary"}, "dict_int": {"dictionary"}},
    "blobs": {"blob": {"blob", "packed_struct"}},
}


def _mask(n: int, every: int, offset: int = 0) -> np.ndarray:
    return (np.arange(n) + offset) % every == 0


def _field(name: str, array: pa.Array, metadata: dict[str, str] | None = None) -> tuple[pa.Field, pa.Array]:
    return pa.field(name, array.type, metadata=metadata), array


def _table(columns: Iterable[tuple[pa.Field, pa.Array]]) -> pa.Table:
    fields, arrays = zip(*columns, strict=True)
    return pa.Table.from_arrays(list(arrays), schema=pa.schema(list(fields)))


def strings() -> pa.Table:
    """Binary-like columns: auto dictionary (Utf8 only), plain, large, compressed, FSST, > 32 KiB."""
    n = 1025
    rng = np.random.default_rng(21)
    words = _words(rng, n)
    nulls = _mask(n, 9)
    texts = [None if null else f"{word} {i}" for i, (word, null) in enumerate(zip(words, nulls, strict=True))]
    return _table(
        [
            _field("dict_string", pa.array([None if m else f"c{i % 7}" for i, m in enumerate(nulls)])),
            _field("plain_string", pa.array(texts)),
            _field("empty_strings", pa.array(["" if i % 3 else None for i in range(n)], pa.string())),
            _field("large_string", pa.array(texts, pa.large_string())),
            _field("binary", pa.array([None if t is None else t.encode()[::-1] for t in texts], pa.binary())),
            _field(
                "large_binary",
                pa.array([None if t is None else t.encode() for t in texts], pa.large_binary()),
            ),
            _field(
                "zstd_binary",
                pa.array([None if t is None else t.encode() for t in texts], pa.binary()),
                {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "5"},
            ),
            _field("lz4_string", pa.array(texts, pa.large_string()), {"lance-encoding:compression": "lz4"}),
            _field(
                "fsst_string",
                pa.array([f"https://example.com/{w}/{i}" for i, w in enumerate(words)]),
                {"lance-encoding:compression": "fsst"},
            ),
            _field("all_null", pa.nulls(n, pa.string())),
        ]
    )


def huge_values() -> pa.Table:
    """Values above 32 KiB, as strings and binaries."""
    big = [bytes(range(256)) * 160, None, b"", b"0123456789" * 4000, b"x"]
    return pa.table(
        {
            "binary": pa.array(big, pa.binary()),
            "string": pa.array(["s" * 33_000, None, "", "t", "x"]),
        }
    )


def lists() -> pa.Table:
    """Lists and large lists with null and empty lists, nested lists, fixed-size lists."""
    n = 1025
    rng = np.random.default_rng(23)
    lengths = rng.integers(0, 5, n)
    nulls = _mask(n, 6)
    ints = [
        None if m else [int(v) if v % 5 else None for v in range(k)]
        for k, m in zip(lengths, nulls, strict=True)
    ]
    vectors = rng.normal(size=(n, 3)).astype(np.float32)
    return _table(
        [
            _field("l", pa.array(ints, pa.list_(pa.int32()))),
            _field("large", pa.array(ints, pa.large_list(pa.int64()))),
            _field("empty", pa.array([[] for _ in range(n)], pa.list_(pa.int8()))),
            _field("all_null", pa.array([None] * n, pa.list_(pa.float64()))),
            _field(
                "nested",
                pa.array(
                    [None if m else [[1, 2], [], None, [3]][:k] for k, m in zip(lengths, nulls, strict=True)],
                    pa.list_(pa.list_(pa.int16())),
                ),
            ),
            _field(
                "strings",
                pa.array(
                    [None if m else ["a", None, ""][:k] for k, m in zip(lengths, nulls, strict=True)],
                    pa.list_(pa.string()),
                ),
            ),
            _field(
                "fsl",
                pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.reshape(-1), mask=_mask(3 * n, 11)), 3, mask=pa.array(_mask(n, 8))
                ),
            ),
            _field(
                "fsl_bool",
                pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.random(2 * n) < 0.5, mask=_mask(2 * n, 7)), 2, mask=pa.array(_mask(n, 9))
                ),
            ),
            _field(
                "fsl_nested",
                pa.FixedSizeListArray.from_arrays(
                    pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4 * n, dtype=np.uint8)), 2), 2
                ),
            ),
            _field(
                "list_fsl",
                pa.array([[[1.0, 2.0]] * (k % 3) for k in lengths], pa.list_(pa.list_(pa.float32(), 2))),
            ),
        ]
    )


def structs() -> pa.Table:
    """Simple structs (no struct nulls in 2.0), nested, with lists, inside lists; a packed struct."""
    n = 1025
    rng = np.random.default_rng(24)
    xs = rng.integers(-1000, 1000, n)
    inner = pa.StructArray.from_arrays(
        [pa.array(xs, mask=_mask(n, 4)), pa.array([f"v{i % 5}" for i in range(n)])], ["x", "y"]
    )
    deep = pa.StructArray.from_arrays(
        [inner, pa.array([[i] * (i % 3) for i in range(n)], pa.list_(pa.int32()))], ["inner", "items"]
    )
    packed_type = pa.struct([("a", pa.int32()), ("b", pa.float64()), ("c", pa.binary(3))])
    packed = pa.StructArray.from_arrays(
        [pa.array(xs.astype(np.int32)), pa.array(xs / 7), pa.array([b"abc"] * n, pa.binary(3))],
        fields=list(packed_type),
    )
    list_of_structs = pa.array(
        [None if i % 10 == 0 else [{"p": i, "q": 0.5}] * (i % 3) for i in range(n)],
        pa.list_(pa.struct([("p", pa.int64()), ("q", pa.float32())])),
    )
    return _table(
        [
            _field("s", inner),
            _field("deep", deep),
            _field("packed", packed, {"packed": "true"}),
            _field("list_of_structs", list_of_structs),
        ]
    )


def dictionaries() -> pa.Table:
    """Arrow dictionary columns (string and integer values, with nulls)."""
    n = 1025
    keys = np.arange(n) % 4
    values = pa.array(["red", "green", "blue", "cyan"])
    return _table(
        [
            _field(
                "dict_string",
                pa.DictionaryArray.from_arrays(pa.array(keys.astype(np.int32), mask=_mask(n, 5)), values),
            ),
            _field(
                "dict_int",
                pa.DictionaryArray.from_arrays(
                    pa.array(keys.astype(np.int8)), pa.array([10, 20, None, 40], pa.int64())
                ),
            ),
        ]
    )


def blobs() -> pa.Table:
    """A blob column (large_binary with lance-encoding:blob): values out of line."""
    rng = np.random.default_rng(25)
    values = [rng.bytes(int(k)) if k % 4 else (None if k % 8 else b"") for k in rng.integers(0, 3000, 40)]
    return _table(
        [
            _field("id", pa.array(np.arange(40, dtype=np.int32))),
            _field("blob", pa.array(values, pa.large_binary()), BLOB),
        ]
    )


def multipage() -> pa.Table:
    """Enough rows for several pages per column with ``max_page_bytes=2048``."""
    n = 1200
    return pa.table(
        {
            "x": pa.array(np.arange(n, dtype=np.int64), mask=_mask(n, 7)),
            "s": pa.array([f"row {i}" for i in range(n)]),
            "l": pa.array([[i, i + 1] if i % 5 else [] for i in range(n)], pa.list_(pa.int32())),
        }
    )


def golden_files() -> dict[str, tuple[pa.Table, dict[str, int]]]:
    """File name -> (table, writer options)."""
    mixed = _table(
        [
            _field("i", pa.array(np.arange(1025, dtype=np.int32), mask=_mask(1025, 3))),
            _field("s", pa.array([f"w{i}" for i in range(1025)])),
        ]
        + [_field("st", pa.StructArray.from_arrays([pa.array(np.arange(1025, dtype=np.float64))], ["f"]))]
        + [_field("l", pa.array([[i] * (i % 3) for i in range(1025)], pa.list_(pa.int16())))]
    )
    jobs = {
        "primitives": (all_primitives().slice(0, 300), {}),
        "strings": (strings(), {}),
        "huge_values": (huge_values(), {}),
        "lists": (lists(), {}),
        "structs": (structs(), {}),
        "dictionaries": (dictionaries(), {}),
        "blobs": (blobs(), {}),
        "multipage": (multipage(), {"max_page_bytes": 2048}),
    }
    for rows in (0, 1, 1023, 1024):
        jobs[f"rows_{rows}"] = (mixed.slice(0, rows), {})
    jobs["rows_1025"] = (mixed, {})
    return jobs


# --- recording what pylance chose -----------------------------------------------------------------


def _oneofs(message: enc20.ArrayEncoding | enc20.ColumnEncoding) -> set[str]:
    """Every oneof member set anywhere in ``message``."""
    found: set[str] = set()
    for descriptor, value in message.ListFields():
        if descriptor.containing_oneof is not None:
            found.add(descriptor.name)
        if hasattr(value, "ListFields"):
            values = [value]
        elif isinstance(value, str | bytes | int | float):
            values = []
        else:
            values = list(value)
        for item in values:
            if hasattr(item, "ListFields"):
                found |= _oneofs(item)
    return found


def _unpack(encoding: file2_pb2.Encoding, kind: type) -> enc20.ArrayEncoding | enc20.ColumnEncoding:
    envelope = any_pb2.Any.FromString(encoding.direct.encoding)
    return kind.FromString(envelope.value)


def _field_paths(path: Path) -> list[str]:
    """Lance field paths in pre-order: one per 2.0 column (packed struct children own none)."""
    schema = LanceFileReader(str(path)).metadata().schema

    def walk(prefix: str, field: pa.Field) -> list[str]:
        name = f"{prefix}{field.name}"
        dtype = field.type
        if pa.types.is_struct(dtype) and (field.metadata or {}).get(b"packed") != b"true":
            return [name, *(p for child in dtype for p in walk(f"{name}.", child))]
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return [name, *walk(f"{name}.", dtype.value_field)]
        return [name]

    return [p for field in schema for p in walk("", field)]


def file_features(path: Path) -> dict[str, list[list[str]]]:
    """Per column, the oneof names of each page (column encoding names included); checks the footer."""
    raw = path.read_bytes()
    _, cmo, _, _, num_columns, major, minor, magic = struct.unpack("<QQQIIHH4s", raw[-40:])
    if (major, minor, magic) != (0, 3, b"LANC"):
        raise AssertionError(f"{path}: footer {major}.{minor} {magic!r}, expected 0.3")
    out = {}
    for i, name in enumerate(_field_paths(path)):
        position, size = struct.unpack_from("<QQ", raw, cmo + 16 * i)
        column = file2_pb2.ColumnMetadata.FromString(raw[position : position + size])
        column_names = _oneofs(_unpack(column.encoding, enc20.ColumnEncoding)) - {"values"}
        out[name] = [
            sorted(_oneofs(_unpack(page.encoding, enc20.ArrayEncoding)) | column_names)
            for page in column.pages
        ]
    if len(out) != num_columns:
        raise AssertionError(f"{path}: {num_columns} columns, {len(out)} field paths")
    return out


def check_required(name: str, features: dict[str, list[list[str]]]) -> None:
    for column, wanted in REQUIRED.get(name, {}).items():
        for page in features[column]:
            if wanted - set(page):
                raise AssertionError(f"2.0/{name}.{column}: pylance chose {page}, wanted {sorted(wanted)}")
    # pylance never splits a list's offsets column, only the values and items columns.
    if name == "multipage" and min(len(features[column]) for column in ("x", "s", "l.item")) < 3:
        raise AssertionError(f"2.0/multipage: expected several pages per column, got {features}")


def write_expected(table: pa.Table, path: Path) -> None:
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as writer:
        writer.write_table(table)


def write_file(path: Path, table: pa.Table, options: dict[str, int]) -> pa.Table:
    with LanceFileWriter(str(path), schema=table.schema, version="2.0", **options) as writer:
        writer.write_batch(table)
    actual = LanceFileReader(str(path)).read_all().to_table()
    if actual.num_rows != table.num_rows:
        raise AssertionError(f"pylance reads {actual.num_rows} rows back from {path}")
    return actual


def generate_files() -> None:
    LEGACY_EXPECTED_DIR.mkdir(parents=True)
    features = {}
    for name, (table, options) in golden_files().items():
        path = LEGACY_DIR / f"{name}.lance"
        write_expected(write_file(path, table, options), LEGACY_EXPECTED_DIR / f"{name}.arrow")
        features[name] = file_features(path)
        check_required(name, features[name])
    (LEGACY_DIR / "encodings.json").write_text(json.dumps(features, indent=1) + "\n")


def generate_dataset() -> None:
    uri = LEGACY_DIR / "dataset.lance"
    table = golden_files()["rows_1025"][0]
    lance.write_dataset(table.slice(0, 600), uri, data_storage_version="2.0", max_rows_per_file=400)
    ds = lance.write_dataset(table.slice(600), uri, mode="append")
    if ds.data_storage_version != "2.0" or len(ds.get_fragments()) != 3:
        raise AssertionError(f"dataset: {ds.data_storage_version}, {len(ds.get_fragments())} fragments")
    write_expected(ds.to_table(), LEGACY_EXPECTED_DIR / "dataset.arrow")


def main() -> None:
    if lance.__version__ != PYLANCE_VERSION:
        raise SystemExit(
            f"golden data must be written by pylance {PYLANCE_VERSION}, found {lance.__version__}"
        )
    if LEGACY_DIR.exists():
        shutil.rmtree(LEGACY_DIR)
    generate_files()
    generate_dataset()


if __name__ == "__main__":
    main()
