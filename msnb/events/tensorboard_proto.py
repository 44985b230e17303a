"""TensorFlow's ``Event`` messages, as tensorboardX writes them for mindformers.

Scalars come as ``simple_value`` (field 2 of Summary.Value; MindSpore uses
field 3, which is why TensorBoard loses MindSpore's scalars), or TF2-style as
a 0-d tensor whose metadata names the "scalars" plugin.  Text is a string
tensor of the "text" plugin; histograms a HistogramProto or a [k, 3] tensor.
"""

from __future__ import annotations

import numpy as np

from .decoded import DecodedEvent, Histogram, Tensor, Text, count_of, decode_envelope, decode_image, shaped
from .wire import FIXED32, FIXED64, LENGTH, VARINT, f32, f64, fields, packed_or_single, signed64, text

# tensorflow/core/framework/types.proto
DTYPES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    19: "float16",
    22: "uint32",
    23: "uint64",
}
_NUMERIC = {"float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bool", "uint16", "float16", "uint32", "uint64"}


def decode_event(buf, a: int, b: int) -> DecodedEvent:
    """Decode a ``tensorflow.Event`` payload at ``buf[a:b]`` (graph_def 4, meta_graph_def 9)."""
    return decode_envelope(buf, a, b, _decode_value, graph_fields=(4, 9))


def _plugin_name(buf, a: int, b: int) -> str:
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:  # plugin_data
            for pnum, pwire, px, py in fields(buf, x, y):
                if pnum == 1 and pwire == LENGTH:
                    return text(buf, px, py)
    return ""


def _decode_value(buf, a: int, b: int, ev: DecodedEvent, base: int) -> None:
    tag = ""
    plugin = ""
    simple = None
    histo = image = tensor_span = None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            tag = text(buf, x, y)
        elif num == 9 and wire == LENGTH:
            plugin = _plugin_name(buf, x, y)
        elif num == 2 and wire == FIXED32:
            simple = (f32(buf, x), x - base)
        elif num == 4 and wire == LENGTH:
            image = decode_image(buf, x, y)
        elif num == 5 and wire == LENGTH:
            histo = decode_histogram(buf, x, y)
        elif num == 8 and wire == LENGTH:
            tensor_span = (x, y)
        elif num == 7:
            pass  # node_name
        else:
            ev.extra_fields = True
    if simple is not None:
        ev.scalars.append((tag, simple[0], simple[1], "f4"))
    if image is not None:
        ev.others.append((tag, image))
    if histo is not None:
        ev.others.append((tag, histo))
    if tensor_span is not None:
        t = decode_tensor(buf, *tensor_span)
        if plugin == "scalars" and t["values"].size == 1 and t["dtype"] in _NUMERIC:
            off = t["value_offset"]
            ev.scalars.append((tag, float(t["values"].ravel()[0]), None if off is None else off - base, t["value_fmt"]))
        elif plugin == "text" or t["dtype"] == "string":
            ev.others.append((tag, Text("\n".join(t["strings"]))))
        elif plugin == "histograms" and t["values"].ndim == 2 and t["values"].shape[1] == 3:
            v = t["values"].astype(np.float64)
            ev.others.append((tag, _histogram_from_edges(v[:, 0], v[:, 1], v[:, 2], tensor_span[0])))
        else:
            ev.others.append((tag, Tensor(t["dims"], t["dtype"], t["values"])))


def decode_tensor(buf, a: int, b: int) -> dict:
    """TensorProto: dtype, shape and values; a lone float's byte offset for the fast path."""
    dtype = 0
    dims: list = []
    values: list = []
    strings: list = []
    content = None
    value_offset = None
    value_fmt = None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == VARINT:
            dtype = x
        elif num == 2 and wire == LENGTH:
            for snum, swire, sx, sy in fields(buf, x, y):
                if snum == 2 and swire == LENGTH:
                    for dnum, dwire, dx, _dy in fields(buf, sx, sy):
                        if dnum == 1 and dwire == VARINT:
                            dims.append(signed64(dx))
        elif num == 4 and wire == LENGTH:
            content = (x, y)
        elif num == 5:
            if wire == LENGTH and y - x == 4:
                value_offset, value_fmt = x, "f4"
            elif wire == FIXED32:
                value_offset, value_fmt = x, "f4"
            packed_or_single(buf, wire, x, y, "f32", values)
        elif num == 6:
            if wire == LENGTH and y - x == 8:
                value_offset, value_fmt = x, "f8"
            elif wire == FIXED64:
                value_offset, value_fmt = x, "f8"
            packed_or_single(buf, wire, x, y, "f64", values)
        elif num in (7, 10, 11, 13, 16, 17):
            packed_or_single(buf, wire, x, y, "svarint", values)
        elif num == 8 and wire == LENGTH:
            strings.append(text(buf, x, y))
    name = DTYPES.get(dtype, f"type{dtype}")
    if content is not None and name in _NUMERIC:
        x, y = content
        itemsize = np.dtype(name).itemsize
        arr = np.frombuffer(bytes(buf[x : y - (y - x) % itemsize]), dtype=np.dtype(name).newbyteorder("<")).astype(name)
        if name == "float32" and y - x == 4:
            value_offset, value_fmt = x, "f4"
        elif name == "float64" and y - x == 8:
            value_offset, value_fmt = x, "f8"
    elif name == "string":
        arr = np.asarray(strings, dtype=object)
    else:
        arr = np.asarray(values)
        if name == "float16" and values:
            arr = np.asarray(values, dtype=np.uint16).view(np.float16)
    arr = shaped(arr, dims)
    if value_fmt is not None and name not in ("float32", "float64"):
        value_offset = value_fmt = None
    return {"dims": tuple(dims), "dtype": name, "values": arr, "strings": strings, "value_offset": value_offset, "value_fmt": value_fmt}


def _histogram_from_edges(left, right, counts, offset: int) -> Histogram:
    counts = np.asarray(counts, dtype=np.float64)
    nonempty = counts > 0
    total = float(counts.sum())
    mids = (np.asarray(left) + np.asarray(right)) / 2
    return Histogram(
        min=float(np.min(np.asarray(left)[nonempty])) if nonempty.any() else float("nan"),
        max=float(np.max(np.asarray(right)[nonempty])) if nonempty.any() else float("nan"),
        sum=float((mids * counts).sum()),
        count=count_of(float(round(total)) if np.isfinite(total) else total, offset),
        nan_count=0,
        pos_inf_count=0,
        neg_inf_count=0,
        left=np.asarray(left, dtype=np.float64),
        right=np.asarray(right, dtype=np.float64),
        counts=counts,
    )


def decode_histogram(buf, a: int, b: int) -> Histogram:
    """HistogramProto: min, max, num, sum, sum_squares, bucket_limit (right edges), bucket (counts)."""
    scal = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    vals = {"min": float("nan"), "max": float("nan"), "num": 0.0, "sum": float("nan"), "sum_squares": float("nan")}
    limits: list = []
    counts: list = []
    for num, wire, x, y in fields(buf, a, b):
        if num in scal and wire == FIXED64:
            vals[scal[num]] = f64(buf, x)
        elif num == 6:
            packed_or_single(buf, wire, x, y, "f64", limits)
        elif num == 7:
            packed_or_single(buf, wire, x, y, "f64", counts)
    right = np.asarray(limits, dtype=np.float64)
    n = min(right.size, len(counts))
    right = right[:n].copy()
    cnt = np.asarray(counts[:n], dtype=np.float64)
    left = np.empty(n)
    if n:
        left[1:] = right[:-1]
        lo = vals["min"]
        left[0] = lo if np.isfinite(lo) and lo <= right[0] else right[0]
        # writers use +-DBL_MAX as the outer limits; the data's extremes are more useful
        hi = vals["max"]
        if np.isfinite(hi) and right[-1] > hi and abs(right[-1]) > 1e300:
            right[-1] = hi
    return Histogram(
        min=vals["min"],
        max=vals["max"],
        sum=vals["sum"],
        count=count_of(vals["num"], a),
        nan_count=0,
        pos_inf_count=0,
        neg_inf_count=0,
        left=left,
        right=right,
        counts=cnt,
    )
