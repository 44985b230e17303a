"""The smoke verdict: checks with pass / warn / fail and one line of why each.

Every check reads what the run left on disk (the summary files, the per-step
times, the log), never the child's own opinion of itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis import DEFAULT_RULES, FAIL, PASS, SKIP, WARN, Check, find_nonfinite, likely_cause, loss_trend, resolve_restarts, spearman, step_time_stability
from ..events.tags import ALIASES
from ..words import count

__all__ = ["PASS", "WARN", "FAIL", "SKIP", "Check", "ProcessOutcome", "spearman", "loss_series", "check_loss", "check_step_time", "check_disk"]


@dataclass
class ProcessOutcome:
    returncode: int | None
    interrupted: bool
    timed_out: bool
    elapsed_s: float
    log_tail: str


def loss_series(summary, logs, rank: int):
    """(tag, steps, values, nonfinite) of the loss for *rank*: the densest of the summary's and the logs' series.

    SummaryCollector records every collect_freq steps, LossMonitor prints
    every step; the trend test wants the most points it can get.  Restarts
    are resolved as the judge does (:func:`msnb.analysis.resolve_restarts`);
    ``nonfinite`` is the first NaN/Inf *record* of that series (from every
    record, before replacing), or None.
    """
    best = (None, np.zeros(0, int), np.zeros(0), None)
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
            raw_steps, raw_values = t.series(tag, rank=pick)
            steps, values, _restarts, _replaced = resolve_restarts(raw_steps, raw_values)
            if steps.size > best[1].size:
                bad = find_nonfinite(t.where(rank=pick), [tag])
                best = (tag, steps, values, bad[0] if bad else None)
    return best


def check_loss(steps, values, label: str, nonfinite=None, rules=DEFAULT_RULES, scalars=None) -> list[Check]:
    """``finite`` and ``loss_falling`` for one rank's loss (the judge's rules; see :mod:`msnb.analysis`).

    Args:
        steps: the loss's steps (restarts resolved).
        values: the loss at those steps.
        label: check-name suffix (``[rank 1]``).
        nonfinite: the first non-finite record (a :class:`~msnb.analysis.NonFinite`), found on every record.
        rules: the judge's parameters.
        scalars: the run's other scalars (a ScalarTable: learning rate, weight and gradient norms), so a loss
            that never fell names its likely cause (:func:`msnb.analysis.likely_cause`); None: no cause named.

    Returns:
        The checks; a non-finite loss skips the trend test.
    """
    values = np.asarray(values, float)
    bad = ~np.isfinite(values)
    if nonfinite is not None:
        return [
            Check(f"finite{label}", FAIL, f"loss is {nonfinite.value} from step {nonfinite.step} ({nonfinite.count} of {count(nonfinite.records, 'record')})")
        ]
    if bad.any():
        return [Check(f"finite{label}", FAIL, f"loss is {values[bad][0]} from step {int(steps[bad][0])} ({int(bad.sum())} of {values.size} points)")]
    cause = likely_cause(scalars) if scalars is not None else None
    return [Check(f"finite{label}", PASS, f"no NaN or Inf in {values.size} loss points"), loss_trend(steps, values, label, rules, cause=cause)]


def check_step_time(times: dict, collect_freq: int, *, builtin_model: bool = False) -> list[Check]:
    """Stability after compilation, and the monitoring overhead from steps with and without collection.

    Stability is judged on the steps that did not collect (collecting steps are
    slower by design, and are what the overhead check measures): unstable when
    the 90th percentile is over twice the median and over 5 ms above it.
    """
    out = []
    for rank, (_steps, ms, collected) in sorted(times.items()):
        label = "" if len(times) == 1 else f"[rank {rank}]"
        out.append(step_time_stability(ms, label, exclude=collected))
        if ms.size < 5:
            continue
        skip = max(3, ms.size // 20)  # the first steps compile
        body, body_collected = ms[skip:], collected[skip:]
        if collect_freq > 1 and body_collected.any() and (~body_collected).any():
            with_c = float(np.median(body[body_collected]))
            without = float(np.median(body[~body_collected]))
            extra = with_c - without
            if extra <= 0:
                detail = (
                    f"collecting steps take {with_c:.2f} ms, the others {without:.2f} ms (medians): "
                    f"no measurable overhead at collect_freq {collect_freq} (step-to-step noise is larger)"
                )
                out.append(Check(f"monitor_overhead{label}", PASS, detail))
                continue
            overhead = extra / collect_freq / without if without > 0 else float("nan")
            detail = (
                f"a collecting step takes {with_c:.2f} ms vs {without:.2f} ms for the others (+{extra:.2f} ms); "
                f"one step in {collect_freq} collects, so monitoring costs {overhead:.1%} of step time"
            )
            if builtin_model:
                out.append(Check(f"monitor_overhead{label}", SKIP, detail + " (not judged: a smoke-sized model; a full-size model's steps cost more)"))
            else:
                out.append(Check(f"monitor_overhead{label}", PASS if overhead < 0.05 else WARN, detail + ("" if overhead < 0.05 else ": raise collect_freq")))
        elif label == "" or rank == min(times):
            out.append(Check(f"monitor_overhead{label}", SKIP, f"not judged: collect_freq {collect_freq}, every step collects, no step to compare with"))
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
        f"{summary_bytes / 1e6:.2f} MB for {count(trained_steps, 'step')} ({per_step * 1000 / 1e6:.2f} MB per 1,000 steps); "
        f"at {median_ms:.1f} ms a step that is {gb:.2f} GB a day"
    )
    if builtin_model:
        return Check("disk_per_day", SKIP, detail + " (not judged: a smoke-sized model; a full-size model's slower steps write less a day)")
    return Check("disk_per_day", PASS if gb < 20 else WARN, detail if gb < 20 else detail + ": raise collect_freq")
