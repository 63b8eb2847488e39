"""The 2.1 / 2.2 field encoder: one top-level field's rows into one page per leaf column.

:class:`StructuralFieldEncoder` shreds the rows into leaves (:mod:`.structural.repdef`) and
encodes each leaf page with :func:`encode_leaf_page`, which walks the steps of
:mod:`.compression_strategy` in order (constant, dictionary, packed struct, full-zip or
mini-block) and builds the page from the choices made there. Blob leaves become blob pages.

Field trees pylance 14 cannot write or read back are refused here, with the error pylance
gives where it gives one (:func:`_marker_refusal`): some when the encoder is made (the schema
alone), others only once rows arrive, since pylance writes and reads back such a field in a
file without rows. :func:`make_field_encoder` is the file layer's entry point.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import EncodedPage, FieldEncoder, FileVersion, WriteExternal
from lance_ops.encoding.columns import check_structural, column_count, field_children, leaf_fields
from lance_ops.encoding.compression import packed_struct
from lance_ops.encoding.compression_strategy import (
    FULLZIP_MIN_VALUE_BYTES,
    auto_per_value,
    auto_variable,
    compress_fixed,
    dictionary_buffer,
    largest_value_bytes,
    try_constant_value,
    try_dictionary,
    try_per_value_compressor,
    try_variable_compressor,
    valid_visible,
)
from lance_ops.encoding.data import (
    DataBlock,
    FixedSizeListBlock,
    FixedWidthBlock,
    StructBlock,
    VariableWidthBlock,
)
from lance_ops.encoding.options import (
    AUTO,
    EncodingOptions,
    check_writer_compression,
    flag_set,
    is_blob_field,
)
from lance_ops.encoding.structural import blob, constant, empty_struct, fullzip, miniblock
from lance_ops.encoding.structural.repdef import ShreddedLeaf, count_leaves, is_leaf_field, shred
from lance_ops.encoding.structural.values import to_block
from lance_ops.errors import LanceOpsError, SchemaError, UnsupportedFeatureError


def _dictionary_page(
    leaf: ShreddedLeaf, indices: DataBlock, items: DataBlock, options: EncodingOptions, version: FileVersion
) -> EncodedPage:
    """Mini-block page of dictionary indices, with the dictionary in page buffer 2."""
    compressed, desc = compress_fixed(indices, options)
    buffers, layout = miniblock.encode_page(
        leaf.levels, compressed, desc, version, dictionary_buffer(items, options, version)
    )
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


def _null_items(block: DataBlock) -> bool:
    """An FSL block whose leaf items are of the null type (0 bits wide)."""
    while isinstance(block, FixedSizeListBlock):
        block = block.child
    return isinstance(block, FixedWidthBlock) and block.bits_per_value == 0


def encode_leaf_page(leaf: ShreddedLeaf, options: EncodingOptions, version: FileVersion) -> EncodedPage:
    """Encode one leaf column's page (steps 1-5 of :mod:`.compression_strategy`, in order)."""
    levels = leaf.levels
    valid = valid_visible(leaf)
    no_values = (
        len(leaf.values) == 0 or pa.types.is_null(leaf.values.type) or (valid is not None and not valid.any())
    )
    if no_values:
        buffers, layout = constant.encode_all_null(levels, version)
        return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    if pa.types.is_dictionary(leaf.values.type):
        keys = leaf.values.indices
        return _dictionary_page(leaf, to_block(keys), to_block(leaf.values.dictionary), options, version)
    if version is not FileVersion.V2_1:
        value = try_constant_value(leaf, valid)
        if value is not None:
            buffers, layout = constant.encode_constant(levels, value, version)
            return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    dtype = leaf.values.type
    if pa.types.is_struct(dtype):
        return _packed_struct_page(leaf, options, version)
    dictionary = try_dictionary(leaf, options, version)
    if dictionary is not None:
        return _dictionary_page(leaf, dictionary.indices, dictionary.items, options, version)
    block = to_block(leaf.values)
    full_zip = largest_value_bytes(block) >= FULLZIP_MIN_VALUE_BYTES
    if options.structural_encoding is not None:
        full_zip = options.structural_encoding == "fullzip"
    if _null_items(block):
        if options.structural_encoding == "miniblock":  # pylance 14 panics on it
            raise UnsupportedFeatureError("a fixed_size_list of nulls cannot be stored in mini-block")
        full_zip = True  # FSL<null> rows are validity bytes only: pylance always writes them full-zip
    if full_zip:
        block = fullzip.byte_aligned(block)
        if options.compression == AUTO:
            stored, desc = auto_per_value(block, dtype, options)
        else:
            stored, desc = try_per_value_compressor(block, dtype, options).compress_per_value(block)
        buffers, layout = fullzip.encode_page(levels, stored, desc, version)
        return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    if isinstance(block, VariableWidthBlock):
        if options.compression == AUTO:
            compressed, desc = auto_variable(block, dtype, options, version)
        else:
            compressed, desc = try_variable_compressor(block, dtype, options, version).compress(block)
    else:
        compressed, desc = compress_fixed(block, options)
    chunked, layout = miniblock.encode_page(levels, compressed, desc, version)
    return EncodedPage(tuple(chunked), layout, leaf.num_rows)


def _has_child_nulls(leaf: ShreddedLeaf) -> bool:
    """Whether a child of the struct leaf is null in a slot where the struct itself is valid."""
    values = leaf.values
    valid = valid_visible(leaf)
    for i in range(values.type.num_fields):
        child = values.field(i)
        if child.null_count == 0:
            continue
        nulls = child.is_null().to_numpy(zero_copy_only=False)
        if bool(np.any(nulls if valid is None else nulls & valid)):
            return True
    return False


def _packed_struct_page(leaf: ShreddedLeaf, options: EncodingOptions, version: FileVersion) -> EncodedPage:
    """Packed struct: mini-block ``PackedStruct`` for fixed-width children, else (2.2 only)
    full-zip ``VariablePackedStruct``. Packed rows have no room for a child's validity, so a
    child null inside a valid struct is refused (as pylance refuses it) rather than lost."""
    if _has_child_nulls(leaf):
        raise UnsupportedFeatureError("a packed struct's children cannot be null where the struct is valid")
    if any(pa.types.is_dictionary(child.type) for child in leaf.values.type):
        # pylance 14 refuses these too (its packing has no place for a child's dictionary).
        raise UnsupportedFeatureError("a packed struct cannot hold dictionary-typed children")
    block = to_block(leaf.values)
    if not isinstance(block, StructBlock):
        raise UnsupportedFeatureError("packed struct values did not form a struct block")
    fixed = all(isinstance(c, FixedWidthBlock) and c.bits_per_value % 8 == 0 for c in block.children)
    if fixed and options.structural_encoding != "fullzip":
        compressed, desc = packed_struct.PackedStructCompressor().compress(block)
        chunked, layout = miniblock.encode_page(leaf.levels, compressed, desc, version)
        return EncodedPage(tuple(chunked), layout, leaf.num_rows)
    if fixed:
        stored, desc = packed_struct.PackedStructCompressor().compress_per_value(block)
    elif version is FileVersion.V2_1:
        raise UnsupportedFeatureError("packed structs with variable-width children need Lance 2.2")
    else:
        stored, desc = packed_struct.VariablePackedStructCompressor().compress(block)
    buffers, layout = fullzip.encode_page(leaf.levels, stored, desc, version)
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


def _contains_map(dtype: pa.DataType) -> bool:
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_contains_map(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _contains_map(dtype.value_type)
    return False


def _holds_plain_struct(field: pa.Field) -> bool:
    """A (not packed) struct of more than one leaf column at or below ``field``."""
    if is_leaf_field(field):
        return False
    if pa.types.is_struct(field.type) and count_leaves(field) > 1:
        return True
    return any(_holds_plain_struct(c) for c in field_children(field))


def _marker_refusal(field: pa.Field, version: FileVersion, *, eager: bool) -> LanceOpsError | None:
    """Markers on a non-leaf field that make a file pylance 14 rejects, refused as pylance's
    writer refuses them or, where it writes them, because its reader cannot read them back:

    * ``lance-encoding:blob`` on a list, struct or map (pylance: "Blob encoding is not available";
      its reader would take the field for one blob column);
    * ``lance-encoding:packed`` on a list or map holding a (not packed) struct of several leaf
      columns (pylance writes a column per struct child, its reader expects one column).

    ``eager``: the refusals pylance makes when the schema is given (a blob list or map; a blob
    struct in 2.1); the others only once rows arrive (pylance writes and reads back such a
    field in a file without rows).
    """
    if is_leaf_field(field):
        return None
    is_struct = pa.types.is_struct(field.type)
    if is_blob_field(field.metadata, field.type) and eager == (not is_struct or version is FileVersion.V2_1):
        return SchemaError(f"blob field {field.name!r} must be large_binary, not {field.type}")
    if not eager and not is_struct and flag_set(field.metadata, "packed") and _holds_plain_struct(field):
        return UnsupportedFeatureError(
            f"field {field.name!r} ({field.type}) marked lance-encoding:packed holds a struct: "
            "pylance 14 cannot read such a file back"
        )
    for child in field_children(field):
        refusal = _marker_refusal(child, version, eager=eager)
        if refusal is not None:
            return refusal
    return None


class StructuralFieldEncoder(FieldEncoder):
    """Encodes one top-level field: one page per leaf column per :meth:`encode` call."""

    def __init__(self, field: pa.Field, version: FileVersion, compression: str | None = None) -> None:
        check_structural(version)
        self.field = field
        self.version = version
        if version is FileVersion.V2_1 and _contains_map(field.type):
            raise UnsupportedFeatureError("Map data type is not enabled in Lance 2.1")
        self.leaves = leaf_fields(field)
        # Like pylance, a leaf follows its own field's metadata (a list's or struct's keys do not
        # reach the leaves below it). ``compression`` (the writer's option) is the scheme of every
        # leaf that sets none itself.
        default = check_writer_compression(compression)
        self.options = [EncodingOptions.from_metadata(leaf.metadata, leaf.type) for leaf in self.leaves]
        if default is not None:
            self.options = [
                o if o.compression is not None else replace(o, compression=default) for o in self.options
            ]
        self._refusal: LanceOpsError | None = None
        for leaf, options in zip(self.leaves, self.options, strict=True):
            if options.blob and pa.types.is_binary(leaf.type):
                # pylance takes a binary blob field and refuses it once values arrive (a file
                # without rows is written and read back).
                self._refusal = SchemaError(f"blob field {leaf.name!r} must be large_binary, not binary")
            elif options.blob:
                blob.check_blob_type(leaf.name, leaf.type)
        refusal = _marker_refusal(field, version, eager=True)
        if refusal is not None:
            raise refusal
        self._refusal = _marker_refusal(field, version, eager=False) or self._refusal
        self.writes_external = any(options.blob for options in self.options)
        self.num_columns = column_count(field)  # a blob struct (never given rows) takes one column

    def encode(self, array: pa.Array, external: WriteExternal | None = None) -> list[list[EncodedPage]]:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if not array.type.equals(self.field.type):
            raise SchemaError(f"field {self.field.name!r}: expected {self.field.type}, got {array.type}")
        if len(array) == 0:
            return [[] for _ in range(self.num_columns)]
        if self._refusal is not None:
            raise self._refusal
        leaves = shred(array, self.field)
        return [
            [
                blob.encode_page(leaf, self.version, external)
                if options.blob
                else empty_struct.encode_page(leaf, field.name)
                if empty_struct.is_empty_struct(field.type)
                else encode_leaf_page(leaf, options, self.version)
            ]
            for leaf, options, field in zip(leaves, self.options, self.leaves, strict=True)
        ]


def make_field_encoder(field: pa.Field, version: FileVersion, compression: str | None = None) -> FieldEncoder:
    return StructuralFieldEncoder(field, version, compression)
