"""What one event record decodes to, whatever file format it came from."""

from __future__ import annotations


class DecodedEvent:
    """One Event payload, flattened.

    ``scalars`` holds ``(tag, value, value_offset, fmt)``: the offset (from the
    payload start) and format (``"f4"``/``"f8"``) of the value's bytes let the
    vectorised decoder in :mod:`msnb.events.fastscalars` read every record that
    shares this one's layout without decoding it.  ``others`` holds
    ``(kind, tag, data)`` for histograms, tensors, images, texts and the rest.
    """

    __slots__ = ("wall_time", "step", "wall_offset", "step_span", "version", "graph_bytes", "scalars", "others", "extra_fields")

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

    @property
    def pure_scalar(self) -> bool:
        """Only a time, a step and fixed-width scalars: safe to use as a layout template."""
        return (
            bool(self.scalars)
            and not self.others
            and self.version is None
            and self.graph_bytes is None
            and not self.extra_fields
            and self.wall_offset is not None
            and all(off is not None for _, _, off, _ in self.scalars)
        )
