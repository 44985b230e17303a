"""A started smoke run followed until it ends: the scratch directory read incrementally into the live view; Ctrl-C,
SIGTERM, SIGHUP, ``timeout`` or the memory watch stop the child and every process that carries the run's marker.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field

import numpy as np

from ...events import Follower
from ...plot.live import one_loss_source
from ...process_sweep import marked, sweep
from ...processes import STOP_SIGNALS, Stopped, StopSignals  # noqa: F401  (re-exported: the runner imports them from here)
from ...words import count
from ..mindformers.judging import log_scalars
from ..shared.verdict import FAIL, Check
from .guard import MARKER_VAR
from .launching import Launched
from .machine_load import MachineLoad
from .memory_watch import MemoryWatch
from .preparing import Prepared

COMPILING_EVERY_S = 5.0


def kill_run(proc: subprocess.Popen, marker: str, grace: float = 5.0) -> None:
    """Stop the child and everything it started, msrun's workers included.

    The guard is asked first (it stops msrun with the signal msrun cleans up
    on); whatever still carries the marker afterwards is killed.
    """
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace + 2)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    sweep(MARKER_VAR, marker, grace, also=lambda: [proc.pid] if proc.poll() is None else [])
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class Watched:
    """How the watched run ended."""

    returncode: int | None
    interrupted: bool = False
    timed_out: bool = False
    stopped_by: str | None = None
    first_live_wall: float | None = None
    everything: object = None
    extra_checks: list = field(default_factory=list)
    out_of_memory: str | None = None  # why the run was stopped (or killed) with this machine's memory nearly gone
    load: MachineLoad = field(default_factory=MachineLoad)  # how busy the machine was while it trained


def mindformers_label(run: str) -> str:
    """The live view's legend for a mindformers run: the loss comes from MFLossMonitor's lines in mindformers' log."""
    return "MFLossMonitor (mindformers' log)" if run == "output/log" or run.startswith("output/log/") else run


def _live_source(prepared: Prepared):
    """What the live view draws: for a mindformers model, MFLossMonitor's lines as they are written (the other
    writers repeat the same loss); otherwise the run that logs the loss most often (the summary repeats it)."""
    return one_loss_source if prepared.plan is None else log_scalars


def watch(launched: Launched, view=None, *, poll_interval: float = 0.25, signals: StopSignals | None = None, memory: MemoryWatch | None = None) -> Watched:
    """Follow the run until it ends, is interrupted, times out or a stop signal arrives; then stop every process of it.

    Args:
        launched: what :func:`launch` returned.
        view: a live view with ``update(scalars, status=..., step=..., force=...)``, or None.
        poll_interval: seconds between polls of the scratch directory.
        signals: the run's :class:`StopSignals`; a stop signal while watching ends the run.
        memory: the run's :class:`~msnb.smoke.run.memory_watch.MemoryWatch` (default: one keeping 5% of the machine free, at
            most 1 GiB); the run is stopped before this machine runs out of memory.

    Returns:
        How it ended, and everything read while it ran.
    """
    o = launched.prepared.options
    follower = Follower(launched.workdir)
    live_scalars = _live_source(launched.prepared)
    out = Watched(None)
    memory = memory if memory is not None else MemoryWatch(launched.marker)
    compiling_said = 0.0  # when to say "compiling" again
    try:
        if signals is not None:
            signals.watching()
        while launched.proc.poll() is None:
            out.load.sample(launched.proc.pid)
            new = follower.poll()
            if len(new.scalars) and out.first_live_wall is None:
                out.first_live_wall = time.time()
            if view is not None:
                if len(new.scalars):
                    shown = live_scalars(follower.result.scalars)
                    if len(shown):
                        view.update(shown, step=int(np.max(shown.step)))
                elif out.first_live_wall is None and time.monotonic() >= compiling_said and any(launched.workdir.glob("step_times*.csv")):
                    # a sign of life every few seconds: compiling a mindformers model takes tens of seconds on CPU
                    waited = time.monotonic() - launched.started
                    view.update(status=f"waiting for the first step (compiling)... {waited:.0f} s since start", force=True)
                    compiling_said = time.monotonic() + COMPILING_EVERY_S
            if o.timeout is not None and time.monotonic() - launched.started > o.timeout:
                out.timed_out = True
                break
            out.out_of_memory = memory.poll()
            if out.out_of_memory is not None:
                break
            time.sleep(poll_interval)
    except KeyboardInterrupt:
        out.interrupted = True
    except Stopped as stop:
        out.stopped_by = stop.name
    finally:
        try:
            kill_run(launched.proc, launched.marker)
        finally:
            if signals is not None:
                signals.done()
            launched._log.close()
    out.returncode = launched.proc.returncode
    if out.out_of_memory is None and not (out.interrupted or out.timed_out or out.stopped_by):
        out.out_of_memory = memory.after_exit(out.returncode)
    left = marked(MARKER_VAR, launched.marker)
    if left:
        out.extra_checks.append(Check("cleanup", FAIL, f"{count(len(left), 'process')} of this run could not be stopped: pids {left}"))
    follower.close()
    out.everything = follower.result
    return out
