"""Callbacks both smoke children add to the training: per-step times, and a stop after the asked-for steps.

Imported only in a smoke child (it imports MindSpore).  The step times go to
``step_times[_rank<N>].csv`` in the scratch directory: the verdict's step-time,
overhead and disk checks read them, and the live view says "compiling" until
the first step lands.
"""

from __future__ import annotations

import time

from mindspore.train.callback import Callback


class StepTimer(Callback):
    """Per-step wall time, and whether the summary writer collected at that step (its overhead)."""

    def __init__(self, path: str, collect_freq: int = 1):
        self.out = open(path, "w", buffering=1)
        self.out.write("step,ms,collected,wall\n")
        self.collect_freq = max(1, int(collect_freq))
        self.t0 = None

    def on_train_step_begin(self, run_context):
        self.t0 = time.perf_counter()

    def on_train_step_end(self, run_context):
        step = run_context.original_args().cur_step_num
        ms = (time.perf_counter() - self.t0) * 1000 if self.t0 else float("nan")
        collected = int(step == 1 or step % self.collect_freq == 0)
        self.out.write(f"{step},{ms:.3f},{collected},{time.time():.6f}\n")

    def on_train_end(self, run_context):
        self.out.close()


class StopAt(Callback):
    """Ask the training to stop once *steps* steps are done (a config's dataset may be far longer than a smoke run)."""

    def __init__(self, steps: int):
        self.steps = int(steps)

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num >= self.steps:
            run_context.request_stop()


__all__ = ["StepTimer", "StopAt"]
