"""A minimal test-only codec: one column per top-level fixed-width, non-null field.

Each page is one raw buffer of the values (plus an empty constant layout as a placeholder
description), so container tests do not depend on the real codec.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.encoding.api import (
    EncodedPage,
    Fetch,
    FieldDecoder,
    FieldEncoder,
    FileVersion,
    PageInfo,
    WriteExternal,
)


def layout() -> pb21.PageLayout:
    layout = pb21.PageLayout()
    layout.constant_layout.SetInParent()
    return layout


class RawEncoder(FieldEncoder):
    num_columns = 1

    def __init__(self, field: pa.Field) -> None:
        self.dtype = field.type.to_pandas_dtype()

    def encode(self, array: pa.Array, external: WriteExternal | None = None) -> list[list[EncodedPage]]:
        values = np.ascontiguousarray(array.to_numpy(zero_copy_only=False).astype(self.dtype))
        return [[EncodedPage(buffers=(values.view(np.uint8),), layout=layout(), num_rows=len(array))]]


class RawDecoder(FieldDecoder):
    def __init__(self, field: pa.Field, pages: list[PageInfo]) -> None:
        self.field = field
        self.pages = pages

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        wanted = np.arange(rows.start, rows.stop) if isinstance(rows, range) else np.asarray(rows)
        dtype = np.dtype(self.field.type.to_pandas_dtype())
        buffers = fetch([page.buffers[0] for page in self.pages])
        values = np.concatenate([np.frombuffer(b, dtype=dtype) for b in buffers] or [np.empty(0, dtype)])
        return pa.array(values[wanted], type=self.field.type)


def make_field_encoder(field: pa.Field, version: FileVersion) -> FieldEncoder:
    return RawEncoder(field)


def make_field_decoder(field: pa.Field, columns: list[list[PageInfo]], version: FileVersion) -> FieldDecoder:
    (pages,) = columns
    return RawDecoder(field, pages)


def num_columns(field: pa.Field, version: FileVersion) -> int:
    return 1
