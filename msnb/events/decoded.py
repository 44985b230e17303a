"""What one event record decodes to, whatever file format it came from."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .wire import FIXED64, LENGTH, VARINT, DecodeError, f64, fields, signed64, text, varint

_INT64_MAX = (1 << 63) - 1


@dataclass
class Histogram:
    """A histogram as both formats decode to it: statistics, then bucket edges and counts (``HistogramTable`` columns)."""

    KIND = "histograms"
    min: float
    max: float
    sum: float
    count: int
    nan_count: int
    pos_inf_count: int
    neg_inf_count: int
    left: np.ndarray
    right: np.ndarray
    counts: np.ndarray


@dataclass
class Tensor:
    """A tensor: shape, numpy dtype name and values (``TensorTable`` columns)."""

    KIND = "tensors"
    dims: tuple
    dtype: str
    values: np.ndarray


@dataclass
class Image:
    """An encoded image with its size and colorspace (``ImageTable`` columns)."""

    KIND = "images"
    height: int
    width: int
    colorspace: int
    png: bytes


@dataclass
class Text:
    """A text summary (``TextTable`` column)."""

    KIND = "texts"
    text: str


@dataclass
class Lineage:
    """Run metadata found in an event file (TensorBoard's hparams plugin), as a ``LineageTable`` row: its kind and fields."""

    KIND = "lineage"
    kind: str
    fields: dict


@dataclass
class Landscape:
    """A loss landscape, kept as a marker with its size: msnb does not tabulate it."""

    KIND = "markers"
    bytes: int


def count_of(value, offset: int = 0) -> int:
    """A histogram's element count from a float or int field; a corrupted one is a DecodeError, not an overflow."""
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            raise DecodeError(f"histogram count {value!r} is not a count", offset)
        value = int(value)
    if not 0 <= value <= _INT64_MAX:
        raise DecodeError(f"histogram count {value} is out of range", offset)
    return value


def shaped(arr: np.ndarray, dims) -> np.ndarray:
    """*arr* reshaped to *dims* when they describe exactly its elements (damaged dims leave it flat)."""
    if dims and all(d >= 0 for d in dims) and math.prod(dims) == arr.size:
        return arr.reshape(tuple(dims))
    return arr


def decode_image(buf, a: int, b: int) -> Image:
    """Summary.Image: MindSpore's and TensorFlow's share these field numbers (1 height, 2 width, 3 colorspace, 4 bytes)."""
    out = {"height": 0, "width": 0, "colorspace": 0, "png": b""}
    names = {1: "height", 2: "width", 3: "colorspace"}
    for num, wire, x, y in fields(buf, a, b):
        if num in names and wire == VARINT:
            out[names[num]] = signed64(x)
        elif num == 4 and wire == LENGTH:
            out["png"] = bytes(buf[x:y])
    return Image(**out)


class DecodedEvent:
    """One Event payload, flattened.

    ``scalars`` holds ``(tag, value, value_offset, fmt)``: the offset (from the
    payload start) and format (``"f4"``/``"f8"``) of the value's bytes let the
    vectorised decoder in :mod:`msnb.events.fastscalars` read every record that
    shares this one's layout without decoding it.  ``others`` holds
    ``(tag, record)`` for the rest, *record* one of :class:`Histogram`,
    :class:`Tensor`, :class:`Image`, :class:`Text`, :class:`Lineage` or :class:`Landscape`
    (its ``KIND`` names the table it goes to).  ``notes`` holds ``(tag, message)`` for
    values the decoder recognised but does not tabulate: the reader reports them.
    """

    __slots__ = ("wall_time", "step", "wall_offset", "step_span", "version", "graph_bytes", "scalars", "others", "extra_fields", "notes")

    def __init__(self):
        self.wall_time = float("nan")
        self.step = 0
        self.wall_offset = None  # offset of the 8 wall_time bytes
        self.step_span = None  # (offset, length) of the step varint
        self.version = None
        self.graph_bytes = None  # size of a graph carried by this event
        self.scalars = []
        self.others = []
        self.extra_fields = False  # fields this reader does not interpret
        self.notes = []  # (tag, message): values recognised but not read

    @property
    def pure_scalar(self) -> bool:
        """Only a time, a step and fixed-width scalars: safe to use as a layout template."""
        return (
            bool(self.scalars)
            and not self.others
            and not self.notes
            and self.version is None
            and self.graph_bytes is None
            and not self.extra_fields
            and self.wall_offset is not None
            and all(off is not None for _, _, off, _ in self.scalars)
        )


def decode_envelope(buf, a: int, b: int, decode_value, graph_fields=(4,)) -> DecodedEvent:
    """The Event message both formats share: 1 wall_time, 2 step, 3 version string, a graph, 5 summary.

    MindSpore's ``mindspore.irpb.Event`` and TensorFlow's ``Event`` agree on
    these field numbers; they differ in the graph fields and in Summary.Value,
    which *decode_value(buf, start, end, event, payload_start)* handles.
    """
    ev = DecodedEvent()
    for num, wire, x, y in fields(buf, a, b):
        if num == 1 and wire == FIXED64:
            ev.wall_time = f64(buf, x)
            ev.wall_offset = x - a
        elif num == 2 and wire == VARINT:
            ev.step = signed64(x)
            _, stop = varint(buf, y, b)
            ev.step_span = (y - a, stop - y)
        elif num == 3 and wire == LENGTH:
            ev.version = text(buf, x, y)
        elif num in graph_fields and wire == LENGTH:
            ev.graph_bytes = y - x
        elif num == 5 and wire == LENGTH:
            for vnum, vwire, va, vb in fields(buf, x, y):
                if vnum == 1 and vwire == LENGTH:
                    decode_value(buf, va, vb, ev, a)
                else:
                    ev.extra_fields = True
        else:
            ev.extra_fields = True  # MindSpore's explain records, TensorFlow's log messages and run metadata
    return ev
