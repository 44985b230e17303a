"""The verdict of a smoke run of a mindformers config: what ran, what each callback wrote, and the usual judge over it.

Read from the scratch directory after the child ended, never from the
child's opinion of itself: MFLossMonitor's lines in ``output/log/rank_N/info.log``,
the TensorBoard files under ``output/tensorboard/rank_N``, TrainingStateMonitor's
per-parameter tags (in both), SummaryMonitor's summary files and
CheckpointMonitor's checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...words import count, plural
from ..shared.judge_skeleton import MINDFORMERS, check_config_lint, check_cost, check_device, check_loss, check_process, steps_trained, was_stopped
from ..shared.verdict import FAIL, PASS, SKIP, WARN, Check
from .plan import change_lines

# what TrainingStateMonitor writes for each monitor_config format (mindformers 1.9), as tag prefixes
FORMAT_TAGS = {
    "optimizer_state_format": ("adam_m_norm/", "adam_v_norm/"),
    "weight_state_format": ("weight_norm",),
    "device_local_loss_format": ("device_accum_local_",),
    "local_loss_format": ("local_",),
    "local_norm_format": ("local_norm/",),
    "device_local_norm_format": ("device_local_norm",),
    "max_attention_logit_format": ("max_attention_logit/",),
}
CHECKPOINT_SUFFIXES = (".ckpt", ".safetensors")


def _runs(scalars, prefix: str):
    runs = sorted({r for r in set(scalars.run.tolist()) if r == prefix or r.startswith(prefix + "/")})
    return scalars.where(run=runs) if runs else scalars.take(np.zeros(len(scalars), dtype=bool))


def log_scalars(scalars):
    """The rows of *scalars* read from mindformers' log files (``output/log/...``): MFLossMonitor's and TrainingStateMonitor's lines."""
    return _runs(scalars, "output/log")


def tensorboard_scalars(scalars):
    """The rows of *scalars* read from the TensorBoard files mindformers wrote (``output/tensorboard/rank_N``)."""
    return _runs(scalars, "output/tensorboard")


def _has(tags: set, prefix: str) -> int:
    return sum(1 for t in tags if t == prefix or t.startswith(prefix))


def _state_monitor(formats: dict, log_tags: set, tb_tags: set, tensorboard: bool) -> tuple[str, list]:
    """What TrainingStateMonitor wrote of each format it was asked for (one phrase a format), and what is missing."""
    said, missing = [], []
    for key, where in formats.items():
        prefixes = FORMAT_TAGS.get(key)
        if prefixes is None:
            continue
        places = [w for w in (where if isinstance(where, list) else [where]) if w in ("log", "tensorboard")]
        counts = {}
        for place in places:
            if place == "tensorboard" and not tensorboard:
                missing.append(f"{key} asks for tensorboard but the config has no tensorboard section")
                continue
            found = sum(_has(log_tags if place == "log" else tb_tags, p) for p in prefixes)
            if found:
                counts[place] = found
            else:
                missing.append(f"{key} wrote nothing to the {place}")
        if counts:
            names = "/".join(p.rstrip("/_") for p in prefixes)
            per_place = ", ".join(f"{n} in {'the log' if place == 'log' else 'TensorBoard'}" for place, n in counts.items())
            said.append(f"{key}: {names} tags, {per_place}")
    return ", ".join(said), missing


def check_callbacks(plan, everything, summary_read, workdir: Path, summary: Path, trained: int) -> Check:
    """The ``callbacks`` check: each callback the config runs, and what it wrote (or that it wrote nothing)."""
    logs = log_scalars(everything.scalars)
    tb = tensorboard_scalars(everything.scalars)
    log_tags, tb_tags = set(logs.tags()), set(tb.tags())
    lines, missing = [], []
    for name in plan.callbacks:
        if name == "MFLossMonitor":
            loss_rows = logs.where(tag="loss")
            n = len(loss_rows)
            present = [t for t in ("loss", "lr", "global_norm") if t in log_tags]
            per_rank = {r: int(np.count_nonzero(loss_rows.rank == r)) for r in range(plan.workers)} if plan.workers > 1 else {}
            silent = [r for r, lines in per_rank.items() if not lines]
            if silent:
                missing.append(f"MFLossMonitor wrote no loss line for {plural(len(silent), 'rank')} {silent}")
            if n:
                split = f" ({', '.join(f'rank {r}: {c}' for r, c in per_rank.items())})" if per_rank else ""
                lines.append(f"MFLossMonitor: {count(n, 'line')}{split} with {', '.join(present)}")
                if "global_norm" not in log_tags or "lr" not in log_tags:
                    missing.append("MFLossMonitor's lines carry no " + " or ".join(t for t in ("lr", "global_norm") if t not in log_tags))
            else:
                missing.append("MFLossMonitor wrote no loss line to output/log")
        elif name == "TrainingStateMonitor":
            said, lacking = _state_monitor(plan.monitor_formats, log_tags, tb_tags, plan.tensorboard)
            if not said and plan.tensordump_off and not plan.monitor_formats:
                said = f"only TensorDump formats asked for ({', '.join(plan.tensordump_off)}), turned off on CPU: nothing to read here"
            lines.append("TrainingStateMonitor: " + (said or "no *_format asked for (monitor_config turns none on)"))
            missing += lacking
        elif name == "SummaryMonitor":
            files = [f for f in summary_read.files if f["kind"] == "ms_summary"]
            bad = [p for p in summary_read.problems if p.severity != "info"]
            if not files:
                missing.append(f"SummaryMonitor wrote no summary file under {summary}")
            elif bad:
                missing.append(f"SummaryMonitor's summaries have {count(len(bad), 'problem')}: {bad[0]}")
            else:
                records = sum(f["records"] for f in files)
                tags = sorted(set(summary_read.scalars.tags()))
                hist = len(set(summary_read.histograms.tag.tolist())) if len(summary_read.histograms) else 0
                lines.append(
                    f"SummaryMonitor: {count(len(files), 'summary file')}, {count(records, 'record')}, CRC-clean ({', '.join(tags[:4]) or 'no scalars'}; {count(hist, 'histogram tag')})"
                )
        elif name == "CheckpointMonitor":
            ckpts = sorted(p for p in (workdir / "output" / "checkpoint").rglob("*") if p.is_file() and p.suffix in CHECKPOINT_SUFFIXES)
            if ckpts:
                lines.append(f"CheckpointMonitor: {count(len(ckpts), 'checkpoint')} ({ckpts[-1].name})")
            elif trained:
                missing.append(f"CheckpointMonitor saved no checkpoint in {count(trained, 'step')}")
        else:
            lines.append(f"{name}: ran (msnb does not read what it writes)")
    if plan.tensorboard:
        ranks = sorted(set(tb.rank.tolist()))
        if ranks:
            per_rank = ", ".join(f"rank {r}: {len(set(tb.where(rank=r).tags()))} scalar tags" for r in ranks)
            lines.append(f"TensorBoard: {per_rank}" + ("" if "loss" in tb_tags else " (no loss tag)"))
            if "loss" not in tb_tags:
                missing.append("the TensorBoard files hold no loss")
        else:
            missing.append("the config's tensorboard section wrote no readable event file under output/tensorboard")
    if not lines and not missing:
        return Check("callbacks", WARN, "the config runs none of the callbacks that write what a run is judged on (MFLossMonitor, TensorBoard, ...)")
    if missing:
        return Check("callbacks", FAIL if trained else WARN, "missing: " + "; ".join(missing) + (" | wrote: " + "; ".join(lines) if lines else ""))
    return Check("callbacks", PASS, "; ".join(lines))


def _failure_words(failures: list) -> str:
    """Each failing rank's own line (one rank: the line alone): never a scheduler's timeout in place of the ranks' errors."""
    if len(failures) == 1:
        f = failures[0]
        return f"while {f.get('stage', '?')}: {f.get('line', '?')}"
    return "; ".join(f"rank {f.get('rank', '?')} while {f.get('stage', '?')}: {f.get('line', '?')}" for f in failures)


def not_rehearsed_reason(failures: list) -> str | None:
    """Why msnb could not rehearse this run (its own code failed, or a kernel has no CPU path), or None when the run is at fault."""
    ours = [f for f in failures if f.get("cause") in ("msnb", "kernel")]
    if not ours or len(ours) != len(failures):
        return None
    kernels = sorted({f.get("kernel") or "an operator" for f in ours if f.get("cause") == "kernel"})
    if kernels:
        return (
            f"{', '.join(kernels)} has no CPU kernel and msnb has no CPU replacement for it ({_failure_words(ours)}); "
            "this config's model runs on Ascend: run the smoke there"
        )
    return f"msnb's own code failed ({_failure_words(ours)}): a bug in msnb, not in your config; the log is kept, please report it"


def _process(outcome, trained: int, stopped_by: str | None, failures: list) -> Check:
    failed = " " + (_failure_words(failures) if failures else (outcome.log_tail.strip().splitlines()[-1] if outcome.log_tail.strip() else "no output"))
    return check_process(outcome, trained, stopped_by, MINDFORMERS, not_rehearsed=not_rehearsed_reason(failures), failed=failed.replace("  ", " "))


def _model(plan, trained: int, returncode, failures: list) -> Check:
    """What ran: PASS only once the model trained; an unregistered model type or a model mindformers could not build fails."""
    if trained or returncode == 0:
        return Check("model", PASS, plan.describe())
    built = [f for f in failures if str(f.get("stage", "")).startswith(("checking the model type", "building the model"))]
    if built and all(f.get("cause") == "config" for f in built):
        return Check("model", FAIL, f"{plan.describe().replace(', through', ' could not be built through')}: {built[0].get('line', '?')}")
    return Check("model", WARN, f"{plan.describe()}; it did not train here")


def _preflight_checks(said: dict | None) -> list:
    """The pre-flight's verdict: FAIL on a finding (key, line, mindformers' line), PASS on what ran; what it could not
    check (a rule on the model or layout not run, msnb's own error) is SKIP, never a pass; rules about the data apart."""
    if said is None:
        return []
    checks = said.get("checks") or []
    failed = [c for c in checks if c.outcome == "failed"]
    if said.get("error") and not failed:
        return [Check("preflight", SKIP, f"mindformers' startup checks at full size could not run here ({said['error']}): not checked")]
    warned = [c for c in checks if c.outcome == "warning"]
    ran = [c for c in checks if c.outcome in ("passed", "warning")]
    ours = [c for c in checks if c.outcome == "msnb error"]
    unchecked = [c for c in checks if c.outcome == "not checked" and c.kind != "data"]
    stood_in = f"; stood in: {'; '.join(said.get('stood_in') or [])}" if said.get("stood_in") else ""
    out = []
    if failed:
        passed = f"; passed: {', '.join(c.check for c in ran)}" if ran else ""
        out.append(Check("preflight", FAIL, "the full-size config fails mindformers' own startup checks: " + " | ".join(c.line() for c in failed) + passed))
    elif ours or unchecked:
        why = " | ".join(f"{c.check}: {c.message}" + (" (msnb's own error, not the config's)" if c in ours else "") for c in ours + unchecked)
        out.append(Check("preflight", SKIP, f"mindformers' startup checks at full size: {len(ran)} ran, not all: {why}"))
    elif ran:
        said_ran = f"mindformers' own startup checks at full size passed ({len(ran)}: {', '.join(c.check for c in ran)}){stood_in}"
        out.append(Check("preflight", WARN if warned else PASS, said_ran + ("; warnings: " + " | ".join(c.line() for c in warned) if warned else "")))
    apart = [c for c in checks if c.outcome == "not checked" and (c.kind == "data" or failed)]
    if apart:
        out.append(Check("preflight_not_checked", SKIP, " | ".join(f"{c.check}: {c.message}" for c in apart)))
    return out


def judge_mindformers_smoke(ctx, *, flags_out: list | None = None) -> list:
    """Every check of a mindformers smoke run.

    Args:
        ctx: a :class:`~msnb.smoke.run.finishing.MindformersRun` bundle: the plan, the process outcome, the tables read, the
            step times, the device, the lint findings, the rehearsal the child reported and its failures.

        flags_out: where given, receives the judge's flags on the loss (those behind its loss checks).

    Returns:
        The checks, in the order they are shown. When msnb could not rehearse the run (see
        :func:`not_rehearsed_reason`), the checks of what the training wrote are left out: nothing is blamed on the
        config for msnb's own limits.
    """
    plan = ctx.plan
    failures = ctx.failures or []
    trained = steps_trained(ctx.times)
    checks = [check_device(ctx.device_usable, ctx.device_reason)]
    checks.append(_model(plan, trained, ctx.outcome.returncode, failures))
    checks.extend(_preflight_checks(ctx.preflight))
    if ctx.rehearsal:
        checks.append(
            Check(
                "cpu_rehearsal",
                PASS,
                f"on CPU, in the training process only (mindformers {ctx.rehearsal.get('mindformers', '?')}): "
                + "; ".join(ctx.rehearsal.get("replaced") or ["nothing replaced"]),
            )
        )
        differences = ctx.rehearsal.get("differences") or []
        if differences:
            checks.append(Check("config_reading", WARN, "mindformers' MindFormerConfig read the YAML differently from msnb: " + "; ".join(differences[:10])))
    lines = change_lines(list(plan.changes) + list(ctx.launch_changes))
    # the config's changes (tens of lines) come last: the rows people look for (process, finite, loss, preflight) first
    changes = [Check("config_changes", PASS, _changes_summary(lines) + "\n" + "\n".join(lines))] if lines else []
    checks.append(Check("data", PASS, plan.data_note))
    if plan.tensordump_off:
        checks.append(
            Check(
                "tensordump_metrics",
                WARN,
                f"monitor_config.{', monitor_config.'.join(plan.tensordump_off)} turned off here: they rely on TensorDump, which has no CPU kernel "
                "(they will run on Ascend); what does work on CPU: "
                "monitor_config.device_local_loss_format (per-device loss) or runner_wrapper.local_norm: True (per-parameter norms in the log)",
            )
        )
    stopped = was_stopped(ctx.outcome, ctx.stopped_by)
    checks.append(_process(ctx.outcome, trained, ctx.stopped_by, failures))
    lint = check_config_lint(ctx.findings, MINDFORMERS)
    if not stopped and not_rehearsed_reason(failures) is not None:
        return checks + [lint] + changes
    checks.append(check_callbacks(plan, ctx.everything, ctx.summary_read, ctx.workdir, ctx.summary, trained))
    per_step = _LogsAndBoard(ctx.everything)
    sources = [ctx.summary_read.scalars if ctx.summary_read is not None else None, per_step.scalars]
    checks.extend(check_loss(sources, log_scalars(ctx.everything.scalars), ctx.outcome, trained, MINDFORMERS, flags_out))
    checks.extend(check_loss_components(log_scalars(ctx.everything.scalars), trained))
    if stopped:
        checks = [c for c in checks if not (c.name.startswith("loss_falling") and c.status == FAIL and trained < 5)]
    written = [ctx.workdir / "output" / "tensorboard", ctx.workdir / "output" / "log", ctx.summary]
    checks.extend(check_cost(ctx.times, ctx.collect_freq, written, trained, plan.workers, builtin_model=plan.shrunk, busy=ctx.busy))
    checks.append(lint)
    return checks + changes


def _changes_summary(lines: list) -> str:
    """``12 settings changed (shrink 3, rehearse 9): listed below``: the one line shown before the list (folded in HTML)."""
    kinds, n, kind = {}, 0, ""
    for line in lines:
        if line.startswith("  - "):
            n += 1
            kinds[kind] = kinds.get(kind, 0) + 1
        else:
            kind = line.rstrip(":")
    return f"{n} setting{'s' if n != 1 else ''} changed ({', '.join(f'{k} {v}' for k, v in kinds.items())}): listed below"


# loss components MFLossMonitor prints beside the loss (mindformers 1.9: lm_loss, mtp_loss; MoE aux losses)
LOSS_COMPONENTS = ("lm_loss", "mtp_loss", "aux_loss", "load_balancing_loss", "indexer_loss", "lm-loss", "mtp-loss", "aux-loss", "load-balancing-loss")


def check_loss_components(logs, trained: int) -> list:
    """A loss component exactly 0, or constant, on every logged step is a warning naming it: something is not computed."""
    if trained < 3 or logs is None or not len(logs):
        return []
    stuck = []
    for tag in sorted(set(logs.tags())):
        base = tag.rsplit("/", 1)[-1]
        if base not in LOSS_COMPONENTS and not base.startswith(("mtp_", "mtp-")) or "norm" in base:
            continue
        values = logs.where(tag=tag).value
        values = values[np.isfinite(values)]
        if values.size < 3:
            continue
        if np.all(values == 0):
            stuck.append(f"{tag} is exactly 0 on all {values.size} logged steps")
        elif np.all(values == values[0]):
            stuck.append(f"{tag} is {values[0]:g} on all {values.size} logged steps")
    if not stuck:
        return []
    return [Check("loss_components", WARN, "; ".join(stuck) + ": that part of the loss is not computed (or not reported) in this configuration")]


class _LogsAndBoard:
    """One source of the per-step loss besides the summary: MFLossMonitor's log lines, else the TensorBoard files.

    The two record the same steps; judged together, every step would look
    written twice (a restart), so the log is taken when it has the loss.
    """

    def __init__(self, everything):
        logs = log_scalars(everything.scalars)
        self.scalars = logs if "loss" in set(logs.tags()) else tensorboard_scalars(everything.scalars)


__all__ = ["judge_mindformers_smoke", "not_rehearsed_reason", "check_loss_components", "check_callbacks", "log_scalars", "tensorboard_scalars", "FORMAT_TAGS"]
