"""How busy the machine was while a smoke trained: other programs' work shows in step times as stalls that are not the run's.

Linux's ``/proc/loadavg`` names the threads runnable at this instant and
``/proc/<pid>/task/<tid>/stat`` whether each of the run's own threads is one
of them; sampled at every poll of the watched run, the share of samples where
other programs' runnable threads took CPUs the run's threads were waiting for
says how often its steps had to wait for a CPU.  Elsewhere nothing is sampled
and the step times are judged as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...environment import own_runnable, runnable_threads

BUSY_SHARE = 0.25  # waiting for a CPU a quarter of the time: slow steps may be other programs' doing
MAX_PROCESSES = 256  # a run's process tree is a handful (msrun and its workers); never walk further


@dataclass
class MachineLoad:
    """Samples, while a run trained, of whether other programs' threads kept its threads from a CPU."""

    cpus: int = field(default_factory=lambda: len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    samples: list = field(default_factory=list)  # (runnable threads of the run, of other programs)

    def sample(self, root: int) -> None:
        total = runnable_threads()
        if total is None:
            return
        own = own_runnable(root, MAX_PROCESSES)
        self.samples.append((own, max(0, total - 1 - own)))  # not the thread that reads

    def busy(self) -> str | None:
        """Why the step times may be other programs' doing (one clause), or None when the machine had CPUs to spare."""
        if len(self.samples) < 4:
            return None
        crowded = sum(others > 0 and own + others > self.cpus for own, others in self.samples) / len(self.samples)
        if crowded < BUSY_SHARE:
            return None
        return f"the machine was busy: other programs' threads took CPUs this run waited for in {crowded:.0%} of it ({self.cpus} CPUs)"
