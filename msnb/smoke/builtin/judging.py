"""The smoke verdict assembled: process, summaries, tags, loss, step time, disk, config lint.

The loss is judged by msnb's one judge (:func:`msnb.analysis.judge.judge_run`, through
:func:`msnb.smoke.shared.verdict.judge_loss`); device, process, loss recorded, step time, disk and config lint are
the checks both smokes share (:mod:`msnb.smoke.shared.judge_skeleton`); this module adds the summaries and tags.
"""

from __future__ import annotations

from pathlib import Path

from ...words import count, plural
from ..shared.judge_skeleton import BUILTIN, check_config_lint, check_cost, check_device, check_loss, check_process, steps_trained, was_stopped
from ..shared.verdict import FAIL, PASS, WARN, Check


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
    busy: str | None = None,
) -> list:
    """The smoke verdict: every check, from what the run left on disk and how its process ended.

    A device requested but not usable fails ``device``.  A run stopped from
    outside (Ctrl-C, ``timeout``, a stop signal named by *stopped_by*) fails
    ``process`` only: the record its writer was cut off in is expected, so it
    does not also fail ``summaries``.  *flags_out*, where given, receives the judge's flags on the loss
    (rank, step, reason), the very ones behind its ``finite``, ``loss_spikes`` and ``rank_divergence`` checks.
    *busy* says why the step times may be other programs' doing (:mod:`msnb.smoke.run.machine_load`).
    """
    checks = [check_device(device_usable, device_reason)]
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
    trained = steps_trained(times)
    stopped = was_stopped(outcome, stopped_by)
    checks.append(check_process(outcome, trained, stopped_by, BUILTIN))

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

    checks.extend(
        check_loss([summary_read.scalars, everything.scalars if everything is not None else None], summary_read.scalars, outcome, trained, BUILTIN, flags_out)
    )
    builtin = not spec.get("code") and not spec.get("module")
    checks.extend(check_cost(times, int(spec.get("collect_freq") or 1), [summary], trained, workers, builtin_model=builtin, busy=busy))
    checks.append(check_config_lint(findings, BUILTIN))
    return checks
