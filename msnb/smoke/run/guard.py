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
guard's last sweep (:mod:`msnb.process_sweep`) kills whatever still carries it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 5.0


MARKER_VAR = "MSNB_SMOKE_ID"
"""Set in the environment of every process of a smoke run (msrun's workers start new sessions: the group misses them)."""


def _msnb_module(name: str):
    """msnb/NAME.py, loaded from its file: the guard runs as a plain script, without importing msnb (both are stdlib only)."""
    spec = importlib.util.spec_from_file_location(f"_msnb_{name}", Path(__file__).resolve().parents[2] / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _process_sweep():
    return _msnb_module("process_sweep")


def main(argv: list[str]) -> int:
    workdir, keep, parent, stop_signal = argv[0], argv[1] == "1", int(argv[2]), int(argv[3])
    command = argv[argv.index("--") + 1 :]
    marker = os.environ.get(MARKER_VAR, "")
    stopped = []
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stopped.append(signum))
    set_parent_death_signal = _msnb_module("processes").set_parent_death_signal  # loaded once: the child's preexec_fn uses it
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
            _process_sweep().sweep(MARKER_VAR, marker, GRACE_S)
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
