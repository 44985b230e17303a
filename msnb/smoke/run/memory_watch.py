"""The smoke run's memory, watched while it trains: a run that grows past this machine's memory is msnb's limit, not the config's fault.

The floor (:mod:`msnb.fullsize.sizes`) refuses what cannot fit before anything starts, but it is a floor:
MindSpore's graph compiler, its memory pools and mindformers' dataset workers come on top.  A run that grows until
the machine has almost nothing left would otherwise be killed by the kernel's OOM killer and judged ``failed`` (an
exit code and no steps), blaming a config that is fine on its cluster.  This watch stops it first, and the verdict
is *not rehearsed*, naming the memory the run held and what was left.
"""

from __future__ import annotations

import signal
import time

from ...environment import available_memory_bytes, has_proc, resident_bytes, total_memory_bytes
from ...process_sweep import marked
from .guard import MARKER_VAR

GIB = 1 << 30


def default_reserve() -> int:
    """What must stay free: 5% of the machine's memory, at most 1 GiB and at least 256 MiB."""
    total = total_memory_bytes()
    return max(256 << 20, min(GIB, total // 20)) if total else GIB


class MemoryWatch:
    """Polled by the runner: says why to stop the run when this machine is about to run out of memory."""

    def __init__(self, marker: str, *, reserve: int | None = None, every: float = 1.0, find=None):
        self.marker = marker
        self.reserve = default_reserve() if reserve is None else int(reserve)
        self.every = every
        self.find = find or (lambda marker: marked(MARKER_VAR, marker))
        self.next_poll = 0.0
        self.peak = 0  # the most the run's processes held together, at a poll
        self.lowest_free: int | None = None

    def poll(self) -> str | None:
        """None while the machine has more than the reserve free; else the reason to stop, in words (at most once a second)."""
        now = time.monotonic()
        if now < self.next_poll or not has_proc():
            return None
        self.next_poll = now + self.every
        free = available_memory_bytes()
        held = resident_bytes(self.find(self.marker))
        self.peak = max(self.peak, held)
        if free is None:
            return None
        self.lowest_free = free if self.lowest_free is None else min(self.lowest_free, free)
        if free >= self.reserve:
            return None
        return (
            f"the training grew to {held / 1e9:,.1f} GB and this machine had {free / 1e9:,.2f} GB of memory left (less than the "
            f"{self.reserve / 1e9:,.2f} GB kept free): stopped before the system's out-of-memory killer; this machine is too small to "
            "rehearse the run at this size (let --shrink shrink it, or run it on a larger machine)"
        )

    def after_exit(self, returncode: int | None) -> str | None:
        """The reason when the run was killed (SIGKILL) while the machine was nearly out of memory: the OOM killer, not the config."""
        killed = returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)
        if not killed or self.lowest_free is None or self.lowest_free >= 4 * self.reserve:
            return None
        return (
            f"the training was killed (SIGKILL) after growing to {self.peak / 1e9:,.1f} GB, with {self.lowest_free / 1e9:,.2f} GB of memory "
            "left on this machine: the system's out-of-memory killer, not the config; this machine is too small to rehearse the run at this size"
        )


__all__ = ["MemoryWatch", "default_reserve"]
