"""Whole reads of many small files at once: each column of all the files in one decode.

Reading a file of a few thousand rows costs a fixed ~2 ms of Python and numpy calls per column
(locating pages, parsing chunk headers, rebuilding the array), however few its rows.
:func:`read_whole_files` reads every row of many files of one schema (the fragments a
compaction merges) with the pages of each leaf column gathered across the files: runs of
mini-block pages of one layout are decoded together (:func:`~lance_ops.encoding.structural.
miniblock.read_whole_pages`) and each field is rebuilt once from its leaves, so those costs are
paid once per column of the whole set. The result is the same as reading each file with
``read_all`` and concatenating.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.field_decoder import StructuralFieldDecoder
from lance_ops.encoding.structural import empty_struct
from lance_ops.encoding.structural.miniblock import read_whole_pages
from lance_ops.encoding.structural.repdef import DecodedLeaf, unshred
from lance_ops.errors import CorruptFileError, LanceOpsError, SchemaError
from lance_ops.file.parallel import run_tasks
from lance_ops.file.reader import FileReader, V2FileReader

_STRUCTURAL = (FileVersion.V2_1, FileVersion.V2_2)


def read_whole_files(readers: Sequence[FileReader], columns: Sequence[str]) -> pa.Table:
    """Every row of ``readers``, in order, projected to ``columns`` (which each file must have).

    A column must have one type in every file (else :class:`SchemaError`). When every file is
    of version 2.1+ each field is decoded across the files at once (one task per field on the
    worker pool); otherwise each file is read on its own."""
    if not readers:
        raise ValueError("read_whole_files needs at least one file")
    schemas = [reader.schema for reader in readers]
    for reader, schema in zip(readers, schemas, strict=True):
        missing = [name for name in columns if schema.get_field_index(name) < 0]
        if missing:
            raise CorruptFileError(getattr(reader, "path", "<file>"), f"no column(s) {missing}")
    fields = [schemas[0].field(name) for name in columns]
    for reader, schema in zip(readers[1:], schemas[1:], strict=True):
        for field in fields:
            if schema.field(field.name).type != field.type:
                other = schema.field(field.name).type
                raise SchemaError(
                    f"column {field.name!r} is {other} in {reader.path} "  # type: ignore[attr-defined]
                    f"but {field.type} in {readers[0].path}"  # type: ignore[attr-defined]
                )
    joint = [r for r in readers if isinstance(r, V2FileReader) and joinable(r)]
    tasks = [
        partial(_joined_field, joint, field)
        if len(joint) == len(readers)
        else partial(_each_file, readers, field.name)
        for field in fields
    ]
    arrays = run_tasks(tasks)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schemas[0].metadata))


def joinable(reader: FileReader) -> bool:
    """Whether :func:`read_whole_files` decodes the columns of ``reader`` across files (2.1+
    files); others are read file by file."""
    return isinstance(reader, V2FileReader) and reader.version in _STRUCTURAL


def _each_file(readers: Sequence[FileReader], name: str) -> pa.ChunkedArray:
    chunks = [chunk for r in readers for chunk in r.read_all([name]).to_table().column(name).chunks]
    return pa.chunked_array(chunks, readers[0].schema.field(name).type)


def _joined_field(readers: Sequence[V2FileReader], field: pa.Field) -> pa.Array | pa.ChunkedArray:
    """``field`` of every file, its leaf columns' pages read across the files together."""
    readers = [reader for reader in readers if int(reader.num_rows)]
    if not readers:
        return pa.array([], field.type)
    decoders = []
    for reader in readers:
        decoder = reader._decoder(reader.schema.get_field_index(field.name))
        if not isinstance(decoder, StructuralFieldDecoder) or any(
            empty_struct.is_empty_struct(leaf.type) for leaf in decoder.leaves
        ):
            return _each_file(readers, field.name)
        decoders.append(decoder)

    def leaf(col: int) -> DecodedLeaf:
        return read_whole_pages(
            [
                (decoder._reader(col, page), reader._fetch, reader.path)
                for reader, decoder in zip(readers, decoders, strict=True)
                for page in range(len(decoder.columns[col]))
            ]
        )

    expected = int(np.sum([int(r.num_rows) for r in readers]))
    array = rebuilt_across_files(decoders[0], field, [r.path for r in readers], leaf, expected)
    return array if array.type == field.type else array.view(field.type)


def rebuilt_across_files(
    decoder: StructuralFieldDecoder,
    field: pa.Field,
    paths: Sequence[str],
    leaf: Callable[[int], DecodedLeaf],
    expected: int,
) -> pa.Array:
    """The storage array of ``field`` (decoded as ``decoder``'s field) rebuilt from its leaf
    columns, ``leaf(col)`` decoding leaf column ``col`` across the files ``paths``. Errors are
    located at those files; a row count other than ``expected`` is a :class:`CorruptFileError`."""
    path = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more files"
    try:
        array = unshred(decoder.field, [leaf(col) for col in range(len(decoder.leaves))])
    except CorruptFileError as exc:
        raise exc.located(path=path, column=field.name) from exc
    except LanceOpsError:
        raise
    except (IndexError, ValueError, pa.ArrowException) as exc:
        raise CorruptFileError(path, f"field {field.name!r}: levels do not rebuild: {exc}") from exc
    if len(array) != expected:
        raise CorruptFileError(path, f"field {field.name!r}: {len(array)} rows decoded of {expected}")
    return array
