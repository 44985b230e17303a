"""What an exporter already wrote, per source file, so exporting again writes only what is new.

Both bridges (TensorBoard and Parquet) write into a destination that outlives
one run of msnb.  The ledger, a JSON file in that destination, remembers for
every source file its identity (device, inode), how many bytes were read and
how many rows of each kind were written.  A later export skips unchanged files
without opening them; a grown file is read again through the same per-file
incremental reader :class:`msnb.events.Follower` uses, and its first rows (the
ones written before) are dropped; a replaced file (new inode, or shorter) is
exported again from its start.  Within one process the reader keeps its place,
so following a live job reads each byte once.

The ledger is read like every small file msnb opens (:mod:`msnb.safe_files`):
a regular file, bounded in size and depth.  One msnb did not write (another
shape, another version, a FIFO, a directory) is refused in one line naming it,
never trusted and never overwritten; every path it names is checked by the
bridge that uses it to stay inside the destination.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path

import numpy as np

from ..errors import UnsafeFile, UsageError
from ..events.discovery import Source, discover
from ..events.objects import identity, local
from ..events.reader import FileState, ReadResult
from ..outputs import check_out_dir
from ..safe_files import loads_json, read_small

KINDS = ReadResult.TABLES  # scalars, histograms, tensors, images, texts, lineage, markers
VERSION = 1


class Ledger:
    """Yields, file by file, the rows of *src* no earlier export into the ledger's destination wrote."""

    def __init__(self, src, state_path, *, verify: bool = True, exclude=None):
        self.src = Path(local(src)).resolve()  # a bucket's prefix: its mirror (msnb.events.objects)
        self.state_path = Path(state_path)
        self.exclude = Path(exclude).resolve() if exclude is not None else None
        self.verify = verify
        self.unchanged = 0
        self.problems: list = []
        self._dir_cache: dict = {}
        self._files: dict[str, FileState] = {}
        self._seen: dict[str, dict] = {}
        self.state = self._load()

    def _load(self) -> dict:
        try:
            raw = read_small(self.state_path, missing_ok=True)
            state = None if raw is None else loads_json(raw, where=self.state_path)
        except UnsafeFile as exc:
            raise self.refuse(exc.reason) from None
        if state is None:
            return {"version": VERSION, "sources": {}}
        problem = _shape_problem(state)
        if problem:
            raise self.refuse(problem)
        return state

    def refuse(self, why: str) -> UsageError:
        """The one-line error for a ledger msnb will not use (or overwrite): *why*, and what to do."""
        return UsageError(
            f"{self.state_path}: {why}; this is not a ledger msnb wrote, so it is neither trusted nor replaced: remove it, or choose another destination"
        )

    def save(self) -> None:
        """Write the ledger atomically (a reader never sees half of it)."""
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        if os.path.lexists(tmp):
            os.unlink(tmp)  # left by a crash, or planted: a symlink there must not be written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(self.state, indent=1, default=str))
        os.replace(tmp, self.state_path)  # a process killed at any point leaves the old ledger or the new one

    @property
    def opened(self) -> int:
        """Source files read in this process (unchanged ones are never opened)."""
        return len(self._files)

    def forget(self, predicate) -> None:
        """Drop the records *predicate* picks: those files are exported again from their start."""
        for path in [p for p, rec in self.state["sources"].items() if predicate(rec)]:
            del self.state["sources"][path]

    @property
    def ever_written(self) -> bool:
        """Whether any source ever gave a row (in this process or an earlier export)."""
        return any(any(rec["written"].values()) for rec in self.state["sources"].values())

    def discover(self) -> list[Source]:
        """Every readable file under the source, less anything inside the excluded destination."""
        if not self.src.exists():
            return []
        found = discover(self.src, self._dir_cache)
        if self.exclude is None:
            return found
        return [s for s in found if not (Path(s.path) == self.exclude or self.exclude in Path(s.path).parents)]

    def new_rows(self, sources, *, final: bool):
        """``(source, ReadResult)`` for each source with rows not written before; updates the counts.

        Call :meth:`save` once the rows were written: a crash before that
        writes them again next time (duplicates), never loses them.
        """
        self.unchanged = 0
        for src in sources:
            try:
                st = os.stat(src.path)
            except OSError:
                continue
            ident = [st.st_dev, st.st_ino]
            key = src.path
            stored = identity(src.path)  # an object of a bucket: its URL and ETag, the same in every process
            if stored is not None:
                key, ident = stored
            rec = self.state["sources"].get(key)
            fs = self._files.get(src.path)
            if fs is None:
                if rec and rec["ident"] == ident and rec["pos"] == st.st_size:
                    self.unchanged += 1
                    continue
                if rec is None or rec["ident"] != ident or st.st_size < rec["pos"]:
                    rec = self.state["sources"][key] = {"ident": ident, "pos": 0, "written": {}}
                fs = self._files[src.path] = FileState(src, verify=self.verify)
                self._seen[src.path] = {}
            new = fs.poll(final=final)
            seen = self._seen[src.path]
            if any(p.kind == "replaced" for p in new.problems):
                seen.clear()
                rec["written"] = {}
            self.problems.extend(new.problems)
            rec["ident"], rec["pos"] = ident, fs.pos
            fresh = _drop_written(new, seen, rec["written"])
            if not fresh.empty:
                yield src, fresh


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _shape_problem(state) -> str | None:
    """What makes *state* something other than a ledger msnb wrote (None: it is one)."""
    if not isinstance(state, dict):
        return f"holds a JSON {type(state).__name__}, not a ledger object"
    if state.get("version") != VERSION:
        return f"has version {state.get('version')!r}, not {VERSION}"
    sources = state.get("sources")
    if not isinstance(sources, dict):
        return "has no 'sources' object"
    for path, rec in sources.items():
        if not isinstance(rec, dict):
            return f"source {path!r} is not an object"
        ident, written = rec.get("ident"), rec.get("written")
        if not (isinstance(ident, list) and len(ident) == 2 and all(_count(i) for i in ident)):
            return f"source {path!r} has no (device, inode) identity"
        if not _count(rec.get("pos")):
            return f"source {path!r} has no byte position"
        if not (isinstance(written, dict) and all(k in KINDS and _count(n) for k, n in written.items())):
            return f"source {path!r} has no row counts"
        if "outputs" in rec and not (isinstance(rec["outputs"], list) and all(isinstance(o, str) for o in rec["outputs"])):
            return f"source {path!r} has outputs that are not a list of names"
    return None


def prepare_destination(src, dst, *, what: str) -> Path:
    """Check and create a bridge's destination; returns it resolved.

    Refused in one line: a destination on a kernel pseudo-filesystem
    (``/proc``, ``/sys``), one that exists and is not a directory or lies
    under a file, one that cannot be created, and one that holds the source
    (``convert runs/job --to tensorboard runs``): its output would land among
    the files it reads, and the next run would read its own output.

    Args:
        src: the source path (None: rows already in memory, no source to keep apart).
        dst: the destination directory.
        what: how the option is spelled, for messages (``the destination``, ``--out``).

    Raises:
        UsageError: as above.
    """
    dst_path = Path(check_out_dir(dst, what=what, inputs=[src]))  # the one output rule, for a folder
    try:
        dst_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what} {dst} cannot be created: {exc.strerror or exc}") from None
    return Path(os.path.realpath(dst_path))


LOCK_WAIT = 60.0  # seconds an export waits for another one's lock on its folder before it stops (exit 2)
_LOCK_POLL = 0.1  # seconds between two tries at a held lock


@contextlib.contextmanager
def destination_lock(dst: Path, name: str, *, wait: float = LOCK_WAIT, on_wait=None):
    """Hold an exclusive lock on the destination *dst* while one export reads and writes its ledger and parts.

    Two exports into one folder would each load the same ledger, write the same rows and save over each other's
    ledger; with the lock the second waits until the first has landed, then writes only what is new since.  The lock
    is ``flock`` on *dst*/*name*: the kernel drops it when its holder dies, so a killed export never blocks the next.
    The holder writes who it is into the file (process id, host, when it took the lock), so a waiter can say whose
    lock it waits on; it waits at most *wait* seconds.

    Args:
        dst: the destination folder.
        name: the lock file's name in it.
        wait: seconds to wait for a lock another process holds (0: do not wait).
        on_wait: called once with a line naming the holder, when the lock is held and the wait begins.

    Raises:
        UsageError: *name* in *dst* is a symbolic link, a FIFO or anything other than a regular file, or another
            process held the lock for longer than *wait* seconds (one line naming the holder).
    """
    path = dst / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be opened as the export's lock file: {exc.strerror or exc}; remove it") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: is not a regular file, so it cannot be the export's lock file; remove it")
        _take_lock(fd, path, wait, on_wait)
        _say_holder(fd)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _take_lock(fd: int, path: Path, wait: float, on_wait) -> None:
    """``flock`` *fd* exclusively, waiting at most *wait* seconds for another holder (said once through *on_wait*)."""
    deadline = time.monotonic() + max(0.0, wait)
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        holder = _holder(fd)
        if time.monotonic() >= deadline:
            raise UsageError(
                f"{path}: held by {holder} for more than {wait:g} s (another export writing into this folder): "
                "wait for it to finish or stop it, then export again"
            )
        if not said and on_wait is not None:
            on_wait(f"waiting up to {wait:g} s for {path}, held by {holder}")
            said = True
        time.sleep(_LOCK_POLL)


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it (``pid 123 on host, since 12:00:01``), else ``another process``."""
    try:
        said = json.loads(os.pread(fd, 512, 0).decode("utf-8", "replace") or "{}")
        pid, host, since = int(said["pid"]), str(said["host"])[:64], float(said["since"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return "another process"
    return f"pid {pid} on {host}, since {time.strftime('%H:%M:%S', time.localtime(since))}"


def _say_holder(fd: int) -> None:
    """Write this process into the lock file it now holds (read by a waiter's message only)."""
    note = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, note, 0)
    except OSError:
        pass  # a read-only lock file still locks; the waiter then says "another process"


def _drop_written(new: ReadResult, seen: dict, done: dict) -> ReadResult:
    """The rows of *new* past those an earlier export wrote (rows of one file come in the same order every time)."""
    out = ReadResult()
    for attr in KINDS:
        table = getattr(new, attr)
        n = len(table)
        if not n:
            continue
        already = seen.get(attr, 0)
        start = max(0, done.get(attr, 0) - already)
        seen[attr] = already + n
        done[attr] = max(done.get(attr, 0), seen[attr])
        if start < n:
            setattr(out, attr, table if start == 0 else table.take(np.arange(start, n)))
    return out
