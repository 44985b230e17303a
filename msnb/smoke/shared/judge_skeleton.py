"""The checks both smokes make, made once: steps trained, device, process, loss recorded, step time, disk, config lint.

The built-in smoke (:mod:`msnb.smoke.builtin.judging`) and the mindformers smoke
(:mod:`msnb.smoke.mindformers.judging`) read different things (summaries and
tags; each callback's files), but how the process ended, what the run costs on
disk and what the config lint found are judged by one rule for both: a smoke
only says its own words (:class:`Wording`), never its own status.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...words import count
from .verdict import FAIL, PASS, WARN, Check, check_disk, check_step_time, judge_loss


@dataclass(frozen=True)
class Wording:
    """What a smoke says in the shared checks; words only, never a status."""

    stopped: str  # after "stopped by SIGTERM after 3 steps; "
    trained: str  # after "trained 40 steps in 12.0 s "
    no_loss: str  # the failing loss_falling check when nothing recorded a loss
    clean_lint: str  # the passing config_lint check


BUILTIN = Wording(
    stopped="the child and its workers were stopped",
    trained="(MindSpore's start included)",
    no_loss="no loss was recorded",
    clean_lint="no findings in the monitoring settings",
)
MINDFORMERS = Wording(
    stopped="the training was stopped",
    trained="through mindformers' Trainer (start and compilation included)",
    no_loss="no loss was recorded by any callback",
    clean_lint="no findings in the config",
)


def steps_trained(times: dict) -> int:
    """The last step any rank timed (the child's ``step_times*.csv``): how far the run got."""
    return max((int(t[0].max()) for t in times.values() if t[0].size), default=0)


def was_stopped(outcome, stopped_by: str | None) -> bool:
    """Stopped from outside (Ctrl-C, ``--timeout``, a stop signal): the run did not end by itself."""
    return outcome.interrupted or outcome.timed_out or stopped_by is not None


def check_device(usable: bool, reason: str) -> Check:
    """A device requested but not usable fails."""
    return Check("device", PASS if usable else FAIL, reason)


def check_process(outcome, trained: int, stopped_by: str | None, wording: Wording, *, not_rehearsed: str | None = None, failed: str | None = None) -> Check:
    """How the training process ended.

    Args:
        outcome: the :class:`~msnb.smoke.shared.verdict.ProcessOutcome`.
        trained: :func:`steps_trained`.
        stopped_by: the stop signal's name, when one ended the run.
        wording: the smoke's words.
        not_rehearsed: why msnb could not rehearse the run (its own limit): a warning, never the config's failure.
        failed: what follows the step count when the process failed (default: ``": "`` and the log's last line).
    """
    steps = count(trained, "step")
    if stopped_by is not None:
        return Check("process", FAIL, f"stopped by {stopped_by} after {steps}; {wording.stopped}")
    if outcome.interrupted:
        return Check("process", FAIL, f"interrupted by the user after {steps}; {wording.stopped}")
    if outcome.timed_out:
        return Check("process", FAIL, f"no end after {outcome.elapsed_s:.0f} s ({steps}): stopped by --timeout")
    if not_rehearsed is not None:
        return Check("process", WARN, f"not rehearsed after {steps}: {not_rehearsed}")
    if outcome.returncode != 0:
        if failed is None:
            failed = ": " + (outcome.log_tail.strip().splitlines()[-1] if outcome.log_tail.strip() else "no output")
        return Check("process", FAIL, f"training exited with code {outcome.returncode} after {steps}{failed}")
    return Check("process", PASS, f"trained {steps} in {outcome.elapsed_s:.1f} s {wording.trained}")


def check_loss(sources, context, outcome, trained: int, wording: Wording, flags_out: list | None = None) -> list[Check]:
    """The judge's loss checks (:func:`~msnb.smoke.shared.verdict.judge_loss`); a run that trained but recorded no loss fails."""
    checks, flags = judge_loss(sources, context=context)
    if flags_out is not None:
        flags_out.extend(flags)
    if not checks and (outcome.returncode == 0 or trained):
        return [Check("loss_falling", FAIL, wording.no_loss)]
    return checks


def check_cost(times: dict, collect_freq: int, written: list, trained: int, workers: int, *, builtin_model: bool, busy: str | None = None) -> list[Check]:
    """Step-time stability, monitoring overhead and disk per day.

    Args:
        times: rank -> (steps, ms, collected, wall) from the child's step times.
        collect_freq: the summary collector's frequency.
        written: the folders whose files count as what monitoring writes.
        trained: :func:`steps_trained`.
        workers: the ranks that each wrote that much.
        builtin_model: a smoke-sized model: overhead and disk are reported, not judged.
        busy: why the step times may be other programs' doing (:mod:`msnb.smoke.run.machine_load`), or None.
    """
    checks = check_step_time({r: t[:3] for r, t in times.items()}, collect_freq, builtin_model=builtin_model, busy=busy)
    medians = [float(np.median(t[1][max(3, t[1].size // 20) :])) for t in times.values() if t[1].size > 5]
    size = sum(p.stat().st_size for root in written if Path(root).exists() for p in Path(root).rglob("*") if p.is_file())
    checks.append(check_disk(size, trained * max(1, workers), float(np.median(medians)) if medians else None, builtin_model=builtin_model))
    return checks


def check_config_lint(findings: list, wording: Wording) -> Check:
    """Errors are predicted startup crashes of the real run (FAIL: passing them would be a false pass); warnings deserve a look (WARN)."""
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    if errors:
        return Check("config_lint", FAIL, "; ".join(f"{f.key}: {f.message}" if f.key else f.message for f in errors + warnings))
    if warnings:
        return Check("config_lint", WARN, "; ".join(f"{f.key}: {f.message}" if f.key else f.message for f in warnings))
    return Check("config_lint", PASS, wording.clean_lint)
