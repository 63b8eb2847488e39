"""The protobuf wire format's building blocks, for messages read or written without generated classes.

A message is a run of fields, each a varint key ``number << 3 | wire type`` then its value: a
varint (type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5). Varints are
little-endian base-128, the high bit of each byte saying another follows: 300 is ``ac 02``.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["decode_varint", "encode_varint", "fields", "length_delimited"]


def encode_varint(value: int) -> bytes:
    """``value`` (non-negative) as a base-128 varint."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it (ValueError when it is cut short)."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of each field of a message: an int for a varint, the raw bytes
    otherwise (ValueError on a malformed message)."""
    pos = 0
    while pos < len(data):
        key, pos = decode_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = decode_varint(data, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = data[pos : pos + size], pos + size
        elif wire == 2:
            size, pos = decode_varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated protobuf field")
        yield number, value


def length_delimited(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a nested message, a string or bytes)."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload
