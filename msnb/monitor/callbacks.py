"""msnb's own MindSpore callbacks: smoothed early stop and periodic summary flush."""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np
from mindspore.train.callback import Callback

from ..config.monitor_schema import EarlyStopSettings
from ..errors import ConfigError


def _step_loss(cb_params) -> float:
    out = cb_params.net_outputs
    if isinstance(out, (tuple, list)):
        out = out[0]
    try:
        return float(np.mean(out.asnumpy()))
    except AttributeError:
        return float(out)


class SmoothedEarlyStop(Callback):
    """Stop training when the moving average of the loss stops improving.

    The average over the last ``window`` steps is what is judged, never one
    step's loss: a single noisy batch does not stop a run.  ``patience`` steps
    without an improvement of ``min_delta`` over the best average stop it; so
    does a NaN/Inf loss when ``stop_on_nan``.  ``stopped_step`` and ``reason``
    say what happened.
    """

    def __init__(self, settings: EarlyStopSettings | None = None, **kwargs):
        super().__init__()
        self.settings = settings or EarlyStopSettings(**kwargs)
        if self.settings.monitor != "loss":
            raise ConfigError(f"SmoothedEarlyStop judges the training loss: monitor must be 'loss', got {self.settings.monitor!r}", key="early_stop.monitor")
        self.window = deque(maxlen=self.settings.window)
        self.best = math.inf
        self.best_step = 0
        self.stopped_step = None
        self.reason = None
        self.smoothed = []  # (step, moving average) as judged

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        step = int(cb.cur_step_num)
        loss = _step_loss(cb)
        s = self.settings
        if not math.isfinite(loss):
            if s.stop_on_nan:
                self._stop(run_context, step, f"loss is {loss} at step {step}")
            return
        self.window.append(loss if s.mode == "min" else -loss)
        if len(self.window) < self.window.maxlen:
            return
        avg = sum(self.window) / len(self.window)
        self.smoothed.append((step, avg if s.mode == "min" else -avg))
        if avg < self.best - s.min_delta:
            self.best, self.best_step = avg, step
        elif step >= s.min_steps and step - self.best_step >= s.patience:
            self._stop(
                run_context,
                step,
                f"the {s.window}-step average loss has not improved by {s.min_delta} for {step - self.best_step} steps "
                f"(best {self.best if s.mode == 'min' else -self.best:.6g} at step {self.best_step})",
            )

    def _stop(self, run_context, step: int, reason: str) -> None:
        self.stopped_step = step
        self.reason = reason
        run_context.request_stop()


class PeriodicFlush(Callback):
    """Flush a SummaryCollector's file every ``interval`` seconds, so a follower sees the data while the job runs.

    MindSpore flushes only at the first step and at the end; SummaryCollector
    keeps its SummaryRecord in ``_record`` (not public API: if it is missing,
    this callback does nothing).
    """

    def __init__(self, collector, interval: float):
        super().__init__()
        self.collector = collector
        self.interval = float(interval)
        self._last = time.monotonic()
        self.flushes = 0

    def on_train_step_end(self, run_context):
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        record = getattr(self.collector, "_record", None)
        if record is not None and hasattr(record, "flush"):
            record.flush()
            self.flushes += 1
