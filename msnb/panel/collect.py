"""Which runs live under a base directory, and the one place each run is read.

A run is what :mod:`msnb.events.discovery` calls one: the directory holding
event files, summaries or logs, with ``rank_N`` folders (or per-rank file
names) folded into it, at any depth (``exp/a/run``).  Discovery walks each
real directory once, so a symlink loop is reported, not followed; a directory
that cannot be listed is reported too, since it may hide runs.

The walk stays inside BASE and is bounded (:func:`walk_base`): a symlink whose
target lies outside BASE is reported and not followed (a link to ``/`` would
otherwise walk the machine), a base on a kernel pseudo-filesystem (``/proc``,
``/sys``) is refused, and at most :data:`MAX_WALK_DEPTH` levels and
:data:`MAX_WALK_ENTRIES` directory entries are looked at; what lies beyond is
reported, never silently dropped.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..events.discovery import discover, head_owner, list_dir
from ..events.problems import ProblemKind
from ..events.reader import Follower
from ..events.records import Problem
from ..safe_files import inside, pseudo_filesystem

MAX_WALK_DEPTH = 32
"""Directory levels below BASE looked into (runs sit a few levels down: ``exp/a/run/rank_0``)."""

MAX_WALK_ENTRIES = 200_000
"""Directory entries (files and folders) looked at in one walk of BASE; past it the walk stops and says so."""


@dataclass(frozen=True)
class RunDir:
    """One run found under a base: ``name`` is its path relative to the base (``"."`` when the base is the run)."""

    name: str
    path: Path
    dir_cache: dict | None = field(default=None, compare=False, hash=False, repr=False)  # the base's bounded walk, shared by the run's reader


def check_base(base: str | os.PathLike) -> Path:
    """*base* as a Path, or a UsageError naming it when it is not a directory.

    Args:
        base: the directory to look for runs in.

    Returns:
        The directory.

    Raises:
        UsageError: *base* does not exist or is not a directory.
    """
    path = Path(base)
    if not path.exists():
        raise UsageError(f"{base}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{base}: not a directory (give the folder that holds the runs)")
    fs = pseudo_filesystem(path)
    if fs is not None:
        raise UsageError(f"{base}: on the kernel's {fs} filesystem, which holds no runs; give the folder that holds them")
    return path


def find_runs(base: str | os.PathLike, *, dir_cache: dict | None = None, problems: list | None = None) -> list[RunDir]:
    """Every run under *base*, sorted by name.

    Args:
        base: a directory (see :func:`check_base`).
        dir_cache: discovery's cache of listed directories, for cheap repeated polls.
        problems: where to append discovery's problems (symlink loops, directories that cannot be listed).

    Returns:
        One :class:`RunDir` per run.
    """
    root = Path(base)
    dir_cache = {} if dir_cache is None else dir_cache
    walk_base(root, dir_cache, problems)
    found = {s.run for s in discover(root, dir_cache, problems)}
    names = sorted(n for n in found if head_owner(n, found) is None)  # add_scalars' head folders are their run's
    return [RunDir(name, root if name == "." else root / name, dir_cache) for name in names]


def walk_base(root: Path, dir_cache: dict, problems: list | None = None) -> None:
    """List the directories under *root* into discovery's *dir_cache*, bounded and never leaving *root*.

    Discovery (and each run's reader) then walks the cached listings: a
    directory listed here is not listed again while its mtime is unchanged, so
    what this walk leaves out (a symlink out of *root*, a level past
    :data:`MAX_WALK_DEPTH`, everything past :data:`MAX_WALK_ENTRIES`) is cached
    as an empty directory and never walked.

    Args:
        root: the base directory.
        dir_cache: discovery's cache (directory -> ``(mtime_ns, files, subdirs)``), filled here.
        problems: where a symlink not followed, a level not walked or a walk cut short is reported.
    """
    real_root = os.path.realpath(root)
    todo = deque([(root, 0)])
    seen: set = set()
    entries = 0
    cut = False
    filesystems: dict = {}  # st_dev -> pseudo-filesystem name or None, looked up once per device

    def report(path, message, severity="warning"):
        if problems is not None:
            problems.append(Problem(str(path), None, ProblemKind.UNREADABLE, message, severity))

    def leave_out(path: Path, message: str) -> None:
        report(path, message)
        try:
            dir_cache[str(path)] = (path.stat().st_mtime_ns, [], [])
        except OSError:
            pass

    while todo:
        d, depth = todo.popleft()
        try:
            st = d.stat()
        except OSError:
            continue  # discovery reports a directory it cannot stat or list
        if (st.st_dev, st.st_ino) in seen:
            continue  # discovery reports the loop
        seen.add((st.st_dev, st.st_ino))
        if entries >= MAX_WALK_ENTRIES:
            dir_cache[str(d)] = (st.st_mtime_ns, [], [])
            cut = True
            continue
        try:
            files, subdirs, seen_here, stopped = list_dir(d, problems, MAX_WALK_ENTRIES - entries)
        except OSError:
            continue  # not cached: discovery lists it itself and reports why it cannot
        entries += seen_here
        cut = cut or stopped
        kept = []
        for name in sorted(subdirs):
            sub = d / name
            if not inside(sub, real_root):
                leave_out(sub, f"a symlink to {os.path.realpath(sub)}, outside {root}: not followed")
            elif _pseudo(sub, st.st_dev, filesystems) is not None:
                leave_out(sub, f"on the kernel's {_pseudo(sub, st.st_dev, filesystems)} filesystem, which holds no runs: not walked")
            elif depth + 1 > MAX_WALK_DEPTH:
                leave_out(sub, f"more than {MAX_WALK_DEPTH} levels below {root}: not walked")
            else:
                kept.append(name)
                todo.append((sub, depth + 1))
        dir_cache[str(d)] = (st.st_mtime_ns, files, kept)
    if cut:
        report(root, f"more than {MAX_WALK_ENTRIES:,} directory entries under {root}: the walk stopped there and runs beyond may be missing")


def _pseudo(sub: Path, parent_dev: int, filesystems: dict) -> str | None:
    """The pseudo-filesystem *sub* is on, or None; looked up only where a mount is crossed."""
    try:
        dev = sub.stat().st_dev
    except OSError:
        return None
    if dev == parent_dev:
        return None
    if dev not in filesystems:
        filesystems[dev] = pseudo_filesystem(sub)
    return filesystems[dev]


def _read_run(run: RunDir, reader: Follower | None = None, *, tags=None, verify: bool = True, final: bool = True, last: bool = False):
    """The one place a run's files are read: everything the first time, only the new bytes after that.

    The reader is a :class:`~msnb.events.Follower` on the run's directory, so
    a one-shot table (``final=True``) and a watch share one code path.  Files
    of runs nested below this one (``run/sub/rank_0``) are theirs, not this
    run's, and are never opened by it (a stray log at the base would otherwise
    read every run twice); the rows carry the run's name from discovery as the
    reader writes them; with *tags* only those tags' scalars are decoded.

    Args:
        run: the run.
        reader: the follower from the previous call (None: start one).
        tags: the scalar tags to keep (None: all).
        verify: check CRCs while reading.
        final: report a partial last record as truncated (a one-shot read) rather than wait for it (a watch).
        last: no poll follows (``msnb runs``): the reader's rows are handed over, not kept beside the
            result (one copy of the run's table in memory instead of two), and None is returned for it.

    Returns:
        ``(reader, result)``: the follower to pass next time (None after a *last* read), and the run's
        :class:`~msnb.events.ReadResult` so far (its ``run`` column holding the
        run's name), or None when a follower given found nothing new.
    """
    first = reader is None
    if first:
        # the run's own files under its own name (a run nested below is read by its own reader), only the tags
        # asked for (other tags' records are framed and checked, not decoded), in worker processes when there is much to read
        reader = Follower(run.path, verify=verify, run=".", names={".": run.name}.get, tags=tags, workers=None)
        if run.dir_cache is not None:
            reader._dir_cache = run.dir_cache  # the base's bounded walk: the reader never lists what it left out
    news = reader.poll_files(final)  # what each file added, not joined: the result below has it all
    if not (first or any(not new.empty or new.problems for new in news)):
        return (None if last else reader), None
    if last:
        return None, reader.drain()
    return reader, reader.result
