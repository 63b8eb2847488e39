"""Lance 2.0 data pages: the ``lance.encodings.ArrayEncoding`` codec, read and write.

One module per encoding family holds both directions: :mod:`.flat`, :mod:`.nullable`,
:mod:`.fixed_size_list`, :mod:`.binary`, :mod:`.fsst`, :mod:`.dictionary`,
:mod:`.packed_struct` and :mod:`.blob`, with the offsets scheme shared by lists and binaries in
:mod:`.offsets`. Decoders register under the ``array_encoding`` oneof name (:mod:`.page`).
:mod:`.strategy` picks encodings per Arrow type the way pylance 14 does, and :mod:`.columns`
lays fields over columns. The file layer reaches this package only through
:mod:`lance_ops.file.codecs`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lance_ops.encoding.api import FieldDecoder, FieldEncoder, PageInfo
from lance_ops.encoding.legacy.v2_0 import (
    binary,
    dictionary,
    fixed_size_list,
    flat,
    fsst,
    nullable,
    packed_struct,
)
from lance_ops.encoding.legacy.v2_0.columns import LegacyFieldDecoder, LegacyFieldEncoder, num_columns

# The decoders register themselves on import.
DECODER_MODULES = (binary, dictionary, fixed_size_list, flat, fsst, nullable, packed_struct)


def make_field_encoder(field: pa.Field) -> FieldEncoder:
    return LegacyFieldEncoder(field)


def make_field_decoder(field: pa.Field, columns: Sequence[Sequence[PageInfo]]) -> FieldDecoder:
    return LegacyFieldDecoder(field, columns)


__all__ = ["make_field_decoder", "make_field_encoder", "num_columns"]
