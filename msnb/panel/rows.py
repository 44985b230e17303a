"""One run as one row of the team panel: what the judge said, where the loss is, how big and how fresh it is.

The verdict is :func:`msnb.analysis.judge.judge_run`, the judge of ``msnb
check``, and the loss shown is the curve it judged
(:func:`~msnb.analysis.judge.run_loss`), so the panel and ``msnb check`` never
disagree about a run.  A row is built in two parts: the judged part, redone
only when the run's files gave something new, and the disk part (size, last
write, active or idle), redone at every poll because time passes.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..analysis.judge import RunVerdict, judge_run
from ..analysis.memory import RunMemory, run_memory
from ..analysis.overview import Envelope
from ..analysis.rules import DEFAULT_RULES, FAIL, PASS, WARN, Rules
from ..analysis.smoothing import ema
from ..events.problems import ProblemKind
from ..events.reader import ReadResult

SPARK_POINTS = 120  # points kept for a sparkline: more than a 160-pixel line can show apart
MISSING_LISTED = 4096  # gaps listed per run: a stray ``rank_9000000000`` folder must not list (or hold) billions
ACTIVE, IDLE, FAILED = "active", "idle", "failed"


@dataclass
class RunRow:
    """One run's row.

    Attributes:
        run: the run's path relative to the base.
        ranks: ranks present (from the files and the scalars).
        missing_ranks: gaps in the rank numbers, counted from 0 up to the highest rank present
            (the first :data:`MISSING_LISTED` of them).
        last_step: the highest step of the loss (of any scalar when there is no loss), or None.
        last_loss: the judged loss at its last step (the median over ranks), or None.
        smoothed_loss: the same, smoothed as TensorBoard does (``Rules.smooth``), or None.
        trend: ``falling``, ``rising``, ``flat``, ``stalled``, ``too short`` or ``-`` (no loss).
        verdict: the judge's :class:`~msnb.analysis.judge.RunVerdict`.
        problems: what the reader skipped or could not read (warnings and errors).
        curve: the smoothed loss, thinned to at most :data:`SPARK_POINTS` points, for the sparkline.
        files: the paths of the run's files (what size and last write are measured on).
        bytes: size on disk of the run's files.
        last_write: when a file of the run was last written (seconds since the epoch), or None.
        active: a file was written within the ``active_within`` window of the last refresh.
        missing_more: missing ranks beyond those listed in ``missing_ranks``.
        memory: what the ranks' logs report of their memory (:class:`~msnb.analysis.memory.RunMemory`), or None.
    """

    run: str
    ranks: list
    missing_ranks: list
    last_step: int | None
    last_loss: float | None
    smoothed_loss: float | None
    trend: str
    verdict: RunVerdict
    problems: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    files: list = field(default_factory=list)
    bytes: int = 0
    last_write: float | None = None
    active: bool = False
    missing_more: int = 0
    memory: RunMemory | None = None

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def warned(self) -> bool:
        """Passed, but with a warning, a gap in the ranks, or damaged data: worth a look."""
        return self.passed and (
            any(c.status == WARN for c in self.verdict.checks) or bool(self.missing_ranks) or any(str(p.severity) != "info" for p in self.problems)
        )

    @property
    def status(self) -> str:
        """``failed`` when the verdict failed, whatever the activity; else ``active`` or ``idle``."""
        if not self.passed:
            return FAILED
        return ACTIVE if self.active else IDLE

    @property
    def light(self) -> str:
        """``red`` (failed), ``amber`` (warnings, missing ranks, damage) or ``green``."""
        return "red" if not self.passed else ("amber" if self.warned else "green")

    @property
    def flags(self) -> list:
        return self.verdict.flags

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the last write, or None when no file of the run could be looked at."""
        return None if self.last_write is None else max(0.0, (time.time() if now is None else now) - self.last_write)

    def as_dict(self) -> dict:
        """The JSON row of ``msnb runs --json``."""
        return {
            "run": self.run,
            "status": self.status,
            "ranks": list(self.ranks),
            "missing_ranks": list(self.missing_ranks),
            "last_step": self.last_step,
            "last_loss": self.last_loss,
            "passed": self.passed,
            "flags": [f.as_dict() for f in self.flags],
            "bytes": self.bytes,
            "last_write": self.last_write,
            "judged_from": self.verdict.judged_from,
            "memory": None if self.memory is None else self.memory.as_dict(),
        }


def _finite_or_none(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _trend(verdict: RunVerdict) -> str:
    checks = {c.name: c for c in verdict.checks}
    falling = checks.get("loss_falling")
    if falling is None:
        return "-"
    if falling.status != PASS:
        return falling.outcome or ("rising" if falling.status == FAIL else "flat")
    stalled = checks.get("loss_stalled")
    return "stalled" if stalled is not None and stalled.status == WARN else "falling"


def _thin(steps: np.ndarray, values: np.ndarray, n: int = SPARK_POINTS) -> list:
    """At most about *n* points of the curve for a sparkline: its M4 envelope, so a spike is still drawn."""
    if values.size <= n:
        return values.tolist()
    envelope = Envelope(buckets=max(1, n // 4))
    envelope.add(steps, values)
    return envelope.envelope()[1].tolist()


def summarize(run: str, result: ReadResult, *, tag: str = "loss", rules: Rules = DEFAULT_RULES) -> RunRow:
    """Judge one run and summarize it (the disk part is left for :func:`refresh`).

    Args:
        run: the run's name (its path relative to the base); *result*'s rows carry it.
        result: what was read from the run (see :func:`msnb.panel.collect.read_run`).
        tag: the loss tag or its meaning; naming one the run lacks fails the run, as in ``msnb check``.
        rules: the judge's parameters.

    Returns:
        The row, with ``bytes`` and ``last_write`` not yet filled in.
    """
    scalars = result.scalars
    seen: dict = {}
    origins = result.origins.get(run)
    verdict = judge_run(scalars, run, tag=tag, rules=rules, explicit_tag=tag != "loss", seen=seen, origins=origins).said_from(origins)
    memory = run_memory(result, run)
    if memory is not None:
        verdict.checks.extend(memory.checks(rules))
    ranks = set(verdict.ranks) | {int(f["rank"]) for f in result.files if int(f["rank"]) >= 0}
    missing, missing_more = _gaps(sorted(ranks))
    last_step = last_loss = smoothed = None
    curve: list = []
    if verdict.tag is not None:
        cs = seen["curves"]  # the very curves judged (the rows are the run's own: see collect.read_run)
        steps, values, _n = seen["loss"]
        last_step = max((int(c.steps[-1]) for c in cs if c.steps.size), default=None)
        ok = np.isfinite(values)
        if values.size:
            last_loss = _finite_or_none(values[-1])
        if ok.any():
            s = ema(values[ok], rules.smooth)
            smoothed = _finite_or_none(s[-1])
            curve = _thin(steps[ok], s)
    elif len(scalars):
        last_step = int(scalars.step.max())
    problems = [p for p in result.problems if str(p.severity) != "info" or p.kind == ProblemKind.COPY]  # a writer's copies, said
    files = [f["path"] for f in result.files]
    row = RunRow(run, sorted(ranks), missing, last_step, last_loss, smoothed, _trend(verdict), verdict, problems, curve, files)
    row.missing_more = missing_more
    row.memory = memory
    return row


def _gaps(ranks: list, limit: int = MISSING_LISTED) -> tuple[list, int]:
    """The ranks missing below the highest of *ranks* (sorted), the first *limit* of them, and how many more there are.

    Built gap by gap, never as a range up to the top rank: a rank comes from a
    folder or file name, and one name may say 9,000,000,000.
    """
    listed: list = []
    more, expected = 0, 0
    for r in ranks:
        if r > expected:
            take = min(r - expected, limit - len(listed))
            listed.extend(range(expected, expected + take))
            more += r - expected - take
        expected = r + 1
    return listed, more


def refresh(row: RunRow, *, active_within: float, now: float | None = None) -> RunRow:
    """The row with its size, last write and activity as the disk says now.

    Args:
        row: a row from :func:`summarize`.
        active_within: seconds since a last write that still count as active.
        now: the time to judge activity at (default: now).

    Returns:
        A new row.
    """
    now = time.time() if now is None else now
    size, last = 0, None
    for path in row.files:
        try:
            st = os.stat(path)
        except OSError:
            continue  # gone since it was read: it no longer takes space
        size += st.st_size
        last = st.st_mtime if last is None else max(last, st.st_mtime)
    active = last is not None and now - last <= active_within
    return replace(row, bytes=size, last_write=last, active=active)
