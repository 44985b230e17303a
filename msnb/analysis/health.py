"""Which rank, which series, which step went bad first, and what followed.

Every series (one tag on one rank of one run) is judged against its own past
only: a point is anomalous when it is non-finite, or when its robust z-score
``(x - median) / (1.4826 * MAD)`` over the trailing window of points before it
exceeds the threshold.  The earliest anomalous point across ranks x tags x
steps is the answer; the other series' first anomalies, in step order, are the
cascade (a parameter's gradient norm, then that rank's loss, then every rank's
grad-norm after the all-reduce).

The detector is vectorised over series: steps are cut into blocks and each
block is judged against the median and MAD of the window that ends where the
block starts, so the work is ``series x steps x window / block`` partitions in
numpy, with one Python iteration per block.  A slow drift (an lr warm-up, a
loss falling) stays inside the window's own spread; a departure does not.
"""

from __future__ import annotations

import html
import math
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import NothingReadable, UsageError
from ..events import ReadResult
from ..events.msprobe import fraction as msprobe_fraction
from ..events.msprobe import site as msprobe_site
from ..events.objects import local
from ..events.runs import read_runs
from ..events.tables import NO_RANK
from ..events.tags import is_schedule, meaning
from ..events.training_state import find_global_norm_records
from ..status import ResultView
from ..words import count, plural
from .memory import memory_of
from .rules import WARN, Check

# reason codes of the vectorised core
NONE, NAN, POS_INF, NEG_INF, DEPARTURE = 0, 1, 2, 3, 4
_NONFINITE = {NAN: "nan", POS_INF: "inf", NEG_INF: "-inf"}
MAD_TO_SIGMA = 1.4826
# tags that measure time or follow a plan: a change there is not the run going bad
_TIMING = ("step_time", "throughput", "flops")
# mindformers' copies of a series against consumed samples (x = samples, not steps): "loss vs samples" as written,
# "loss_vs_samples" as tensorboardX stores it; scanned, they made a 40-step run read "steps 1-80"
_VS_SAMPLES = (" vs samples", "_vs_samples")
_TIMING_TAGS = ("throughput_linearity", "B-samples-per-day", "model-flops-throughput-per-npu", "batch-size")
# per-parameter families: at the same step, the specific series is named before the aggregates it feeds
PER_PARAMETER = ("local_norm/", "adam_m_norm/", "adam_v_norm/", "max_attention_logit/", "weight_stable_rank/", "weight_eigenvalue/")
_AGGREGATE_SUFFIXES = ("max_attention_logit/mean", "max_attention_logit/max")


@dataclass(frozen=True)
class Settings:
    """How the detector judges a point; the defaults keep healthy runs (noise, warm-up) silent.

    Attributes:
        window: trailing points a point is compared with.
        block: points judged against the same window (larger is faster, the window lags more); never more than
            the history a point needs, so a short run is judged in blocks as short as that history.
        threshold: robust z beyond which a point departs from its history.
        min_history: points a series needs before departures count (non-finite counts from the first).  None
            (the default): scaled to the series, a third of its points, at least :data:`SHORT_HISTORY` and at
            most :data:`LONG_HISTORY`: a 30-point series is judged from its 10th point, one of 96 points or more
            from its 32nd.  A scaled history shorter than :data:`LONG_HISTORY` raises the threshold as much
            (x 32/10 for 10 points): a median and MAD of a few points are uncertain, and a short run is all
            warm-up (Adam's moments ramp up from zero), so only a departure a long run would flag with room to spare
            counts, and only one :data:`SHORT_JUMP` times the largest |value| of its history away from its median:
            an order of magnitude beyond anything the series held.
        rel_floor: the scale never drops below this fraction of the median (flat series stay quiet).
    """

    window: int = 64
    block: int = 32
    threshold: float = 10.0
    min_history: int | None = None
    rel_floor: float = 0.05

    def check(self) -> Settings:
        history = LONG_HISTORY if self.min_history is None else self.min_history
        if self.window < 4 or self.block < 1 or history < 4:
            raise UsageError(f"window must be >= 4, block >= 1 and min_history >= 4 (got {self.window}, {self.block}, {history})")
        if not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise UsageError(f"threshold must be a positive number (got {self.threshold})")
        if not self.rel_floor >= 0:
            raise UsageError(f"rel_floor must be >= 0 (got {self.rel_floor})")
        return self

    def history(self, points: int) -> int:
        """The points of history a series of *points* points needs before a departure counts (see ``min_history``)."""
        if self.min_history is not None:
            return self.min_history
        return min(LONG_HISTORY, max(SHORT_HISTORY, points // 3))

    def short(self, points: int) -> bool:
        """Whether a series of *points* points is judged as a short run's (a scaled history under :data:`LONG_HISTORY`)."""
        return self.min_history is None and self.history(points) < LONG_HISTORY

    def threshold_for(self, points: int) -> float:
        """The robust z a series of *points* points must pass: ``threshold``, raised where the history was scaled down."""
        if self.min_history is not None:
            return self.threshold
        return self.threshold * LONG_HISTORY / self.history(points)


LONG_HISTORY = 32  # a long run's points of history before departures count
SHORT_JUMP = 10.0  # a short series' departure is also this many times the largest |value| of its history away from its median
SHORT_HISTORY = 6  # the least a short run's scaled history is: a robust median and MAD of fewer mean little


def _median_sorted(srt: np.ndarray) -> np.ndarray:
    """Medians along the last axis of an array already sorted along it."""
    k = srt.shape[-1]
    if k % 2:
        return srt[..., k // 2]
    return 0.5 * (srt[..., k // 2 - 1] + srt[..., k // 2])


def _window_stats(windows: np.ndarray, rel_floor: float):
    """Median, robust scale (1.4826 MAD, floored at ``rel_floor`` x |median|) and reach (the largest |value|) along the last axis.

    *windows* is a fresh copy, sorted in place: a full SIMD sort of short rows
    costs less than ``np.partition``'s per-row set-up.
    """
    windows.sort(axis=-1)
    med = _median_sorted(windows)
    dev = np.abs(windows - med[..., None])
    dev.sort(axis=-1)
    mad = _median_sorted(dev)
    scale = np.maximum(MAD_TO_SIGMA * mad, rel_floor * np.abs(med))
    reach = np.maximum(np.abs(windows[..., 0]), np.abs(windows[..., -1]))
    return med, np.maximum(scale, np.finfo(windows.dtype).tiny), reach


ROWS_PER_CHUNK = 128  # series judged at once: their steps stay in cache, the window copies stay small


def first_departures(values: np.ndarray, settings: Settings = Settings()):
    """For each row of *values* (series x points), its first anomalous point.

    Args:
        values: 2-D float array, one series a row, points in step order (float32 keeps memory low).
        settings: the detector's :class:`Settings`.

    Returns:
        ``(index, z, code)``: per row the first anomalous column (-1: none), its
        robust z (inf for non-finite) and its reason code (``NAN``, ``POS_INF``,
        ``NEG_INF``, ``DEPARTURE`` or ``NONE``).
    """
    x = np.asarray(values)
    if x.ndim != 2:
        raise ValueError("values must be 2-D: series x points")
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    n, t = x.shape
    index = np.full(n, -1, dtype=np.int64)
    zs = np.zeros(n, dtype=np.float64)
    codes = np.zeros(n, dtype=np.int8)
    if n == 0 or t == 0:
        return index, zs, codes
    history = settings.history(t)
    w, b = settings.window, min(settings.block, history)
    first = int(math.ceil(history / b)) * b  # the first judged point
    starts = np.arange(first, t, b)
    short = [int(s) for s in starts if s < w]  # windows still filling: shorter, one block at a time
    full = starts[starts >= w]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for r0 in range(0, n, ROWS_PER_CHUNK):
            xc = x[r0 : r0 + ROWS_PER_CHUNK]
            rows = np.arange(r0, r0 + xc.shape[0])
            bad = ~np.isfinite(xc)
            nf = np.where(bad.any(axis=1), bad.argmax(axis=1), t)
            dep = np.full(xc.shape[0], t, dtype=np.int64)
            dep_z = np.zeros(xc.shape[0])
            if starts.size:
                meds, scales, reaches = [], [], []
                for s in short:
                    m, sc, r = _window_stats(xc[:, :s].copy(), settings.rel_floor)
                    meds.append(m[:, None])
                    scales.append(sc[:, None])
                    reaches.append(r[:, None])
                if full.size:
                    view = np.lib.stride_tricks.sliding_window_view(xc, w, axis=1)
                    m, sc, r = _window_stats(view[:, full - w], settings.rel_floor)  # fancy index: one copy
                    meds.append(m)
                    scales.append(sc)
                    reaches.append(r)
                med = np.repeat(np.concatenate(meds, axis=1), b, axis=1)[:, : t - first]
                scale = np.repeat(np.concatenate(scales, axis=1), b, axis=1)[:, : t - first]
                z = (xc[:, first:] - med) / scale
                hit = np.abs(z) > settings.threshold_for(t)  # NaN compares False: non-finite points are counted above
                if settings.short(t):  # a short run: an order of magnitude beyond anything its history held, too
                    reach = np.repeat(np.concatenate(reaches, axis=1), b, axis=1)[:, : t - first]
                    hit &= np.abs(xc[:, first:] - med) > SHORT_JUMP * reach
                any_hit = hit.any(axis=1)
                col = hit.argmax(axis=1)
                dep = np.where(any_hit, first + col, t)
                dep_z = np.where(any_hit, z[np.arange(xc.shape[0]), col], 0.0)
            is_nf = nf <= dep
            at = np.minimum(nf, dep)
            found = at < t
            index[rows[found]] = at[found]
            nf_rows = found & is_nf
            if nf_rows.any():
                v = xc[np.flatnonzero(nf_rows), nf[nf_rows]]
                codes[rows[nf_rows]] = np.where(np.isnan(v), NAN, np.where(v > 0, POS_INF, NEG_INF))
                zs[rows[nf_rows]] = np.inf
            dep_rows = found & ~is_nf
            codes[rows[dep_rows]] = DEPARTURE
            zs[rows[dep_rows]] = dep_z[dep_rows]
    return index, zs, codes


def scanned_by_default(tag: str) -> bool:
    """Tags worth judging: not schedules (lr, loss scale), not timing, not mindformers' ``<tag> vs samples`` copies,
    not msprobe's fractions of zero or NaN elements (a step of a discrete fraction is no departure; NaN shows in the
    statistics themselves)."""
    if tag.endswith(_VS_SAMPLES) or tag in _TIMING_TAGS or msprobe_fraction(tag):
        return False
    return not (is_schedule(tag) or meaning(tag) in _TIMING)


def _tier(tag: str) -> int:
    """0 for a per-parameter series, 1 for what aggregates them (loss, grad-norm, means)."""
    return 0 if tag.startswith(PER_PARAMETER) and not tag.startswith(_AGGREGATE_SUFFIXES) else 1


@dataclass
class Anomaly:
    """One series' first anomalous point: where (run, rank, tag), when (step), what (value, reason).

    The run is named as ``msnb check`` names it (its label), so a health report and a verdict speak of one run.
    """

    step: int
    rank: int
    tag: str
    value: float
    reason: str
    run: str = "."
    z: float = math.inf
    call: int = 0  # where the writer recorded its series within a step (msprobe: its call order), 0 where unknown

    def as_dict(self, *, value: bool = True) -> dict:
        """JSON-ready: unknown rank and non-finite values become null (the reason names them)."""
        out = {"run": self.run, "step": int(self.step), "rank": None if self.rank == NO_RANK else int(self.rank), "tag": self.tag}
        if value:
            out["value"] = float(self.value) if math.isfinite(self.value) else None
        out["reason"] = self.reason
        return out

    def where(self, *, run: bool = False) -> str:
        """``step 1,230, rank 5, local_norm/...`` (with the run when *run*: several runs were scanned)."""
        rank = "rank ?" if self.rank == NO_RANK else f"rank {self.rank}"
        in_run = f"run {self.run}, " if run else ""
        return f"step {self.step:,}, {in_run}{rank}, {self.tag}"

    def describe(self, *, run: bool = False) -> str:
        return f"{self.where(run=run)} = {self.value:.6g}: {self.reason}"

    def __str__(self) -> str:
        return self.describe()


@dataclass
class HealthReport(ResultView):
    """The first anomaly, the cascade that followed, and what was looked at.

    ``as_dict()`` is the JSON of ``msnb health --json``; ``passed`` (no anomaly) decides the exit code.
    """

    first: Anomaly | None
    cascade: list = field(default_factory=list)
    ranks: list = field(default_factory=list)
    tags_scanned: int = 0
    series_scanned: int = 0
    steps: tuple = (None, None)
    settings: Settings = field(default_factory=Settings)
    global_norm_records: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    cascade_total: int = 0
    scanned_tags: list = field(default_factory=list)
    read_from: dict = field(default_factory=dict)  # run -> {writer: tags scanned read from it} (one job's writers: msnb.events.identity)
    origins: dict = field(default_factory=dict, repr=False)  # run -> {tag: writer}, ReadResult.origins with head folders folded
    memory: dict = field(default_factory=dict)  # run -> RunMemory: MindSpore's memory report in the ranks' logs (msnb.analysis.memory)
    evaluation: list = field(default_factory=list)  # first anomalies of tables' series beside a training log: warnings
    judged: object = None  # the judge's answer on the job (msnb.analysis.health_judged.Judged), None where not asked

    @property
    def anomalous(self) -> bool:
        return self.first is not None

    @property
    def failed_runs(self) -> list:
        """The runs the judge (``msnb check``) fails, each a :class:`~msnb.analysis.judge.RunVerdict`."""
        return list(self.judged.failed) if self.judged is not None else []

    @property
    def passed(self) -> bool:
        """No anomaly in a training series and no run the judge fails (``msnb health`` exits 0); an evaluation
        table's anomaly is a warning, as in ``msnb check``."""
        return not self.anomalous and not self.failed_runs

    def as_dict(self) -> dict:
        return {
            "first": self.first.as_dict() if self.first else None,
            "cascade": [a.as_dict(value=False) for a in self.cascade],
            "ranks": [None if r == NO_RANK else int(r) for r in self.ranks],
            "tags_scanned": int(self.tags_scanned),
            "read_from": {run: dict(writers) for run, writers in self.read_from.items()},
            "memory": {run: mem.as_dict() | {"checks": [c.as_dict() for c in mem.checks()]} for run, mem in self.memory.items()},
            "judged_failed": [self.judged.as_dict(v) for v in self.failed_runs],
            "evaluation": [{**a.as_dict(), "from": self.tag_from(a) or None} for a in self.evaluation],
        }

    def read_from_text(self) -> str:
        """``read from tensorboard/rank_* (204 tags), log/worker_0.log (1 tag)``: the writers the scanned series came from."""
        several = len(self.read_from) > 1
        parts = []
        for run, writers in list(self.read_from.items())[:8]:
            said = ", ".join(f"{w} ({count(n, 'tag', thousands=True)})" for w, n in writers.items())
            parts.append(f"run {run}: {said}" if several else said)
        more = f"; ... {count(len(self.read_from) - 8, 'more run')}" if len(self.read_from) > 8 else ""
        return f"read from {'; '.join(parts)}{more}" if parts else ""

    def first_from(self) -> str:
        """The writer the first anomaly's series was read from, or ``""``."""
        return self.tag_from(self.first)

    def tag_from(self, anomaly: Anomaly | None) -> str:
        """The writer an anomaly's series was read from, or ``""``."""
        if anomaly is None:
            return ""
        return self.origins.get(anomaly.run, {}).get(anomaly.tag, "")

    def judged_lines(self) -> list:
        """The judge's failed runs and the evaluation tables' anomalies, one line each, as the text says them."""
        lines = [f"judged: {self.judged.named(v)} (msnb check)" for v in self.failed_runs]
        for a in self.evaluation:
            lines.append(f"warning: {self.tag_from(a) or 'a table'}: {a.describe(run=self.several_runs)} (a table's series, judged as evaluation)")
        return lines

    def said_from(self, origins: dict) -> HealthReport:
        """Name the writer each scanned tag was read from (``origins``: run -> {tag: writer}); returns the report."""
        scanned = set(self.scanned_tags)
        self.origins, self.read_from = {}, {}
        for run, tags in (origins or {}).items():
            named = sorted(set(tags.values()), key=len)
            # add_scalars' head folders are their writer's (tensorboard/rank_*/max_attention_logit/.../head_0 is tensorboard/rank_*)
            top = {w: next((o for o in named if w.startswith(o + "/")), w) for w in named}
            self.origins[run] = {tag: top[writer] for tag, writer in tags.items()}
            writers = Counter(writer for tag, writer in self.origins[run].items() if tag in scanned)
            if writers:
                self.read_from[run] = dict(writers.most_common())
        return self

    def _scope(self) -> str:
        ranks = [r for r in self.ranks if r != NO_RANK]
        rank_text = f"ranks {_spans(ranks)}" if ranks else "no rank known"
        lo, hi = self.steps
        step_text = f", steps {lo:,}-{hi:,}" if lo is not None else ""
        return f"{self.series_scanned:,} series ({count(self.tags_scanned, 'tag', thousands=True)}, {rank_text}{step_text})"

    def cascade_groups(self) -> list[tuple[int, str, str, list[int]]]:
        """The cascade as ``(step, what, reason kind, ranks)``: one group per run, tag (or parameter family) and step.

        Many parameters of one family going bad at one step read as one line
        (``local_norm/* (201 series)``); one tag across ranks lists the ranks.  With
        several runs scanned, *what* starts with the run (``run job_b: grad-norm``):
        ranks of different runs are never merged into one line.
        """
        several = self.several_runs
        by_tag: dict = {}
        for a in self.cascade:
            kind = a.reason.split(" ", 1)[0]
            by_tag.setdefault((a.step, a.run if several else "", a.tag, kind), set()).add(a.rank)
        merged: dict = {}
        for (step, run, tag, kind), ranks in by_tag.items():
            family = tag.split("/", 1)[0] + "/*" if _tier(tag) == 0 else tag
            merged.setdefault((step, run, family, kind, tuple(sorted(ranks))), []).append(tag)
        out = []
        for (step, run, family, kind, ranks), tags in merged.items():
            what = tags[0] if len(tags) == 1 else f"{family} ({len(tags)} series)"
            out.append((step, f"run {run}: {what}" if several else what, kind, list(ranks)))
        return out

    @property
    def several_runs(self) -> bool:
        runs = {a.run for a in ([self.first] if self.first else []) + list(self.cascade)}
        return len(runs) > 1

    def format_text(self, *, max_lines: int = 12) -> str:
        s = self.settings
        if self.first is None and self.failed_runs:
            lines = [f"no anomaly left its own history, but the judge fails {count(len(self.failed_runs), 'run')}:", *self.judged_lines()]
            lines.append(f"scanned {self._scope()}")
        elif self.first is None and self.evaluation:
            n = len(self.evaluation)
            lines = [f"no anomaly in a training series; {count(n, 'table series', 'table series')} beside them went bad (a warning, as in msnb check):"]
            lines += [*self.judged_lines(), f"scanned {self._scope()}"]
        elif self.first is None:
            lines = [
                f"no anomaly: {self._scope()} stayed finite and within robust z {s.threshold:g} of their trailing {s.window}-point history"
                + (" (a series under 96 points: judged from a third of its points on, with the bar raised as much)" if s.min_history is None else ""),
            ]
        else:
            source = self.first_from()
            lines = [f"first anomaly: {self.first.describe(run=self.several_runs)}" + (f" (read from {source})" if source else "")]
            groups = self.cascade_groups()
            if groups:
                lines.append(f"then ({self.cascade_total:,} series):")
                for step, tag, kind, ranks in groups[:max_lines]:
                    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_spans(ranks)}"
                    lines.append(f"  step {step:>8,}  {who:<12} {tag}  ({kind})")
                if len(groups) > max_lines:
                    lines.append(f"  ... {count(len(groups) - max_lines, 'more group')}")
            lines.append(f"scanned {self._scope()}")
        if self.first is not None:
            lines += self.judged_lines()
        if self.read_from:
            lines.append(self.read_from_text())
        for _path, record in self.global_norm_records:
            steps = ", ".join(f"{k:,}" for k in sorted(record)[:8])
            lines.append(f"abnormal_global_norm.json: global norm over mindformers' spike threshold at {plural(len(record), 'step')} {steps}")
        lines += self.memory_lines()
        for p in self.problems:
            lines.append(f"{p.severity}: {p}")
        return "\n".join(lines)

    def memory_lines(self) -> list[str]:
        """The memory findings of each run whose logs report it (a warning, or its ranks' peaks)."""
        out = []
        for run, mem in self.memory.items():
            who = f" of {run}" if len(self.memory) > 1 else ""
            for c in mem.checks():
                out.append(f"memory{who}: {'warning: ' if c.status == WARN else ''}{c.detail}")
        return out

    def __str__(self) -> str:
        return self.format_text()

    def __repr__(self) -> str:
        what = f"first anomaly at {self.first.where()}, then {self.cascade_total:,} series" if self.first else "no anomaly"
        return f"<HealthReport: {what}; scanned {self.series_scanned:,} series>"

    def _repr_html_(self) -> str:
        e = html.escape
        if self.first is None:
            return f"<div><b>msnb health</b>: {'<br>'.join(e(line) for line in self.format_text().splitlines())}</div>"
        memory = "".join(f"<p>{e(line)}</p>" for line in self.memory_lines())
        read_from = f"<p>{e(self.read_from_text())}</p>" if self.read_from else ""
        rows = [("first", self.first)] + [("then", a) for a in self.cascade[:20]]
        body = "".join(
            f"<tr><td>{label}</td><td style='text-align:right'>{a.step:,}</td><td>{e(str(a.rank))}</td><td><code>{e(a.tag)}</code></td><td>{e(a.reason)}</td></tr>"
            for label, a in rows
        )
        more = f"<p>... and {self.cascade_total - 20:,} more series</p>" if self.cascade_total > 20 else ""
        source = f" (read from <code>{e(self.first_from())}</code>)" if self.first_from() else ""
        return (
            "<div><b>msnb health</b>: first anomaly at "
            f"<b>{e(self.first.where(run=self.several_runs))}</b>{source}"
            "<table><thead><tr><th></th><th>step</th><th>rank</th><th>tag</th><th>reason</th></tr></thead>"
            f"<tbody>{body}</tbody></table>{more}<p>scanned {e(self._scope())}</p>{read_from}"
            + "".join(f"<p>{e(line)}</p>" for line in self.judged_lines())
            + memory
            + "</div>"
        )


def _spans(values) -> str:
    """``0-3, 5, 7`` for [0, 1, 2, 3, 5, 7]."""
    values = sorted(set(int(v) for v in values))
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def _reason(code: int, z: float, settings: Settings, median: float | None = None) -> str:
    if code in _NONFINITE:
        return f"non-finite ({_NONFINITE[code]})"
    sign = "+" if z >= 0 else "-"
    size = f"{abs(z):.1f}" if abs(z) < 1e6 else f"{abs(z):.3g}"  # a flat history's scale is tiny: z can be astronomical
    return f"departure (robust z {sign}{size} over the trailing {settings.window} points)"


def _factorize(col: np.ndarray) -> tuple[np.ndarray, list]:
    """Integer codes and the distinct values, in first-seen order (object columns: faster than sorting strings)."""
    seen: dict = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in col.tolist()), dtype=np.int64, count=len(col))
    return codes, list(seen)


def _series(scalars):
    """Split a scalar table into series; group series that share their steps into one dense array each.

    A step written twice in a series (a job resumed from a checkpoint) keeps
    its last value, as TensorBoard does, unless one of its writes was NaN or Inf.  Yields ``(keys, steps, values)`` with
    keys ``(run, rank, tag)`` per row of the ``values`` array.
    """
    run_codes, runs = _factorize(scalars.run)
    tag_codes, tags = _factorize(scalars.tag)
    rank_codes, ranks = _factorize(scalars.rank)
    n_rank, n_tag = len(ranks), len(tags)
    sid = (run_codes * n_rank + rank_codes) * n_tag + tag_codes
    order = np.lexsort((np.arange(len(sid)), scalars.step, sid))
    sid_s, step_s = sid[order], scalars.step[order]
    keep = np.ones(len(order), dtype=bool)
    keep[:-1] = (sid_s[1:] != sid_s[:-1]) | (step_s[1:] != step_s[:-1])  # last write of a (series, step) wins
    written = scalars.value[order]
    values = written[keep]
    bad = ~np.isfinite(written)
    if bad.any() and not keep.all():
        # ... except that a NaN/Inf is never hidden by a later finite write of its step (a retried step): the judge
        # flags it, so the scan must see it too
        point = np.cumsum(keep) - keep  # the kept point each record belongs to
        first_bad, at = np.unique(point[bad], return_index=True)
        values[first_bad] = written[np.flatnonzero(bad)[at]]
    order, sid_s, step_s = order[keep], sid_s[keep], step_s[keep]
    bounds = np.flatnonzero(np.diff(sid_s)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(sid_s)]))
    groups: dict = {}
    for a, z in zip(starts.tolist(), ends.tolist()):
        st = step_s[a:z]
        groups.setdefault(st.tobytes(), (st, []))[1].append((a, z))
    for st, spans in groups.values():
        keys = []
        for a, _z in spans:
            s = int(sid_s[a])
            keys.append((runs[s // (n_rank * n_tag)], int(ranks[(s // n_tag) % n_rank]), tags[s % n_tag]))
        block = np.stack([values[a:z] for a, z in spans])
        yield keys, st, block


def scan_scalars(scalars, *, tag_prefix=None, settings: Settings | None = None, max_cascade: int = 200, evaluation=frozenset()) -> HealthReport:
    """Judge every series of a scalar table: the first anomaly and its cascade.

    Args:
        scalars: a :class:`~msnb.events.ScalarTable` (from :func:`msnb.read`).
        tag_prefix: only tags starting with this (a string or several); default: all but schedules and timing.
        settings: the detector's :class:`Settings`.
        max_cascade: at most this many series listed in the cascade (``cascade_total`` counts them all).
        evaluation: ``(run, tag)`` of series judged as evaluation (a table's beside a training log): their first
            anomalies are the report's ``evaluation`` warnings, never its first anomaly or cascade.

    Returns:
        A :class:`HealthReport`.

    Raises:
        UsageError: *tag_prefix* matches no tag, or the settings are out of range.
    """
    settings = (settings or Settings()).check()
    prefixes = (tag_prefix,) if isinstance(tag_prefix, str) else tuple(tag_prefix or ())
    codes, tags = _factorize(scalars.tag)
    keep = np.array([(t.startswith(prefixes) if prefixes else scanned_by_default(t)) for t in tags], dtype=bool)
    wanted = [t for t, k in zip(tags, keep.tolist()) if k]
    if prefixes and not wanted and len(tags):
        raise UsageError(f"no tag starts with {' or '.join(map(repr, prefixes))} (tags: {', '.join(sorted(tags)[:8])}{', ...' if len(tags) > 8 else ''})")
    table = scalars if keep.all() else scalars.take(keep[codes]) if len(tags) else scalars
    calls = call_order(tags)
    found = []
    n_series = 0
    for keys, steps, block in _series(table) if len(table) else ():
        n_series += len(keys)
        index, zs, codes = first_departures(block, settings)
        for i in np.flatnonzero(index >= 0).tolist():
            run, rank, tag = keys[i]
            j = int(index[i])
            found.append(
                Anomaly(int(steps[j]), rank, tag, float(block[i, j]), _reason(int(codes[i]), float(zs[i]), settings), run, float(zs[i]), calls.get(tag, 0))
            )
    ranks = sorted(set(table.rank.tolist()))
    lo_hi = (int(table.step.min()), int(table.step.max())) if len(table) else (None, None)
    report = HealthReport(None, [], ranks, len(wanted), n_series, lo_hi, settings, scanned_tags=wanted)
    report.evaluation = sorted((a for a in found if (a.run, a.tag) in evaluation), key=lambda a: (a.step, a.run, a.tag, a.rank))
    _order(report, [a for a in found if (a.run, a.tag) not in evaluation], max_cascade)
    return report


def call_order(tags) -> dict:
    """tag -> where its call comes in a step (1, 2, ...), for the tags of writers that record in call order (msprobe).

    *tags* are in the order the reader met them: files are read in msprobe's order within a step (forward,
    backward, all-reduce, optimizer) and rows in the order msprobe wrote them, so the first appearance of a call
    (``actv/fc1.input``; all its statistics share it) is its place in the step.  Other tags are left out (0).
    """
    sites: dict = {}
    out = {}
    for tag in tags:
        where = msprobe_site(tag)
        if where is not None:
            out[tag] = sites.setdefault(where, len(sites) + 1)
    return out


def _order(report: HealthReport, found: list, max_cascade: int) -> None:
    found.sort(key=lambda a: (a.step, _tier(a.tag), a.call, -abs(a.z) if math.isfinite(a.z) else -math.inf, a.rank, a.tag))
    if found:
        report.first = found[0]
        rest = found[1:]
        report.cascade = rest[:max_cascade]
        report.cascade_total = len(rest)


def scan_cube(values: np.ndarray, steps, *, tags, ranks=None, settings: Settings | None = None, max_cascade: int = 200) -> HealthReport:
    """Judge a dense ranks x tags x steps array (every series sampled at the same steps).

    The fast path for large runs held as one array: no table, no grouping.

    Args:
        values: float array of shape (ranks, tags, steps); float32 halves the memory.
        steps: the step of each column.
        tags: the tag of each middle index.
        ranks: the rank of each first index (default 0..n-1).
        settings: the detector's :class:`Settings`.
        max_cascade: at most this many series listed in the cascade.

    Returns:
        A :class:`HealthReport`.
    """
    settings = (settings or Settings()).check()
    v = np.asarray(values)
    if v.ndim != 3:
        raise ValueError("values must be 3-D: ranks x tags x steps")
    r, p, t = v.shape
    steps = np.asarray(steps)
    ranks = list(range(r)) if ranks is None else list(ranks)
    tags = list(tags)
    if len(steps) != t or len(tags) != p or len(ranks) != r:
        raise ValueError("steps, tags and ranks must match the array's shape")
    index, zs, codes = first_departures(v.reshape(r * p, t), settings)
    found = []
    for i in np.flatnonzero(index >= 0).tolist():
        j = int(index[i])
        rank, tag = ranks[i // p], tags[i % p]
        found.append(Anomaly(int(steps[j]), rank, tag, float(v[i // p, i % p, j]), _reason(int(codes[i]), float(zs[i]), settings), ".", float(zs[i])))
    report = HealthReport(None, [], sorted(ranks), p, r * p, (int(steps.min()), int(steps.max())) if t else (None, None), settings)
    _order(report, found, max_cascade)
    return report


def _spike_anomalies(records) -> list:
    """mindformers' own verdict (``abnormal_global_norm.json``): a global norm over the spike threshold."""
    out = []
    for _path, record in records:
        for step in sorted(record):
            norms = record[step]
            out.append(
                Anomaly(step, 0, "global_norm", norms[0] if norms else math.nan, "over global_norm_spike_threshold (abnormal_global_norm.json)", ".", math.inf)
            )
    return out


def health(source, *, tag_prefix=None, settings: Settings | None = None, max_cascade: int = 200, verify: bool = True) -> HealthReport:
    """The first anomaly across ranks x tags x steps of a run, and the cascade that followed.

    Args:
        source: a path (a run, a tree of runs, a file) or a :class:`~msnb.events.ReadResult` already read.
        tag_prefix: only tags starting with this (e.g. ``"local_norm"``); default: all but schedules and timing.
        settings: the detector's :class:`Settings` (window, threshold, ...).
        max_cascade: at most this many series listed in the cascade.
        verify: check CRCs while reading a path.

    Returns:
        A :class:`HealthReport`; ``report.anomalous`` says whether anything went bad.

    Raises:
        NothingReadable: the path is missing or holds no scalars.
    """
    if isinstance(source, ReadResult):
        result, records, problems = source, [], []
        where = "the data given"
    else:
        if not os.path.exists(local(source)):  # a bucket's prefix: its mirror (msnb.events.objects)
            raise NothingReadable(f"{source}: no such file or directory")
        result = read_runs(source, verify=verify, labelled=True)  # runs named as msnb check names them
        records, problems = find_global_norm_records(source)
        where = str(source)
    if not len(result.scalars) and not records:
        raise NothingReadable(f"no scalars in {where}")
    said = None
    if not tag_prefix and len(result.scalars):  # the whole job: what the judge says of it stands here too
        from .health_judged import judged  # deferred: the judge imports this module

        said = judged(result)
    evaluation = said.evaluation if said is not None else frozenset()
    report = scan_scalars(result.scalars, tag_prefix=tag_prefix, settings=settings, max_cascade=max_cascade, evaluation=evaluation)
    report.judged = said
    report.global_norm_records = records
    report.problems = [p for p in result.problems if p.severity != "info"] + problems
    report.said_from(result.origins)
    report.memory = memory_of(result)
    if records and not tag_prefix:
        found = ([report.first] if report.first else []) + list(report.cascade) + _spike_anomalies(records)
        total = report.cascade_total + (1 if report.first else 0) + len(_spike_anomalies(records))
        _order(report, found, max_cascade)
        report.cascade_total = total - 1
    return report


def first_anomaly(read_result, **kwargs) -> Anomaly | None:
    """The earliest anomalous point of a run already read, or None: for the smoke verdict and ``msnb check``.

    Args:
        read_result: a :class:`~msnb.events.ReadResult`.
        **kwargs: passed to :func:`scan_scalars` (``tag_prefix``, ``settings``).

    Returns:
        The first :class:`Anomaly`, or None when every series stayed healthy.
    """
    if not len(read_result.scalars):
        return None
    return scan_scalars(read_result.scalars, max_cascade=0, **kwargs).first


def first_anomaly_check(scalars, **kwargs) -> Check | None:
    """For a run whose verdict failed: which rank and which parameter went bad first, when the run recorded per-parameter data.

    A failing loss says *that* a run broke; mindformers' TrainingStateMonitor
    data (``local_norm/<param>``, ``adam_m_norm/...``) and msprobe's per-module
    statistics (``actv/<module>/norm``...) can say *where* it started.  Without such data there is nothing to add and None is returned.
    The check warns (it explains a failure, it does not add one).

    Args:
        scalars: one run's :class:`~msnb.events.ScalarTable`.
        **kwargs: passed to :func:`scan_scalars` (``settings``).

    Returns:
        A ``first_anomaly`` :class:`~msnb.analysis.Check`, or None.
    """
    if not len(scalars) or not any(t.startswith(PER_PARAMETER) or msprobe_site(t) is not None for t in scalars.tags()):
        return None
    report = scan_scalars(scalars, max_cascade=3, **kwargs)
    if report.first is None:
        return Check("first_anomaly", WARN, f"none of {report.series_scanned:,} series (per-parameter data included) left its own history")
    then = "; then " + "; ".join(a.where() for a in report.cascade) if report.cascade else ""
    more = f" and {report.cascade_total - len(report.cascade):,} more series" if report.cascade_total > len(report.cascade) else ""
    return Check("first_anomaly", WARN, f"first anomaly at {report.first.describe()}{then}{more}")
