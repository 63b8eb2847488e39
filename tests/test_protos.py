"""The generated protobuf modules must match protos/ and stay wire-compatible."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "scripts" / "gen_protos.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    written = _gen_module().generate(tmp_path)
    committed = ROOT / "lance_ops" / "_proto"
    names = {p.name for p in written}
    assert names == {p.name for p in committed.glob("*.py*")}, "generated module set differs"
    stale = [n for n in sorted(names) if (tmp_path / n).read_text() != (committed / n).read_text()]
    assert not stale, f"lance_ops/_proto is stale, run scripts/gen_protos.py: {stale}"


def test_type_urls_match_pylance_names() -> None:
    from lance_ops._proto import encodings_v2_0_pb2, encodings_v2_1_pb2, file2_pb2, file_pb2

    assert encodings_v2_1_pb2.PageLayout.DESCRIPTOR.full_name == "lance.encodings21.PageLayout"
    assert encodings_v2_0_pb2.ArrayEncoding.DESCRIPTOR.full_name == "lance.encodings.ArrayEncoding"
    assert encodings_v2_0_pb2.ColumnEncoding.DESCRIPTOR.full_name == "lance.encodings.ColumnEncoding"
    assert file2_pb2.ColumnMetadata.DESCRIPTOR.full_name == "lance.file.v2.ColumnMetadata"
    assert file_pb2.FileDescriptor.DESCRIPTOR.full_name == "lance.file.FileDescriptor"


def test_worked_example_column_metadata_decodes() -> None:
    """The 2.0 worked example bytes of spec/file-container.md §1.4 parse with our protos."""
    from google.protobuf import any_pb2

    from lance_ops._proto import encodings_v2_0_pb2, file2_pb2, file_pb2

    fd = bytes.fromhex("0a1b0a1912016120ffffffffffffffffff012a05696e743332300138011003")
    desc = file_pb2.FileDescriptor.FromString(fd)
    assert desc.length == 3
    (field,) = desc.schema.fields
    assert (field.name, field.parent_id, field.logical_type, field.nullable) == ("a", -1, "int32", True)
    assert field.encoding == file_pb2.PLAIN

    page_any = any_pb2.Any(type_url="/lance.encodings.ArrayEncoding")
    enc = encodings_v2_0_pb2.ArrayEncoding()
    enc.nullable.no_nulls.values.flat.bits_per_value = 32
    enc.nullable.no_nulls.values.flat.buffer.SetInParent()
    page_any.value = enc.SerializeToString()
    assert page_any.value.hex() == "120a0a080a060a0408201200"
    page = file2_pb2.ColumnMetadata.Page(buffer_offsets=[0], buffer_sizes=[12], length=3)
    page.encoding.direct.encoding = page_any.SerializeToString()
    assert file2_pb2.ColumnMetadata.Page.FromString(page.SerializeToString()).length == 3


def test_unknown_fields_are_tolerated() -> None:
    """Decoders keep going when a newer writer adds fields (e.g. pylance's Manifest field 23)."""
    from lance_ops._proto import encodings_v2_1_pb2

    known = encodings_v2_1_pb2.MiniBlockLayout(num_items=7).SerializeToString()
    unknown_field_99 = bytes([0x98, 0x06, 0x05])  # varint field 99 = 5 (tag 792 as a 2-byte varint)
    msg = encodings_v2_1_pb2.MiniBlockLayout.FromString(known + unknown_field_99)
    assert msg.num_items == 7


def test_messages_pickle() -> None:
    """Spark ships Lance fields to executors by pickle: classes must live under their real module."""
    import pickle

    from lance_ops._proto import file_pb2, table_pb2

    field = file_pb2.Field(name="x", id=3, parent_id=-1, logical_type="int64")
    assert pickle.loads(pickle.dumps(field)) == field
    assert file_pb2.Field.__module__ == "lance_ops._proto.file_pb2"
    fragment = table_pb2.DataFragment(id=7, physical_rows=10)
    assert pickle.loads(pickle.dumps(fragment)) == fragment
