"""mindformers' TrainingStateMonitor in the log, in ``add_scalars`` folders, and in ``abnormal_global_norm.json``.

TrainingStateMonitor logs one value a line, after the logger's prefix::

    2024-05-01 12:00:00,123 - mindformers[mindformers/core/callback/callback.py:1496] - INFO - \
Epoch:[  1/  2], step:[    5/  100] local_norm/layers.0.attention.wq.weight: 0.0123
    [INFO] 2024-05-01 12:00:00,123 [mindformers/core/callback/callback.py:1496] _to_log: \
Epoch:[  1/  2], step:[    5/  100] max_attention_logit/layers.0.attention: [3.1, 2.7]

A line becomes the tag TensorBoard would hold; a list value (the heads of
``max_attention_logit/<param>``) becomes one ``<tag>/head_<i>`` per head, the
spelling :func:`fold_head_runs` gives tensorboardX's ``add_scalars`` folders.
Parsing is linear in the line: one ``str.find`` for the anchor, then a pattern
of literals and single character classes (nothing can backtrack), and lines
longer than :data:`MAX_LINE` are not looked at.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..safe_files import load_json
from .discovery import walk
from .problems import Problem
from .tables import ScalarTable

MAX_LINE = 1 << 20  # a max_attention_logit list of thousands of heads still fits
ANCHOR = "Epoch:["
# "Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s" (mindformers TrainingStateMonitor._to_log); the tag holds no space or colon
_LINE = re.compile(r"Epoch:\[ *(\d{1,12})/ *(\d{1,12})\], step:\[ *(\d{1,15})/ *(\d{1,15})\] ([^\s:]{1,4096}): ")
_SPLIT = re.compile(r"[,\s]+")
HEADS = "max_attention_logit/"
RECORD_NAME = "abnormal_global_norm.json"
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a step and a norm or two per spike: millions of spikes fit


def _number(text: str) -> float | None:
    text = text.strip()
    if text.startswith("np.float") and text.endswith(")"):  # numpy 2's repr of a scalar
        text = text[text.find("(") + 1 : -1]
    try:
        return float(text)
    except ValueError:
        return None


def _values(text: str) -> list[float] | None:
    """A logged value: a number, or a list (Python ``[1.0, 2.0]`` or numpy ``[1. 2.]``) of numbers."""
    text = text.strip()
    if not text.startswith("["):
        v = _number(text)
        return None if v is None else [v]
    if not text.endswith("]"):
        return None
    out = []
    for part in _SPLIT.split(text.strip("[]")):
        if part:
            v = _number(part)
            if v is None:
                return None
            out.append(v)
    return out


def parse_line(line: str) -> list[tuple[str, int, float]] | None:
    """The ``(tag, global_step, value)`` points of one TrainingStateMonitor log line, or None when it is not one.

    Args:
        line: one line of a mindformers log (either of the logger's formats).

    Returns:
        The points (several for a list value), or None for any other line.
    """
    if len(line) > MAX_LINE:
        return None
    at = line.find(ANCHOR)
    if at < 0:
        return None
    m = _LINE.match(line, at)
    if m is None:
        return None
    epoch, step, per_epoch = int(m.group(1)), int(m.group(3)), int(m.group(4))
    if epoch < 1 or step < 1:  # _to_log counts both from 1
        return None
    values = _values(line[m.end() :])
    if not values:
        return None
    tag = m.group(5)
    gstep = (epoch - 1) * per_epoch + step
    heads = tag.startswith(HEADS) and line.rstrip().endswith("]")
    if len(values) == 1 and not heads:
        return [(tag, gstep, values[0])]
    name = "head_" if heads else ""
    return [(f"{tag}/{name}{i}", gstep, v) for i, v in enumerate(values)]


def fold_head_runs(scalars):
    """Undo tensorboardX's ``add_scalars`` layout: ``<run>/<tag>/head_<i>`` folders holding *tag* become run *run*, tag ``<tag>/head_<i>``.

    TrainingStateMonitor writes each head of ``max_attention_logit/<param>`` with
    ``add_scalars``, which opens one writer per head in ``rank_N/<tag>/head_<i>``;
    the reader sees each as its own run.  Folding them back makes the heads series
    of the run they belong to, as the log reader spells them.

    Args:
        scalars: a :class:`~msnb.events.ScalarTable`.

    Returns:
        The same table, or a copy with those rows' run and tag rewritten.
    """
    if not len(scalars):
        return scalars
    codes: dict = {}
    code = np.fromiter((codes.setdefault(rt, len(codes)) for rt in zip(scalars.run.tolist(), scalars.tag.tolist())), dtype=np.int64, count=len(scalars))
    new_run, new_tag, changed = [], [], False
    for run, tag in codes:  # one pass over the distinct (run, tag) pairs, in code order
        stem, _, head = run.rpartition("/")
        if head.startswith("head_") and (stem == tag or stem.endswith("/" + tag)):
            new_run.append("." if stem == tag else (stem[: -len(tag) - 1] or "."))
            new_tag.append(f"{tag}/{head}")
            changed = True
        else:
            new_run.append(run)
            new_tag.append(tag)
    if not changed:
        return scalars
    runs = np.empty(len(new_run), dtype=object)
    runs[:] = new_run
    tags = np.empty(len(new_tag), dtype=object)
    tags[:] = new_tag
    return ScalarTable(run=runs[code], rank=scalars.rank, tag=tags[code], step=scalars.step, wall_time=scalars.wall_time, value=scalars.value)


def read_global_norm_record(path) -> dict[int, list[float]]:
    """The steps and global norms in one ``abnormal_global_norm.json`` (``{"300": [3.3], "600": [4.1, 4.2]}``).

    Args:
        path: the file.

    Returns:
        step -> global norms over the threshold at that step.

    Raises:
        ValueError: the file is not such a record (the caller reports it as a problem).
    """
    data = load_json(path, limit=MAX_RECORD_BYTES)  # a regular file, bounded in size and depth (a ValueError if not)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object of step -> list of global norms")
    out = {}
    for key, norms in data.items():
        if not isinstance(key, str) or not key.isdigit():
            raise ValueError(f"key {key!r} is not a step")
        if not isinstance(norms, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in norms):
            raise ValueError(f"step {key}: expected a list of numbers")
        out[int(key)] = [float(v) for v in norms]
    return out


def find_global_norm_records(root, *, max_depth: int = 6):
    """Every ``abnormal_global_norm.json`` under *root* (or *root* itself), read.

    Args:
        root: a file or directory.
        max_depth: how deep below *root* to look (mindformers writes it in the output root).

    Returns:
        ``(records, problems)``: records as ``(path, {step: [norms]})``, problems as
        :class:`~msnb.events.Problem` for files that could not be read.
    """
    root = os.fspath(root)
    found = []
    if os.path.isfile(root):
        candidates = [root] if os.path.basename(root) == RECORD_NAME else []
    else:
        left: list = []
        candidates = [os.path.join(d, RECORD_NAME) for d, names in walk(root, left, max_depth=max_depth) if RECORD_NAME in names]
    problems = [  # a record linked from outside the folder (/dev/zero, another job's) is named, never opened
        Problem(p.path, None, "decode", f"abnormal_global_norm.json could not be read: {p.message}")
        for p in ([] if os.path.isfile(root) else left)
        if os.path.basename(p.path) == RECORD_NAME
    ]
    for path in candidates:
        try:
            found.append((path, read_global_norm_record(path)))
        except (OSError, ValueError) as exc:
            problems.append(Problem(path, None, "decode", f"abnormal_global_norm.json could not be read: {getattr(exc, 'reason', exc)}"))
    return found, problems
