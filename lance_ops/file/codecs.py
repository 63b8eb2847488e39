"""The one place where a file's version chooses its codec.

2.0 files store ``lance.encodings.ArrayEncoding`` pages, give every Lance field a column and
are handled by :mod:`lance_ops.encoding.legacy.v2_0`; 2.1 / 2.2 files store
``lance.encodings21.PageLayout`` pages, one column per leaf, handled by the structural codec
(:mod:`lance_ops.encoding.field_decoder`, :mod:`lance_ops.encoding.field_encoder`). The reader
and writer ask :func:`codec_for` and never test the version themselves. The 2.1 / 2.2 encoder
(and its compression strategy) is imported on the first write only: reading never loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
from google.protobuf.message import Message

from lance_ops._proto import encodings_v2_0_pb2 as pb20
from lance_ops._proto import encodings_v2_1_pb2 as pb21
from lance_ops.encoding import columns, field_decoder
from lance_ops.encoding.api import FieldDecoder, FieldEncoder, FileVersion, PageInfo
from lance_ops.encoding.legacy import v2_0
from lance_ops.errors import UnsupportedFeatureError


@dataclass(frozen=True)
class Codec:
    """How pages of one file version are described, encoded and decoded."""

    layout_type: type[Message]  # payload of every Page.encoding
    column_encodings: tuple[str, ...]  # ColumnEncoding oneofs a reader accepts
    num_columns: Callable[[pa.Field], int]
    # (field), or (field, compression=...) when chooses_compression
    make_field_encoder: Callable[..., FieldEncoder]
    make_field_decoder: Callable[[pa.Field, Sequence[Sequence[PageInfo]]], FieldDecoder]
    priority_is_first_row: bool  # 2.1+: Page.priority = first top-level row; 2.0: always 0
    every_column_holds_rows: bool  # 2.1+: every column's pages add up to the file's rows
    cuts_pages: bool  # 2.0: the encoder splits each column by max_page_bytes, not the writer
    chooses_compression: bool  # 2.1+: the encoder takes a writer-wide ``compression`` (e.g. "auto")


def _structural_encoder(field: pa.Field, **kwargs: Any) -> FieldEncoder:
    """:func:`lance_ops.encoding.field_encoder.make_field_encoder`, imported on the first write:
    the read path never loads the encoder."""
    from lance_ops.encoding import field_encoder

    return field_encoder.make_field_encoder(field, **kwargs)


def codec_for(version: FileVersion) -> Codec:
    """The codec of ``version``; legacy 0.1 files have no v2 codec."""
    if version is FileVersion.V2_0:
        return Codec(
            layout_type=pb20.ArrayEncoding,
            column_encodings=("values", "blob"),
            num_columns=v2_0.num_columns,
            make_field_encoder=v2_0.make_field_encoder,
            make_field_decoder=v2_0.make_field_decoder,
            priority_is_first_row=False,
            every_column_holds_rows=False,
            cuts_pages=True,
            chooses_compression=False,
        )
    if version in (FileVersion.V2_1, FileVersion.V2_2):
        return Codec(
            layout_type=pb21.PageLayout,
            column_encodings=("values",),
            num_columns=partial(columns.num_columns, version=version),
            make_field_encoder=partial(_structural_encoder, version=version),
            make_field_decoder=partial(field_decoder.make_field_decoder, version=version),
            priority_is_first_row=True,
            every_column_holds_rows=True,
            cuts_pages=False,
            chooses_compression=True,
        )
    raise UnsupportedFeatureError(f"Lance file version {version} has no v2 codec")
