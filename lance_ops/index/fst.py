"""Finite state transducers in the byte format of the ``fst`` Rust crate (version 3), which an
INVERTED index's ``_token_fst_bytes`` holds: sorted tokens, each mapped to its token id.

Layout (facts of the format): a 16-byte header (``u64`` version 3, ``u64`` type 0), the nodes,
then ``u64`` number of keys, ``u64`` root address and a ``u32`` masked CRC-32C of everything before
it. Nodes are written children first; a node's address is its last byte (the state byte), and it
is read backwards from there. The state byte's top two bits give the node's kind:

* ``11`` one transition to the node written just before it, no output;
* ``10`` one transition (packed output and address delta);
* ``0f`` any number of transitions, ``f`` the final flag.

Low six bits of a one-transition state name the input byte by its rank among the crate's 63 most
common inputs (0: the byte is stored before the state). Address ``0`` is the empty final node.
Outputs are summed along the path, plus the final output of the last node.

:class:`FstWriter` shares identical suffix nodes (the same node compiled once), which keeps the
result compact though not always minimal; readers do not need minimality.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from lance_ops.errors import CorruptFileError

__all__ = ["FstReader", "build_fst", "crc32c_masked"]

VERSION = 3
_EMPTY = 0
_NONE = 1
_INDEX_THRESHOLD = 32
# The fst crate's most common input bytes, in rank order (rank 1 = ``t``).
_COMMON = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHG"
_COMMON_RANK = {b: i + 1 for i, b in enumerate(_COMMON)}


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def crc32c_masked(data: bytes) -> int:
    """The masked CRC-32C (Castagnoli) the format stores last."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _pack_size(n: int) -> int:
    return max(1, (n.bit_length() + 7) // 8)


def _unpack(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "little")


class FstReader:
    """Lookups and ordered iteration over an FST's bytes (``bytes`` -> ``int``)."""

    def __init__(self, data: bytes) -> None:
        data = bytes(data)
        if len(data) < 36:
            raise CorruptFileError("fst", f"FST of {len(data)} bytes is too short")
        version, kind = struct.unpack_from("<QQ", data, 0)
        if version != VERSION:
            raise CorruptFileError("fst", f"FST version {version} is not supported (only {VERSION})")
        end = len(data) - 4
        self.len, self.root = struct.unpack_from("<QQ", data, end - 16)
        if self.root != _EMPTY and self.root + 21 != len(data):
            raise CorruptFileError("fst", "FST root address does not match its size")
        self.data = data

    def __len__(self) -> int:
        return int(self.len)

    def _node(self, addr: int) -> tuple[bool, int, list[tuple[int, int, int]]]:
        """``(is_final, final_output, [(input, output, target), ...])`` of the node at ``addr``."""
        if addr == _EMPTY:
            return True, 0, []
        data = self.data
        state = data[addr]
        kind = state >> 6
        if kind in (0b11, 0b10):
            rank = state & 0x3F
            pos = addr - 1
            if rank:
                inp = _COMMON[rank - 1]
            else:
                inp = data[pos]
                pos -= 1
            if kind == 0b11:
                return False, 0, [(inp, 0, pos)]
            sizes = data[pos]
            tsize, osize = sizes >> 4, sizes & 0x0F
            pos -= tsize
            delta = _unpack(data, pos, tsize)
            out = 0
            if osize:
                pos -= osize
                out = _unpack(data, pos, osize)
            target = _EMPTY if delta == _EMPTY else pos - delta
            return False, 0, [(inp, out, target)]
        is_final = bool(state & 0x40)
        ntrans = state & 0x3F
        pos = addr - 1
        if ntrans == 0:
            ntrans = data[pos]
            ntrans = 256 if ntrans == 1 else ntrans
            pos -= 1
        sizes = data[pos]
        tsize, osize = sizes >> 4, sizes & 0x0F
        if ntrans > _INDEX_THRESHOLD:
            pos -= 256
        inputs_at = pos - ntrans
        addrs_at = inputs_at - ntrans * tsize
        outs_at = addrs_at - ntrans * osize
        end = outs_at - (osize if is_final else 0)
        trans = []
        for i in range(ntrans):
            inp = data[pos - 1 - i]
            delta = _unpack(data, pos - ntrans - (i + 1) * tsize, tsize)
            out = _unpack(data, addrs_at - (i + 1) * osize, osize) if osize else 0
            trans.append((inp, out, _EMPTY if delta == _EMPTY else end - delta))
        final_output = _unpack(data, outs_at - osize, osize) if is_final and osize else 0
        return is_final, final_output, trans

    def get(self, key: bytes | str) -> int | None:
        """The value of ``key``, None when absent."""
        if isinstance(key, str):
            key = key.encode()
        addr, total = self.root, 0
        for b in key:
            for inp, out, target in self._node(addr)[2]:
                if inp == b:
                    addr, total = target, total + out
                    break
            else:
                return None
        is_final, final_output, _ = self._node(addr)
        return total + final_output if is_final else None

    def items(self) -> Iterator[tuple[bytes, int]]:
        """Every ``(key, value)`` in key order."""
        stack: list[tuple[int, bytes, int]] = [(self.root, b"", 0)]
        while stack:
            addr, key, total = stack.pop()
            is_final, final_output, trans = self._node(addr)
            if is_final:
                yield key, total + final_output
            for inp, out, target in sorted(trans, reverse=True):
                stack.append((target, key + bytes((inp,)), total + out))


class _Node:
    __slots__ = ("final", "final_output", "trans")

    def __init__(self) -> None:
        self.final = False
        self.final_output = 0
        # [input, output, target address] (the last one's target is set when it is compiled)
        self.trans: list[list[int]] = []


class _Builder:
    def __init__(self) -> None:
        self.buf = bytearray(struct.pack("<QQ", VERSION, 0))
        self.last_addr = _NONE
        self.registry: dict[tuple, int] = {}

    def compile(self, node: _Node) -> int:
        if not node.trans and node.final and node.final_output == 0:
            return _EMPTY
        key = (node.final, node.final_output, tuple(tuple(t) for t in node.trans))
        addr = self.registry.get(key)
        if addr is not None:
            return addr
        start = len(self.buf)
        self._write(node, start)
        self.last_addr = len(self.buf) - 1
        self.registry[key] = self.last_addr
        return self.last_addr

    def _write(self, node: _Node, start: int) -> None:
        buf = self.buf
        trans = node.trans
        if len(trans) == 1 and not node.final:
            inp, out, target = trans[0]
            rank = _COMMON_RANK.get(inp, 0)
            if target == self.last_addr and out == 0:
                if not rank:
                    buf.append(inp)
                buf.append(0xC0 | rank)
                return
            delta = _EMPTY if target == _EMPTY else start - target
            osize = _pack_size(out) if out else 0
            tsize = _pack_size(delta)
            if osize:
                buf += out.to_bytes(osize, "little")
            buf += delta.to_bytes(tsize, "little")
            buf.append((tsize << 4) | osize)
            if not rank:
                buf.append(inp)
            buf.append(0x80 | rank)
            return
        deltas = [_EMPTY if t == _EMPTY else start - t for _, _, t in trans]
        tsize = max((_pack_size(d) for d in deltas), default=0)
        any_outs = node.final_output != 0 or any(out for _, out, _ in trans)
        osize = (
            max([_pack_size(node.final_output)] + [_pack_size(out) for _, out, _ in trans]) if any_outs else 0
        )
        if any_outs:
            if node.final:
                buf += node.final_output.to_bytes(osize, "little")
            for _, out, _ in reversed(trans):
                buf += out.to_bytes(osize, "little")
        for d in reversed(deltas):
            buf += d.to_bytes(tsize, "little")
        for inp, _, _ in reversed(trans):
            buf.append(inp)
        if len(trans) > _INDEX_THRESHOLD:
            index = bytearray([255] * 256)
            for i, (inp, _, _) in enumerate(trans):
                index[inp] = i
            buf += index
        buf.append((tsize << 4) | osize)
        n = len(trans)
        state = 0x40 if node.final else 0
        if 0 < n <= 0x3F:
            state |= n
        else:
            buf.append(1 if n == 256 else n)
        buf.append(state)


def build_fst(items: Iterable[tuple[bytes, int]]) -> bytes:
    """The FST bytes of ``items``: ``(key, value)`` pairs with strictly increasing keys."""
    builder = _Builder()
    stack = [_Node()]
    previous: bytes | None = None
    count = 0

    def freeze(depth: int) -> None:
        # compile the nodes deeper than ``depth`` and point their parents' last transitions at them
        while len(stack) > depth + 1:
            node = stack.pop()
            stack[-1].trans[-1][2] = builder.compile(node)

    for key, value in items:
        if previous is not None and key <= previous:
            raise ValueError(f"FST keys must be strictly increasing: {key!r} after {previous!r}")
        if value < 0:
            raise ValueError(f"FST values must be non-negative, got {value}")
        prefix = 0
        if previous is not None:
            limit = min(len(key), len(previous))
            while prefix < limit and key[prefix] == previous[prefix]:
                prefix += 1
        freeze(prefix)
        # push the shared part of the output up the common prefix, the rest down
        remaining = value
        for i in range(prefix):
            last = stack[i].trans[-1]
            common = min(last[1], remaining)
            extra = last[1] - common
            last[1] = common
            remaining -= common
            if extra:
                child = stack[i + 1]
                if child.final:
                    child.final_output += extra
                for t in child.trans:
                    t[1] += extra
        for j, b in enumerate(key[prefix:]):
            stack[-1].trans.append([b, remaining if j == 0 else 0, _NONE])
            stack.append(_Node())
        if len(key) == prefix:
            stack[-1].final_output += remaining
        stack[-1].final = True
        previous = key
        count += 1
    freeze(0)
    root = builder.compile(stack[0])
    buf = builder.buf
    buf += struct.pack("<QQ", count, root)
    buf += struct.pack("<I", crc32c_masked(bytes(buf)))
    return bytes(buf)
