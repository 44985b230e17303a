"""Which runs live under a base directory, and the one place each run is read.

A run is what :mod:`msnb.events.identity` calls one: the folder of a job, its
writers' folders (``output/log``, ``tensorboard``, ``summary``) and ``rank_N``
folders (or per-rank file names, at any depth) folded into it (``exp/a/run``).  Discovery walks each
real directory once, so a symlink loop is reported, not followed; a directory
that cannot be listed is reported too, since it may hide runs.

The walk stays inside BASE and is bounded, as every walk msnb makes is
(:class:`msnb.events.discovery.WalkBounds`): a symlink out of BASE is reported
and not followed, a base on a kernel pseudo-filesystem (``/proc``, ``/sys``) is
refused, and the depth and entries looked at are capped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..events.discovery import discover, head_owner
from ..events.identity import as_job
from ..events.objects import local
from ..events.reader import Follower
from ..safe_files import pseudo_filesystem


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
    path = Path(local(base))  # a bucket's prefix: its mirror, listed once (msnb.events.objects)
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
    sources = discover(root, dir_cache, problems)
    found = {s.run for s in sources}
    # one run per job (identity's rule: output/log and output/tensorboard are the job's); add_scalars' head folders are their run's
    names = sorted({as_job(s, found) for s in sources if head_owner(s.run, found) is None})
    return [RunDir(name, root if name == "." else root / name, dir_cache) for name in names]


def read_run(run: RunDir, reader: Follower | None = None, *, tags=None, verify: bool = True, final: bool = True, last: bool = False):
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
        reader = Follower(run.path, verify=verify, run=".", names={".": run.name}.get, tags=tags, workers=None, jobs=True)
        if run.dir_cache is not None:
            reader._dir_cache = run.dir_cache  # the base's bounded walk: the reader never lists what it left out
    news = reader.poll_files(final)  # what each file added, not joined: the result below has it all
    if not (first or any(not new.empty or new.problems for new in news)):
        return (None if last else reader), None
    if last:
        return None, reader.drain()
    return reader, reader.result
