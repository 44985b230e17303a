"""The smoke run's guard: the one process the runner starts, so that no way of ending the runner leaves training behind.

    python guard.py WORKDIR KEEP PARENT_PID STOP_SIGNAL -- COMMAND...

It runs as a plain script (no msnb import: it starts in milliseconds) and
starts COMMAND (the worker, or msrun) as its child.  On Linux both carry a
parent-death signal (``prctl(PR_SET_PDEATHSIG)``): the guard gets SIGTERM when
the runner dies however it dies, SIGKILL included, and its child gets
STOP_SIGNAL when the guard dies.  msrun stops its workers, its scheduler and
its log tails only on SIGINT, hence STOP_SIGNAL.  The guard also polls its
parent, which covers systems without prctl.  When the runner is gone, nobody
is left to read the scratch directory, so the guard removes it (unless KEEP).
Every process of the run carries ``MSNB_SMOKE_ID`` in its environment; the
guard's last sweep kills whatever still carries it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0


def set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send *sig* to this process when its parent dies; False where that is not available.

    Args:
        sig: the signal number.

    Returns:
        Whether the kernel accepted it.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def marked_processes(marker: str) -> list[int]:
    """Processes other than this one whose environment holds ``MSNB_SMOKE_ID=<marker>`` (Linux /proc)."""
    needle = f"MSNB_SMOKE_ID={marker}\0".encode()
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def sweep(marker: str, grace: float = GRACE_S, *, find=None, also=None) -> None:
    """SIGTERM, then SIGKILL, every process that still carries the run's marker.

    Args:
        marker: the run's ``MSNB_SMOKE_ID``.
        grace: seconds to wait after each signal for the processes to go.
        find: ``marker -> [pid]`` (default :func:`marked_processes`, Linux /proc).
        also: ``() -> [pid]`` of processes to stop that may not carry the marker (the runner's own child).
    """
    find = find or marked_processes
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = find(marker) + (also() if also else [])
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and find(marker):
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    workdir, keep, parent, stop_signal = argv[0], argv[1] == "1", int(argv[2]), int(argv[3])
    command = argv[argv.index("--") + 1 :]
    marker = os.environ.get("MSNB_SMOKE_ID", "")
    stopped = []
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stopped.append(signum))
    set_parent_death_signal(signal.SIGTERM)

    def orphaned() -> bool:
        return os.getppid() != parent

    child = None
    if not orphaned():  # the runner may have died before the line above
        child = subprocess.Popen(command, preexec_fn=lambda: set_parent_death_signal(stop_signal))  # one thread here: preexec_fn is safe
        while child.poll() is None and not stopped and not orphaned():
            time.sleep(0.2)
        if child.poll() is None:
            try:
                child.send_signal(stop_signal)
                child.wait(GRACE_S)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
    if child is None or stopped or orphaned():
        if marker:
            sweep(marker)
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
    if orphaned() and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    if child is None:
        return 128 + signal.SIGTERM
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
