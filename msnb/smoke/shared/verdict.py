"""The smoke verdict: checks with pass / warn / fail and one line of why each.

Every check reads what the run left on disk (the summary files, the per-step
times, the log), never the child's own opinion of itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analysis import DEFAULT_RULES, FAIL, PASS, SKIP, WARN, Check, spearman, step_time_stability
from ...analysis.judge import judge_run
from ...events.tables import distinct
from ...events.tags import resolve
from ...words import count

__all__ = ["PASS", "WARN", "FAIL", "SKIP", "Check", "ProcessOutcome", "spearman", "judge_loss", "check_step_time", "check_disk"]


@dataclass
class ProcessOutcome:
    returncode: int | None
    interrupted: bool
    timed_out: bool
    elapsed_s: float
    log_tail: str


def judge_loss(sources, *, context=None, rules=DEFAULT_RULES) -> tuple[list[Check], list]:
    """The judge's checks of a smoke run's loss, and its flags: :func:`msnb.analysis.judge.judge_run`, nothing else.

    The loss is judged where it was recorded for the most ranks, on the most steps
    (SummaryCollector records every collect_freq steps, LossMonitor and
    MFLossMonitor print every step). The judge's ``tags``, ``steps`` and
    ``step_time`` checks are left to the smoke's own (it knows which tags it asked
    for, why steps are strided, and times every step itself).

    Args:
        sources: ScalarTables (a run's summaries, its logs...), None entries ignored.
        context: the run's other scalars (learning rate, weight and gradient norms), looked at only to name why
            a loss never fell.
        rules: the judge's parameters.

    Returns:
        (checks, flags); no checks when no source recorded a loss.
    """
    best = None
    for table in sources:
        if table is None:
            continue
        tag = resolve("loss", set(table.tags()))
        if tag is None:
            continue
        rows = table.where(tag=tag)
        runs = sorted(distinct(rows.run))
        for run in runs:
            mine = rows.take(rows.run == run) if len(runs) > 1 else rows
            # several ranks first (a log that mixes the workers' lines under no rank is no rank's series), then points:
            # one rank's summary (every collect_freq steps) never beats its log (every step, the NaN step included)
            n = (max(1, len({int(r) for r in distinct(mine.rank) if int(r) >= 0})), len(mine))
            if best is None or n > best[0]:
                best = (n, table, run)
    if best is None:
        return [], []
    _n, table, run = best
    verdict = judge_run(table, run, tag="loss", rules=rules, context=context)
    # tags, steps and step times are the smoke's own checks (it knows what it asked for and times every step itself)
    return [c for c in verdict.checks if c.name not in ("tags", "steps") and not c.name.startswith("step_time")], verdict.flags


def check_step_time(times: dict, collect_freq: int, *, builtin_model: bool = False, busy: str | None = None) -> list[Check]:
    """Stalls and slowing down after compilation, and the monitoring overhead from steps with and without collection.

    Step time is judged on the steps that did not collect (collecting steps are
    slower by design, and are what the overhead check measures) by
    :func:`msnb.analysis.step_time_stability`: a warning only on a stall or a
    slowdown.  *busy* (the machine lacked CPUs while the run trained, see
    :mod:`msnb.smoke.run.machine_load`) makes such a warning a skip that says so:
    other programs' work is nothing the user's run can act on.
    """
    out = []
    for rank, (_steps, ms, collected) in sorted(times.items()):
        label = "" if len(times) == 1 else f"[rank {rank}]"
        stability = step_time_stability(ms, label, exclude=collected)
        if busy and stability.status == WARN and ms.size >= 5:
            stability = Check(stability.name, SKIP, f"not judged: {busy}, so the slow steps may be its doing ({stability.detail})")
        out.append(stability)
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
