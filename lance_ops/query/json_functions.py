"""pylance 14's JSON functions over ``arrow.json`` columns, for filters and SQL expressions.

================================  ===============================================================
``json_get(j, key)``              the value under ``key`` as JSONB bytes (``large_binary``)
``json_get_int(j, key)``          as ``int64``: integers; floats rounded (half away from zero);
                                  booleans 1 / 0; strings holding a number
``json_get_float(j, key)``        as ``float64``: numbers, booleans 1.0 / 0.0, numeric strings
``json_get_bool(j, key)``         as ``bool``: booleans, the strings ``true`` / ``false``
``json_get_string(j, key)``       as text: strings unquoted, numbers and booleans as JSON prints them
``json_extract(j, '$.a.b[0]')``   the value at a JSONPath as compact JSON text (``'"s"'``, ``'null'``)
``json_exists(j, '$.a')``         whether the path is there
``json_array_contains(j, p, v)``  whether the array at path ``p`` has an item whose JSON text is
                                  ``v`` (or, for a string item, ``"v"``)
``json_array_length(j, p)``       the length of the array at path ``p`` (0 for another value, NULL
                                  when the path is missing)
================================  ===============================================================

``j`` is a JSON column, or the result of ``json_get`` (JSONB): ``json_get(json_get(j, 'a'), 'b')``.

``key`` is an object member name, or, when it is all digits, an array position (0-based). A
missing key / path, a null row and a JSON ``null`` give NULL (``json_extract``: ``'null'`` for a
JSON null). A value the typed getters cannot convert (an object, an array, a non-numeric string
for ``json_get_int``) raises :class:`~lance_ops.errors.PredicateError` (pylance fails the query
too). JSONPath: ``$``, ``.name``, ``['name']`` / ``["name"]``, ``[n]``; a path without ``$`` is
read as ``$.`` + path (``a.b``), as pylance's JSON index paths are.

Each call parses each row's document (a per-row Python loop: JSON has no vectorised form).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding import jsonb
from lance_ops.errors import PredicateError

__all__ = [
    "GETTERS",
    "MISSING",
    "JSON_FUNCTIONS",
    "convert",
    "json_function",
    "lookup",
    "parse_path",
]

MISSING = object()
_PATH_TOKEN = re.compile(r"""\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]""")


def parse_path(path: str) -> tuple[str | int, ...]:
    """The steps of a JSONPath (``$.a.b[0]``; ``a.b`` is ``$.a.b``): member names and positions."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    elif text:
        text = "." + text
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _PATH_TOKEN.match(text, pos)
        if match is None:
            raise PredicateError(f"Invalid JSONPath '{path}'")
        name, index, single, double = match.groups()
        if index is not None:
            steps.append(int(index))
        else:
            steps.append(name if name is not None else single if single is not None else double)
        pos = match.end()
    return tuple(steps)


def key_step(key: str) -> str | int:
    """A ``json_get*`` key: an array position when it is all digits, else a member name."""
    return int(key) if key.isdigit() else key


def lookup(document: Any, steps: tuple[str | int, ...]) -> Any:
    """The value at ``steps`` in a parsed document, or :data:`MISSING`."""
    value = document
    for step in steps:
        if isinstance(step, int) and isinstance(value, list):
            if step >= len(value):
                return MISSING
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict):
            if step not in value:
                return MISSING
            value = value[step]
        else:
            return MISSING
    return value


def _fail(what: str, value: Any) -> PredicateError:
    return PredicateError(f"Execution error: Failed to convert to {what}: {json.dumps(value)[:60]}")


def _round_half_away(value: float) -> int:
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return value
    elif isinstance(value, float):
        if math.isfinite(value) and -(2.0**63) <= value < 2.0**63:
            return _round_half_away(value)
    elif isinstance(value, str):
        try:
            number = json.loads(value)
        except ValueError:
            number = None
        if isinstance(number, int | float) and not isinstance(number, bool):
            return _to_int(number)
    raise _fail("integer", value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _fail("float", value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _fail("boolean", value)


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return jsonb.text_of(value)
    raise _fail("string", value)


# json_get_* name -> (conversion, Arrow type)
GETTERS: dict[str, tuple[Callable[[Any], Any], pa.DataType]] = {
    "json_get": (jsonb.from_python, pa.large_binary()),
    "json_get_int": (_to_int, pa.int64()),
    "json_get_float": (_to_float, pa.float64()),
    "json_get_bool": (_to_bool, pa.bool_()),
    "json_get_string": (_to_string, pa.string()),
}


def convert(name: str, value: Any) -> Any:
    """A found value as ``name`` returns it (None when missing, and for a JSON null but in
    ``json_get``, which returns its JSONB)."""
    if value is MISSING or (value is None and name != "json_get"):
        return None
    return GETTERS[name][0](value)


def _documents(array: pa.Array) -> list[Any]:
    """Each row's parsed document (None for a null row)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):  # JSONB
        return [None if b is None else jsonb.to_python(b) for b in array.to_pylist()]
    return [None if t is None else json.loads(t) for t in array.to_pylist()]


def _per_row(second: pa.Array | pa.Scalar, rows: int) -> list[Any]:
    if isinstance(second, pa.Scalar):
        return [second.as_py()] * rows
    return second.to_pylist()


def _getter(name: str) -> Callable[..., pa.Array]:
    def run(ctx: Any, documents: pa.Array, keys: pa.Array | pa.Scalar) -> pa.Array:
        out: list[Any] = []
        for document, key in zip(_documents(documents), _per_row(keys, len(documents)), strict=True):
            if document is None or key is None:
                out.append(None)
            else:
                out.append(convert(name, lookup(document, (key_step(key),))))
        return pa.array(out, GETTERS[name][1])

    return run


def _extract(ctx: Any, documents: pa.Array, paths: pa.Array | pa.Scalar) -> pa.Array:
    out: list[str | None] = []
    for document, path in zip(_documents(documents), _per_row(paths, len(documents)), strict=True):
        value = MISSING if document is None or path is None else lookup(document, parse_path(path))
        out.append(None if value is MISSING else jsonb.text_of(value))
    return pa.array(out, pa.string())


def _exists(ctx: Any, documents: pa.Array, paths: pa.Array | pa.Scalar) -> pa.Array:
    out: list[bool | None] = []
    for document, path in zip(_documents(documents), _per_row(paths, len(documents)), strict=True):
        out.append(
            None if document is None or path is None else lookup(document, parse_path(path)) is not MISSING
        )
    return pa.array(out, pa.bool_())


def _array_contains(ctx: Any, documents: pa.Array, paths: pa.Array | pa.Scalar, wanted: Any) -> pa.Array:
    out: list[bool | None] = []
    rows = len(documents)
    for document, path, value in zip(
        _documents(documents), _per_row(paths, rows), _per_row(wanted, rows), strict=True
    ):
        if document is None or path is None or value is None:
            out.append(None)
            continue
        found = lookup(document, parse_path(path))
        items = found if isinstance(found, list) else []
        # an item matches as its JSON text, or a string item as the value quoted
        out.append(any(jsonb.text_of(item) in (value, f'"{value}"') for item in items))
    return pa.array(out, pa.bool_())


def _array_length(ctx: Any, documents: pa.Array, paths: pa.Array | pa.Scalar) -> pa.Array:
    out: list[int | None] = []
    for document, path in zip(_documents(documents), _per_row(paths, len(documents)), strict=True):
        found = MISSING if document is None or path is None else lookup(document, parse_path(path))
        out.append(None if found is MISSING else len(found) if isinstance(found, list) else 0)
    return pa.array(out, pa.int64())


# name -> (the function over (documents, text arguments...), result type, number of text arguments)
JSON_FUNCTIONS: dict[str, tuple[Callable[..., pa.Array], pa.DataType, int]] = {
    **{name: (_getter(name), out, 1) for name, (_, out) in GETTERS.items()},
    "json_extract": (_extract, pa.string(), 1),
    "json_exists": (_exists, pa.bool_(), 1),
    "json_array_contains": (_array_contains, pa.bool_(), 2),
    "json_array_length": (_array_length, pa.int64(), 1),
}


def json_function(name: str, column_type: pa.DataType) -> str:
    """The Arrow function ``name`` over a JSON column of ``column_type`` (registered on first use)."""
    registered = f"lance_ops.{name}[{column_type}]"
    try:
        pc.get_function(registered)
    except pa.ArrowKeyError:
        function, out, texts = JSON_FUNCTIONS[name]
        pc.register_scalar_function(
            function,
            registered,
            {"summary": f"pylance's {name}", "description": f"lance-ops' {name} over {column_type}"},
            {"json": column_type, **{f"arg{i}": pa.string() for i in range(texts)}},
            out,
        )
    return registered
