"""Ending every process that carries a marker in its environment: the one sweep the smoke and the kernel check share.

A child that starts its own session (msrun's workers, a ``setsid`` daemon in a
checked kernel) leaves its parent's process group, so signalling the group
misses it; the environment, though, is inherited by everything it starts.  So
the starter sets ``VAR=<random marker>`` in the child's environment and, at the
end, sweeps: SIGTERM, a grace period, then SIGKILL for whatever still carries
it.  Standard library only: the smoke's guard loads this file by path (it runs
as a plain script, without importing msnb).
"""

from __future__ import annotations

import os
import signal
import time


def marked(var: str, marker: str) -> list[int]:
    """Processes other than this one whose environment holds exactly ``VAR=<marker>``.

    Linux reads ``/proc/<pid>/environ`` (another user's process is unreadable,
    so never found); elsewhere psutil, where installed; otherwise none.

    Args:
        var: the environment variable's name.
        marker: its value.
    """
    if os.path.isdir("/proc"):
        return _marked_in_proc(f"{var}={marker}".encode())
    try:  # not Linux: psutil, where installed
        import psutil  # optional: psutil is no dependency of msnb
    except ImportError:
        return []
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid != os.getpid() and p.environ().get(var) == marker:
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found


def _marked_in_proc(entry: bytes) -> list[int]:
    found = []
    try:
        pids = os.listdir("/proc")
    except OSError:
        return found
    for pid in pids:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if entry in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def sweep(var: str, marker: str, grace: float, *, also=None, find=None, poll: float = 0.1) -> None:
    """SIGTERM, then SIGKILL, every process that carries ``VAR=<marker>``; returns once none is left or the grace ran out.

    Args:
        var: the environment variable's name.
        marker: its value; an empty one sweeps nothing (it would match every process that sets the variable empty).
        grace: seconds to wait after each signal for the processes to go.
        also: ``() -> [pid]``: processes to stop with them that may not carry the marker (a starter's own child).
        find: ``(var, marker) -> [pid]`` (default :func:`marked`).
        poll: seconds between looks while waiting.
    """
    if not marker:
        return
    find = find or marked
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = find(var, marker) + (also() if also else [])
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and find(var, marker):
            time.sleep(poll)
