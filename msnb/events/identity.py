"""One run identity for every view: which files make a run, and which writer's copy of each tag is read.

A training job leaves the same series in several writers' files: mindformers' ``output/log/rank_N/info.log``,
the console captured as ``train.log``, TensorBoard files, MindSpore summaries, perhaps a metrics table.  Read as
discovered, each folder is a run of its own (``log``, ``tensorboard``, ``summary``), and two files in one folder
(``train.log`` and ``eval_results.csv``) pour their ``loss`` rows into one series.  Here, once, for ``msnb read``,
check, plot, report, runs, board, compare and health:

- **A run** is the folder the user named, or each folder below it that holds a job: the folders every job has
  (``output``, ``log``, ``tensorboard``, ``summary``, ``rank_N``: :data:`GENERIC_FOLDERS`) name no run, so
  ``job/output/log/rank_0/info.log`` and ``job/output/tensorboard/rank_0`` are both run ``job``
  (:func:`job_name`).  Ranks are found at any depth (:mod:`msnb.events.discovery`).
- **A writer** is one file series of the run (:func:`writer_key`): an event folder, or a log or table name
  (its ranks' files together).  Each tag is read from one writer: the one that keeps it most fully (most
  points; a training writer before a table, which never stands in for the training's series).  Another
  writer's copy that agrees with it (its every point equal at the print's precision) is left out and said once;
  a copy that differs is kept under its writer's name (``train/loss``) and said, never mixed into the series read,
  and the judge judges it too (the worse verdict stands).  Where copies differ and one holds a NaN or Inf that the
  fuller one lacks, that one is the series read (drawn first).
- **Where each tag came from** is kept (``ReadResult.origins``, each an :class:`Origin`: the writer's label, whether
  it is a table, and which tag a differing copy is a copy of), so every verdict says which files it read, judges
  every training writer's copy, and judges a table's series as evaluation.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from ..words import listed
from .discovery import LOG, MS_SUMMARY, TABLE_CSV, TABLE_JSONL, TFEVENTS, TRAINER_STATE, Source, head_owner, rank_in_name
from .problems import Problem, ProblemKind
from .tables import distinct

GENERIC_FOLDERS = frozenset(
    {"tensorboard", "summary", "summaries", "summary_dir", "output", "outputs", "log", "logs", "tb", "tb_logs", "tensorboard_logs", "events", "msrun_log"}
)
"""Folder names writers and launchers give every run: they name no run."""

TABLES = frozenset({TABLE_CSV, TABLE_JSONL})
"""Kinds that are tables a job or a person wrote beside the training (an evaluation's ``eval_results.csv``)."""

_NAMED_BY_FILE = frozenset({LOG, TABLE_CSV, TABLE_JSONL, TRAINER_STATE})  # a writer of these kinds is its file name, not its folder
_PREFERENCE = {LOG: 3, TFEVENTS: 2}  # on equal points: mindformers' own log, then TensorBoard, then the rest
_KIND_WORDS = {TFEVENTS: "TensorBoard events", MS_SUMMARY: "MindSpore summaries"}
_RTOL, _ATOL = 1e-5, 1e-6  # mindformers prints 6 decimals; TensorBoard keeps float32
_RANK_IN_FILE = re.compile(r"(?<![a-z])(rank|device|worker)([_-]?)\d+", re.IGNORECASE)


class Origin(str):
    """Where a tag of a run was read: its writer's label (``output/log/rank_0/info.log``), which it compares and
    prints as, and what that writer is.

    Attributes:
        table: the writer is an evaluation's or a metrics table (:data:`TABLES`): its series are judged as
            evaluation, never as the training's.
        copy_of: for a writer's differing copy kept under its writer's name (``train/loss``), the tag it is a copy of
            (``loss``); None for the series read under its own tag.
    """

    def __new__(cls, label: str, *, table: bool = False, copy_of: str | None = None):
        self = super().__new__(cls, label)
        self.table, self.copy_of = table, copy_of
        return self

    def __reduce__(self):
        return (_origin, (str(self), self.table, self.copy_of))


def _origin(label: str, table: bool, copy_of: str | None) -> Origin:
    return Origin(label, table=table, copy_of=copy_of)


def stands_for(tag: str, origins: dict | None) -> str:
    """The tag *tag* holds a series of: the tag a differing copy copies (``train/loss`` -> ``loss``), else *tag* itself."""
    origin = (origins or {}).get(tag)
    return getattr(origin, "copy_of", None) or tag


def is_table(tag: str, origins: dict | None) -> bool:
    """Was *tag* read from an evaluation's or a metrics table (its :class:`Origin`)? False where nothing says so."""
    return bool(getattr((origins or {}).get(tag), "table", False))


def is_generic(name: str) -> bool:
    """True for a folder name that writers give every run (``tensorboard``, ``output``, ``rank_3``...)."""
    return name.lower() in GENERIC_FOLDERS or rank_in_name(name) is not None or name in (".", "")


def job_name(run: str) -> str:
    """The run a folder found by discovery belongs to: *run* without its trailing generic folders (``"."`` when none is left).

    ``output/log`` and ``output/tensorboard`` are ``"."``; ``job_a/output/tensorboard`` is ``job_a``;
    ``job_b/output/tensorboard/retry`` stays itself (a run nested in another).
    """
    parts = [] if run == "." else run.split("/")
    end = len(parts)
    while end and is_generic(parts[end - 1]):
        end -= 1
    return "/".join(parts[:end]) or "."


def as_job(src: Source, discovered: set) -> str:
    """The run *src* belongs to: its folder's job (:func:`job_name`), an add_scalars head folder under its owner's job."""
    owner = head_owner(src.run, discovered)
    if owner is None:
        return job_name(src.run)
    tail = src.run if owner == "." else src.run[len(owner) + 1 :]
    job = job_name(owner)
    return tail if job == "." else f"{job}/{tail}"


def _relative(path: str, root: Path) -> list:
    try:
        return list(Path(path).relative_to(root).parts) if root.is_dir() else [Path(path).name]
    except ValueError:
        return [Path(path).name]


def writer_key(src: Source, root: Path) -> tuple:
    """Which writer of its run *src* is: its folder (rank folders left out) and kind, and for logs and tables its file name (rank numbers left out)."""
    parts = _relative(src.path, root)
    folders = tuple(p for p in parts[:-1] if rank_in_name(p) is None)
    name = _RANK_IN_FILE.sub(r"\1\2*", parts[-1]) if src.kind in _NAMED_BY_FILE else ""
    return (folders, src.kind, name)


def writer_label(sources: list, root: Path) -> str:
    """How a person finds a writer's files: ``output/log/rank_0/info.log``, ``output/tensorboard/rank_*``, ``train.log``."""
    ranks = {s.rank for s in sources}
    parts = _relative(sources[0].path, root)
    if len(ranks) > 1:
        parts = [_RANK_IN_FILE.sub(r"\1\2*", p) if rank_in_name(p) is not None else p for p in parts[:-1]] + [_RANK_IN_FILE.sub(r"\1\2*", parts[-1])]
    if sources[0].kind not in _NAMED_BY_FILE and len(parts) > 1:
        parts = parts[:-1]  # an event folder, not its many timestamped files
        if all(rank_in_name(p) is not None or "*" in p for p in parts):  # rank folders alone say not what they hold
            return f"{'/'.join(parts)} ({_KIND_WORDS.get(sources[0].kind, sources[0].kind)})"
    return "/".join(parts)


def _short(sources: list, root: Path) -> str:
    """The name a writer's differing copy of a tag is kept under (``eval_results`` for ``eval_results.csv``)."""
    parts = _relative(sources[0].path, root)
    if sources[0].kind in _NAMED_BY_FILE:
        return _RANK_IN_FILE.sub(r"\1\2*", parts[-1]).rsplit(".", 1)[0] or parts[-1]
    folders = [p for p in parts[:-1] if rank_in_name(p) is None]
    return folders[-1] if folders else sources[0].kind


def _by_rank(tables: list, tag: str) -> dict:
    """rank -> (steps, values) of *tag* in read order, over a writer's tables."""
    out: dict = {}
    for t in tables:
        mask = t.tag == tag
        if not mask.any():
            continue
        ranks, steps, values = t.rank[mask], t.step[mask], t.value[mask]
        for r in np.unique(ranks):
            m = ranks == r
            s, v = out.get(int(r), (np.zeros(0, np.int64), np.zeros(0)))
            out[int(r)] = (np.concatenate([s, steps[m]]), np.concatenate([v, values[m]]))
    return out


def _within(small, big) -> bool:
    """Every point of *small* is a point of *big* (same step, value equal at the print's precision)."""
    s_steps, s_values = small
    b_steps, b_values = big
    if not s_steps.size:
        return True
    order = np.argsort(b_steps, kind="stable")
    sorted_steps = b_steps[order]
    pos = np.searchsorted(sorted_steps, s_steps)
    found = pos < sorted_steps.size
    if not found.all() or not np.array_equal(sorted_steps[pos], s_steps):
        return False
    return bool(np.allclose(b_values[order][pos], s_values, rtol=_RTOL, atol=_ATOL, equal_nan=True))


def _agrees(copy: dict, kept: dict) -> bool:
    """A copy (rank -> series) that says nothing the kept one does not: rank for rank, or one series equal to one of the kept ranks'."""
    if set(copy) <= set(kept):
        return all(_within(copy[r], kept[r]) for r in copy)
    if len(copy) == 1:
        only = next(iter(copy.values()))
        return any(_within(only, series) for series in kept.values())
    return False


def _nonfinite(series: dict) -> bool:
    return any(not np.isfinite(v).all() for _, v in series.values())


class _Writer:
    def __init__(self, sources: list, tables: list, root: Path):
        self.sources, self.tables = sources, tables
        self.kind = sources[0].kind
        self.label = writer_label(sources, root)
        self.short = _short(sources, root)
        self.ranked = any(s.rank >= 0 for s in sources)
        self.tags = set().union(*(distinct(t.tag) for t in tables)) if tables else set()

    def origin(self, copy_of: str | None = None) -> Origin:
        return Origin(self.label, table=self.kind in TABLES, copy_of=copy_of)


def settle(parts: list, root) -> tuple[list, list, dict]:
    """Each run's writers as one run: every tag read from one writer, the others' copies said.

    Args:
        parts: ``(source, scalars)`` per file read, *source* under its run's name.
        root: the path that was read (writers are named relative to it).

    Returns:
        ``(scalars, problems, origins)``: each part's scalars with the copies left out or renamed (in order),
        the copies said (:attr:`ProblemKind.COPY`), and ``run -> {tag: writer label}``.
    """
    root = Path(root)
    groups: dict = {}  # run -> writer key -> part indices
    for i, (src, scalars) in enumerate(parts):
        run = next(iter(distinct(scalars.run))) if len(scalars) else src.run  # an add_scalars head folder's rows are its run's
        groups.setdefault(run, {}).setdefault(writer_key(src, root), []).append(i)
    out = [scalars for _, scalars in parts]
    problems: list = []
    origins: dict = {}
    for run, writers in groups.items():
        ws = {key: _Writer([parts[i][0] for i in idx], [parts[i][1] for i in idx if len(parts[i][1])], root) for key, idx in writers.items()}
        mine = origins.setdefault(run, {})
        paths = {w.label: w.sources[0].path for w in ws.values()}
        holders: dict = {}
        for key in sorted(ws, key=lambda k: ws[k].label):
            for tag in ws[key].tags:
                holders.setdefault(tag, []).append(key)
        drop: dict = {}  # writer key -> tags left out
        rename: dict = {}  # writer key -> {tag: new tag}
        same: dict = {}  # (copy label, kept label) -> tags
        other: list = []
        for tag in sorted(holders):
            keys = holders[tag]
            if len(keys) == 1:
                mine[tag] = ws[keys[0]].origin()
                continue
            kept, copies = _choose(tag, keys, ws)
            mine[tag] = ws[kept].origin()
            for key, agrees in copies:
                if agrees:
                    drop.setdefault(key, set()).add(tag)
                    same.setdefault((ws[key].label, ws[kept].label), []).append(tag)
                else:
                    new = f"{ws[key].short}/{tag}"
                    rename.setdefault(key, {})[tag] = new
                    mine[new] = ws[key].origin(copy_of=tag)
                    other.append((ws[key], ws[kept], tag, new))
        for (copy, kept), tags in same.items():
            problems.append(
                Problem(
                    paths[copy], None, ProblemKind.COPY, f"{listed(tags, 8)}: the same series as {kept}'s (one job's writers): read once, from {kept}", "info"
                )
            )
        for w, kept, tag, new in other:
            if w.kind in TABLES:
                why = (
                    f"an evaluation's or a table's series, never the training's ({kept.label} keeps the {tag} read): kept apart as {new}, judged as evaluation"
                )
            else:
                why = f"another series than the one read from {kept.label}: kept apart as {new} and judged too (the worse verdict stands)"
            problems.append(
                Problem(
                    w.sources[0].path,
                    None,
                    ProblemKind.COPY,
                    f"{tag}: {why}",
                    "info" if w.kind in TABLES else "warning",
                )
            )
        for key, idx in writers.items():
            gone, renamed = drop.get(key, set()), rename.get(key, {})
            if not (gone or renamed):
                continue
            for i in idx:
                out[i] = _without(out[i], gone, renamed)
    return out, problems, origins


def _choose(tag: str, keys: list, ws: dict) -> tuple:
    """The writer whose copy of *tag* is read, and each other writer with whether its copy agrees with it."""
    series = {k: _by_rank(ws[k].tables, tag) for k in keys}
    training = [k for k in keys if ws[k].kind not in TABLES] or keys  # a table never stands in for a training writer's series
    points = {k: sum(s.size for s, _ in series[k].values()) for k in keys}
    ranked = sorted(training, key=lambda k: (points[k], _PREFERENCE.get(ws[k].kind, 1), ws[k].ranked), reverse=True)
    kept = ranked[0]
    agree = {k: _agrees(series[k], series[kept]) for k in keys if k != kept}
    if not _nonfinite(series[kept]):  # a differing copy holding a NaN or Inf is read instead: a failure is never hidden
        worse = [k for k in ranked[1:] if not agree[k] and _nonfinite(series[k])]
        if worse:
            kept = worse[0]
            agree = {k: _agrees(series[k], series[kept]) for k in keys if k != kept}
    return kept, [(k, agree[k]) for k in keys if k != kept]


def _without(scalars, gone: set, renamed: dict):
    """*scalars* without the rows of the tags in *gone*, the tags in *renamed* renamed."""
    tags = scalars.tag
    if gone:
        keep = ~np.isin(tags, list(gone))
        scalars = scalars.take(keep)
        tags = scalars.tag
    if renamed:
        new = tags.copy()
        for old, name in renamed.items():
            new[tags == old] = name
        scalars = type(scalars)(**{c: (new if c == "tag" else getattr(scalars, c)) for c in scalars.COLUMNS})
    return scalars


def judged_from(origins: dict, tags) -> str:
    """``output/log/rank_0/info.log: loss, global_norm; output/tensorboard/rank_0: lr``: which writer each tag read came from."""
    by_writer: dict = {}
    for tag in tags:
        if tag is not None and tag in origins:
            by_writer.setdefault(origins[tag], []).append(tag)
    return "; ".join(f"{label}: {', '.join(dict.fromkeys(ts))}" for label, ts in by_writer.items())


def root_of(path) -> Path:
    """The folder writers are named relative to: *path*, or the folder of a file given."""
    p = Path(path)
    return p if p.is_dir() or not os.path.exists(p) else p.parent
