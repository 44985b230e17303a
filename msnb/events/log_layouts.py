"""The training-log layouts msnb reads, one entry each: the line reader, the bulk reader and discovery's sniff derive
from this table.

A layout is a kind of line a trainer prints once per step (mindformers' MFLossMonitor, its dynamic-graph trainer,
Megatron-LM's iteration line, MindSpore's LossMonitor...).  Three readers need to know it:

- discovery (:mod:`msnb.events.discovery`) sniffs a ``.txt``/``.out`` file's first 64 KiB for one of its lines
  (:attr:`LogLayout.sniff`), or the file is not taken for a log;
- the bulk reader (:mod:`msnb.events.bulklog`) places every layout's :attr:`~LogLayout.marker` in a chunk; a chunk
  holding the marker of a layout with no whole-chunk reader (:attr:`~LogLayout.bulk`) goes to the line reader;
- the line reader (:class:`msnb.events.logs.LogParser`) reads each line by the first entry, in table order, whose
  marker the line holds and whose reader takes it: a built-in layout by its own method (:attr:`~LogLayout.handler`),
  every other entry by its :attr:`~LogLayout.line` pattern.

Adding a layout is one entry in :data:`LAYOUTS` (docs/ARCHITECTURE.md, "Add a log layout")::

    LogLayout("my-trainer", marker=b"[train] step", line=r"\\[train\\] step (?P<step>\\d{1,19}) loss=(?P<loss>{num})",
              fields=(("loss", "loss"),))

The pattern's ``step`` group is the step, each field group a value (``{num}`` is a number as the logs print it);
a timestamp at the line's start (``2024-06-01 10:00:00``) is its wall time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# a number as the logs print it: digits, point, exponent, or NaN/Inf (the line reader's own number syntax)
NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?)(?![A-Za-z]))"


@dataclass(frozen=True)
class LogLayout:
    """One kind of per-step log line.

    Attributes:
        name: what the layout is called in messages and docs.
        marker: a literal every line of the layout holds (bytes): lines and chunks without it are skipped fast.
        sniff: a pattern (bytes) that finds one of its lines in a file's head; None: a file holding only such lines is
            not taken for a log by its head (a layout that never comes alone, such as a progress line).
        line: the line pattern of a layout read through this table (``{num}`` a number); None for a built-in one.
        fields: ``(group, tag)`` pairs: the pattern's groups read as values, and the tag each becomes.
        bulk: the name of :mod:`msnb.events.bulklog`'s whole-chunk reader of the layout; None: read line by line.
        handler: the :class:`~msnb.events.logs.LogParser` method that reads a built-in layout's line.
    """

    name: str
    marker: bytes
    sniff: bytes | None = None
    line: str | None = None
    fields: tuple = ()
    bulk: str | None = None
    handler: str | None = None

    def pattern(self) -> re.Pattern:
        """The compiled :attr:`line` pattern (a table layout's)."""
        return _compiled(self.line)


_MEGATRON_SNIFF = rb"iteration\s{0,64}\d{1,19}\s{0,64}/\s{0,64}\d{1,19}\s{0,64}\|"

# The layouts, in the order both readers try them: the line reader reads a line by the first entry whose marker it
# holds and whose reader takes it; the bulk reader hands a chunk to the first whole-chunk reader (table order) whose
# marker it holds (a line of that layout holding another's marker is left to the line reader, so this order decides).
# Order matters only where one line could be two layouts': a TrainingStateMonitor line and an MFLossMonitor line in
# sink mode share "Epoch:[ ..], step:[ ..], loss: N" (TrainingStateMonitor reads it); a line that is an iteration line
# and another layout's is Megatron's.
LAYOUTS: list[LogLayout] = [
    LogLayout("mindformers TrainingStateMonitor", b"Epoch:[", handler="_training_state"),
    LogLayout("Megatron-LM iteration", b"iteration", sniff=_MEGATRON_SNIFF, bulk="_megatron", handler="_megatron"),
    LogLayout("mindformers dynamic-graph trainer", b"{ step:[", sniff=rb"\{ ?step:\[ *\d", bulk="_pynative", handler="_pynative_line"),
    LogLayout("mindformers MFLossMonitor", b"Epoch:[", sniff=rb"\{ ?Epoch:\[ *\d", bulk="_mf", handler="_mf"),
    LogLayout("MindSpore LossMonitor", b"epoch:", sniff=rb"epoch: *\d{1,19} +step: *\d{1,19}, *loss is", handler="_loss_monitor"),
    LogLayout("MindSpore TimeMonitor", b"epoch time", handler="_time_monitor"),
    LogLayout("mindformers 1.x progress", b"samples/s/p", handler="_progress"),  # read with the loss line before it
    # MindSpore's memory report (msnb.events.memory_lines): no step, kept as the file's memory rows, never as points
    LogLayout("MindSpore memory report (sizes)", b" memory size:", sniff=rb"(?:Device (?:MOC|HBM)|MindSpore Used) memory size: {0,16}\d", handler="_memory"),
    LogLayout("MindSpore memory report (peaks)", b"peak memory usage (", sniff=rb"(?:Used|Actual) peak memory usage \(with", handler="_memory"),
]
PROGRESS_MARKER = b"samples/s/p"  # the one layout whose lines belong to the loss line before them


@functools.lru_cache(maxsize=64)
def _compiled(line: str) -> re.Pattern:
    return re.compile(line.replace("{num}", NUM))


@functools.lru_cache(maxsize=8)
def _derived(layouts: tuple) -> tuple:
    markers = tuple(dict.fromkeys(layout.marker for layout in layouts if layout.marker != PROGRESS_MARKER)) + (PROGRESS_MARKER,)
    sniff = re.compile(
        b"|".join(layout.sniff if layout.sniff is not None else _compiled(layout.line).pattern.encode() for layout in layouts if layout.sniff or layout.line)
    )
    return markers, sniff, tuple(layout for layout in layouts if layout.line is not None)


def markers() -> tuple[bytes, ...]:
    """Every layout's marker, once each, the progress line's last (the bulk reader places them in a chunk)."""
    return _derived(tuple(LAYOUTS))[0]


def sniff_pattern() -> re.Pattern:
    """One pattern that finds a line of any layout in a file's head (discovery's sniff)."""
    return _derived(tuple(LAYOUTS))[1]


def table_layouts() -> tuple[LogLayout, ...]:
    """The layouts read through their :attr:`~LogLayout.line` pattern (no built-in reader)."""
    return _derived(tuple(LAYOUTS))[2]


def bulk_readers(module) -> tuple:
    """``(marker, reader)`` of each layout with a whole-chunk reader, in table order, looked up in *module* (bulklog)."""
    return tuple((layout.marker, getattr(module, layout.bulk)) for layout in LAYOUTS if layout.bulk is not None)


__all__ = ["LogLayout", "LAYOUTS", "NUM", "PROGRESS_MARKER", "markers", "sniff_pattern", "table_layouts", "bulk_readers"]
