"""Compression schemes of the Lance 2.1/2.2 codec; importing the package registers every decoder."""

from lance_ops.encoding.compression import (  # noqa: F401
    bitpacking,
    bss,
    constant,
    flat,
    fsl,
    fsst,
    general,
    packed_struct,
    rle,
    variable,
)
