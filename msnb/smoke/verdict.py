"""The smoke verdict: checks with pass / warn / fail and one line of why each.

Every check reads what the run left on disk (the summary files, the per-step
times, the log), never the child's own opinion of itself.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..events.tags import ALIASES
from ..plot.smoothing import ema

PASS, WARN, FAIL = "pass", "warn", "fail"


@dataclass
class Check:
    name: str
    status: str
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProcessOutcome:
    returncode: int | None
    interrupted: bool
    timed_out: bool
    elapsed_s: float
    log_tail: str


def spearman(x, y) -> float:
    """Spearman's rank correlation (ties get average ranks)."""

    def ranks(a):
        order = np.argsort(a, kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        # average the ranks of ties
        vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        return (sums / counts)[inv]

    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return 0.0
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def loss_series(summary, logs, rank: int):
    """(tag, steps, values) of the loss for *rank*: the densest of the summary's and the logs' series.

    SummaryCollector records every collect_freq steps, LossMonitor prints
    every step; the trend test wants the most points it can get.
    """
    best = (None, np.zeros(0, int), np.zeros(0))
    for source in (summary, logs):
        if source is None:
            continue
        present = set(source.scalars.tags())
        for tag in ALIASES["loss"]:
            if tag not in present:
                continue
            t = source.scalars.where(tag=tag)
            ranks = set(t.rank.tolist())
            pick = rank if rank in ranks else (next(iter(ranks)) if len(ranks) == 1 else None)
            if pick is None:
                continue
            steps, values = t.series(tag, rank=pick)
            steps, first = np.unique(steps, return_index=True)
            if steps.size > best[1].size:
                best = (tag, steps, values[first])
    return best


def check_loss(steps, values, label: str) -> list[Check]:
    out = []
    bad = ~np.isfinite(values)
    if bad.any():
        out.append(Check(f"finite{label}", FAIL, f"loss is {values[bad][0]} from step {int(steps[bad][0])} ({int(bad.sum())} of {values.size} points)"))
        return out
    out.append(Check(f"finite{label}", PASS, f"no NaN or Inf in {values.size} loss points"))
    if values.size < 10:
        out.append(Check(f"loss_falling{label}", WARN, f"only {values.size} loss points: too few to judge a trend"))
        return out
    rho = spearman(steps, values)
    z = rho * math.sqrt(values.size - 1)  # rank correlation is ~N(0, 1/(n-1)) when there is no trend
    smooth = ema(values, 0.6)
    head = float(np.mean(smooth[: max(3, values.size // 10)]))
    tail = float(np.mean(smooth[-max(3, values.size // 10) :]))
    change = (tail - head) / abs(head) if head else float("nan")
    detail = f"Spearman rho {rho:+.2f} over {values.size} points (z {z:+.1f}); smoothed loss {head:.4g} -> {tail:.4g} ({change:+.0%})"
    if tail > 10 * abs(head) or (rho > 0.3 and z > 2.58):
        out.append(Check(f"loss_falling{label}", FAIL, "loss is rising (diverging): " + detail))
    elif rho < -0.3 and z < -2.58:
        out.append(Check(f"loss_falling{label}", PASS, "loss falls: " + detail))
    else:
        out.append(Check(f"loss_falling{label}", WARN, "no clear downward trend: " + detail))
    return out


def check_step_time(times: dict, collect_freq: int, *, builtin_model: bool = False) -> list[Check]:
    """Stability after compilation, and the monitoring overhead from steps with and without collection.

    Stability is judged on the steps that did not collect (collecting steps are
    slower by design, and are what the overhead check measures): unstable when
    the 90th percentile is over twice the median and over 5 ms above it.
    """
    out = []
    for rank, (_steps, ms, collected) in sorted(times.items()):
        label = "" if len(times) == 1 else f"[rank {rank}]"
        if ms.size < 5:
            out.append(Check(f"step_time{label}", WARN, f"only {ms.size} timed steps"))
            continue
        skip = max(3, ms.size // 20)  # the first steps compile
        body, body_collected = ms[skip:], collected[skip:]
        plain = body[~body_collected] if (~body_collected).sum() >= 5 else body
        med = float(np.median(plain))
        p90 = float(np.percentile(plain, 90))
        unstable = p90 > 2 * med and p90 - med > 5.0
        detail = f"median {med:.2f} ms, p90 {p90:.2f} ms after the first {skip} steps (first step {ms[0]:.0f} ms: compilation and start-up)"
        out.append(
            Check(f"step_time{label}", WARN if unstable else PASS, (f"unstable: p90 is {p90 / med:.1f}x the median; " if unstable else "stable: ") + detail)
        )
        if collect_freq > 1 and body_collected.any() and (~body_collected).any():
            with_c = float(np.median(body[body_collected]))
            without = float(np.median(body[~body_collected]))
            extra = max(0.0, with_c - without)
            overhead = extra / collect_freq / without if without > 0 else float("nan")
            detail = (
                f"a collecting step takes {with_c:.2f} ms vs {without:.2f} ms (+{extra:.2f} ms); every {collect_freq} steps that is {overhead:.1%} of step time"
            )
            if builtin_model:
                out.append(Check(f"monitor_overhead{label}", PASS, detail + " (built-in model: reported, not judged; a real model's steps cost more)"))
            else:
                out.append(Check(f"monitor_overhead{label}", PASS if overhead < 0.05 else WARN, detail + ("" if overhead < 0.05 else ": raise collect_freq")))
        elif label == "" or rank == min(times):
            out.append(Check(f"monitor_overhead{label}", PASS, f"collect_freq {collect_freq}: every step collects, no step to compare with"))
    return out


def check_disk(summary_bytes: int, trained_steps: int, median_ms: float | None, *, builtin_model: bool = False) -> Check:
    """Summary growth per 1,000 steps and per day at the measured step time.

    With msnb's built-in model the steps take a millisecond, so the daily
    figure says little about a real model: it is reported, not judged.
    """
    if not trained_steps or not median_ms:
        return Check("disk_per_day", WARN, "cannot project: no timed steps")
    per_step = summary_bytes / trained_steps
    gb = per_step * 86400 / (median_ms / 1000) / 1e9
    detail = (
        f"{summary_bytes / 1e6:.2f} MB for {trained_steps} steps ({per_step * 1000 / 1e6:.2f} MB per 1,000 steps); "
        f"at {median_ms:.1f} ms a step that is {gb:.2f} GB a day"
    )
    if builtin_model:
        return Check("disk_per_day", PASS, detail + " (built-in model: a real model's slower steps write less a day)")
    return Check("disk_per_day", PASS if gb < 20 else WARN, detail if gb < 20 else detail + ": raise collect_freq")
