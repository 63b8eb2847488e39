"""Structural layouts of Lance 2.1 / 2.2 pages (spec/encodings-2.1.md §2-§5).

* :mod:`.repdef` — repetition / definition levels: Arrow ↔ levels, level compression.
* :mod:`.miniblock` — mini-block pages (small values, dictionaries, repetition index).
* :mod:`.fullzip` — full-zip pages (values of 256 bytes and more).
* :mod:`.constant` — constant pages (all-null, 2.2 constant value).
* :mod:`.blob` — blob pages (descriptions in the page, blob bytes in buffers outside it).
* :mod:`.values` — Arrow leaf arrays ↔ :mod:`lance_ops.encoding.data` blocks.
* :mod:`.page` — the page-reader registry keyed by the ``PageLayout`` oneof.
"""
