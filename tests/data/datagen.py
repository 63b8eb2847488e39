"""Generate the golden Lance files and datasets under ``tests/data/`` with pylance 14.0.2.

    .venv/bin/python tests/data/datagen.py
    .venv/bin/python tests/data/datagen.py --maps   # only add the 2.2 maps file to existing data

Layout written (everything below ``tests/data/`` except this script is regenerated):

``files/<version>/<name>.lance``
    A Lance data file written by ``lance.file.LanceFileWriter(version=<version>)`` (2.1 and 2.2).
``files/expected/<name>.parquet``
    What pylance reads back from ``<name>.lance`` (the same in every version), so the golden
    tests need no pylance; stored with the exact Arrow schema (see ``golden.py``, which also
    holds the paths and is what the tests import).
``files/<version>/encodings.json``
    Per file, per column, per page: the protobuf field names of the layouts / compressions pylance chose
    (``mini_block_layout``, ``full_zip_layout``, ``constant_layout``, ``fsst``, ``rle``,
    ``inline_bitpacking``, ``general``, ``dictionary``...). This script asserts the cases each file
    exists for (e.g. that the FSST column really is FSST) so a pylance upgrade cannot silently turn
    a golden file into a weaker one.
``datasets/<name>.lance`` and ``datasets/<name>.expected/v<N>.parquet``
    Small pylance datasets (V2 manifest names) and the full content of every version;
    ``datasets/<name>.expected/versions.json`` lists versions with row and fragment counts.

The data and the Parquet expectations are deterministic (fixed seeds). pylance's own bytes are
not always: FSST symbol tables come from random samples and field metadata is written in hash-map
order, and dataset manifests hold commit timestamps and random file names.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
from golden import (
    DATA_DIR,
    DATASETS_DIR,
    EXPECTED_FILES_DIR,
    FEATURES,
    FILE_VERSIONS,
    FILES_DIR,
    PYLANCE_VERSION,
    leaf_paths,
    write_expected,
)
from lance.file import LanceFileReader, LanceFileWriter

# Rust debug names in pylance's page descriptions -> the protobuf field names lance_ops prints.
_FEATURES = {
    "MiniBlockLayout(": "mini_block_layout",
    "FullZipLayout(": "full_zip_layout",
    "ConstantLayout(": "constant_layout",
    "BlobLayout(": "blob_layout",
    "dictionary: Some(": "dictionary",
    "Dictionary(": "dictionary",
    "Flat(": "flat",
    "Variable(": "variable",
    "Constant(": "constant",
    "OutOfLineBitpacking(": "out_of_line_bitpacking",
    "InlineBitpacking(": "inline_bitpacking",
    "Fsst(": "fsst",
    "Rle(": "rle",
    "ByteStreamSplit(": "byte_stream_split",
    "General(": "general",
    "FixedSizeList(": "fixed_size_list",
    "PackedStruct(": "packed_struct",
    "VariablePackedStruct(": "variable_packed_struct",
}
assert set(_FEATURES.values()) <= set(FEATURES)
_FEATURE_RE = re.compile("|".join(rf"\b{re.escape(name)}" for name in _FEATURES))


def page_features(encoding: str) -> list[str]:
    """The sorted protobuf names of the layouts / compressions named in a pylance page description."""
    return sorted({_FEATURES[match] for match in _FEATURE_RE.findall(encoding)})


# --- data ------------------------------------------------------------------------------------------


def _nulls(rng: np.random.Generator, n: int, every: int = 7) -> np.ndarray:
    """A null mask with every ``every``-th row null plus ~5% random nulls."""
    mask = np.zeros(n, dtype=bool)
    mask[::every] = True
    mask |= rng.random(n) < 0.05
    return mask


def _ints(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


def _with_nulls(array: pa.Array, mask: np.ndarray) -> pa.Array:
    """``array`` (fixed width, no nulls) with the rows in ``mask`` set to null, values kept."""
    validity = pa.py_buffer(np.packbits(~mask, bitorder="little").tobytes())
    return pa.Array.from_buffers(array.type, len(array), [validity, *array.buffers()[1:]])


def _field(name: str, array: pa.Array, **metadata: str) -> tuple[pa.Field, pa.Array]:
    meta = {f"lance-encoding:{key.replace('_', '-')}": value for key, value in metadata.items()}
    return pa.field(name, array.type, metadata=meta or None), array


def _table(columns: Iterable[tuple[pa.Field, pa.Array]]) -> pa.Table:
    fields, arrays = zip(*columns, strict=True)
    return pa.Table.from_arrays(list(arrays), schema=pa.schema(fields))


def _decimals(rng: np.random.Generator, n: int, digits: int, scale: int) -> list[Decimal]:
    units = rng.integers(-(10**15), 10**15, size=n)
    return [Decimal(int(u) * 10 ** (digits - 16 - scale) + i).scaleb(-scale) for i, u in enumerate(units)]


def primitives() -> pa.Table:
    """Every fixed-width type, 1 025 rows (n % 8 != 0), with nulls; random values (mostly Flat)."""
    n = 1025
    rng = np.random.default_rng(1)
    days = rng.integers(-20_000, 40_000, n)
    seconds = rng.integers(0, 86_400, n)
    instants = rng.integers(-(2**40), 2**40, n)
    plain: dict[str, pa.Array] = {
        **{dt: pa.array(_ints(rng, dt, n)) for dt in ("int8", "int16", "int32", "int64")},
        **{dt: pa.array(_ints(rng, dt, n)) for dt in ("uint8", "uint16", "uint32", "uint64")},
        "float16": pa.array(rng.normal(size=n).astype(np.float16)),
        "float32": pa.array(rng.normal(size=n).astype(np.float32)),
        "float64": pa.array(rng.normal(size=n)),
        "bool": pa.array(rng.random(n) < 0.5),
        "date32": pa.array(days.astype(np.int32), pa.date32()),
        "date64": pa.array(days * 86_400_000, pa.date64()),
        "time32_s": pa.array(seconds.astype(np.int32), pa.time32("s")),
        "time32_ms": pa.array((seconds * 1000 + 7).astype(np.int32), pa.time32("ms")),
        "time64_us": pa.array(seconds * 1_000_000 + 11, pa.time64("us")),
        "time64_ns": pa.array(seconds * 1_000_000_000 + 13, pa.time64("ns")),
        "timestamp_s": pa.array(instants // 1000, pa.timestamp("s")),
        "timestamp_ms": pa.array(instants, pa.timestamp("ms")),
        "timestamp_us": pa.array(instants * 1000, pa.timestamp("us")),
        "timestamp_ns": pa.array(instants * 1000 + 5, pa.timestamp("ns")),
        "timestamp_us_tz": pa.array(instants * 1000, pa.timestamp("us", tz="America/New_York")),
        "timestamp_ns_utc": pa.array(instants * 1000 + 1, pa.timestamp("ns", tz="UTC")),
        **{
            f"duration_{u}": pa.array(rng.integers(-(2**40), 2**40, n), pa.duration(u))
            for u in "s ms us ns".split()
        },
        "decimal128": pa.array(_decimals(rng, n, 20, 4), pa.decimal128(20, 4)),
        "decimal256": pa.array(_decimals(rng, n, 40, 6), pa.decimal256(40, 6)),
        "fixed_size_binary": pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(7), n, [None, pa.py_buffer(rng.bytes(7 * n))]
        ),
    }
    columns = [_field("row", pa.array(np.arange(n, dtype=np.int32)))]
    for name, array in plain.items():
        columns.append(_field(name, _with_nulls(array, _nulls(rng, n))))
    columns.append(_field("int32_no_nulls", pa.array(_ints(rng, "int32", n))))
    return _table(columns)


def shapes() -> pa.Table:
    """Data shapes that steer pylance's encoder: all-null, constant, bit-packing, runs, dictionaries."""
    n = 3001
    rng = np.random.default_rng(2)
    ids = np.arange(n)
    runs = np.repeat(np.arange(n // 300 + 1, dtype=np.int32), 300)[:n]
    return _table(
        [
            _field("all_null_int32", pa.nulls(n, pa.int32())),
            _field("all_null_string", pa.nulls(n, pa.string())),
            _field("all_null_float64", pa.nulls(n, pa.float64())),
            _field("constant_int64", pa.array(np.full(n, 7, dtype=np.int64))),
            _field("constant_float64", pa.array(np.full(n, 2.5))),
            _field("constant_bool", pa.array(np.ones(n, dtype=bool))),
            _field("constant_string", pa.array(["same"] * n)),
            _field("constant_with_nulls", pa.array(np.full(n, -3, dtype=np.int32), mask=ids % 5 == 0)),
            _field("bitpack_int32", pa.array((ids % 1000).astype(np.int32))),
            _field("bitpack_int16", pa.array(rng.integers(0, 300, n).astype(np.int16))),
            _field("bitpack_uint8", pa.array(rng.integers(0, 16, n).astype(np.uint8))),
            _field("bitpack_uint64", pa.array(rng.integers(0, 2**20, n).astype(np.uint64))),
            _field("bitpack_nullable", pa.array(ids.astype(np.int32), mask=_nulls(rng, n))),
            _field("runs_int32", pa.array(runs)),
            _field("runs_int64_nullable", pa.array(np.repeat(ids[:31] * 1000, 100)[:n], mask=ids % 97 == 0)),
            _field("runs_float32", pa.array(np.repeat(rng.normal(size=11).astype(np.float32), 280)[:n])),
            _field(
                "rare_nulls",
                pa.array(rng.integers(-(2**31), 2**31, n).astype(np.int32), mask=ids % 1000 == 1),
            ),
            _field("bool_random", pa.array(rng.random(n) < 0.3, mask=ids % 11 == 0)),
            _field("lowcard_int64", pa.array(rng.integers(0, 100, n).astype(np.int64) * 1_000_003)),
            _field(
                "lowcard_decimal",
                pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(0, 50, n)], pa.decimal128(12, 2)),
            ),
            _field("flat_forced", pa.array((ids % 1000).astype(np.int32)), compression="none"),
            _field("zstd_bss", pa.array(rng.normal(size=n)), compression="zstd", bss="on"),
            _field(
                "lz4_periodic_float32",
                pa.array(np.tile(rng.normal(size=50).astype(np.float32), n // 50 + 1)[:n]),
                compression="lz4",
                bss="off",
            ),
        ]
    )


def _words(rng: np.random.Generator, n: int) -> list[str]:
    syllables = np.array(["ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "ze", "pa", "qu", "é", "ß", "日"])
    lengths = rng.integers(2, 6, n)
    picks = rng.integers(0, len(syllables), lengths.sum())
    return ["".join(part) for part in np.split(syllables[picks], np.cumsum(lengths)[:-1])]


def strings() -> pa.Table:
    """Variable-width columns: the four types with nulls and empties, dictionaries, FSST (>= 32 KiB)."""
    n = 1200
    rng = np.random.default_rng(3)
    ids = np.arange(n)
    words = _words(rng, n)
    mask = _nulls(rng, n)
    short = [w if i % 13 else "" for i, w in enumerate(words)]
    blobs = [rng.bytes(int(k)) for k in rng.integers(0, 12, n)]
    fruit = np.array(["apple", "banana", "cherry", "durian", "elderberry"])[rng.integers(0, 5, n)].tolist()
    high = [f"user-{i * 7919 % 100_003:06d}-{w}@example.org" for i, w in enumerate(words)]
    return _table(
        [
            _field("string", pa.array(short, pa.string(), mask=mask)),
            _field("binary", pa.array(blobs, pa.binary(), mask=mask)),
            _field("large_string", pa.array(short, pa.large_string(), mask=~mask & (ids % 3 == 0))),
            _field("large_binary", pa.array(blobs, pa.large_binary(), mask=ids % 4 == 1)),
            _field("string_no_nulls", pa.array(short, pa.string())),
            _field("dict_string", pa.array(fruit, pa.string(), mask=ids % 9 == 0)),
            _field("dict_large_string", pa.array(fruit, pa.large_string())),
            _field("fsst_string", pa.array(high, pa.string(), mask=ids % 17 == 0)),
            _field("fsst_large_string", pa.array(high[::-1], pa.large_string())),
            _field("zstd_string", pa.array(high, pa.string()), compression="zstd"),
        ]
    )


def fullzip() -> pa.Table:
    """Values of >= 256 bytes, which move whole pages to the full-zip layout."""
    n = 130
    rng = np.random.default_rng(4)
    ids = np.arange(n)
    words = _words(rng, n * 40)
    long_text = [" ".join(words[i * 40 : i * 40 + 40 - i % 7]) + f" #{i}" for i in range(n)]
    long_bytes = [rng.bytes(int(k)) for k in rng.integers(256, 300, n)]
    return _table(
        [
            _field("long_string", pa.array(long_text, pa.string())),
            _field("long_string_nullable", pa.array(long_text[::-1], pa.string(), mask=ids % 6 == 2)),
            _field("long_large_string", pa.array(long_text, pa.large_string(), mask=ids % 10 == 0)),
            _field("long_binary", pa.array(long_bytes, pa.binary(), mask=ids % 8 == 3)),
            _field("one_long_value", pa.array(["x"] * (n - 1) + ["y" * 300], pa.string())),
            _field(
                "fullzip_int32",
                pa.array(ids.astype(np.int32) * 3, mask=ids % 5 == 0),
                structural_encoding="fullzip",
            ),
            _field("fullzip_float64", pa.array(rng.normal(size=n)), structural_encoding="fullzip"),
            _field(
                "vector64",
                pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.integers(-64, 64, n * 64).astype(np.float32) / 8),
                    64,
                    mask=pa.array(ids % 9 == 1),
                ),
            ),
        ]
    )


def huge_values() -> pa.Table:
    """A value above 32 KiB, which pylance compresses per value with zstd."""
    big_text = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(900))
    big_bytes = bytes(range(256)) * 160
    text = ["small", big_text, None, "", big_text[:40_000] + "tail", "x" * 300, "end"]
    data = [b"a", big_bytes, b"", None, big_bytes[:33_000], b"\x00" * 512, b"z"]
    return _table(
        [
            _field("big_string", pa.array(text, pa.string())),
            _field("big_large_binary", pa.array(data, pa.large_binary())),
            _field("row", pa.array(np.arange(len(text), dtype=np.int64))),
        ]
    )


def multipage_batches() -> list[pa.Table]:
    """Five batches written with a tiny per-column cache, so every column has several pages."""
    rng = np.random.default_rng(5)
    batches = []
    for b in range(5):
        n = 400 + 7 * b
        start = sum(t.num_rows for t in batches)
        ids = np.arange(start, start + n)
        batches.append(
            _table(
                [
                    _field("id", pa.array(ids.astype(np.int64))),
                    _field("value", pa.array(rng.integers(-(2**40), 2**40, n), mask=ids % 7 == 0)),
                    _field("label", pa.array([f"label-{i % 37}-{i}" for i in ids], pa.string())),
                ]
            )
        )
    return batches


def nested() -> pa.Table:
    """Nested types: lists with null and empty lists, nullable structs, lists of structs, vectors."""
    n = 521
    rng = np.random.default_rng(6)
    ids = np.arange(n)
    lengths = rng.integers(0, 6, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    items = pa.array(
        rng.integers(-1000, 1000, offsets[-1]).astype(np.int32), mask=rng.random(offsets[-1]) < 0.1
    )
    list_mask = pa.array(ids % 9 == 4)
    words = _words(rng, int(offsets[-1]))
    struct = pa.StructArray.from_arrays(
        [pa.array(ids.astype(np.int64) * 3), pa.array(_words(rng, n), mask=ids % 5 == 0)],
        names=["x", "name"],
        mask=pa.array(ids % 7 == 3),
    )
    inner = pa.StructArray.from_arrays([items, pa.array(words)], names=["v", "w"])
    vectors = pa.array(rng.normal(size=n * 8).astype(np.float32))
    return _table(
        [
            _field("list_int32", pa.ListArray.from_arrays(offsets, items, mask=list_mask)),
            _field(
                "large_list_string", pa.LargeListArray.from_arrays(offsets.astype(np.int64), pa.array(words))
            ),
            _field("struct", struct),
            _field("list_struct", pa.ListArray.from_arrays(offsets, inner, mask=list_mask)),
            _field("vector8", pa.FixedSizeListArray.from_arrays(vectors, 8)),
        ]
    )


def maps() -> pa.Table:
    """Maps (Lance 2.2 only): null and empty maps, null values, maps in a list and a struct,
    a map of dictionary values, enough rows for several mini-block chunks."""
    n = 1537
    rng = np.random.default_rng(11)
    ids = np.arange(n)
    lengths = rng.integers(0, 4, n)
    lengths[ids % 10 == 0] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total = int(offsets[-1])
    keys = pa.array([f"k{i % 23}" for i in range(total)])
    values = pa.array(rng.integers(-500, 500, total).astype(np.int32), mask=np.arange(total) % 6 == 1)
    plain = pa.MapArray.from_arrays(offsets, keys, values, mask=pa.array(ids % 9 == 4))
    floats = pa.MapArray.from_arrays(
        offsets, pa.array(rng.integers(0, 10**6, total)), pa.array(rng.normal(size=total))
    )
    words = pa.array([f"w{i % 7}" for i in range(total)]).dictionary_encode()
    of_dictionary = pa.MapArray.from_arrays(offsets, keys, words)
    list_offsets = np.concatenate([[0], np.cumsum(ids % 3)]).astype(np.int32)  # 0, 1 or 2 maps a row
    in_list = pa.ListArray.from_arrays(
        list_offsets, plain.slice(0, int(list_offsets[-1])), mask=pa.array(ids % 11 == 5)
    )
    in_struct = pa.StructArray.from_arrays([plain, pa.array(ids)], names=["m", "id"])
    return _table(
        [
            _field("map_string_int32", plain),
            _field("map_int64_float64", floats),
            _field("map_string_dictionary", of_dictionary),
            _field("list_map", in_list),
            _field("struct_map", in_struct),
        ]
    )


# Golden files written for only some versions (maps need 2.2).
ONLY_VERSIONS = {"maps": ("2.2",)}


def edge_rows() -> dict[str, pa.Table]:
    """Zero-row and one-row files."""
    schema = pa.schema([("a", pa.int32()), ("s", pa.string()), ("f", pa.float64())])
    return {
        "empty": schema.empty_table(),
        "one_row": pa.table({"a": [42], "s": ["only"], "f": [None]}, schema=schema),
    }


# Columns and the protobuf names that must appear in all their pages in a given version
# (pylance 14 choices, see the encodings fact sheet §8).
REQUIRED: dict[str, dict[str, dict[str, set[str]]]] = {
    "shapes": {
        "*": {
            "all_null_int32": {"constant_layout"},
            "all_null_string": {"constant_layout"},
            "bitpack_int32": {"mini_block_layout", "inline_bitpacking"},
            "runs_int32": {"rle"},
            "bitpack_nullable": {"out_of_line_bitpacking"},
            "lowcard_decimal": {"dictionary"},
            "zstd_bss": {"general", "byte_stream_split"},
            "lz4_periodic_float32": {"general"},
        },
        "2.1": {"constant_int64": {"rle"}, "constant_string": {"dictionary"}},
        "2.2": {
            "constant_int64": {"constant_layout"},
            "constant_string": {"constant_layout"},
            "lowcard_int64": {"dictionary"},
            "rare_nulls": {"rle"},
        },
    },
    "strings": {
        "*": {
            "dict_string": {"dictionary"},
            "fsst_string": {"fsst", "mini_block_layout"},
            "fsst_large_string": {"fsst"},
            "string": {"variable"},
        },
    },
    "fullzip": {
        "*": {
            "long_string": {"full_zip_layout", "fsst"},
            "long_binary": {"full_zip_layout", "variable"},
            "one_long_value": {"full_zip_layout"},
            "fullzip_int32": {"full_zip_layout", "flat"},
            "vector64": {"full_zip_layout", "fixed_size_list"},
        },
    },
    "nested": {
        "*": {
            "list_int32.item": {"mini_block_layout"},
            "list_struct.item.w": {"mini_block_layout", "variable"},
            "vector8": {"mini_block_layout", "fixed_size_list"},
        }
    },
    "huge_values": {"*": {"big_string": {"full_zip_layout", "general"}, "big_large_binary": {"general"}}},
}


def write_file(path: Path, batches: list[pa.Table], version: str, **options: int) -> pa.Table:
    """Write one golden file with pylance and return what pylance reads back (checked against the input)."""
    with LanceFileWriter(str(path), schema=batches[0].schema, version=version, **options) as writer:
        for batch in batches:
            writer.write_batch(batch)
    actual = LanceFileReader(str(path)).read_all().to_table()
    if not actual.equals(pa.concat_tables(batches)):
        raise AssertionError(f"pylance does not read back what it wrote to {path}")
    return actual


def file_features(path: Path, version: str) -> dict[str, list[list[str]]]:
    """Per column (leaf path), the features of each page; checks the footer version."""
    reader = LanceFileReader(str(path))
    metadata = reader.metadata()
    found = f"{metadata.major_version}.{metadata.minor_version}"
    if found != version:
        raise AssertionError(f"{path}: wrote {version}, footer says {found}")
    return {
        name: [page_features(page.encoding) for page in column.pages]
        for name, column in zip(leaf_paths(metadata.schema), metadata.columns, strict=True)
    }


def check_required(name: str, version: str, features: Mapping[str, list[list[str]]]) -> None:
    """Fail unless every page of the columns in :data:`REQUIRED` uses the wanted encodings."""
    wanted = {**REQUIRED.get(name, {}).get("*", {}), **REQUIRED.get(name, {}).get(version, {})}
    for column, names in wanted.items():
        for page in features[column]:
            missing = names - set(page)
            if missing:
                raise AssertionError(
                    f"{version}/{name}.{column}: pylance chose {page}, missing {sorted(missing)}"
                )
    if name == "multipage" and min(len(pages) for pages in features.values()) < 3:
        raise AssertionError(f"{version}/multipage: expected several pages per column, got {features}")


def golden_files() -> dict[str, tuple[list[pa.Table], dict[str, int]]]:
    """File name -> (batches to write, writer options)."""
    jobs: dict[str, tuple[list[pa.Table], dict[str, int]]] = {
        name: ([make()], {})
        for name, make in {
            "primitives": primitives,
            "shapes": shapes,
            "strings": strings,
            "fullzip": fullzip,
            "huge_values": huge_values,
            "nested": nested,
            "maps": maps,
        }.items()
    }
    jobs["multipage"] = (multipage_batches(), {"data_cache_bytes": 3 * 2400})
    jobs.update({name: ([table], {}) for name, table in edge_rows().items()})
    return jobs


def generate_files() -> None:
    EXPECTED_FILES_DIR.mkdir(parents=True)
    features: dict[str, dict[str, dict[str, list[list[str]]]]] = {v: {} for v in FILE_VERSIONS}
    for version in FILE_VERSIONS:
        (FILES_DIR / version).mkdir()
    for name, (batches, options) in golden_files().items():
        tables = []
        for version in ONLY_VERSIONS.get(name, FILE_VERSIONS):
            path = FILES_DIR / version / f"{name}.lance"
            tables.append(write_file(path, batches, version, **options))
            features[version][name] = file_features(path, version)
            check_required(name, version, features[version][name])
        if not all(table.equals(tables[0], check_metadata=True) for table in tables):
            raise AssertionError(f"{name}: pylance reads different tables back from different versions")
        write_expected(tables[0], EXPECTED_FILES_DIR / f"{name}.parquet")
    for version, found in features.items():
        (FILES_DIR / version / "encodings.json").write_text(
            json.dumps(found, indent=1, sort_keys=True) + "\n"
        )


# --- datasets --------------------------------------------------------------------------------------


def _people(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"person-{i}" for i in ids]),
            "city": pa.array(np.array(["Oslo", "Lima", "Pune", "Kyiv"])[ids % 4].tolist()),
            "score": pa.array(rng.normal(size=n), mask=ids % 6 == 0),
        }
    )


def _record_versions(uri: Path, expected_dir: Path) -> None:
    """Write every version's content and a summary (rows, fragments) next to the dataset."""
    latest = lance.dataset(str(uri))
    summary = []
    for info in latest.versions():
        ds = lance.dataset(str(uri), version=info["version"])
        table = ds.to_table()
        write_expected(table, expected_dir / f"v{ds.version}.parquet")
        summary.append(
            {
                "version": ds.version,
                "rows": ds.count_rows(),
                "fragments": len(ds.get_fragments()),
                "data_storage_version": ds.data_storage_version,
                "columns": table.column_names,
            }
        )
    (expected_dir / "versions.json").write_text(json.dumps(summary, indent=1) + "\n")


def generate_datasets() -> None:
    DATASETS_DIR.mkdir(parents=True, exist_ok=True)
    options = {"enable_v2_manifest_paths": True, "max_rows_per_file": 300, "max_rows_per_group": 256}

    basic = DATASETS_DIR / "basic.lance"
    lance.write_dataset(_people(0, 500, 10), basic, mode="create", data_storage_version="2.1", **options)
    lance.write_dataset(_people(500, 250, 11), basic, mode="append", **options)
    overwrite = _people(5000, 150, 12).append_column("flag", pa.array(np.arange(150) % 3 == 0))
    lance.write_dataset(overwrite, basic, mode="overwrite", **options)
    expected = DATASETS_DIR / "basic.expected"
    expected.mkdir()
    _record_versions(basic, expected)

    deletes = DATASETS_DIR / "deletes.lance"
    ds = lance.write_dataset(
        _people(0, 1000, 20), deletes, mode="create", data_storage_version="2.2", **options
    )
    ds.delete("id % 10 = 3")
    ds.delete("id >= 350 AND id < 575")
    ds.delete("id < 300")
    expected = DATASETS_DIR / "deletes.expected"
    expected.mkdir()
    _record_versions(deletes, expected)

    # >= 5000 deleted rows in one fragment: a Roaring bitmap deletion file (.bin) instead of Arrow.
    bitmap = DATASETS_DIR / "bitmap_deletes.lance"
    ids = pa.table({"id": pa.array(np.arange(6000, dtype=np.int32))})
    ds = lance.write_dataset(ids, bitmap, mode="create", enable_v2_manifest_paths=True)
    ds.delete("id % 7 <> 0")
    expected = DATASETS_DIR / "bitmap_deletes.expected"
    expected.mkdir()
    _record_versions(bitmap, expected)
    if not list((bitmap / "_deletions").glob("*.bin")):
        raise AssertionError("bitmap_deletes: pylance wrote no bitmap deletion file")


DATASET_NAMES = ("basic", "deletes", "bitmap_deletes")


def add_maps() -> None:
    """Write only the 2.2 ``maps`` golden file into the existing golden data (``--maps``)."""
    batches, options = golden_files()["maps"]
    path = FILES_DIR / "2.2" / "maps.lance"
    table = write_file(path, batches, "2.2", **options)
    write_expected(table, EXPECTED_FILES_DIR / "maps.parquet")
    encodings_path = FILES_DIR / "2.2" / "encodings.json"
    found = json.loads(encodings_path.read_text())
    found["maps"] = file_features(path, "2.2")
    encodings_path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


def main() -> None:
    if lance.__version__ != PYLANCE_VERSION:
        raise SystemExit(
            f"golden data must be written by pylance {PYLANCE_VERSION}, found {lance.__version__}"
        )
    if sys.argv[1:] == ["--maps"]:
        add_maps()
        return
    # Only this script's output: files/2.0, files/0.1 and the legacy datasets belong to
    # datagen_legacy20.py and datagen_legacy01.py.
    ours = [DATASETS_DIR / f"{name}{suffix}" for name in DATASET_NAMES for suffix in (".lance", ".expected")]
    for stale in (*(FILES_DIR / version for version in FILE_VERSIONS), EXPECTED_FILES_DIR, *ours):
        if stale.exists():
            shutil.rmtree(stale)
    generate_files()
    generate_datasets()
    total = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    print(f"wrote {total / 1024:.0f} KiB under {DATA_DIR}")


if __name__ == "__main__":
    main()
