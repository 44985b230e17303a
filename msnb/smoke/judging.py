"""The smoke verdict assembled: process, summaries, tags, loss, step time, disk, config lint.

The rules that judge a loss curve live in :mod:`msnb.smoke.verdict` (and the
analysis layer below it); this module decides which of them a smoke run gets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analysis import rank_divergence
from ..analysis.health import first_anomaly_check
from ..words import count, plural
from .verdict import FAIL, PASS, WARN, Check, check_disk, check_loss, check_step_time, loss_series

_LOSS_CHECKS = ("finite", "loss_falling", "rank_divergence")


def _first_anomaly(summary_read, everything):
    """Where a failed loss started (rank, parameter), from whichever source recorded per-parameter data."""
    for source in (summary_read, everything):
        if source is not None and (where := first_anomaly_check(source.scalars)) is not None:
            return where
    return None


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
) -> list:
    """The smoke verdict: every check, from what the run left on disk and how its process ended.

    A device requested but not usable fails ``device``.  A run stopped from
    outside (Ctrl-C, ``timeout``, a stop signal named by *stopped_by*) fails
    ``process`` only: the record its writer was cut off in is expected, so it
    does not also fail ``summaries``.
    """
    checks = [Check("device", PASS if device_usable else FAIL, device_reason)]
    if spec.get("mindformers_model"):
        checks.append(
            Check(
                "model",
                WARN,
                f"the YAML describes {spec['mindformers_model']}; msnb does not run a mindformers Trainer in smoke runs yet "
                "(its models need Ascend: they fail on the CPU backend), so the YAML's monitor_config was tested on msnb's "
                "built-in network",
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
    cut_note = f"; the run was stopped, so {count(len(cut), 'last record')} were cut short (not counted)" if cut else ""
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

    for rank in expected_ranks:
        label = "" if rank is None else f"[rank {rank}]"
        tag, steps, values, nonfinite = loss_series(summary_read, everything, 0 if rank is None else rank)
        if tag is None:
            if outcome.returncode == 0 or trained:
                checks.append(Check(f"loss_falling{label}", FAIL, "no loss was recorded"))
            continue
        checks.extend(check_loss(steps, values, label, nonfinite, scalars=summary_read.scalars))
    if workers > 1 and loss_tag is not None:
        flags = [f for f in rank_divergence(summary_read.scalars, loss_tag) if f.rank >= 0]
        if flags:
            checks.append(Check("rank_divergence", FAIL, "; ".join(f.reason for f in flags)))
        else:
            checks.append(Check("rank_divergence", PASS, f"{workers} ranks follow one trend within the noise between them"))
    if any(c.status == FAIL and c.name.startswith(_LOSS_CHECKS) for c in checks):
        where = _first_anomaly(summary_read, everything)
        if where is not None:
            checks.append(where)

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
