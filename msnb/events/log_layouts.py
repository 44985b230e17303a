"""The training-log layouts msnb reads, one entry each: the line reader, the bulk reader and discovery's sniff derive
from this table.

A layout is a kind of line a trainer prints once per step (mindformers' MFLossMonitor, its dynamic-graph trainer,
Megatron-LM's iteration line, MindSpore's LossMonitor...).  Three readers need to know it:

- discovery (:mod:`msnb.events.discovery`) sniffs a ``.txt``/``.out`` file's first 64 KiB for one of its lines
  (:attr:`LogLayout.sniff`), or the file is not taken for a log;
- the bulk reader (:mod:`msnb.events.bulklog`) places every layout's :attr:`~LogLayout.marker` in a chunk; a chunk
  holding the marker of a layout with no whole-chunk reader (``bulklog.CHUNK_READERS``) goes to the line reader;
- the line reader (:class:`msnb.events.logs.LogParser`) reads each line by the first entry, in table order, whose
  marker the line holds and whose reader takes it: a built-in layout by the reader the line reader keeps for that
  entry (``logs.LINE_READERS``), every other entry by its :attr:`~LogLayout.line` pattern.

A built-in layout's patterns, markers and printed field names are written here once (:func:`megatron_head`,
:data:`MF_FIELDS`, :data:`PYNATIVE_FIELDS`, each entry's marker) and both readers take them from here.

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

    A built-in entry (no :attr:`line`) is read by the line reader's own reader of it (``logs.LINE_READERS``, keyed by
    the entry) and, for a large and common layout, by a whole-chunk reader too (``bulklog.CHUNK_READERS``).
    """

    name: str
    marker: bytes
    sniff: bytes | None = None
    line: str | None = None
    fields: tuple = ()

    def pattern(self) -> re.Pattern:
        """The compiled :attr:`line` pattern (a table layout's)."""
        return _compiled(self.line)


# Megatron-LM / MindSpeed-LLM: "[time] iteration      100/  500000 | consumed samples: 800 | ... | lm loss: 9.65E+00 | ...";
# the head written once: *space* is the whitespace a reader allows between its parts (the line reader's \s; the bulk
# reader's [ \t\x1f], \s inside one line), *step* the step's digits (a group where it is read)
_MEGATRON_HEAD = r"iteration{space}{{0,64}}{step}{space}{{0,64}}/{space}{{0,64}}\d{{1,19}}{space}{{0,64}}\|"
MEGATRON_VALIDATION_AT = "validation loss at iteration"  # its evaluation line, whose fields become "validation " tags
MEGATRON_VALIDATION = MEGATRON_VALIDATION_AT + r"\s{0,64}(\d{1,19})\s{0,64}\|"


def megatron_head(space: str = r"\s", step: str = r"(\d{1,19})") -> str:
    """Megatron-LM's iteration head (``iteration 100/ 500000 |``) as a pattern: the line reader's by default."""
    return _MEGATRON_HEAD.format(space=space, step=step)


# printed field -> tag, read after the loss, each found by its name; the whole-chunk reader captures the same, in this order
SEPARATE_LOSSES = {name: name for name in ("lm_loss", "load_balancing_loss", "mtp_loss", "indexer_loss")}
MF_FIELDS = {  # mindformers' MFLossMonitor
    **SEPARATE_LOSSES,
    "per_step_time": "step_time_ms",
    "lr": "lr",
    "loss_scale": "loss_scale",
    "global_norm": "global_norm",
    "train_throughput_per_npu": "model-flops-throughput-per-npu",
}
PYNATIVE_FIELDS = {  # mindformers' dynamic-graph trainer
    **SEPARATE_LOSSES,
    "consumed_samples": "consumed_samples",
    "global_batch_size": "global_batch_size",
    "per_step_time": "step_time_ms",
    "lr": "lr",
    "grad_norm": "grad_norm",
    "throughput": "model-flops-throughput-per-npu",
}
STAGE_FIELDS = {"consumed_samples": "consumed_samples", "global_batch_size": "global_batch_size", "per_step_time": "step_time_ms"}  # a non-last stage's

# the built-in entries, each named once (the readers key their own readers by these)
TRAINING_STATE = LogLayout("mindformers TrainingStateMonitor", b"Epoch:[")
MEGATRON = LogLayout("Megatron-LM iteration", b"iteration", sniff=megatron_head(step=r"\d{1,19}").encode())
PYNATIVE = LogLayout("mindformers dynamic-graph trainer", b"{ step:[", sniff=rb"\{ ?step:\[ *\d")
MF_LOSS_MONITOR = LogLayout("mindformers MFLossMonitor", b"Epoch:[", sniff=rb"\{ ?Epoch:\[ *\d")
LOSS_MONITOR = LogLayout("MindSpore LossMonitor", b"epoch:", sniff=rb"epoch: *\d{1,19} +step: *\d{1,19}, *loss is")
TIME_MONITOR = LogLayout("MindSpore TimeMonitor", b"epoch time")
PROGRESS = LogLayout("mindformers 1.x progress", b"samples/s/p")  # read with the loss line before it
# MindSpore's memory report (msnb.events.memory_lines): no step, kept as the file's memory rows, never as points
MEMORY_SIZES = LogLayout("MindSpore memory report (sizes)", b" memory size:", sniff=rb"(?:Device (?:MOC|HBM)|MindSpore Used) memory size: {0,16}\d")
MEMORY_PEAKS = LogLayout("MindSpore memory report (peaks)", b"peak memory usage (", sniff=rb"(?:Used|Actual) peak memory usage \(with")

# The layouts, in the order both readers try them: the line reader reads a line by the first entry whose marker it
# holds and whose reader takes it; the bulk reader hands a chunk to the first whole-chunk reader (table order) whose
# marker it holds (a line of that layout holding another's marker is left to the line reader, so this order decides).
# Order matters only where one line could be two layouts': a TrainingStateMonitor line and an MFLossMonitor line in
# sink mode share "Epoch:[ ..], step:[ ..], loss: N" (TrainingStateMonitor reads it); a line that is an iteration line
# and another layout's is Megatron's.
LAYOUTS: list[LogLayout] = [TRAINING_STATE, MEGATRON, PYNATIVE, MF_LOSS_MONITOR, LOSS_MONITOR, TIME_MONITOR, PROGRESS, MEMORY_SIZES, MEMORY_PEAKS]
PROGRESS_MARKER = PROGRESS.marker  # the one layout whose lines belong to the loss line before them


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


def readers_in_order(readers: dict) -> tuple:
    """``(marker, reader)`` of each entry *readers* holds (a reader's own readers, keyed by entry), in table order."""
    return tuple((layout.marker, readers[layout]) for layout in LAYOUTS if layout in readers)


__all__ = [
    "LogLayout", "LAYOUTS", "NUM", "PROGRESS_MARKER", "markers", "sniff_pattern", "table_layouts", "readers_in_order", "megatron_head",
    "MEGATRON_VALIDATION", "MEGATRON_VALIDATION_AT", "SEPARATE_LOSSES", "MF_FIELDS", "PYNATIVE_FIELDS", "STAGE_FIELDS", "TRAINING_STATE", "MEGATRON", "PYNATIVE",
    "MF_LOSS_MONITOR", "LOSS_MONITOR", "TIME_MONITOR", "PROGRESS", "MEMORY_SIZES", "MEMORY_PEAKS",
]  # fmt: skip
