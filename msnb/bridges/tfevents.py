"""TensorBoard event records, encoded by hand and framed with masked CRC32C.

msnb decodes protobuf by field number (:mod:`msnb.events.wire`) so that it
needs neither MindSpore's generated classes nor a particular protobuf release;
this module is the writing half of the same idea.  It depends on nothing but
``crc32c`` and numpy, so it installs beside MindSpore's protobuf 3.20.3 pin and
is several times faster than building message objects (``benchmarks/bench_export.py``
measures it against tensorboardX).

Field numbers are TensorFlow's ``event.proto``, ``summary.proto``,
``tensor.proto`` and ``histogram.proto``, and TensorBoard's hparams plugin
``plugin_data.proto`` / ``api.proto``.
"""

from __future__ import annotations

import math
import os
import socket
import struct
import time

import numpy as np
from crc32c import crc32c

from ..events.records import HEADER as HEAD
from ..events.records import masked_crc

_D = struct.Struct("<d").pack
_Q = struct.Struct("<Q").pack
_I = struct.Struct("<I").pack

# tensorflow/core/framework/types.proto
TF_DTYPES = {
    "float32": 1,
    "float64": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 5,
    "int8": 6,
    "string": 7,
    "int64": 9,
    "bool": 10,
    "uint16": 17,
    "float16": 19,
    "uint32": 22,
    "uint64": 23,
}
FILE_VERSION = "brain.Event:2"


# ---------------------------------------------------------------- wire format
def varint(n: int) -> bytes:
    """Base-128 varint; negative numbers as 64-bit two's complement (int64 fields)."""
    if n < 0:
        n += 1 << 64
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _double(field: int, x: float) -> bytes:
    return varint(field << 3 | 1) + _D(x)


def _int(field: int, n: int) -> bytes:
    return varint(field << 3) + varint(int(n))


def _str(field: int, s: str) -> bytes:
    return _len(field, s.encode("utf-8"))


def frame(payload: bytes) -> bytes:
    """One record: length, masked CRC of the length, payload, masked CRC of the payload."""
    head = _Q(len(payload))
    return head + _I(masked_crc(head)) + payload + _I(masked_crc(payload))


def _wall(x) -> float:
    """TensorBoard orders nothing by wall time, but its servers reject NaN there; unknown is 0."""
    x = float(x)
    return x if math.isfinite(x) else 0.0


def event(step: int, wall_time: float, values: list[bytes]) -> bytes:
    """An Event payload carrying one Summary of already encoded Values."""
    summary = b"".join(_len(1, v) for v in values)
    return _double(1, _wall(wall_time)) + _int(2, step) + _len(5, summary)


# ---------------------------------------------------------------- summary values
def plugin_metadata(plugin: str, content: bytes = b"", data_class: int = 0) -> bytes:
    """SummaryMetadata naming the TensorBoard plugin that owns a value (data_class 1 scalar, 2 tensor)."""
    out = _len(1, _str(1, plugin) + (_len(2, content) if content else b""))
    if data_class:
        out += _int(4, data_class)
    return out


def tensor_proto(values: np.ndarray, dtype: str | None = None) -> bytes:
    """TensorProto with dtype, shape and little-endian tensor_content (strings as string_val)."""
    arr = np.asarray(values)
    name = dtype or arr.dtype.name
    shape = b"".join(_len(2, _int(1, d)) for d in arr.shape)
    if name == "string" or arr.dtype == object or arr.dtype.kind in "US":
        strings = [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in arr.ravel().tolist()]
        return _int(1, TF_DTYPES["string"]) + _len(2, shape) + b"".join(_len(8, s) for s in strings)
    if name not in TF_DTYPES:  # bfloat16 and other names numpy cannot hold: widen to float32
        name = "float32"
    data = np.ascontiguousarray(arr, dtype=np.dtype(name).newbyteorder("<")).tobytes()
    return _int(1, TF_DTYPES[name]) + _len(2, shape) + _len(4, data)


def scalar_value(tag: str, value: float) -> bytes:
    with np.errstate(over="ignore"):
        return _str(1, tag) + varint(2 << 3 | 5) + np.float64(value).astype("<f4").tobytes()


def histogram_value(tag: str, hmin: float, hmax: float, count: float, hsum: float, left, right, counts) -> bytes:
    """HistogramProto: bucket_limit are the right edges, bucket the counts (TensorBoard's layout)."""
    right = np.asarray(right, dtype="<f8")
    counts = np.asarray(counts, dtype="<f8")
    mids = (np.asarray(left, dtype=np.float64) + right) / 2 if len(right) else right
    finite = np.isfinite(mids)
    sum_squares = float((counts[finite] * mids[finite] ** 2).sum())
    fields = {1: hmin, 2: hmax, 3: count, 4: hsum, 5: sum_squares}
    histo = b"".join(_double(k, v if math.isfinite(v) else 0.0) for k, v in ((k, float(v)) for k, v in fields.items()))
    histo += _len(6, right.tobytes()) + _len(7, counts.tobytes())
    return _str(1, tag) + _len(5, histo)


def image_value(tag: str, height: int, width: int, colorspace: int, png: bytes) -> bytes:
    image = _int(1, height) + _int(2, width) + _int(3, colorspace) + _len(4, bytes(png))
    return _str(1, tag) + _len(4, image)


def tensor_value(tag: str, values: np.ndarray, dtype: str | None = None) -> bytes:
    return _str(1, tag) + _len(8, tensor_proto(values, dtype))


def text_value(tag: str, text: str) -> bytes:
    """A string tensor owned by the text plugin (the TEXT tab renders it as Markdown)."""
    return _str(1, tag) + _len(9, plugin_metadata("text", data_class=2)) + _len(8, tensor_proto(np.asarray([text], dtype=object), "string"))


# ---------------------------------------------------------------- hparams plugin
def _pb_value(x) -> bytes:
    """google.protobuf.Value: number, string or bool (everything else as its JSON-ish text)."""
    if isinstance(x, (bool, np.bool_)):
        return _int(4, int(bool(x)))
    if isinstance(x, (int, float, np.integer, np.floating)):
        return _double(2, float(x))
    return _str(3, str(x))


def _hparams_value(tag: str, plugin_data: bytes) -> bytes:
    # content is HParamsPluginData{version 0 (the default, left out), oneof data}; a null tensor as TensorBoard writes
    null = _int(1, TF_DTYPES["float32"]) + _len(2, b"")
    return _str(1, tag) + _len(9, plugin_metadata("hparams", plugin_data, data_class=2)) + _len(8, null)


def hparams_values(hparams: dict, start_time: float) -> list[bytes]:
    """The summaries TensorBoard's HPARAMS tab reads for one session: its start (the values) and its end.

    No experiment summary is written: with none, TensorBoard gathers the
    hyper-parameters of every run's session and offers each run's scalars as
    metrics, which is right when several converted runs sit side by side.

    Args:
        hparams: name -> number, string or bool.
        start_time: the session's start (seconds since the epoch).

    Returns:
        Encoded Summary.Value messages, to be written in one event.
    """
    start = b"".join(_len(1, _str(1, k) + _len(2, _pb_value(v))) for k, v in hparams.items()) + _double(5, _wall(start_time))
    end = _int(1, 1) + _double(2, _wall(start_time))
    return [_hparams_value("_hparams_/session_start_info", _len(3, start)), _hparams_value("_hparams_/session_end_info", _len(4, end))]


# ---------------------------------------------------------------- fast scalars
_CHUNK = 1 << 16  # rows framed at once: bounds the index arrays of the scatter


def _varint_bytes(u: np.ndarray, width: int) -> np.ndarray:
    """Varints of *width* bytes for the uint64 values *u* (all of that width), one row each."""
    out = np.empty((u.size, width), dtype=np.uint8)
    for j in range(width):
        byte = (u >> np.uint64(7 * j)) & np.uint64(0x7F)
        out[:, j] = byte | np.uint64(0x80 if j < width - 1 else 0)
    return out


def _tag_prefix(tag: str) -> bytes:
    """Event field 5 (summary) up to the simple_value's 4 bytes: the same for every record of a tag."""
    tb = tag.encode("utf-8")
    value = b"\x0a" + varint(len(tb)) + tb + b"\x15"
    summary = b"\x0a" + varint(len(value) + 4) + value
    return b"\x2a" + varint(len(summary) + 4) + summary


def scalar_records(tags, steps, walls, values) -> bytes:
    """Framed Events of one simple_value each, for many scalar rows at once, in the rows' order.

    Rows of one tag whose steps take as many varint bytes share one layout, so
    they are assembled as the rows of a byte matrix (numpy) and scattered to
    their places; only the payload CRC is computed row by row.  Values are
    rounded to float32 (simple_value's type; too large ones become inf) and an
    unknown wall time is written as 0.

    Args:
        tags: one tag per row (a sequence of str).
        steps: int64 steps.
        walls: wall times (seconds).
        values: the values.

    Returns:
        The framed records, ready to append to an event file.
    """
    steps = np.asarray(steps, dtype=np.int64)
    n = steps.size
    if n == 0:
        return b""
    walls = np.asarray(walls, dtype=np.float64)
    walls = np.where(np.isfinite(walls), walls, 0.0).astype("<f8")
    with np.errstate(over="ignore"):
        values = np.asarray(values, dtype=np.float64).astype("<f4")
    u = steps.astype(np.uint64)  # negative steps: two's complement, 10 bytes, as protobuf writes int64
    width = np.ones(n, dtype=np.int64)
    for j in range(1, 10):
        width += u >= np.uint64(1 << (7 * j))
    tags = list(tags)
    ids = {t: i for i, t in enumerate(dict.fromkeys(tags))}
    tag_id = np.fromiter(map(ids.__getitem__, tags), dtype=np.int64, count=n)
    prefixes = [_tag_prefix(t) for t in ids]
    plen = np.array([len(p) for p in prefixes], dtype=np.int64)
    payload_len = 1 + 8 + 1 + width + plen[tag_id] + 4
    frame_len = HEAD + payload_len + 4
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(frame_len[:-1], out=starts[1:])
    out = np.empty(int(starts[-1] + frame_len[-1]), dtype=np.uint8)

    key = tag_id * 16 + width
    order = np.argsort(key, kind="stable")
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    for group in np.split(order, bounds):
        t, w = divmod(int(key[group[0]]), 16)
        prefix = np.frombuffer(prefixes[t], dtype=np.uint8)
        p_len = 10 + w + prefix.size + 4
        f_len = HEAD + p_len + 4
        head = _Q(p_len)
        head = np.frombuffer(head + _I(masked_crc(head)), dtype=np.uint8)
        cols = np.arange(f_len)
        for c0 in range(0, group.size, _CHUNK):
            idx = group[c0 : c0 + _CHUNK]
            m = np.empty((idx.size, f_len), dtype=np.uint8)
            m[:, :HEAD] = head
            m[:, HEAD] = 0x09
            m[:, HEAD + 1 : HEAD + 9] = walls[idx].view(np.uint8).reshape(-1, 8)
            m[:, HEAD + 9] = 0x10
            m[:, HEAD + 10 : HEAD + 10 + w] = _varint_bytes(u[idx], w)
            at = HEAD + 10 + w
            m[:, at : at + prefix.size] = prefix
            m[:, at + prefix.size : at + prefix.size + 4] = values[idx].view(np.uint8).reshape(-1, 4)
            flat = memoryview(m.reshape(-1))
            spans = [flat[r : r + p_len] for r in range(HEAD, idx.size * f_len, f_len)]
            crcs = np.fromiter(map(crc32c, spans), dtype=np.uint32, count=idx.size)
            masked = ((crcs >> np.uint32(15)) | (crcs << np.uint32(17))) + np.uint32(0xA282EAD8)
            m[:, HEAD + p_len :] = masked.astype("<u4").view(np.uint8).reshape(-1, 4)
            out[starts[idx][:, None] + cols] = m
    return out.tobytes()


class EventFileWriter:
    """Appends framed events to one ``events.out.tfevents.<time>.<host>.msnb`` file.

    A new file starts with the ``brain.Event:2`` version record; an existing one
    (a later conversion adding to it) is appended to as it is.
    """

    def __init__(self, directory: str | os.PathLike, *, path: str | os.PathLike | None = None):
        os.makedirs(directory, exist_ok=True)
        if path is None:
            name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname() or 'localhost'}.msnb"
            path = os.path.join(directory, name)
        self.path = str(path)
        fresh = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._f = open(self.path, "ab")
        if fresh:
            self._f.write(frame(_double(1, time.time()) + _str(3, FILE_VERSION)))

    def write_event(self, step: int, wall_time: float, values: list[bytes]) -> None:
        self._f.write(frame(event(step, wall_time, values)))

    def write_raw(self, framed: bytes) -> None:
        self._f.write(framed)

    def flush(self) -> int:
        """Push what was written to the OS; returns the file's size."""
        self._f.flush()
        return self._f.tell()

    def close(self) -> None:
        self._f.close()
