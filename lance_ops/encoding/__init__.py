"""The Lance 2.1 / 2.2 codec: pages <-> Arrow, with no I/O of its own.

Entry points for the file layer: :func:`make_field_encoder`, :func:`make_field_decoder` and
:func:`num_columns` (the encoding strategy), plus the contract types of :mod:`.api`.
"""

from lance_ops.encoding.api import EncodedPage, Fetch, FieldDecoder, FieldEncoder, FileVersion, PageInfo
from lance_ops.encoding.strategy import EncodingOptions, make_field_decoder, make_field_encoder, num_columns

__all__ = [
    "EncodedPage",
    "EncodingOptions",
    "Fetch",
    "FieldDecoder",
    "FieldEncoder",
    "FileVersion",
    "PageInfo",
    "make_field_decoder",
    "make_field_encoder",
    "num_columns",
]
