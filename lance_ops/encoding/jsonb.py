"""JSONB: the binary form in which Lance stores JSON columns (``lance.json`` over ``large_binary``).

pylance 14 takes ``arrow.json`` columns, parses each document and stores it in the binary layout of
the ``jsonb`` crate; reads turn it back into compact JSON text. The layout, as pylance 14 writes it
(all integers big-endian):

* a value is a *container*: a ``u32`` header, then one ``u32`` entry per item, then the items'
  bytes in order. Header: ``0x80000000 | n`` for an array of n items, ``0x40000000 | n`` for an
  object of n members, ``0x20000000`` for a lone scalar (one entry follows);
* an object's entries are its n keys' entries then its n values' entries, and its bytes the keys'
  bytes then the values' bytes; keys are sorted by their UTF-8 bytes, a key given twice is refused;
* an entry is ``type | length`` (length of the item's bytes in the low 28 bits): null
  ``0x00000000``, string ``0x10000000`` (UTF-8 bytes), number ``0x20000000``, false
  ``0x30000000``, true ``0x40000000``, nested container ``0x50000000``;
* a number is a tag byte and its payload: ``0x00`` zero (integer), ``0x10`` NaN, ``0x20`` +inf,
  ``0x30`` -inf, ``0x40`` negative integer (two's complement in 1, 2, 4 or 8 bytes, the fewest that
  hold it), ``0x50`` non-negative integer (unsigned, 1, 2, 4 or 8 bytes), ``0x60`` float64
  (8 bytes). Integers outside int64 / uint64 become float64; a number with a fraction or an
  exponent is float64 even when integral (``1.0``, ``1E2``).

Text out is compact (no spaces), keys in stored order, strings escaped as JSON requires (control
characters, ``"`` and ``\\``; other characters as UTF-8), non-finite numbers as ``null``, floats in
the shortest form that reads back (``1.0``, ``0.00001``, ``1.23e-7``, ``1e+16``).

Parsing is Python's :mod:`json` and both directions walk each document in Python: JSON is
recursive and variable-width, so there is no vectorised form; the per-document loop is the cost
(about the cost of ``json.loads`` + ``json.dumps``). pylance's parser is more lenient than
:mod:`json` (it takes an empty string, ``nan``, trailing commas and single quotes); those raise
:class:`~lance_ops.errors.InvalidJsonError` here.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pyarrow as pa

from lance_ops.errors import CorruptFileError, InvalidJsonError

__all__ = [
    "decode",
    "decode_array",
    "encode",
    "encode_array",
    "float_text",
    "from_python",
    "parse",
    "text_of",
    "to_python",
]

_ARRAY = 0x80000000
_OBJECT = 0x40000000
_SCALAR = 0x20000000
_KIND_MASK = 0xE0000000

_NULL = 0x00000000
_STRING = 0x10000000
_NUMBER = 0x20000000
_FALSE = 0x30000000
_TRUE = 0x40000000
_CONTAINER = 0x50000000
_TYPE_MASK = 0x70000000
_LENGTH_MASK = 0x0FFFFFFF

_N_ZERO = 0x00
_N_NAN = 0x10
_N_INF = 0x20
_N_NEG_INF = 0x30
_N_INT = 0x40
_N_UINT = 0x50
_N_FLOAT = 0x60

_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_UINT_FORMATS = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}
_INT_FORMATS = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}


# --------------------------------------------------------------------------- text -> JSONB


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise InvalidJsonError(f"Failed to encode JSON: duplicate object attribute {key!r}")
            seen.add(key)
    return out


def parse(text: str | bytes) -> Any:
    """The Python value of JSON ``text`` (objects as dicts); raises :class:`InvalidJsonError`."""
    try:
        return json.loads(text, object_pairs_hook=_unique_members)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8
        if isinstance(exc, InvalidJsonError):
            raise
        raise InvalidJsonError(f"Failed to encode JSON: {exc}") from exc


def _utf8(text: str) -> bytes:
    # A lone surrogate (``"\\ud800"`` in the text) is kept as its escape, as pylance stores it.
    return text.encode("utf-8", errors="backslashreplace")


def _number(value: int | float) -> bytes:
    if isinstance(value, int):
        if value == 0:
            return bytes([_N_ZERO])
        if 0 < value <= _U64_MAX:
            size = 1 if value <= 0xFF else 2 if value <= 0xFFFF else 4 if value <= 0xFFFFFFFF else 8
            return bytes([_N_UINT]) + struct.pack(_UINT_FORMATS[size], value)
        if _I64_MIN <= value < 0:
            size = 1 if value >= -0x80 else 2 if value >= -0x8000 else 4 if value >= -0x80000000 else 8
            return bytes([_N_INT]) + struct.pack(_INT_FORMATS[size], value)
        value = float(value)
    if math.isnan(value):
        return bytes([_N_NAN])
    if math.isinf(value):
        return bytes([_N_INF if value > 0 else _N_NEG_INF])
    return bytes([_N_FLOAT]) + struct.pack(">d", value)


def _item(value: Any) -> tuple[int, bytes]:
    """The entry type and bytes of one value inside a container."""
    if value is None:
        return _NULL, b""
    if value is True:
        return _TRUE, b""
    if value is False:
        return _FALSE, b""
    if isinstance(value, str):
        return _STRING, _utf8(value)
    if isinstance(value, int | float):
        return _NUMBER, _number(value)
    return _CONTAINER, _container(value)


def _entries(items: list[tuple[int, bytes]]) -> bytes:
    return struct.pack(f">{len(items)}I", *(kind | len(data) for kind, data in items))


def _container(value: Any) -> bytes:
    if isinstance(value, list):
        items = [_item(v) for v in value]
        return struct.pack(">I", _ARRAY | len(items)) + _entries(items) + b"".join(d for _, d in items)
    if isinstance(value, dict):
        keys = sorted((_utf8(k), k) for k in value)
        key_items = [(_STRING, raw) for raw, _ in keys]
        value_items = [_item(value[k]) for _, k in keys]
        both = key_items + value_items
        return struct.pack(">I", _OBJECT | len(keys)) + _entries(both) + b"".join(d for _, d in both)
    kind, data = _item(value)
    return struct.pack(">II", _SCALAR, kind | len(data)) + data


def from_python(value: Any) -> bytes:
    """The JSONB bytes of a parsed JSON value (dict / list / str / int / float / bool / None)."""
    return _container(value)


def encode(text: str | bytes) -> bytes:
    """The JSONB bytes of one JSON document; raises :class:`InvalidJsonError` when it is not one."""
    return _container(parse(text))


def encode_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """JSON text (``arrow.json``, string or binary values) as a ``large_binary`` array of JSONB;
    nulls stay null."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    return pa.array([None if t is None else encode(t) for t in array.to_pylist()], pa.large_binary())


# --------------------------------------------------------------------------- JSONB -> text


def _corrupt(message: str) -> CorruptFileError:
    return CorruptFileError("", f"bad JSONB value: {message}")


def _read_number(data: bytes) -> int | float | None:
    """The number in ``data``; None for NaN and infinities (written as ``null``)."""
    if not data:
        raise _corrupt("empty number")
    tag, payload = data[0], data[1:]
    if tag == _N_ZERO:
        return 0
    if tag in (_N_NAN, _N_INF, _N_NEG_INF):
        return None
    if tag == _N_UINT and len(payload) in _UINT_FORMATS:
        return int(struct.unpack(_UINT_FORMATS[len(payload)], payload)[0])
    if tag == _N_INT and len(payload) in _INT_FORMATS:
        return int(struct.unpack(_INT_FORMATS[len(payload)], payload)[0])
    if tag == _N_FLOAT and len(payload) == 8:
        return float(struct.unpack(">d", payload)[0])
    raise _corrupt(f"unknown number tag 0x{tag:02x} with {len(payload)} bytes")


def _read_item(kind: int, data: bytes) -> Any:
    if kind == _NULL:
        return None
    if kind == _TRUE:
        return True
    if kind == _FALSE:
        return False
    if kind == _STRING:
        return data.decode("utf-8")
    if kind == _NUMBER:
        return _read_number(data)
    if kind == _CONTAINER:
        return _read_container(data)
    raise _corrupt(f"unknown entry type 0x{kind:08x}")


def _split(data: bytes, start: int, count: int) -> list[tuple[int, bytes]]:
    """``count`` entries at ``start`` and the bytes each one's length covers after them."""
    end = start + 4 * count
    if end > len(data):
        raise _corrupt("entries run past the value")
    entries = struct.unpack_from(f">{count}I", data, start)
    out = []
    pos = end
    for entry in entries:
        if entry & 0x80000000:
            raise _corrupt("offset-form entries are not supported")
        length = entry & _LENGTH_MASK
        if pos + length > len(data):
            raise _corrupt("an item runs past the value")
        out.append((entry & _TYPE_MASK, data[pos : pos + length]))
        pos += length
    return out


def _read_container(data: bytes) -> Any:
    if len(data) < 4:
        raise _corrupt("shorter than its header")
    (header,) = struct.unpack_from(">I", data)
    kind, count = header & _KIND_MASK, header & _LENGTH_MASK
    if kind == _ARRAY:
        return [_read_item(k, d) for k, d in _split(data, 4, count)]
    if kind == _OBJECT:
        items = _split(data, 4, 2 * count)
        keys = [d.decode("utf-8") for _, d in items[:count]]
        return {key: _read_item(k, d) for key, (k, d) in zip(keys, items[count:], strict=True)}
    if kind == _SCALAR:
        ((k, d),) = _split(data, 4, 1)
        return _read_item(k, d)
    raise _corrupt(f"unknown header 0x{header:08x}")


def to_python(data: bytes) -> Any:
    """The Python value of one JSONB document (objects as dicts in stored key order)."""
    return _read_container(bytes(data))


def float_text(value: float) -> str:
    """``value`` as pylance writes it: the shortest digits that read back; plain between 1e-5 and
    1e16 (``1.0``, ``0.00001``), else ``d.ddde+N`` / ``d.ddde-N``."""
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if power == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(float_text(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(item, out)
        out.append("}")


def text_of(value: Any) -> str:
    """Compact JSON text of a Python JSON value, as pylance prints JSONB (see :func:`decode`)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def decode(data: bytes) -> str:
    """Compact JSON text of one JSONB document, as pylance reads it back."""
    return text_of(to_python(data))


def decode_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A binary array of JSONB documents as ``arrow.json`` text (nulls stay null)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    texts = [None if b is None else decode(b) for b in array.to_pylist()]
    return pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))
