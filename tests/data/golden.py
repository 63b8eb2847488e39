"""Where the golden data lives and how its Parquet expectations are stored (no pylance needed).

Shared by ``datagen.py`` (which writes the data with pylance) and the tests that read it.
Parquet cannot hold every Arrow type exactly (``date64``, ``time32[s]``, ``timestamp[s]`` are
coerced), so each expectation carries its exact Arrow schema, IPC-serialized, in the key-value
metadata under :data:`SCHEMA_KEY`; :func:`read_expected` casts the Parquet table back to it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PYLANCE_VERSION = "14.0.2"
DATA_DIR = Path(__file__).resolve().parent
FILES_DIR = DATA_DIR / "files"
EXPECTED_FILES_DIR = FILES_DIR / "expected"
DATASETS_DIR = DATA_DIR / "datasets"
FILE_VERSIONS = ("2.1", "2.2")
SCHEMA_KEY = b"lance_ops:arrow_schema"

# Protobuf field names (PageLayout / CompressiveEncoding oneofs, MiniBlockLayout.dictionary) that
# golden pages are tagged with in ``files/<version>/encodings.json``.
FEATURES = (
    "mini_block_layout",
    "full_zip_layout",
    "constant_layout",
    "blob_layout",
    "dictionary",
    "flat",
    "variable",
    "constant",
    "out_of_line_bitpacking",
    "inline_bitpacking",
    "fsst",
    "rle",
    "byte_stream_split",
    "general",
    "fixed_size_list",
    "packed_struct",
    "variable_packed_struct",
)
_TEXT_FEATURE_RE = re.compile(r"\b(" + "|".join(FEATURES) + r") \{")


def leaf_paths(schema: pa.Schema) -> list[str]:
    """Dotted paths of the leaves, one per 2.1+ column (``s.x``, ``l.item``; fixed-size lists are leaves)."""

    def walk(name: str, dtype: pa.DataType) -> list[str]:
        if pa.types.is_struct(dtype):
            return [path for child in dtype for path in walk(f"{name}.{child.name}", child.type)]
        if pa.types.is_map(dtype):
            return walk(f"{name}.key", dtype.key_type) + walk(f"{name}.value", dtype.item_type)
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return walk(f"{name}.item", dtype.value_type)
        return [name]

    return [path for field in schema for path in walk(field.name, field.type)]


def sorted_metadata(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every metadata mapping in key order (pylance returns hash-map order)."""
    return pa.schema(
        [field.with_metadata(dict(sorted((field.metadata or {}).items()))) for field in schema],
        metadata=dict(sorted((schema.metadata or {}).items())),
    )


def write_expected(table: pa.Table, path: Path) -> None:
    """Write ``table`` as Parquet with its exact Arrow schema in the key-value metadata."""
    schema = sorted_metadata(table.schema)
    metadata = {**(schema.metadata or {}), SCHEMA_KEY: schema.serialize().to_pybytes()}
    pq.write_table(table.cast(schema).replace_schema_metadata(metadata), path, compression="zstd")
    if not read_expected(path).equals(table, check_metadata=True):
        raise AssertionError(f"{path} does not round-trip through Parquet")


def read_expected(path: Path) -> pa.Table:
    """Read an expectation written by :func:`write_expected` back with its exact Arrow types."""
    table = pq.read_table(path)
    schema = pa.ipc.read_schema(pa.py_buffer(table.schema.metadata[SCHEMA_KEY]))
    return table.replace_schema_metadata(None).cast(schema)


def text_features(layout_text: str) -> list[str]:
    """The sorted feature names in a page layout printed as protobuf text format."""
    return sorted(set(_TEXT_FEATURE_RE.findall(layout_text)))
