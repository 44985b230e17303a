"""Reading many files at once in worker processes, with the same result as one process.

A multi-rank job leaves one event file per rank; reading them one after the
other uses one core.  Here each worker reads whole files with the very same
per-file state a single process uses (:class:`msnb.events.reader.FileState`),
sends it back, and the caller puts the states back in file order, so rows,
their order and the problems are those of a one-process read by construction.

Workers are plain ``python -c`` children talking pickles over their stdin and
stdout, not :mod:`multiprocessing`: a spawned multiprocessing child imports the
caller's ``__main__`` again, which re-runs an unguarded user script or
notebook cell.  A child reads its tasks from a pipe, so it ends when the parent
does (end of file), and on Linux it also asks the kernel to kill it then.
"""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import numpy as np

from ..environment import running_processes
from ..heap import keep_scratch_memory
from .tables import MAX_CODES, TABLE_KINDS, object_codes

PARALLEL_BYTES = 48 << 20  # below this many unread bytes, starting processes costs more than it saves
TASK_BYTES = 24 << 20  # files are handed out in tasks of about this many bytes: the busiest worker finishes last
MAX_WORKERS = 8  # more processes than this rarely help: reading becomes disk-bound
_LEN = struct.Struct("<Q")


class WorkerError(Exception):
    """A worker process failed: a bug, not a user's mistake; carries the worker's traceback."""


def default_workers() -> int:
    """The cores this process may use that other processes are not already using, capped at :data:`MAX_WORKERS`.

    On a shared machine (a login node, a notebook server) the load average
    counts the cores others keep busy; workers started on those would only
    queue behind them and add their own start-up, so they are left out.  The
    load average trails by a minute (a job that just ended still counts), so a
    core counts as busy only where the processes running right now say so too.
    Returns 1 where no Python can be started.
    """
    if not sys.executable:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = int(os.getloadavg()[0]) - 1  # this process is one of the running ones
    except OSError:
        busy = 0
    running = running_processes()
    if running is not None:
        busy = min(busy, running - 1)
    return max(1, min(cores - max(0, busy), MAX_WORKERS))


def plan(pending: list[tuple[int, int]], workers: int) -> list[list[int]]:
    """Cut files into contiguous tasks, or none when one process is the better choice.

    Args:
        pending: ``(index, unread bytes)`` of each file with something to read, in file order.
        workers: processes allowed.

    Returns:
        Lists of file indices (each a task, in file order); empty when reading in this process pays more,
        or when no worker can be started (an embedded interpreter with an empty ``sys.executable``).
    """
    total = sum(n for _, n in pending)
    if not sys.executable or workers < 2 or len(pending) < 2 or total < PARALLEL_BYTES:
        return []
    target = max(1, min(TASK_BYTES, total // (4 * workers)))
    tasks, current, size = [], [], 0
    for i, n in pending:
        current.append(i)
        size += n
        if size >= target:
            tasks.append(current)
            current, size = [], 0
    if current:
        tasks.append(current)
    return tasks


# ---------------------------------------------------------------- compact tables
# A worker's tables go back as their columns in the fewest bytes that give the very same arrays again: a
# column of one value as that value, integers in the narrowest type that holds them, float64 as float32 where
# every bit survives the round trip (tensorboardX's simple_value is a float32), object columns (run, tag) as
# the few objects they repeat and a code per row.  Pickling an object column costs the worker and the parent
# a step of the pickle machine per row; the codes cost neither, and the scalars of an overview cross the pipe in
# 15 bytes a row instead of 39.

TABLE_TYPES = frozenset(TABLE_KINDS.values())


def _pack_column(col: np.ndarray):
    """A column as ``(form, ...)``, the fewest bytes :func:`_unpack_column` turns back into the same array."""
    n = col.size
    if n == 0 or col.ndim != 1:
        return ("raw", col)
    kind = col.dtype.kind
    if kind == "O":
        coded = object_codes(col, limit=min(MAX_CODES, n // 2))
        if coded is None:
            return ("raw", col)
        objects, codes = coded
        return ("same", objects[0], n, col.dtype) if len(objects) == 1 else ("codes", objects, codes)
    if kind == "f" and col.dtype.itemsize == 8:
        bits = col.view(np.uint64)
        if (bits == bits[0]).all():
            return ("same", col[:1].copy(), n, col.dtype)
        with np.errstate(all="ignore"):
            narrow = col.astype(np.float32)
        if np.array_equal(narrow.astype(np.float64).view(np.uint64), bits):  # every bit back: NaN payloads, -0.0, inf
            return ("cast", narrow, col.dtype)
        return ("raw", col)
    if kind in "iu":
        lo, hi = col.min(), col.max()
        if lo == hi:
            return ("same", col[:1].copy(), n, col.dtype)
        narrow = np.result_type(np.min_scalar_type(lo), np.min_scalar_type(hi))
        if narrow.itemsize < col.dtype.itemsize and np.can_cast(narrow, col.dtype):
            return ("cast", col.astype(narrow), col.dtype)
    return ("raw", col)


def _unpack_column(packed) -> np.ndarray:
    form = packed[0]
    if form == "raw":
        return packed[1]
    if form == "cast":
        return packed[1].astype(packed[2])
    if form == "same":
        _, value, n, dtype = packed
        if dtype.kind == "O":
            out = np.empty(n, dtype=object)
            out.fill(value)
            return out
        return np.repeat(value.astype(dtype, copy=False), n)
    _, objects, codes = packed
    table = np.empty(len(objects), dtype=object)
    for i, obj in enumerate(objects):  # one by one: an object that is itself a sequence stays one element
        table[i] = obj
    return table[codes]


def _unpack_table(cls, columns):
    return cls(**{name: _unpack_column(packed) for name, packed in columns})


class _CompactPickler(pickle.Pickler):
    """Pickles msnb's tables as their packed columns (see :func:`_pack_column`), everything else as pickle does."""

    def reducer_override(self, obj):
        if type(obj) in TABLE_TYPES and vars(obj).keys() == set(obj.COLUMNS):
            return _unpack_table, (type(obj), [(name, _pack_column(getattr(obj, name))) for name in obj.COLUMNS])
        return NotImplemented


def dumps(obj) -> bytes:
    """*obj* pickled with its tables packed; ``pickle.loads`` gives back the same tables."""
    buf = io.BytesIO()
    _CompactPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _send(pipe, obj) -> None:
    data = dumps(obj)
    pipe.write(_LEN.pack(len(data)))
    pipe.write(data)
    pipe.flush()


def _receive(pipe):
    head = pipe.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    return pickle.loads(pipe.read(n))


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (elsewhere the closed pipe ends it)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def serve() -> None:
    """A worker's loop: read ``(task, states, final)``, poll each state, send ``(task, states, news)`` back."""
    _die_with_parent()
    keep_scratch_memory()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the pickles
    inp = os.fdopen(os.dup(0), "rb")
    while True:
        msg = _receive(inp)
        if msg is None:  # the parent has no more tasks: exit now, without tearing down the heap it already has back
            out.flush()
            os._exit(0)
        task, states, final = msg
        try:
            news = [st.poll(final=final) for st in states]
        except Exception:  # a bug in a worker: hand its traceback to the parent, which raises it
            _send(out, (task, None, traceback.format_exc()))
            continue
        _send(out, (task, states, news))


def _start(n: int) -> list[subprocess.Popen]:
    root = str(Path(__file__).resolve().parents[2])  # the directory holding this msnb package
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    code = "from msnb.events.parallel import serve; serve()"
    return [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) for _ in range(n)]


def poll_states(states: list, tasks: list[list[int]], workers: int, *, final: bool) -> list:
    """Poll ``states[i]`` for every i in *tasks*, here and in ``workers - 1`` worker processes.

    This process reads tasks too, as one of the *workers*: it has msnb imported
    already (a worker spends its first third of a second importing it) and what
    it reads is not sent through a pipe.  A thread of its own hands out tasks and
    receives results, so a worker never waits for this process to finish a file.
    Each state travels without the results of earlier polls (they stay here)
    and comes back advanced; it replaces the one in *states*.

    Args:
        states: the :class:`~msnb.events.reader.FileState` of every file, in file order.
        tasks: lists of indices into *states* (see :func:`plan`).
        workers: processes reading, this one included (at most one per task).
        final: passed to each state's ``poll``.

    Returns:
        The new :class:`~msnb.events.reader.ReadResult` of each polled state, in the order of *tasks*' indices.

    Raises:
        WorkerError: a worker crashed or raised (with its traceback); what this process reads raises as it would
        in a one-process read.
    """
    exchange = _Exchange(states, tasks, final)
    procs = _start(max(0, min(workers, len(tasks)) - 1))
    thread = None
    try:
        busy = [proc for proc in procs if exchange.give(proc)]  # every worker's first task, before this process takes any
        for proc in procs:
            if proc not in busy:  # (none: there are fewer workers than tasks) no task: it exits now
                proc.stdin.close()
        if busy:
            thread = threading.Thread(target=exchange.serve, args=(busy,), name="msnb-read-workers", daemon=True)
            thread.start()
        while (t := exchange.claim()) is not None:  # this process's share, read the one-process way
            exchange.news.update((i, states[i].poll(final=final)) for i in tasks[t])
        while thread is not None and thread.is_alive():
            thread.join(0.1)  # in short waits: Ctrl-C still reaches this thread
        if exchange.failure is not None:
            raise exchange.failure
    except BaseException:  # a failed worker, Ctrl-C: the others' work is of no use, end them now
        exchange.stop = True
        for proc in procs:
            proc.kill()
        raise
    finally:
        if thread is not None:
            thread.join()
        for proc in procs:
            try:
                proc.stdin.close()
            except OSError:  # a killed worker's pipe
                pass
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        for i, results in exchange.earlier.items():  # a failed task: its states keep what they had
            states[i].results = results + states[i].results
    return [exchange.news[i] for t in tasks for i in t]


class _Exchange:
    """The tasks of one :func:`poll_states`: claimed one at a time by this process or given to a worker."""

    def __init__(self, states: list, tasks: list[list[int]], final: bool):
        self.states, self.tasks, self.final = states, tasks, final
        self.todo = list(range(len(tasks)))[::-1]
        self.lock = threading.Lock()
        self.earlier: dict = {}  # results of earlier polls of the states out with a worker
        self.news: dict = {}
        self.failure: BaseException | None = None
        self.stop = False

    def claim(self) -> int | None:
        with self.lock:
            return self.todo.pop() if self.todo and not self.stop and self.failure is None else None

    def give(self, proc) -> bool:
        t = self.claim()
        if t is None:
            return False
        batch = []
        for i in self.tasks[t]:
            self.earlier[i] = self.states[i].results
            self.states[i].results = []
            batch.append(self.states[i])
        _send(proc.stdin, (t, batch, self.final))
        return True

    def serve(self, procs: list) -> None:
        """The thread's loop: take each worker's result, give it the next task, until none is left."""
        sel = selectors.DefaultSelector()
        try:
            for proc in procs:
                sel.register(proc.stdout, selectors.EVENT_READ, proc)
            while sel.get_map() and not self.stop:
                for key, _ in sel.select(timeout=0.5):
                    proc = key.data
                    msg = _receive(proc.stdout)
                    if msg is None:
                        raise WorkerError(f"a reading worker ended unexpectedly (exit status {proc.wait()})")
                    t, back, polled = msg
                    if back is None:
                        raise WorkerError(f"a reading worker failed:\n{polled}")
                    for i, st, new in zip(self.tasks[t], back, polled):
                        st.results = self.earlier.pop(i) + st.results
                        self.states[i] = st
                        self.news[i] = new
                    if not self.give(proc):
                        sel.unregister(proc.stdout)
                        proc.stdin.close()  # no more tasks: it exits while the others finish theirs
        except BaseException as exc:  # handed to the caller's thread, which raises it
            if not self.stop:
                self.failure = exc
        finally:
            sel.close()
