"""The smoke verdict assembled: process, summaries, tags, loss, step time, disk, config lint.

The loss is judged by msnb's one judge (:func:`msnb.analysis.judge.judge_run`, through
:func:`msnb.smoke.verdict.judge_loss`); this module adds what only a smoke run can check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..words import count, plural
from .verdict import FAIL, PASS, WARN, Check, check_disk, check_step_time, judge_loss


def judge_smoke(
    outcome,
    summary_read,
    everything,
    times,
    spec,
    device_name,
    device_reason,
    findings,
    summary: Path,
    workers: int,
    *,
    device_usable: bool = True,
    stopped_by: str | None = None,
    flags_out: list | None = None,
) -> list:
    """The smoke verdict: every check, from what the run left on disk and how its process ended.

    A device requested but not usable fails ``device``.  A run stopped from
    outside (Ctrl-C, ``timeout``, a stop signal named by *stopped_by*) fails
    ``process`` only: the record its writer was cut off in is expected, so it
    does not also fail ``summaries``.  *flags_out*, where given, receives the judge's flags on the loss
    (rank, step, reason), the very ones behind its ``finite``, ``loss_spikes`` and ``rank_divergence`` checks.
    """
    checks = [Check("device", PASS if device_usable else FAIL, device_reason)]
    if spec.get("mindformers_model"):
        checks.append(
            Check(
                "model",
                WARN,
                f"the YAML describes {spec['mindformers_model']} but has no model.model_config (and a trainer, run_mode or "
                "runner_config), so it is not a mindformers run config the smoke can train; its monitor_config was tested on "
                "msnb's built-in network",
            )
        )
    trained = max((int(t[0].max()) for t in times.values() if t[0].size), default=0)
    stopped = outcome.interrupted or outcome.timed_out or stopped_by is not None
    if stopped_by is not None:
        checks.append(Check("process", FAIL, f"stopped by {stopped_by} after {count(trained, 'step')}; the child and its workers were stopped"))
    elif outcome.interrupted:
        checks.append(Check("process", FAIL, f"interrupted by the user after {count(trained, 'step')}; the child and its workers were stopped"))
    elif outcome.timed_out:
        checks.append(Check("process", FAIL, f"no end after {outcome.elapsed_s:.0f} s ({count(trained, 'step')}): stopped by --timeout"))
    elif outcome.returncode != 0:
        last = outcome.log_tail.strip().splitlines()[-1] if outcome.log_tail.strip() else "no output"
        checks.append(Check("process", FAIL, f"training exited with code {outcome.returncode} after {count(trained, 'step')}: {last}"))
    else:
        checks.append(Check("process", PASS, f"trained {count(trained, 'step')} in {outcome.elapsed_s:.1f} s (MindSpore's start included)"))

    expected_ranks = list(range(workers)) if workers > 1 else [None]
    ms_files = [f for f in summary_read.files if f["kind"] == "ms_summary"]
    problems = [p for p in summary_read.problems if p.severity != "info"]
    cut = [p for p in problems if stopped and p.kind == "truncated"]  # the writer was stopped mid-record: expected
    problems = [p for p in problems if p not in cut]
    cut_note = f"; the run was stopped, so {count(len(cut), 'last record')} {'was' if len(cut) == 1 else 'were'} cut short (not counted)" if cut else ""
    if not ms_files:
        checks.append(Check("summaries", FAIL, f"no summary file was written under {summary}"))
    elif problems:
        checks.append(Check("summaries", FAIL, f"{count(len(problems), 'problem')} reading the summaries: {problems[0]}"))
    else:
        ranks_found = sorted({f["rank"] for f in ms_files})
        missing = [r for r in expected_ranks if r is not None and not any(f["rank"] == r for f in ms_files)]
        if missing:
            checks.append(Check("summaries", FAIL, f"no summary for {plural(len(missing), 'rank')} {missing} (found {ranks_found})"))
        else:
            records = sum(f["records"] for f in ms_files)
            checks.append(
                Check("summaries", PASS, f"{count(len(ms_files), 'summary file')}, {count(records, 'record')}, CRC-clean, readable without MindSpore{cut_note}")
            )

    tags = set(summary_read.scalars.tags())
    loss_tag = next((t for t in ("loss/auto", "loss") if t in tags), None)
    wanted = ["loss/auto"] + (["lr"] if not spec.get("code") and not spec.get("module") else [])
    missing_tags = [t for t in wanted if t not in tags]
    if ms_files:
        if loss_tag is None:
            checks.append(Check("tags", FAIL, f"no loss in the summary (tags: {', '.join(sorted(tags)) or 'none'})"))
        elif missing_tags:
            checks.append(Check("tags", WARN, f"missing {', '.join(missing_tags)} (present: {', '.join(sorted(tags))})"))
        else:
            checks.append(
                Check(
                    "tags",
                    PASS,
                    f"{', '.join(sorted(tags))}"
                    + (f"; histograms: {', '.join(sorted(set(summary_read.histograms.tag.tolist())))}" if len(summary_read.histograms) else ""),
                )
            )

    loss_checks, flags = judge_loss([summary_read.scalars, everything.scalars if everything is not None else None], context=summary_read.scalars)
    if flags_out is not None:
        flags_out.extend(flags)
    if not loss_checks and (outcome.returncode == 0 or trained):
        checks.append(Check("loss_falling", FAIL, "no loss was recorded"))
    checks.extend(loss_checks)

    collect_freq = int(spec.get("collect_freq") or 1)
    builtin = not spec.get("code") and not spec.get("module")
    checks.extend(check_step_time({r: t[:3] for r, t in times.items()}, collect_freq, builtin_model=builtin))
    medians = [float(np.median(t[1][max(3, t[1].size // 20) :])) for t in times.values() if t[1].size > 5]
    size = sum(p.stat().st_size for p in summary.rglob("*") if p.is_file()) if summary.exists() else 0
    checks.append(check_disk(size, trained * max(1, workers), float(np.median(medians)) if medians else None, builtin_model=builtin))

    warnings = [f for f in findings if f.severity in ("warning", "error")]
    if warnings:
        checks.append(Check("config_lint", WARN, "; ".join(f"{f.key}: {f.message}" for f in warnings)))
    else:
        checks.append(Check("config_lint", PASS, "no findings in the monitoring settings"))
    return checks
