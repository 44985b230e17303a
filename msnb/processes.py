"""The life of msnb's child processes: they die with their parent, SIGTERM or SIGHUP while msnb waits on one is held,
or raised where the wait can stop the child and clean up, and a child started in its own session is ended with
every process of its group (:func:`end_process_group`).

A stop signal's default action ends the process at once, which would leave a child's scratch folder behind (and,
without the child's parent-death signal, the child).  The smoke's watch, its children and the pre-flight share this.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1

STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGHUP) arrived while a smoke run was being watched."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class StopSignals:
    """SIGTERM and SIGHUP during a smoke run: held, except while the run is watched, where they raise :class:`Stopped`.

    Held signals (one that came while launching or judging) are raised at the
    start of watching, or delivered to the previous handlers when the run is
    over.  Signals can only be handled in the main thread; elsewhere this does
    nothing, and the guard's parent-death signal still stops the run.
    """

    def __init__(self):
        self.held: list[int] = []
        self.raising = False
        self.previous: dict = {}

    def _handle(self, signum, frame):
        if self.raising:
            self.raising = False  # once: a second signal is held while the children are stopped
            raise Stopped(signum)
        self.held.append(signum)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def watching(self) -> None:
        """From now on a stop signal raises :class:`Stopped` (at once, if one was held)."""
        if self.held:
            raise Stopped(self.held.pop(0))
        self.raising = True

    def done(self) -> None:
        """From now on stop signals are held again."""
        self.raising = False

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.held):  # delivered now, to whoever handled them before
            signal.raise_signal(sig)


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


def end_process_group(pgid: int | None, grace: float = 0.0) -> None:
    """SIGKILL every process of the group *pgid* (a child started with ``start_new_session=True`` leads its own), then
    wait up to *grace* seconds for the group to be gone (a signal is delivered asynchronously).

    Nothing happens for no group, for this process's own group, or for a group already gone.  The install-kernel
    script's environment, the kernel check's kernel and the pre-flight's child are ended with it.
    """
    if not pgid or pgid == os.getpgrp():
        return
    deadline = time.monotonic() + grace
    try:
        os.killpg(pgid, signal.SIGKILL)
        while time.monotonic() < deadline:
            time.sleep(0.01)
            os.killpg(pgid, 0)  # raises once no process of the group is left
    except (ProcessLookupError, PermissionError):
        pass


# What a launch puts in the environment and MindSpore or mindformers read: a shell that sourced a job's launch script
# holds the job's values, not a rehearsal's (MS_SIMULATION_LEVEL would make MindSpore compile without training).
LAUNCH_VARIABLES = (
    "RANK_SIZE",
    "RANK_ID",
    "DEVICE_NUM_PER_NODE",
    "MS_WORKER_NUM",
    "MS_LOCAL_WORKER",
    "MS_ROLE",
    "MS_NODE_ID",
    "MS_SCHED_HOST",
    "MS_SCHED_PORT",
    "CPU_AFFINITY",
    "MS_SIMULATION_LEVEL",
    "RUN_MODE",
)


def child_environment(workdir, **extra: str) -> dict:
    """The environment for a child that runs mindformers in *workdir*: the user's own, with every output of
    mindformers kept in ``workdir/output`` and nothing of a launch.

    mindformers writes its logs under ``LOG_MF_PATH`` and its checkpoints and strategy files under
    ``LOCAL_DEFAULT_PATH`` wherever they point, and copies its output to object storage when ``REMOTE_SAVE_URL`` is
    set. Inherited from a user's job, they would send a rehearsal's files into the real job's folders and bucket, and
    leave the rehearsal's own folder without the log it is judged by.

    Args:
        workdir: the child's scratch folder.
        extra: more variables to set (``TMPDIR``...).
    """
    env = {name: value for name, value in os.environ.items() if name not in LAUNCH_VARIABLES and name != "REMOTE_SAVE_URL"}
    output = os.path.join(str(workdir), "output")
    env.update(LOCAL_DEFAULT_PATH=output, LOG_MF_PATH=os.path.join(output, "log"), **extra)
    return env
