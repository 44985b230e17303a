"""Scalars from training logs: MindSpore's LossMonitor and TimeMonitor, mindformers' MFLossMonitor.

Lines look like::

    epoch: 1 step: 16, loss is 14.0172                                      (LossMonitor)
    ValueError: In epoch: 1 step: 3, loss is NAN or INF, training ...       (LossMonitor stopping a run: a NaN point)
    Train epoch time: 3078.914 ms, per step time: 48.108 ms                (TimeMonitor)
    2024-05-01 12:00:00,123 - mindformers[...] - INFO - { Epoch:[  1/  2], step:[    5/  100],
        loss:[2.345678/2.456789], per_step_time: 123ms, lr: 0.0001, overflow cond: False,
        loss_scale: 1.0, global_norm: [1.23]                                (MFLossMonitor, one line)
      4.0% |██      | 12.34567 samples/s/p  0:10:00 }                      (its progress line)

Steps become global steps: mindformers prints the steps per epoch; for
LossMonitor the epoch's length comes from TimeMonitor's epoch/step time ratio
when present, else from the last step seen in the epoch.  Scalars are named
``loss``, ``lr``, ``step_time_ms``, ``loss_scale``, ``global_norm`` and ``throughput``.

Parsing is linear in the line length: the number pattern has one way to match
each string (no nested or adjacent unbounded repeats over the same
characters), every pattern is anchored on a literal found first with
``str.find``, and a line is parsed by its first :data:`MAX_LINE` characters.
Counters wider than int64 (a corrupted step) are ignored, never an overflow.
"""

from __future__ import annotations

import math
import re
import time

from . import training_state

# one way to match any number: digits, then an optional fraction, then an optional exponent
_NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Inf)"
_INT = r"(\d{1,19})"  # wider counters are no counters: the pattern then fails at once
MAX_LINE = 16_384  # characters of one line that are parsed; monitor lines are a few hundred
_INT64_MAX = (1 << 63) - 1
# mindformers' console format starts with the time, its file format with "[INFO] "
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")
_MF = re.compile(
    r"\{ ?Epoch:\[ *" + _INT + r"/ *" + _INT + r"\],\s*step:\[ *" + _INT + r"/ *" + _INT + r"\],\s*"
    r"loss:\s*(?:\[\s*(?P<loss>" + _NUM + r")\s*/\s*(?P<avg>" + _NUM + r")\s*\]|(?P<sinkloss>" + _NUM + r"))"
)
_MF_FIELDS = {
    "step_time_ms": re.compile(r"per_step_time:\s*(" + _NUM + r")\s*ms"),
    "lr": re.compile(r"\blr: *(?:\[ *)?(" + _NUM + r")"),
    "loss_scale": re.compile(r"loss_scale: *(?:\[ *)?(" + _NUM + r")"),
    "global_norm": re.compile(r"global_norm: *(?:\[ *)?(" + _NUM + r")"),
}
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


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _wall_time(line: str) -> float:
    m = _TIMESTAMP.search(line, 0, 64)
    if not m:
        return math.nan
    try:
        t = time.mktime(time.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return math.nan
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

    def feed(self, lines) -> list:
        """Points of the given lines, in order.

        Args:
            lines: text lines (without their newline); each is parsed by its first ``max_line`` characters.

        Returns:
            ``(tag, step, wall_time, value)`` tuples.
        """
        points = []
        for line in lines:
            self.lines += 1
            if len(line) > self.max_line:
                line = line[: self.max_line]
                self.long_lines += 1
            if "Epoch:[" in line and (state := training_state.parse_line(line)) is not None:  # TrainingStateMonitor
                wall = _wall_time(line)
                points.extend((tag, step, wall, value) for tag, step, value in state)
                self.matched += 1
                continue
            if "loss" not in line and "epoch time" not in line and "samples/s/p" not in line:
                continue
            at = line.find("Epoch:[")
            m = None
            if at >= 1:
                m = _MF.match(line, at - 1) or (_MF.match(line, at - 2) if at >= 2 else None)
            if m:
                epoch, step, per_epoch = int(m.group(1)), int(m.group(3)), int(m.group(4))
                gstep = (epoch - 1) * per_epoch + step
                if not 0 <= gstep <= _INT64_MAX:
                    continue
                wall = _wall_time(line)
                loss = m.group("loss") if m.group("loss") is not None else m.group("sinkloss")
                points.append(("loss", gstep, wall, _float(loss)))
                for tag, rx in _MF_FIELDS.items():
                    fm = rx.search(line, m.end())
                    if fm:
                        points.append((tag, gstep, wall, _float(fm.group(1))))
                self.last_global = (gstep, wall)
                self.matched += 1
                continue
            m = _at_literal(_LOSS_MONITOR_NAN, line, "epoch:")
            if m:
                gstep = self._global_step(int(m.group(1)), int(m.group(2)))
                if gstep is None:
                    continue
                points.append(("loss", gstep, _wall_time(line), math.nan))
                self.matched += 1
                continue
            m = _at_literal(_LOSS_MONITOR, line, "epoch:")
            if m:
                gstep = self._global_step(int(m.group(1)), int(m.group(2)))
                if gstep is None:
                    continue
                points.append(("loss", gstep, _wall_time(line), _float(m.group(3))))
                self.last_global = (gstep, _wall_time(line))
                self.matched += 1
                continue
            at = line.find(" epoch time:")
            m = _TIME_MONITOR.match(line, _word_start(line, at)) if at >= 1 else None
            if m and m.group(1).lower() == "train":
                epoch_ms, step_ms = _float(m.group(2)), _float(m.group(3))
                if self.epoch is not None and step_ms > 0 and math.isfinite(epoch_ms) and epoch_ms / step_ms < _INT64_MAX:
                    steps = int(round(epoch_ms / step_ms))
                    if steps >= self.last_step_in_epoch:
                        self.epoch_steps[self.epoch] = steps
                if self.last_global is not None:
                    gstep = self.last_global[0]
                    points.append(("step_time_ms", gstep, _wall_time(line), step_ms))
                self.matched += 1
                continue
            at = line.find("samples/s/p")
            m = _MF_PROGRESS.search(line, max(0, at - 64), at) if at >= 0 else None
            if m and self.last_global is not None:
                gstep, wall = self.last_global
                points.append(("throughput", gstep, wall, _float(m.group(1))))
                self.matched += 1
        return points
