"""MindSpore's summary and lineage messages (``mindspore.irpb``), decoded by field number.

Field numbers follow MindSpore's ``summary.proto``, ``anf_ir.proto`` and
``lineage.proto``.  The messages are proto2, so
repeated scalars are accepted packed and unpacked alike.
"""

from __future__ import annotations

import json
from functools import partial
from operator import attrgetter

import numpy as np

from .decoded import DecodedEvent, Histogram, Landscape, Tensor, count_of, decode_envelope, decode_image, shaped
from .fasthistograms import decode_histograms
from .wire import FIXED32, FIXED64, LENGTH, VARINT, DecodeError, f32, f64, fields, packed_or_single, signed64, text, varint

VERSION_PREFIXES = ("MindSpore.Event:", "Mindspore.Event:")
_DECODE_ERRORS = (DecodeError, IndexError, ValueError, OverflowError, RecursionError)  # what a damaged record can raise (decode_records' list)

# anf_ir.proto DataType -> numpy dtype name (the ones a summary tensor can hold)
DATA_TYPES = {
    1: "bool",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "uint8",
    7: "uint16",
    8: "uint32",
    9: "uint64",
    10: "float16",
    11: "float32",
    12: "float64",
    13: "string",
    46: "bfloat16",
}


def decode_event(buf, a: int, b: int) -> DecodedEvent:
    """Decode a ``mindspore.irpb.Event`` payload at ``buf[a:b]``."""
    return decode_envelope(buf, a, b, _decode_value, graph_fields=(4,))


def decode_event_deferred(buf, a: int, b: int) -> DecodedEvent:
    """Like :func:`decode_event`, but histograms stay :class:`HistogramSpan` placeholders.

    A reader decodes every record of a buffer this way, then all their histograms at
    once with :func:`resolve_histograms` (vectorised: see :mod:`msnb.events.fasthistograms`).
    A record that fails raises what :func:`decode_event` raises: the first error in field
    order, so a broken histogram before the failing field is decoded here and raises first.
    """
    pending: list = []
    try:
        return decode_envelope(buf, a, b, partial(_decode_value, defer=pending), graph_fields=(4,))
    except _DECODE_ERRORS:
        for span in pending:
            decode_histogram(buf, span.start, span.end)
        raise


class HistogramSpan:
    """Where a histogram message lies in the buffer, until :func:`resolve_histograms` decodes it."""

    __slots__ = ("start", "end")
    KIND = "histograms"

    def __init__(self, start: int, end: int):
        self.start, self.end = start, end


def resolve_histograms(buf, events: list) -> tuple[list, list]:
    """Decode the :class:`HistogramSpan` placeholders of *events* together, in place.

    Args:
        buf: the buffer the events were decoded from.
        events: ``(record_index, DecodedEvent)`` pairs from :func:`decode_event_deferred`.

    Returns:
        ``(events, errors)``: the events whose histograms all decoded, and
        ``(record_index, DecodeError)`` for each record with one that did not (that record is dropped whole,
        as :func:`decode_event` would have raised for it).
    """
    where = [(ev.others, j, tag, rec) for _i, ev in events for j, (tag, rec) in enumerate(ev.others) if isinstance(rec, HistogramSpan)]
    if not where:
        return events, []
    spans = [w[3] for w in where]
    decoded = decode_histograms(buf, list(map(attrgetter("start"), spans)), list(map(attrgetter("end"), spans)))
    failed: dict = {}
    owner = {id(ev.others): k for k, (_i, ev) in enumerate(events)}
    for n in [n for n, hist in enumerate(decoded) if hist is None]:  # in field order: a record's first failure is the one it reports
        others, _j, _tag, span = where[n]
        k = owner[id(others)]
        if k in failed:
            continue
        try:
            decoded[n] = decode_histogram(buf, span.start, span.end)
        except _DECODE_ERRORS as exc:
            failed[k] = exc if isinstance(exc, DecodeError) else DecodeError(str(exc), 0)  # as decode_records words it
    for (others, j, tag, _span), hist in zip(where, decoded):
        others[j] = (tag, hist)  # a record that failed is dropped below, whatever it holds
    if not failed:
        return events, []
    return [e for k, e in enumerate(events) if k not in failed], [(events[k][0], exc) for k, exc in failed.items()]


def _decode_value(buf, a: int, b: int, ev: DecodedEvent, base: int, defer: list | None = None) -> None:
    if defer is not None and _deferred_histogram_value(buf, a, b, ev, defer):
        return
    tag = ""
    scalar = None
    found = []
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            tag = text(buf, x, y)
        elif num == 3 and wire == FIXED32:
            scalar = (f32(buf, x), x - base)
        elif num == 4 and wire == LENGTH:
            found.append(decode_image(buf, x, y))
        elif num == 8 and wire == LENGTH:
            found.append(decode_tensor(buf, x, y))
        elif num == 9 and wire == LENGTH:
            if defer is None:
                found.append(decode_histogram(buf, x, y))
            else:  # left for resolve_histograms; *defer* lists the spans met so far
                found.append(HistogramSpan(x, y))
                defer.append(found[-1])
        elif num == 10 and wire == LENGTH:
            found.append(Landscape(y - x))
        else:
            ev.extra_fields = True
    if scalar is not None:
        ev.scalars.append((tag, scalar[0], scalar[1], "f4"))
    for record in found:
        ev.others.append((tag, record))


def _deferred_histogram_value(buf, a: int, b: int, ev: DecodedEvent, defer: list) -> bool:
    """The value SummaryRecord writes for a histogram, ``0a <tag> 4a <histogram>`` and nothing else, read without the field walk.

    Returns False (having changed nothing) for any other layout, which :func:`_decode_value` then walks field by field.
    """
    if b - a < 4 or buf[a] != 0x0A or buf[a + 1] >= 0x80:
        return False
    key = a + 2 + buf[a + 1]
    if key >= b or buf[key] != 0x4A:
        return False
    try:
        n, start = varint(buf, key + 1, b)
    except DecodeError:
        return False
    if start + n != b:
        return False
    span = HistogramSpan(start, b)
    defer.append(span)
    ev.others.append((text(buf, a + 2, key), span))
    return True


def decode_tensor(buf, a: int, b: int) -> Tensor:
    """anf_ir TensorProto: dims, data_type, and values from whichever field holds them."""
    dims: list = []
    dtype = 0
    values: list = []
    raw = None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1:
            packed_or_single(buf, wire, x, y, "svarint", dims)
        elif num == 2 and wire == VARINT:
            dtype = x
        elif num == 3:
            packed_or_single(buf, wire, x, y, "f32", values)
        elif num in (4, 5):
            packed_or_single(buf, wire, x, y, "svarint", values)
        elif num == 6:
            packed_or_single(buf, wire, x, y, "f64", values)
        elif num == 7:
            packed_or_single(buf, wire, x, y, "varint", values)
        elif num == 8 and wire == LENGTH:
            raw = bytes(buf[x:y])
    dtype_name = DATA_TYPES.get(dtype, f"type{dtype}")
    if values:
        arr = np.asarray(values)
    elif raw is not None and dtype_name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"):
        itemsize = np.dtype(dtype_name).itemsize
        arr = np.frombuffer(raw[: len(raw) - len(raw) % itemsize], dtype=dtype_name).copy()
    else:
        arr = np.zeros(0)
    arr = shaped(arr, dims)
    return Tensor(tuple(int(d) for d in dims), dtype_name, arr)


def decode_histogram(buf, a: int, b: int) -> Histogram:
    """Summary.Histogram: buckets of (left, width, count) plus min/max/sum/count and NaN/Inf counts.

    proto2: a min, max or sum of 0 is written, and one left out is unknown (MindSpore writes none when no value
    is finite), hence NaN; unlike TensorBoard's proto3 HistogramProto (:mod:`tensorboard_proto`), where absent is 0.
    """
    left: list = []
    width: list = []
    counts: list = []
    out = {"min": float("nan"), "max": float("nan"), "sum": float("nan"), "count": 0, "nan_count": 0, "pos_inf_count": 0, "neg_inf_count": 0}
    ints = {2: "nan_count", 3: "pos_inf_count", 4: "neg_inf_count", 8: "count"}
    doubles = {5: "max", 6: "min", 7: "sum"}
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            # the usual layout: 09 <left f64> 11 <width f64> 18 <count varint>
            if y - x >= 19 and buf[x] == 0x09 and buf[x + 9] == 0x11 and buf[x + 18] == 0x18:
                c, stop = varint(buf, x + 19, y)
                if stop == y:
                    left.append(f64(buf, x + 1))
                    width.append(f64(buf, x + 10))
                    counts.append(signed64(c))
                    continue
            l_, w_, c_ = 0.0, 0.0, 0
            for bnum, bwire, bx, _by in fields(buf, x, y):
                if bnum == 1 and bwire == FIXED64:
                    l_ = f64(buf, bx)
                elif bnum == 2 and bwire == FIXED64:
                    w_ = f64(buf, bx)
                elif bnum == 3 and bwire == VARINT:
                    c_ = signed64(bx)
            left.append(l_)
            width.append(w_)
            counts.append(c_)
        elif num in ints and wire == VARINT:
            out[ints[num]] = signed64(x)
        elif num in doubles and wire == FIXED64:
            out[doubles[num]] = f64(buf, x)
    lefts = np.asarray(left, dtype=np.float64)
    out["count"] = count_of(out["count"], a)
    out["left"] = lefts
    with np.errstate(over="ignore", invalid="ignore"):  # a damaged edge may overflow to inf: kept as it is, not warned about
        out["right"] = lefts + np.asarray(width, dtype=np.float64)
    out["counts"] = np.asarray(counts, dtype=np.float64)
    return Histogram(**out)


# ---------------------------------------------------------------- lineage

_HYPER = {
    1: ("optimizer", "s"),
    2: ("learning_rate", "f"),
    3: ("loss_function", "s"),
    4: ("epoch", "i"),
    5: ("parallel_mode", "s"),
    6: ("device_num", "i"),
    8: ("batch_size", "i"),
}
_TRAIN_DATASET = {1: ("train_dataset_path", "s"), 2: ("train_dataset_size", "i")}
_ALGORITHM = {1: ("network", "s"), 2: ("loss", "f")}
_MODEL = {3: ("model_path", "s"), 4: ("model_size", "i")}
_VALID_DATASET = {1: ("valid_dataset_path", "s"), 2: ("valid_dataset_size", "i")}


def _flat(buf, a: int, b: int, spec: dict, out: dict) -> None:
    for num, wire, x, y in fields(buf, a, b):
        if num not in spec:
            continue
        name, kind = spec[num]
        if kind == "s" and wire == LENGTH:
            out[name] = text(buf, x, y)
        elif kind == "i" and wire == VARINT:
            out[name] = signed64(x)  # int32 negatives are sign-extended to 64 bits on the wire
        elif kind == "f" and wire == FIXED32:
            out[name] = f32(buf, x)
        elif kind == "f" and wire == FIXED64:
            out[name] = f64(buf, x)


def _map_entry(buf, a: int, b: int) -> tuple[str, tuple | None]:
    """A proto map entry (1 key string, 2 value): the key and the value's ``(wire, start, end)``."""
    key, value = "", None
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            key = text(buf, x, y)
        elif num == 2:
            value = (wire, x, y)
    return key, value


MAX_DEPTH = 64  # nesting a lineage record may have; deeper is damage (and would exhaust Python's stack)


def _deeper(depth: int, offset: int) -> int:
    if depth >= MAX_DEPTH:
        raise DecodeError(f"lineage record nested more than {MAX_DEPTH} levels deep", offset)
    return depth + 1


def _user_defined(buf, a: int, b: int, out: dict, depth: int = 0) -> None:
    """UserDefinedInfo: nested infos (1) and maps of dicts (2), int32 (3), strings (4), doubles (5)."""
    depth = _deeper(depth, a)
    for num, wire, x, y in fields(buf, a, b):
        if wire != LENGTH:
            continue
        if num == 1:
            _user_defined(buf, x, y, out, depth)
            continue
        key, entry = _map_entry(buf, x, y)
        value = None
        if entry is not None:
            ewire, ex, ey = entry
            if num == 2 and ewire == LENGTH:
                value = {}
                _user_defined(buf, ex, ey, value, depth)
            elif num == 3 and ewire == VARINT:
                value = signed64(ex)
            elif num == 4 and ewire == LENGTH:
                value = text(buf, ex, ey)
            elif num == 5 and ewire == FIXED64:
                value = f64(buf, ex)
        if key:
            out[key] = value


def _dataset_graph(buf, a: int, b: int, depth: int = 0) -> dict:
    depth = _deeper(depth, a)
    node: dict = {}
    for num, wire, x, y in fields(buf, a, b):
        if wire != LENGTH:
            continue
        if num == 1:
            node.setdefault("children", []).append(_dataset_graph(buf, x, y, depth))
        elif num == 2:
            node.update(_operation_parameter(buf, x, y))
        elif num == 3:
            node.setdefault("operations", []).append(_operation(buf, x, y))
        elif num == 4:
            node["sampler"] = _operation(buf, x, y)
    return node


def _operation(buf, a: int, b: int) -> dict:
    op: dict = {}
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == LENGTH:
            op.update(_operation_parameter(buf, x, y))
    return op


def _operation_parameter(buf, a: int, b: int) -> dict:
    """OperationParameter: maps of strings (1), string lists (2), bools (3), ints (4), doubles (5)."""
    params: dict = {}
    for num, wire, x, y in fields(buf, a, b):
        if wire != LENGTH:
            continue
        key, entry = _map_entry(buf, x, y)
        value = None
        if entry is not None:
            ewire, ex, ey = entry
            if num == 1 and ewire == LENGTH:
                value = text(buf, ex, ey)
            elif num == 2 and ewire == LENGTH:
                value = [text(buf, sx, sy) for sn, sw, sx, sy in fields(buf, ex, ey) if sn == 1 and sw == LENGTH]
            elif num == 3 and ewire == VARINT:
                value = bool(ex)
            elif num == 4 and ewire == VARINT:
                value = signed64(ex)
            elif num == 5 and ewire == FIXED64:
                value = f64(buf, ex)
        if key:
            params[key] = value
    return params


def decode_lineage(buf, a: int, b: int) -> dict:
    """A ``LineageEvent``: ``{"wall_time", "step", "version", "kind", "fields"}``, plus ``"note"`` when something was kept unparsed."""
    rec = {"wall_time": float("nan"), "step": 0, "version": None, "kind": None, "fields": {}}
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == FIXED64:
            rec["wall_time"] = f64(buf, x)
        elif num == 2 and wire == VARINT:
            rec["step"] = signed64(x)
        elif num == 3 and wire == LENGTH:
            rec["version"] = text(buf, x, y)
            rec["kind"] = rec["kind"] or "version"
        elif num == 6 and wire == LENGTH:
            rec["kind"] = "train"
            for tnum, twire, tx, ty in fields(buf, x, y):
                spec = {1: _HYPER, 2: _TRAIN_DATASET, 3: _ALGORITHM, 4: _MODEL}.get(tnum)
                if spec and twire == LENGTH:
                    _flat(buf, tx, ty, spec, rec["fields"])
        elif num == 7 and wire == LENGTH:
            rec["kind"] = "evaluation"
            for enum_, ewire, ex, ey in fields(buf, x, y):
                if enum_ == 2 and ewire == LENGTH:
                    metric = text(buf, ex, ey)
                    try:
                        rec["fields"]["metric"] = json.loads(metric)
                    except ValueError:
                        rec["fields"]["metric"] = metric
                    except RecursionError:
                        # kept as the text it is; the reader reports it
                        rec["fields"]["metric"] = metric
                        rec["note"] = "evaluation metrics are JSON nested too deeply to parse; kept as text"
                elif enum_ == 3 and ewire == LENGTH:
                    _flat(buf, ex, ey, _VALID_DATASET, rec["fields"])
        elif num == 9 and wire == LENGTH:
            rec["kind"] = "dataset_graph"
            rec["fields"] = _dataset_graph(buf, x, y)
        elif num == 10 and wire == LENGTH:
            rec["kind"] = "user_defined"
            _user_defined(buf, x, y, rec["fields"])
    if rec["kind"] is None:
        raise DecodeError("lineage record carries none of train, evaluation, dataset graph or user-defined info", 0)
    return rec
