"""Decoders (and the page encoder, :mod:`.encoder`) for legacy Lance 0.1 (v1) data files.

A v1 file is a sequence of batches; every field (nested ones included) has one page per batch,
located through the file's page table (see :mod:`.container`). Pages use plain,
var-binary or dictionary encoding (:mod:`.plain`, :mod:`.binary`, :mod:`.dictionary`); lists and
structs are assembled from their children's pages by field id (:mod:`.decoder`).
"""

from lance_ops.encoding.legacy.v0_1.decoder import LegacyField, LegacyFieldDecoder, PageTable, layout_of

__all__ = ["LegacyField", "LegacyFieldDecoder", "PageTable", "layout_of"]
