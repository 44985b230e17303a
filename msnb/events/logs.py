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
"""

from __future__ import annotations

import math
import re
import time

from . import training_state

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Inf|-inf)"
# mindformers' console format starts with the time, its file format with "[INFO] "
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")
_MF = re.compile(
    r"\{ ?Epoch:\[\s*(\d+)/\s*(\d+)\],\s*step:\[\s*(\d+)/\s*(\d+)\],\s*"
    r"loss:\s*(?:\[\s*(?P<loss>" + _NUM + r")\s*/\s*(?P<avg>" + _NUM + r")\s*\]|(?P<sinkloss>" + _NUM + r"))"
)
_MF_FIELDS = {
    "step_time_ms": re.compile(r"per_step_time:\s*(" + _NUM + r")\s*ms"),
    "lr": re.compile(r"\blr:\s*\[?\s*(" + _NUM + r")"),
    "loss_scale": re.compile(r"loss_scale:\s*\[?\s*(" + _NUM + r")"),
    "global_norm": re.compile(r"global_norm:\s*\[?\s*(" + _NUM + r")"),
}
_MF_PROGRESS = re.compile(r"(" + _NUM + r")\s*samples/s/p")
_LOSS_MONITOR = re.compile(r"epoch:\s*(\d+)\s+step:\s*(\d+),\s*loss is\s*(" + _NUM + r")")
# LossMonitor's last words before it stops a run: "In epoch: 1 step: 3, loss is NAN or INF, training ..."
_LOSS_MONITOR_NAN = re.compile(r"epoch:\s*(\d+)\s+step:\s*(\d+),\s*loss is NAN or INF")
_TIME_MONITOR = re.compile(r"(\w+) epoch time:\s*(" + _NUM + r")\s*ms,\s*per step time:\s*(" + _NUM + r")\s*ms")


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

    def __init__(self):
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
        return self.offset + step

    def feed(self, lines) -> list:
        points = []
        for line in lines:
            self.lines += 1
            if "Epoch:[" in line and (state := training_state.parse_line(line)) is not None:  # TrainingStateMonitor
                wall = _wall_time(line)
                points.extend((tag, step, wall, value) for tag, step, value in state)
                self.matched += 1
                continue
            if "loss" not in line and "epoch time" not in line and "samples/s/p" not in line:
                continue
            m = _MF.search(line)
            if m:
                epoch, step, per_epoch = int(m.group(1)), int(m.group(3)), int(m.group(4))
                gstep = (epoch - 1) * per_epoch + step
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
            m = _LOSS_MONITOR_NAN.search(line)
            if m:
                gstep = self._global_step(int(m.group(1)), int(m.group(2)))
                points.append(("loss", gstep, _wall_time(line), math.nan))
                self.matched += 1
                continue
            m = _LOSS_MONITOR.search(line)
            if m:
                gstep = self._global_step(int(m.group(1)), int(m.group(2)))
                points.append(("loss", gstep, _wall_time(line), _float(m.group(3))))
                self.last_global = (gstep, _wall_time(line))
                self.matched += 1
                continue
            m = _TIME_MONITOR.search(line)
            if m and m.group(1).lower() == "train":
                epoch_ms, step_ms = _float(m.group(2)), _float(m.group(3))
                if self.epoch is not None and step_ms > 0 and math.isfinite(epoch_ms):
                    steps = int(round(epoch_ms / step_ms))
                    if steps >= self.last_step_in_epoch:
                        self.epoch_steps[self.epoch] = steps
                if self.last_global is not None:
                    gstep = self.last_global[0]
                    points.append(("step_time_ms", gstep, _wall_time(line), step_ms))
                self.matched += 1
                continue
            m = _MF_PROGRESS.search(line)
            if m and self.last_global is not None:
                gstep, wall = self.last_global
                points.append(("throughput", gstep, wall, _float(m.group(1))))
                self.matched += 1
        return points
