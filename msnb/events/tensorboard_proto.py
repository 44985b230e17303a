"""TensorFlow's ``Event`` messages, as tensorboardX writes them for mindformers.

Scalars come as ``simple_value`` (field 2 of Summary.Value; MindSpore uses
field 3, which is why TensorBoard loses MindSpore's scalars), or TF2-style as
a 0-d tensor whose metadata names the "scalars" plugin.  Text is a string
tensor of the "text" plugin (or of no plugin); histograms a HistogramProto or a
[k, 3] tensor; hyper-parameters the "hparams" plugin's metadata, read as
lineage rows.

``HistogramProto`` is proto3: a field equal to zero is not written, so an
absent min, max or sum *is* 0 (a ReLU's min, an all-zero gradient), as
TensorBoard's EventAccumulator reads it.  A TF2 histogram holds only bucket
edges and counts: its sum is unknown and left NaN
(:meth:`msnb.events.tables.HistogramTable.estimated_sum` gives the bucket
estimate, said to be one); its min and max are the outer edges of its occupied
buckets, which TF2 draws from the data's extremes.

What msnb does not tabulate is named, never dropped silently: audio, and string
tensors of other plugins (``custom_scalars`` layouts, graphs of the Keras
plugin...) become notes the reader reports once per tag and file.
"""

from __future__ import annotations

import numpy as np

from .decoded import DecodedEvent, Histogram, Lineage, Tensor, Text, count_of, decode_envelope, decode_image, shaped
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


def _plugin(buf, a: int, b: int) -> tuple[str, tuple | None]:
    """SummaryMetadata's plugin: its name and where its content lies (None: no content)."""
    name, content = "", None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:  # plugin_data
            for pnum, pwire, px, py in fields(buf, x, y):
                if pnum == 1 and pwire == LENGTH:
                    name = text(buf, px, py)
                elif pnum == 2 and pwire == LENGTH:
                    content = (px, py)
    return name, content


# tensorboard/plugins/hparams/api.proto: DataType and Status enums
_HPARAM_TYPES = {0: "unset", 1: "string", 2: "bool", 3: "float64"}
_STATUS = {0: "unknown", 1: "success", 2: "failure", 3: "running"}
_VALUE_DEPTH = 8  # google.protobuf.Value nesting read at most (lists of lists...); deeper is text


def _pb_value(buf, a: int, b: int, depth: int = 0):
    """google.protobuf.Value: None, a float, a str, a bool, or a list of them (a struct as a dict)."""
    out = None
    for num, wire, x, y in fields(buf, a, b):
        if num == 2 and wire == FIXED64:
            out = f64(buf, x)
        elif num == 3 and wire == LENGTH:
            out = text(buf, x, y)
        elif num == 4 and wire == VARINT:
            out = bool(x)
        elif num == 1 and wire == VARINT:
            out = None
        elif num in (5, 6) and wire == LENGTH:
            if depth >= _VALUE_DEPTH:
                out = "<nested too deep>"
            elif num == 6:  # ListValue: 1 repeated Value
                out = [_pb_value(buf, vx, vy, depth + 1) for vnum, vwire, vx, vy in fields(buf, x, y) if vnum == 1 and vwire == LENGTH]
            else:  # Struct: 1 map<string, Value>
                out = dict(_map_entry(buf, ex, ey, depth + 1) for enum_, ewire, ex, ey in fields(buf, x, y) if enum_ == 1 and ewire == LENGTH)
    return out


def _map_entry(buf, a: int, b: int, depth: int = 0) -> tuple[str, object]:
    """One ``map<string, google.protobuf.Value>`` entry (key 1, value 2)."""
    key, value = "", None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            key = text(buf, x, y)
        elif num == 2 and wire == LENGTH:
            value = _pb_value(buf, x, y, depth)
    return key, value


def _hparams(buf, a: int, b: int) -> Lineage | None:
    """HParamsPluginData (1 version; oneof 2 experiment, 3 session_start_info, 4 session_end_info) as a lineage record.

    ``hparams``: the session's values (name -> number, string, bool); ``hparams_experiment``: the
    declared hyper-parameters (name -> type) and metric tags; ``hparams_end``: the session's status.
    """
    for num, wire, x, y in fields(buf, a, b):
        if num == 3 and wire == LENGTH:  # SessionStartInfo: 1 map hparams, 2 model_uri, 3 monitor_url, 4 group_name, 5 start_time_secs
            values = dict(_map_entry(buf, ex, ey) for enum_, ewire, ex, ey in fields(buf, x, y) if enum_ == 1 and ewire == LENGTH)
            return Lineage("hparams", values)
        if num == 4 and wire == LENGTH:  # SessionEndInfo: 1 status, 2 end_time_secs
            end = {"status": "unknown"}
            for enum_, ewire, ex, _ey in fields(buf, x, y):
                if enum_ == 1 and ewire == VARINT:
                    end["status"] = _STATUS.get(ex, f"status {ex}")
                elif enum_ == 2 and ewire == FIXED64:
                    end["end_time_secs"] = f64(buf, ex)
            return Lineage("hparams_end", end)
        if num == 2 and wire == LENGTH:
            return Lineage("hparams_experiment", _experiment(buf, x, y))
    return None


def _experiment(buf, a: int, b: int) -> dict:
    """Experiment: 6 name, 1 description, 2 user, 3 time_created_secs, 4 hparam_infos, 5 metric_infos."""
    declared: dict = {}
    metrics: list = []
    out: dict = {}
    for num, wire, x, y in fields(buf, a, b):
        if num == 4 and wire == LENGTH:  # HParamInfo: 1 name, 4 type
            name, kind = "", 0
            for hnum, hwire, hx, hy in fields(buf, x, y):
                if hnum == 1 and hwire == LENGTH:
                    name = text(buf, hx, hy)
                elif hnum == 4 and hwire == VARINT:
                    kind = hx
            declared[name] = _HPARAM_TYPES.get(kind, f"type {kind}")
        elif num == 5 and wire == LENGTH:  # MetricInfo: 1 MetricName{1 group, 2 tag}
            for mnum, mwire, mx, my in fields(buf, x, y):
                if mnum == 1 and mwire == LENGTH:
                    parts = {n: text(buf, px, py) for n, w, px, py in fields(buf, mx, my) if w == LENGTH}
                    metrics.append("/".join(p for p in (parts.get(1, ""), parts.get(2, "")) if p))
        elif num in (6, 1, 2) and wire == LENGTH:
            out[{6: "name", 1: "description", 2: "user"}[num]] = text(buf, x, y)
    out["hparams"] = declared
    out["metrics"] = metrics
    return out


def _decode_value(buf, a: int, b: int, ev: DecodedEvent, base: int) -> None:
    tag = ""
    plugin = ""
    content = None
    simple = None
    histo = image = tensor_span = None
    audio = False
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            tag = text(buf, x, y)
        elif num == 9 and wire == LENGTH:
            plugin, content = _plugin(buf, x, y)
        elif num == 6 and wire == LENGTH:
            audio = True
            ev.extra_fields = True
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
    if plugin == "hparams":
        record = _hparams(buf, *content) if content is not None else None
        if record is not None:
            ev.others.append((tag, record))
        else:
            ev.notes.append((tag, "hparams summary without session data; not read"))
        return
    if audio:
        ev.notes.append((tag, "audio summaries are not read (msnb has no audio table)"))
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
        elif t["dtype"] == "string" and plugin not in ("text", ""):
            ev.notes.append((tag, f"string tensor of the {plugin!r} plugin (not data msnb tabulates); not read"))
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
    return Histogram(
        min=float(np.min(np.asarray(left)[nonempty])) if nonempty.any() else float("nan"),
        max=float(np.max(np.asarray(right)[nonempty])) if nonempty.any() else float("nan"),
        sum=float("nan"),  # not in the file: HistogramTable.estimated_sum gives the bucket estimate
        count=count_of(float(round(total)) if np.isfinite(total) else total, offset),
        nan_count=0,
        pos_inf_count=0,
        neg_inf_count=0,
        left=np.asarray(left, dtype=np.float64),
        right=np.asarray(right, dtype=np.float64),
        counts=counts,
    )


def decode_histogram(buf, a: int, b: int) -> Histogram:
    """HistogramProto: min, max, num, sum, sum_squares, bucket_limit (right edges), bucket (counts).

    proto3: an absent number is 0, not unknown (a writer leaves out every field equal to 0).
    """
    scal = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    vals = dict.fromkeys(scal.values(), 0.0)
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
