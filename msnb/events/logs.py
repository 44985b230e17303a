"""Scalars from training logs: MindSpore's LossMonitor and TimeMonitor, mindformers' MFLossMonitor and its dynamic-graph trainer.

Lines look like::

    epoch: 1 step: 16, loss is 14.0172                                      (LossMonitor; NAN, INF print as such)
    ValueError: In epoch: 1 step: 3, loss is NAN or INF, training ...       (LossMonitor stopping a run: a NaN point)
    Train epoch time: 3078.914 ms, per step time: 48.108 ms                (TimeMonitor)
    2024-05-01 12:00:00,123 - mindformers[...] - INFO - { Epoch:[  1/  2], step:[    5/  100],
        loss:[2.345678/2.456789], per_step_time: 123ms, lr: 0.0001, overflow cond: False,
        loss_scale: 1.0, global_norm: [1.23], train_throughput_per_npu: 170.738T
                                                                            (MFLossMonitor, one line)
      4.0% |██      | 12.34567 samples/s/p  0:10:00 }                      (its progress line)
    { step:[    1/   10], loss:  11.813965, per_step_time:  13570ms, lr: 1.000000e-05,
        grad_norm:  13.831877, throughput:   1.36T }                         (mindformers' dynamic-graph trainer,
                                                                             ``mindformers/pynative/callback/loss_callback.py``)

Steps become global steps: mindformers prints the steps per epoch (its
dynamic-graph trainer the global step itself); for LossMonitor the epoch's
length comes from TimeMonitor's epoch/step time ratio when present, else from
the last step seen in the epoch.  Scalars are named ``loss``, ``lr``,
``step_time_ms``, ``loss_scale``, ``global_norm`` (MFLossMonitor) or
``grad_norm`` (the dynamic-graph trainer, as printed), ``throughput``
(samples/s per device, from the progress line), the separate losses as printed
(``lm_loss``, ``load_balancing_loss``, ``mtp_loss``, ``indexer_loss``), and
``model-flops-throughput-per-npu`` for the TFLOPS per device printed with a
``T`` (``train_throughput_per_npu``; the dynamic-graph trainer's
``throughput``): the tag mindformers gives that value in TensorBoard.
Every value is read as printed; where a release is known to print a wrong
unit (mindformers 1.9's dynamic-graph throughput, 1000 times too small) that
is said as a problem naming the release (:meth:`LogParser.take_units`).

A field that is there but is not one number (``global_norm: [1 31049]``, a
tensor's repr) is not guessed at: it is left out and reported
(:meth:`LogParser.take_declined`).

Parsing is linear in the line length: the number pattern has one way to match
each string (no nested or adjacent unbounded repeats over the same
characters), every pattern is anchored on a literal found first with
``str.find``, and a line is parsed by its first :data:`MAX_LINE` characters
(1 MiB: the one limit for every log line, TrainingStateMonitor's long
``max_attention_logit`` lists included; a longer line is reported).
Counters wider than int64 (a corrupted step) are ignored, never an overflow.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
import time
import types

from ..words import count
from . import log_layouts, training_state
from .memory_lines import MemoryLines

# one way to match any number: digits, then an optional fraction, then an optional exponent; or NaN/Inf in any case
_NUM = log_layouts.NUM  # a number as the logs print it (one definition, the layout table's)
_INT = r"(\d{1,19})"  # wider counters are no counters: the pattern then fails at once
MAX_LINE = training_state.MAX_LINE  # characters of one line that are parsed (1 MiB), for every kind of line
_INT64_MAX = (1 << 63) - 1
# mindformers' console format starts with the time, its file format with "[INFO] "
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")
_MF = re.compile(
    r"\{ ?Epoch:\[ *" + _INT + r"/ *" + _INT + r"\],\s*step:\[ *" + _INT + r"/ *" + _INT + r"\],\s*"
    r"loss:\s*(?:\[\s*(?P<loss>" + _NUM + r")\s*/\s*(?P<avg>" + _NUM + r")\s*\]|(?P<sinkloss>" + _NUM + r"))"
)
# the dynamic-graph trainer: "{ step:[%5d/%5d], loss: %10.6f, per_step_time: %6dms, ..." (no epoch: the global step);
# 2.1 prints "consumed_samples: %s, global_batch_size: %s, " before the loss, 2.0 and 2.1 "loss: N/A (non-last PP stage...)"
_PYNATIVE = re.compile(
    r"\{ step:\[ *" + _INT + r"/ *" + _INT + r"\],(?P<counts> *consumed_samples: *(?P<consumed>\d{1,19}|None), *global_batch_size: *(?P<batch>\d{1,19}|None),)?"
    r" *loss: *(?:(?P<loss>" + _NUM + r")|(?P<na>N/A))"
)
# Megatron-LM / MindSpeed-LLM's iteration and validation lines (their patterns: the layout table's)
MEGATRON_STEP = re.compile(log_layouts.megatron_head())
MEGATRON_VALIDATION = re.compile(log_layouts.MEGATRON_VALIDATION)
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9 ()/_.,-]{0,96}")
_MTP = re.compile(r"(?<![A-Za-z0-9_])mtp_(\d{1,3})_loss: *(" + _NUM + r")")
_NUMBER = re.compile(_NUM)
# the fields printed after the loss, each found by its name: the layout table's
_MF_FIELDS, _PYNATIVE_FIELDS, _STAGE_FIELDS = log_layouts.MF_FIELDS, log_layouts.PYNATIVE_FIELDS, log_layouts.STAGE_FIELDS
# each built-in layout's marker, as the line reader looks for it
_MEGATRON_AT, _PYNATIVE_AT = log_layouts.MEGATRON.marker.decode(), log_layouts.PYNATIVE.marker.decode()
_MF_AT, _LOSS_MONITOR_AT = log_layouts.MF_LOSS_MONITOR.marker.decode(), log_layouts.LOSS_MONITOR.marker.decode()
_PROGRESS_AT = log_layouts.PROGRESS_MARKER.decode()
_MAX_BRACKET = 256  # characters between a field's [ and ] (a one-number list is a few dozen)
# matched backwards from the literal: the number just before " samples/s/p"
_MF_PROGRESS = re.compile(r"(" + _NUM + r") {0,8}$")
_LOSS_MONITOR = re.compile(r"epoch: *" + _INT + r" +step: *" + _INT + r", *loss is *(" + _NUM + r")")
# LossMonitor's last words before it stops a run: "In epoch: 1 step: 3, loss is NAN or INF, training ..."
_LOSS_MONITOR_NAN = re.compile(r"epoch: *" + _INT + r" +step: *" + _INT + r", *loss is NAN or INF")
_TIME_MONITOR = re.compile(r"(\w{1,16}) epoch time: *(" + _NUM + r") *ms, *per step time: *(" + _NUM + r") *ms")


def _word_start(line: str, at: int) -> int:
    """Start of the word (at most 16 characters) that ends at *at*."""
    lo = max(0, at - 16)
    i = at
    while i > lo and (line[i - 1].isalnum() or line[i - 1] == "_"):
        i -= 1
    return i


def _at_literal(pattern: re.Pattern, line: str, literal: str):
    """*pattern* matched where *literal* occurs (each occurrence tried once: linear in the line)."""
    at = line.find(literal)
    while at >= 0:
        m = pattern.match(line, at)
        if m:
            return m
        at = line.find(literal, at + len(literal))
    return None


def _field(line: str, name: str, start: int):
    """The value printed after ``name:`` (or ``name`` and a space) from *start* on: ``(value, None)``, ``(None, text)`` when it is no single number, or None when absent.

    The name must start a word (``lr`` is not the end of ``per_step_lr``).  A bracketed value
    (numpy's ``[1.23]``) must hold exactly one number: ``[1 31049]`` is declined, never read as 1.
    """
    at = line.find(name, start)
    n = len(name)
    while at >= 0:
        before = line[at - 1] if at > 0 else " "
        after = line[at + n : at + n + 1]
        if not (before.isalnum() or before == "_") and after in (":", " "):
            break
        at = line.find(name, at + n)
    if at < 0:
        return None
    p = at + n + (after == ":")
    end = min(len(line), p + 64)
    while p < end and line[p] == " ":
        p += 1
    if line.startswith("[", p):
        close = line.find("]", p, p + _MAX_BRACKET)
        if close < 0:
            return None, line[p : p + 32] + "..."
        parts = line[p + 1 : close].replace(",", " ").split()
        m = _NUMBER.fullmatch(parts[0]) if len(parts) == 1 else None
        return (_float(m.group(0)), None) if m else (None, line[p : close + 1])
    m = _NUMBER.match(line, p)
    if m is None:
        stop = line.find(",", p, p + 32)
        return None, line[p : stop if stop >= 0 else p + 32]
    return _float(m.group(0)), None


def megatron_number(text: str) -> float | None:
    """The number a Megatron field prints (``1.043863E+01``, ``nan``, ``3121.4`` with a unit after it), or None."""
    if len(text) > 96:
        return None
    try:
        return float(text)  # surrounding spaces allowed
    except ValueError:
        pass
    words = text.split()
    try:
        return float(words[0]) if words else None
    except ValueError:
        return None


class MegatronNames(dict):
    """Printed field name (spaces around it kept) -> tag (None: not a name), judged once per name."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def tag(self, raw: str):
        if raw in self:
            return self[raw]
        name = raw.strip()
        tag = self.prefix + name if _FIELD_NAME.fullmatch(name) else None
        if len(self) < 4096:  # a file of ever-new names is judged name by name, never held
            self[raw] = tag
        return tag


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


_MINUTES: dict = {}  # YYYYMMDDHHMM as one integer -> its local time in seconds (NaN: not a date)
_MINUTES_KEPT = 4096


def minute(key: int) -> float:
    """Local epoch seconds of the minute ``YYYYMMDDHHMM`` (an integer), NaN where that is no date.

    Judged as ``time.strptime(..., "%Y-%m-%d %H:%M")`` judges it (a test checks them against each other) and
    converted by ``time.mktime`` (daylight saving as the machine's zone has it), once a minute: a log has thousands
    of lines a minute, and strptime alone costs more than a line's other work.
    """
    t = _MINUTES.get(key)
    if t is None:
        if len(_MINUTES) >= _MINUTES_KEPT:
            _MINUTES.clear()
        year, month, day, hour, mins = key // 10**8, key // 10**6 % 100, key // 10**4 % 100, key // 100 % 100, key % 100
        try:
            datetime.datetime(year, month, day, hour, mins)  # what strptime refuses (a 30th of February, hour 24, year 0)
            t = time.mktime((year, month, day, hour, mins, 0, 0, 0, -1))
        except (ValueError, OverflowError):
            t = math.nan
        _MINUTES[key] = t
    return t


def wall_time(line: str) -> float:
    m = _TIMESTAMP.search(line, 0, 64)
    if not m:
        return math.nan
    stamp = m.group(1)
    seconds = int(stamp[17:19])
    if seconds > 61:  # what strptime's %S accepts (leap seconds included)
        return math.nan
    t = minute(int(stamp[0:4] + stamp[5:7] + stamp[8:10] + stamp[11:13] + stamp[14:16])) + seconds
    if m.group(2):
        t += int(m.group(2)) / 10 ** len(m.group(2))
    return t


class LogParser:
    """Turns log lines into ``(tag, step, wall_time, value)`` points; keeps epoch state across calls."""

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self.long_lines = 0  # lines cut to max_line characters
        self.epoch = None
        self.offset = 0  # global step of the epoch's step 0 (LossMonitor)
        self.last_step_in_epoch = 0
        self.epoch_steps = {}  # epoch -> steps, learned from TimeMonitor
        self.last_global = None
        self.lines = 0
        self.matched = 0
        self.declined: dict = {}  # field -> [lines, first line number, first text]: fields that were no single number
        self.not_last_stage = 0  # dynamic-graph lines of a non-last pipeline stage ("loss: N/A"): counted, no loss
        self.generation = None  # 2 once a line only mindformers 2.x writes was seen (then its throughput's unit is right)
        self.unit_1_9 = 0  # dynamic-graph lines with a throughput that mindformers 1.9 would have printed 1000x too small
        self.said_unit = False  # take_units said it
        self.megatron = {"": MegatronNames(""), "validation ": MegatronNames("validation ")}
        self.fieldless = [0, 0]  # Megatron iteration lines without a readable field: how many, the first's line number
        self.bulk_misses = 0  # chunks msnb.events.bulklog split whole before finding a line outside the layout
        self.bulk_wait = 0  # chunks it reads the careful way before splitting one whole again (2**misses - 1 after a miss)
        self._readers = None  # (the layouts, their line readers), made at the first feed
        self.memory = MemoryLines()  # MindSpore's memory report, job by job (no points: msnb.events.memory_lines)
        self.prev = ""  # the line before the one being read (a memory report's glog prefix may stand on it)

    def bulk_state(self) -> tuple:
        """What a bulk reading (:mod:`msnb.events.bulklog`) changes, kept so a chunk it gives up is read from the same state."""
        return self.matched, self.last_global, self.generation, self.not_last_stage, self.unit_1_9

    def restore_bulk_state(self, state: tuple) -> None:
        self.matched, self.last_global, self.generation, self.not_last_stage, self.unit_1_9 = state

    def _global_step(self, epoch: int, step: int) -> int:
        if self.epoch is None:
            self.epoch = epoch
            self.offset = 0
        elif epoch != self.epoch:
            if epoch > self.epoch:
                span = self.epoch_steps.get(self.epoch) or self.last_step_in_epoch
                self.offset += span * (epoch - self.epoch)
            else:  # a new training started in the same log
                self.offset = 0
            self.epoch = epoch
            self.last_step_in_epoch = 0
        self.last_step_in_epoch = max(self.last_step_in_epoch, step)
        gstep = self.offset + step
        return gstep if gstep <= _INT64_MAX else None

    def _fields(self, line: str, start: int, names: dict, gstep: int, wall: float, points: list) -> None:
        """The named fields after *start*, as points; a field that is no single number is declined."""
        for name, tag in names.items():
            found = _field(line, name, start)
            if found is None:
                continue
            value, text = found
            if text is None:
                points.append((tag, gstep, wall, value))
            else:
                seen = self.declined.get(name)
                if seen is None:
                    self.declined[name] = [1, self.lines, text]
                else:
                    seen[0] += 1

    def _megatron(self, line: str, points: list) -> bool:
        """A Megatron iteration or validation line's ``name: number`` fields as points; False when the line is none."""
        at = line.find(_MEGATRON_AT)
        m = MEGATRON_STEP.match(line, at)
        prefix = ""
        if m is None:
            v = line.find(log_layouts.MEGATRON_VALIDATION_AT)
            m = MEGATRON_VALIDATION.match(line, v) if v >= 0 else None
            prefix = "validation "
            if m is None:
                return False
        step = int(m.group(1))
        if step > _INT64_MAX:
            return False
        wall = wall_time(line)
        names = self.megatron[prefix]
        before = len(points)
        for part in line[m.end() :].split("|"):
            name, colon, value = part.partition(":")
            if not colon:
                continue
            tag = names.tag(name)
            if tag is None:
                continue
            number = megatron_number(value)
            if number is not None:
                points.append((tag, step, wall, number))
        if len(points) == before:
            self.fieldless = [self.fieldless[0] + 1, self.fieldless[1] or self.lines]
        self.matched += 1
        return True

    def _pynative(self, line: str, m, points: list) -> None:
        """A dynamic-graph trainer line (mindformers 1.9, 2.0, 2.1)."""
        gstep = int(m.group(1))
        wall = wall_time(line)
        if m.group("counts") is not None or "_loss: " in line[m.end() :] or m.group("na"):
            self.generation = 2  # fields 1.9 never printed
        start = m.start() + 8
        before = len(points)
        if m.group("na"):  # a non-last pipeline stage: no loss, and its "grad_norm: NaN" is no gradient's
            self.not_last_stage += 1
            self._fields(line, start, _STAGE_FIELDS, gstep, wall, points)
            self.matched += 1
            return
        points.append(("loss", gstep, wall, _float(m.group("loss"))))
        self._fields(line, start, _PYNATIVE_FIELDS, gstep, wall, points)
        if self.generation != 2 and any(t == "model-flops-throughput-per-npu" for t, _, _, _ in points[before:]):
            self.unit_1_9 += 1  # read as printed; whether 1.9 printed it (1000x too small) is said, never guessed
        for mtp in _MTP.finditer(line, m.end(), m.end() + 4096):
            points.append((f"mtp-{int(mtp.group(1))}-loss", gstep, wall, _float(mtp.group(2))))
        self.last_global = (gstep, wall)
        self.matched += 1

    def take_units(self) -> list[str]:
        """One sentence, once a file, for values read as printed that a release is known to print in a wrong unit.

        mindformers 1.9's dynamic-graph trainer divides the FLOPs by the step's milliseconds times 1e12 and prints
        the result with a ``T``: 1000 times too small.  2.x divides by milliseconds times 1e9 (TFLOPS, as printed).
        A line only 2.x writes proves the release; otherwise the line could be either's, so the value is kept as
        printed and the fault is named.
        """
        if not self.unit_1_9 or self.generation == 2 or self.said_unit:
            return []
        self.said_unit = True  # once a file: a followed log's every poll would say it again
        return [
            "'throughput' read as printed: mindformers 1.9's dynamic-graph trainer prints it 1000 times too small"
            " (FLOPs / (milliseconds x 1e12), shown as 'T'); if mindformers 1.9 wrote this log, its TFLOPS are 1000 times"
            " the values read (2.x prints them right)"
        ]

    def take_withdrawn_unit(self) -> bool:
        """Whether the unit sentence :meth:`take_units` said no longer holds (once): a later line proved mindformers 2.x.

        A followed log can say it on its first lines and prove 2.x further down; one read of the whole log never says it.
        """
        if self.said_unit and self.generation == 2:
            self.said_unit = False
            return True
        return False

    def take_declined(self) -> list[str]:
        """One sentence per field that was printed but not as one number since the last call (then forgotten)."""
        out = [
            f"field {name!r} is not one number on {count(lines, 'line')} (first on line {first}: {text!r}); not read"
            for name, (lines, first, text) in self.declined.items()
        ]
        self.declined = {}
        if self.not_last_stage:
            out.append(
                f"{count(self.not_last_stage, 'line')} of a non-last pipeline stage ('loss: N/A'): counted, no loss read from them"
                " (the last stage's log holds the loss)"
            )
            self.not_last_stage = 0
        n, first = self.fieldless
        if n:
            out.append(f"line {first}: an iteration line without a readable 'name: number' field" + (f" ({count(n, 'such line')})" if n > 1 else ""))
            self.fieldless = [0, 0]
        return out

    def feed(self, lines) -> list:
        """Points of the given lines, in order.

        Each line is read by the first layout of :data:`msnb.events.log_layouts.LAYOUTS`, in table order, whose marker
        it holds and whose reader takes it.

        Args:
            lines: text lines (without their newline); each is parsed by its first ``max_line`` characters.

        Returns:
            ``(tag, step, wall_time, value)`` tuples.
        """
        points = []
        readers = self._line_readers()
        for line in lines:
            self.lines += 1
            if len(line) > self.max_line:
                line = line[: self.max_line]
                self.long_lines += 1
            for marker, read in readers:
                if marker in line and read(line, points):
                    break
            self.prev = line
        return points

    def _memory(self, line: str, points: list) -> bool:
        """A line of MindSpore's memory report: a figure of the file's memory rows, no point (:mod:`msnb.events.memory_lines`)."""
        return self.memory.line(line, self.lines, self.prev, self.matched)

    def _line_readers(self) -> tuple:
        """``(marker, reader)`` of every layout in table order: a built-in one's method, a table one's pattern reader."""
        layouts = tuple(log_layouts.LAYOUTS)
        if self._readers is None or self._readers[0] != layouts:
            readers = tuple(
                (layout.marker.decode(), types.MethodType(LINE_READERS[layout], self) if layout.line is None else functools.partial(self._table_line, layout))
                for layout in layouts
            )
            self._readers = (layouts, readers)
        return self._readers[1]

    def _training_state(self, line: str, points: list) -> bool:
        """A TrainingStateMonitor line (mindformers): its points; False when the line is none."""
        state = training_state.parse_line(line)
        if state is None:
            return False
        wall = wall_time(line)
        points.extend((tag, step, wall, value) for tag, step, value in state)
        self.matched += 1
        return True

    def _table_line(self, layout, line: str, points: list) -> bool:
        """A line of a layout read through the table (:attr:`~msnb.events.log_layouts.LogLayout.line`); False when it is none."""
        m = layout.pattern().search(line)
        if m is None:
            return False
        step = int(m.group("step"))
        if step > _INT64_MAX:
            return True
        wall = wall_time(line)
        for group, tag in layout.fields:
            text = m.group(group)
            if text is not None:
                points.append((tag, step, wall, _float(text)))
        self.matched += 1
        return True

    def _pynative_line(self, line: str, points: list) -> bool:
        """A dynamic-graph trainer line (``{ step:[``); True also for one whose counters overflow (read as nothing)."""
        at = line.find(_PYNATIVE_AT)
        m = _PYNATIVE.match(line, at) if at >= 0 else None
        if not m:
            return False
        if int(m.group(1)) <= _INT64_MAX and int(m.group(2)) <= _INT64_MAX:
            self._pynative(line, m, points)
        return True

    def _mf(self, line: str, points: list) -> bool:
        """An MFLossMonitor line (``{ Epoch:[``); True also for one whose global step is out of range."""
        at = line.find(_MF_AT)
        m = None
        if at >= 1:
            m = _MF.match(line, at - 1) or (_MF.match(line, at - 2) if at >= 2 else None)
        if not m:
            return False
        epoch, step, per_epoch = int(m.group(1)), int(m.group(3)), int(m.group(4))
        gstep = (epoch - 1) * per_epoch + step
        if not 0 <= gstep <= _INT64_MAX:
            return True
        wall = wall_time(line)
        loss = m.group("loss") if m.group("loss") is not None else m.group("sinkloss")
        points.append(("loss", gstep, wall, _float(loss)))
        self._fields(line, m.end(), _MF_FIELDS, gstep, wall, points)
        self.last_global = (gstep, wall)
        self.matched += 1
        return True

    def _loss_monitor(self, line: str, points: list) -> bool:
        """A LossMonitor line (``epoch: E step: S, loss is V``, or ``... loss is NAN or INF``)."""
        m = _at_literal(_LOSS_MONITOR_NAN, line, _LOSS_MONITOR_AT)
        if m:
            gstep = self._global_step(int(m.group(1)), int(m.group(2)))
            if gstep is not None:
                points.append(("loss", gstep, wall_time(line), math.nan))
                self.matched += 1
            return True
        m = _at_literal(_LOSS_MONITOR, line, _LOSS_MONITOR_AT)
        if not m:
            return False
        gstep = self._global_step(int(m.group(1)), int(m.group(2)))
        if gstep is not None:
            points.append(("loss", gstep, wall_time(line), _float(m.group(3))))
            self.last_global = (gstep, wall_time(line))
            self.matched += 1
        return True

    def _time_monitor(self, line: str, points: list) -> bool:
        """A TimeMonitor line of training (``train epoch time: ... per step time: ...``): the step time of the last step."""
        at = line.find(" epoch time:")
        m = _TIME_MONITOR.match(line, _word_start(line, at)) if at >= 1 else None
        if not (m and m.group(1).lower() == "train"):
            return False
        epoch_ms, step_ms = _float(m.group(2)), _float(m.group(3))
        if self.epoch is not None and step_ms > 0 and math.isfinite(epoch_ms) and epoch_ms / step_ms < _INT64_MAX:
            steps = int(round(epoch_ms / step_ms))
            if steps >= self.last_step_in_epoch:
                self.epoch_steps[self.epoch] = steps
        if self.last_global is not None:
            gstep = self.last_global[0]
            points.append(("step_time_ms", gstep, wall_time(line), step_ms))
        self.matched += 1
        return True

    def _progress(self, line: str, points: list) -> bool:
        """mindformers 1.x's progress line (``... samples/s/p``): the throughput of the loss line before it."""
        at = line.find(_PROGRESS_AT)
        m = _MF_PROGRESS.search(line, max(0, at - 64), at) if at >= 0 else None
        if not (m and self.last_global is not None):
            return False
        gstep, wall = self.last_global
        points.append(("throughput", gstep, wall, _float(m.group(1))))
        self.matched += 1
        return True


# the line reader of each built-in entry of the layout table (a table entry is read by its pattern)
LINE_READERS = {
    log_layouts.TRAINING_STATE: LogParser._training_state,
    log_layouts.MEGATRON: LogParser._megatron,
    log_layouts.PYNATIVE: LogParser._pynative_line,
    log_layouts.MF_LOSS_MONITOR: LogParser._mf,
    log_layouts.LOSS_MONITOR: LogParser._loss_monitor,
    log_layouts.TIME_MONITOR: LogParser._time_monitor,
    log_layouts.PROGRESS: LogParser._progress,
    log_layouts.MEMORY_SIZES: LogParser._memory,
    log_layouts.MEMORY_PEAKS: LogParser._memory,
}
