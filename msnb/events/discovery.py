"""Which files under a path are worth reading, what they are, and whose they are.

A run is a directory; a file's rank comes from a ``rank_N`` directory, an
msrun ``worker_N.log`` name, or the device id in a MindSpore summary name.
Files of one run and rank are read in the order their names' timestamps give.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .tables import NO_RANK

MS_SUMMARY, MS_LINEAGE, TFEVENTS, LOG = "ms_summary", "ms_lineage", "tfevents", "log"

# <prefix>.out.events.summary.<unix_ts>[.<device_id>].<host><suffix>
_MS_NAME = re.compile(r"\.out\.events\.summary\.(\d+)\.(?:(\d+)\.)?(.+)$")
_TF_NAME = re.compile(r"tfevents\.(\d+(?:\.\d+)?)")
_RANK_DIR = re.compile(r"^rank[_-]?(\d+)$")
_WORKER_LOG = re.compile(r"^(?:worker|rank)[_-]?(\d+)\.log$")
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages"}


def classify(name: str) -> str | None:
    """The kind of file *name* is, judged by name only (None: not ours)."""
    if "tfevents" in name:
        return TFEVENTS
    if _MS_NAME.search(name):
        return MS_LINEAGE if name.endswith("_lineage") else MS_SUMMARY
    if name.endswith(".log"):
        return LOG
    return None


@dataclass(frozen=True)
class Source:
    """One file to read, with the run and rank it belongs to."""

    path: str
    kind: str
    run: str
    rank: int
    order: tuple  # sort key within (run, rank): timestamp from the name, then name


def _timestamp(name: str, kind: str) -> float:
    m = (_TF_NAME if kind == TFEVENTS else _MS_NAME).search(name)
    if m:
        try:
            return float(m.group(1))
        except ValueError:
            pass
    return 0.0


def describe(path: Path, root: Path, kind: str) -> Source:
    """Run (relative to *root*, "." for root itself) and rank of a file."""
    parent = path.parent
    try:
        rel_parts = list(parent.relative_to(root).parts) if parent != root else []
    except ValueError:
        rel_parts = []
    rank = NO_RANK
    # the nearest rank_N directory names the rank; the run is what lies above it
    for i in range(len(rel_parts) - 1, -1, -1):
        m = _RANK_DIR.match(rel_parts[i])
        if m:
            rank = int(m.group(1))
            rel_parts = rel_parts[:i] + rel_parts[i + 1 :]
            break
    if rank == NO_RANK and kind == LOG:
        m = _WORKER_LOG.match(path.name)
        if m:
            rank = int(m.group(1))
    if rank == NO_RANK and kind in (MS_SUMMARY, MS_LINEAGE):
        m = _MS_NAME.search(path.name)
        if m and m.group(2) is not None:
            rank = int(m.group(2))
    run = "/".join(rel_parts) if rel_parts else "."
    return Source(str(path), kind, run, rank, (_timestamp(path.name, kind), path.name))


def discover(root: str | os.PathLike, dir_cache: dict | None = None) -> list[Source]:
    """Every readable file under *root* (or *root* itself), in reading order.

    *dir_cache* maps a directory to ``(mtime_ns, files, subdirs)``; a directory
    whose mtime has not changed is not listed again (cheap repeated polls).
    """
    root_path = Path(root)
    if root_path.is_file():
        kind = classify(root_path.name) or sniff(root_path)
        return [describe(root_path, root_path.parent, kind)] if kind else []
    sources = []
    stack = [root_path]
    while stack:
        d = stack.pop()
        try:
            mtime = d.stat().st_mtime_ns
        except OSError:
            continue
        cached = dir_cache.get(str(d)) if dir_cache is not None else None
        if cached and cached[0] == mtime:
            files, subdirs = cached[1], cached[2]
        else:
            files, subdirs = [], []
            try:
                with os.scandir(d) as it:
                    for entry in it:
                        try:
                            if entry.is_dir(follow_symlinks=True):
                                # hidden folders (.venv, .git, checkpoints of editors) never hold a run
                                if entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                                    subdirs.append(entry.name)
                            elif entry.is_file(follow_symlinks=True):
                                kind = classify(entry.name)
                                if kind:
                                    files.append((entry.name, kind))
                        except OSError:
                            continue
            except OSError:
                continue
            if dir_cache is not None:
                dir_cache[str(d)] = (mtime, files, subdirs)
        for name, kind in files:
            sources.append(describe(d / name, root_path, kind))
        stack.extend(d / s for s in subdirs)
    sources.sort(key=lambda s: (s.run, s.rank, s.kind, s.order))
    return sources


def sniff(path: Path) -> str | None:
    """Kind of a file given explicitly under a name msnb does not know."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if len(head) >= 12:
        from .records import masked_crc

        if masked_crc(head[:8]) == int.from_bytes(head[8:12], "little"):
            return TFEVENTS if b"brain.Event" in head else MS_SUMMARY
    return LOG
