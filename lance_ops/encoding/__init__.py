"""The Lance 2.1 / 2.2 codec: pages <-> Arrow, with no I/O of its own.

The contract with the file layer is :mod:`.api`. The entry points are split by direction, as
in lance-encoding, so that reading never loads the writing side:

* :mod:`.field_decoder` — :func:`~.field_decoder.make_field_decoder` (reading);
* :mod:`.field_encoder` — :func:`~.field_encoder.make_field_encoder` (writing), which asks
  :mod:`.compression_strategy` how to encode each page;
* :mod:`.columns` — :func:`~.columns.num_columns`, the columns a field occupies (both);
* :mod:`.options` — :class:`~.options.EncodingOptions`, the ``lance-encoding:*`` keys.
"""

from lance_ops.encoding.api import EncodedPage, Fetch, FieldDecoder, FieldEncoder, FileVersion, PageInfo

__all__ = ["EncodedPage", "Fetch", "FieldDecoder", "FieldEncoder", "FileVersion", "PageInfo"]
