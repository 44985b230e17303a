"""Reading several paths at once without mixing their runs up, and naming runs for people.

A run is keyed by its full path: ``msnb plot A/exp B/exp`` gives two runs,
``A/exp`` and ``B/exp``, never one curve named ``exp``.  Labels are the
shortest suffix of each run's path that no other run shares, and a path that
*is* the run is named after its directory, never ``.``.
"""

from __future__ import annotations

import os

import numpy as np

from .reader import ReadResult, read


def _root(path) -> str:
    """The directory a path stands for: itself, or the folder of a file given directly."""
    p = os.path.normpath(str(path))
    return p if os.path.isdir(p) or not os.path.exists(p) else os.path.normpath(os.path.dirname(p) or ".")


def _key(root: str, run: str) -> str:
    return root if run == "." else f"{root}/{run}".replace("//", "/")


def read_runs(paths, verify: bool = True) -> ReadResult:
    """Read one or several paths into one result.

    Args:
        paths: a path, or a list of paths (files, run directories, trees of runs).
        verify: check record checksums.

    Returns:
        A :class:`ReadResult`.  With one path the ``run`` column is relative to it
        (``"."`` for the path itself); with several it is the run's full path
        (the path as given, joined with the run inside it), so equal run names
        under different paths stay apart.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    results = []
    for p in paths:
        r = read(p, verify=verify)
        if len(paths) > 1:
            root = _root(p)
            for t in ReadResult.TABLES:
                table = getattr(r, t)
                if len(table):
                    table.run = np.array([_key(root, run) for run in table.run.tolist()], dtype=object)
        results.append(r)
    return ReadResult.merge(results)


read_for_plot = read_runs  # the name the plot layer has always used


def shortest_distinct_suffixes(full_paths: dict) -> dict:
    """For each key, the fewest trailing path components of its full path that no other key's path ends with.

    Args:
        full_paths: key -> absolute path.

    Returns:
        key -> label.
    """
    parts = {k: [c for c in v.split(os.sep) if c] or [os.sep] for k, v in full_paths.items()}
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
            labelled by the shortest distinct suffix of its full path.

    Returns:
        A callable ``run -> label``; a run it was not told about keeps its key,
        except ``"."``, which is named after the path's directory.
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    single = _root(paths[0]) if len(paths) == 1 else None

    def full(run: str) -> str:
        return os.path.abspath(os.path.join(single, run) if single is not None else run)

    labels = shortest_distinct_suffixes({run: full(run) for run in runs}) if runs else {}
    if single is not None and "." not in labels:
        labels["."] = os.path.basename(os.path.abspath(single)) or os.sep
    return lambda run: labels.get(run, run)
