"""Protocol-buffer wire format, just enough to walk messages by field number.

MindSpore pins protobuf 3.20.3, whose decoding is pure Python and slow, and a
reader must also work where MindSpore and its generated classes are absent.
These helpers decode in place from a bytes buffer without building message
objects; the schema knowledge lives in the ``*_proto`` modules.
"""

from __future__ import annotations

import struct

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

_F64 = struct.Struct("<d").unpack_from
_F32 = struct.Struct("<f").unpack_from


class DecodeError(ValueError):
    """A payload is not the protobuf message it should be; names the byte offset."""

    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} (at payload byte {offset})")
        self.offset = offset


_MASK64 = (1 << 64) - 1


def varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Decode a base-128 varint at *pos*; returns (value, next position)."""
    if pos >= end:
        raise DecodeError("varint runs past the end of the message", pos)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    p = pos + 1
    while True:
        if p >= end:
            raise DecodeError("varint runs past the end of the message", pos)
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _MASK64, p  # a tenth byte past bit 63 is dropped, as protobuf drops it (never an int past 64 bits)
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes", pos)


def signed64(value: int) -> int:
    """Interpret a decoded varint as two's-complement int64."""
    return value - (1 << 64) if value >= 1 << 63 else value


def fields(buf, pos: int, end: int):
    """Yield ``(field_number, wire_type, a, b)`` for each field in ``buf[pos:end]``.

    For varints ``a`` is the value and ``b`` where its bytes start; for fixed
    and length-delimited fields ``a:b`` is the span of the raw bytes.
    """
    while pos < end:
        key, pos = varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0", pos)
        if wire == VARINT:
            start = pos
            value, pos = varint(buf, pos, end)
            yield number, wire, value, start
        elif wire == LENGTH:
            n, start = varint(buf, pos, end)
            pos = start + n
            if pos > end:
                raise DecodeError(f"field {number} claims {n} bytes past the end of the message", start)
            yield number, wire, start, pos
        elif wire == FIXED64:
            start = pos
            pos += 8
            if pos > end:
                raise DecodeError(f"fixed64 field {number} runs past the end", start)
            yield number, wire, start, pos
        elif wire == FIXED32:
            start = pos
            pos += 4
            if pos > end:
                raise DecodeError(f"fixed32 field {number} runs past the end", start)
            yield number, wire, start, pos
        else:
            raise DecodeError(f"unsupported wire type {wire} for field {number}", pos)


def f64(buf, pos: int) -> float:
    return _F64(buf, pos)[0]


def f32(buf, pos: int) -> float:
    return _F32(buf, pos)[0]


def text(buf, a: int, b: int) -> str:
    return bytes(buf[a:b]).decode("utf-8", errors="replace")


def packed_or_single(buf, wire: int, a: int, b: int, kind: str, out: list) -> None:
    """Append repeated scalar values, accepting both packed and unpacked encodings.

    *kind* is ``"f32"``, ``"f64"``, ``"varint"`` or ``"svarint"`` (int64 two's complement).
    """
    if wire == LENGTH:
        if kind == "f32":
            out.extend(struct.unpack_from(f"<{(b - a) // 4}f", buf, a))
        elif kind == "f64":
            out.extend(struct.unpack_from(f"<{(b - a) // 8}d", buf, a))
        else:
            p = a
            while p < b:
                v, p = varint(buf, p, b)
                out.append(signed64(v) if kind == "svarint" else v)
    elif wire == FIXED32 and kind == "f32":
        out.append(f32(buf, a))
    elif wire == FIXED64 and kind == "f64":
        out.append(f64(buf, a))
    elif wire == VARINT and kind in ("varint", "svarint"):
        out.append(signed64(a) if kind == "svarint" else a)
    else:
        raise DecodeError(f"wire type {wire} does not fit a repeated {kind}", a)
