"""Reading several paths at once without mixing their runs up, and naming runs for people.

Which files make a run is :mod:`msnb.events.identity`'s rule (one run per job, whatever folders its writers
use); here runs read from several paths are kept apart.  A run is keyed by its full path: ``msnb plot A/exp B/exp`` gives two runs,
``A/exp`` and ``B/exp``, never one curve named ``exp``.  Labels are the
shortest suffix of each run's path that no other run shares, and a path that
*is* the run is named after its directory, never ``.``.  Folders every run has
(``tensorboard``, ``summary``, ``output``, ``log``, ``rank_N``) tell no run
apart, so labels skip them: ``job_a/output/tensorboard`` is ``job_a``.
"""

from __future__ import annotations

import os

from .discovery import discover, head_owner
from .identity import GENERIC_FOLDERS, as_job, is_generic
from .reader import ReadResult, read

__all__ = ["GENERIC_FOLDERS", "is_generic", "read_runs", "discovered_runs", "run_labeller", "shortest_distinct_suffixes", "informative_parts"]


def informative_parts(parts: list) -> list:
    """*parts* without its trailing generic folders (all of them kept when nothing else is left)."""
    end = len(parts)
    while end > 0 and is_generic(parts[end - 1]):
        end -= 1
    return parts[:end] or parts


def run_root(path) -> str:
    """The directory a path stands for: itself, or the folder of a file given directly."""
    p = os.path.normpath(str(path))
    return p if os.path.isdir(p) or not os.path.exists(p) else os.path.normpath(os.path.dirname(p) or ".")


def run_key(root: str, run: str) -> str:
    return root if run == "." else f"{root}/{run}".replace("//", "/")


def read_runs(paths, verify: bool = True, *, labelled: bool = False) -> ReadResult:
    """Read one or several paths into one result, each run under its identity from the start.

    Args:
        paths: a path, or a list of paths (files, run directories, trees of runs).
        verify: check record checksums.
        labelled: runs carry their labels (:func:`run_labeller`: ``job_a``, not ``.`` or
            ``/abs/job_a/output/tensorboard``) instead of their keys.

    Returns:
        A :class:`ReadResult`.  Unlabelled, with one path the ``run`` column is relative to it
        (``"."`` for the path itself); with several it is the run's full path
        (the path as given, joined with the run inside it), so equal run names
        under different paths stay apart.  The names are given to the reader, which
        writes them as it reads: no table is renamed afterwards.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    keys = [_keyer(run_root(p)) if len(paths) > 1 else None for p in paths]
    names = keys
    if labelled:  # labels tell each run from all the others: every path's runs are found before any is read
        found = [key(run) if key else run for p, key in zip(paths, keys) for run in discovered_runs(p)]
        label = run_labeller(paths, found)
        names = [_labeller(key, label) for key in keys]
    return ReadResult.merge(read(p, verify=verify, names=n, jobs=True) for p, n in zip(paths, names))


def _keyer(root: str):
    return lambda run: run_key(root, run)


def _labeller(key, label):
    return (lambda run: label(key(run))) if key else label


def discovered_runs(path) -> list:
    """The runs under *path* as the reader names them reading by job (:mod:`msnb.events.identity`), sorted."""
    sources = discover(path)
    found = {s.run for s in sources}
    return sorted({as_job(s, found) for s in sources if head_owner(s.run, found) is None})


def shortest_distinct_suffixes(full_paths: dict) -> dict:
    """For each key, the fewest trailing path components of its full path that no other key's path ends with.

    Trailing generic folders (:func:`is_generic`) are left out first, unless two paths differ only there.

    Args:
        full_paths: key -> absolute path.

    Returns:
        key -> label.
    """
    full = {k: [c for c in v.split(os.sep) if c] or [os.sep] for k, v in full_paths.items()}
    parts = {k: informative_parts(p) for k, p in full.items()}
    if len({tuple(p) for p in parts.values()}) < len(parts):  # runs told apart only by a generic folder: keep them
        parts = full
    labels = {}
    for key, mine in parts.items():
        others = [p for k, p in parts.items() if k != key]
        for n in range(1, len(mine) + 1):
            tail = mine[-n:]
            if not any(o[-n:] == tail for o in others):
                break
        labels[key] = "/".join(mine[-n:])
    return labels


def run_labeller(paths, runs=None):
    """A function naming each run for a legend.

    Args:
        paths: the path or paths that were read (as given to :func:`read_runs`).
        runs: the run keys present (``result.runs``); with them, each run is
            labelled by the shortest distinct suffix of its full path, generic
            folders such as ``tensorboard`` left out.

    Returns:
        A callable ``run -> label``; a run it was not told about keeps its key,
        except ``"."``, which is named after the path's directory.
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    single = run_root(paths[0]) if len(paths) == 1 else None

    def full(run: str) -> str:
        return os.path.abspath(os.path.join(single, run) if single is not None else run)

    labels = shortest_distinct_suffixes({run: full(run) for run in runs}) if runs else {}
    if single is not None and "." not in labels:
        labels["."] = "/".join(informative_parts([c for c in os.path.abspath(single).split(os.sep) if c])[-1:]) or os.sep
    return lambda run: labels.get(run, run)
