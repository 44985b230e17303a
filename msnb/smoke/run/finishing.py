"""A finished smoke run read back from disk and judged (built-in model or mindformers config), its figures drawn
(a figure that cannot be drawn is a warning, never a lost verdict), its scratch directory removed or kept.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...events import read
from ...fullsize.launch import say_cards_a_node
from ...fullsize.preflight import checks_from
from ...outputs import figure_out
from ...outputs import save_figure as write_figure
from ...plot.render import plain_text
from ...words import count
from ..builtin.judging import judge_smoke
from ..mindformers.child import summary_root
from ..mindformers.judging import judge_mindformers_smoke, not_rehearsed_reason
from ..mindformers.plan import (
    DELETE,
    Change,
    ModelPlan,
)
from ..shared.judge_skeleton import steps_trained
from ..shared.verdict import FAIL, PASS, WARN, Check, ProcessOutcome
from .figures import smoke_figures
from .launching import Launched
from .options import DEFAULT_OUT
from .result import SmokeResult
from .watching import Watched

LOG_TAIL_LINES = 25


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    keep = [line for line in text.splitlines() if line.strip()]
    return "\n".join(keep[-lines:])


def read_step_times(workdir: Path) -> dict:
    out = {}
    for path in sorted(workdir.glob("step_times*.csv")):
        rank = int(path.stem.split("rank")[1]) if "rank" in path.stem else 0
        try:
            if path.stat().st_size <= len("step,ms,collected,wall\n"):  # the header only: no step was timed
                continue
            rows = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2))
        except (ValueError, OSError):
            continue
        if rows.size == 0 or rows.shape[1] < 4:
            continue
        out[rank] = (rows[:, 0].astype(int), rows[:, 1], rows[:, 2].astype(bool), rows[:, 3])
    return out


def _draw(summary_read, times, live_read=None) -> tuple[object, object, list]:
    """The final figures; a failure to draw one is a warning check, and the other is still drawn."""
    try:
        figure, hist_figure = smoke_figures(summary_read, times, live_read)
        return figure, hist_figure, []
    except Exception as exc:  # drawing is another layer's code; whatever it raises, the verdict stands
        first = f"{type(exc).__name__}: {exc}"
    try:
        figure, _ = smoke_figures(replace(summary_read, histograms=type(summary_read.histograms)()), times, live_read)
        return figure, None, [Check("figures", WARN, f"the histogram figure could not be drawn ({first}); the curves were")]
    except Exception as exc:  # noqa: BLE001 - same reason
        return None, None, [Check("figures", WARN, f"no figure could be drawn ({first}; without histograms: {type(exc).__name__}: {exc})")]


def save_figure(result: SmokeResult, out) -> Check | None:
    """Save the run's final figure to *out*; a failure becomes a warning check added to the verdict.

    Args:
        result: a finished smoke run.
        out: a .png or .svg path.

    Returns:
        The warning check when it could not be saved (also appended to ``result.checks``), else None.
    """
    if result.figure is None:
        return None
    try:
        path = figure_out(out, inputs=result.inputs)  # checked before the run too (prepare); again here, where it is written
        plain_text(result.figure)  # names from files are no TeX
        write_figure(result.figure, path)
        result.figure_file = path
        result.figure_note = "in the current directory; --out FILE to write elsewhere" if str(out) == DEFAULT_OUT else ""
        return None
    except Exception as exc:  # a missing directory, a read-only place, an unknown extension: the verdict stands
        check = Check("figure_file", WARN, f"could not save the figure to {out}: {type(exc).__name__}: {exc}")
        result.checks.append(check)
        return check


def check_sink(sink_size: int | None, device: str, mode: str, times: dict) -> list[Check]:
    """Whether ``--sink-size`` rehearsed sink mode, from the step numbers the callbacks saw.

    In sink mode the callbacks run once per sink of N steps, SummaryCollector's
    collect_freq counts sinks, and the log line changes.  MindSpore 2.9 trains
    on CPU, and in PyNative mode, without sink mode (one step at a time), so
    there the option is accepted but changes nothing: a warning says so.
    """
    if not sink_size:
        return []
    steps = [t[0] for t in times.values() if t[0].size > 1]
    stride = int(np.median(np.concatenate([np.diff(s) for s in steps]))) if steps else None
    if stride == sink_size:
        return [Check("sink_mode", PASS, f"dataset_sink_mode=True, sink_size={sink_size}: callbacks ran every {stride} steps, as in the real run")]
    why = (
        "MindSpore trains on CPU without sink mode"
        if device == "CPU"
        else ("MindSpore's PyNative mode trains without sink mode (use --mode graph)" if mode == "pynative" else "MindSpore did not sink the dataset")
    )
    seen = f"callbacks ran every {count(stride, 'step')}" if stride else "no steps were timed"
    return [Check("sink_mode", WARN, f"sink mode not rehearsed: {why}; dataset_sink_mode=True, sink_size={sink_size} was accepted but {seen}")]


def _read_json(path: Path) -> dict | None:
    """A small JSON file the child wrote (None when absent or not JSON: the child may have died before writing it)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class MindformersRun:
    """Everything the verdict of a mindformers smoke run is made from (see :func:`msnb.smoke.mindformers.judging.judge_mindformers_smoke`)."""

    plan: ModelPlan
    outcome: ProcessOutcome
    everything: object  # what the Follower read in the scratch directory: logs, TensorBoard files, summaries
    summary_read: object  # the summary directory read on its own
    times: dict
    device_usable: bool
    device_reason: str
    findings: list
    workdir: Path
    summary: Path
    collect_freq: int
    stopped_by: str | None
    rehearsal: dict | None
    failures: list  # each failing rank's failure.json: stage, line, cause (config, kernel, msnb), kernel, rank
    launch_changes: list  # the changes made at launch (outputs isolated in the scratch folder)
    busy: str | None = None  # why the step times may be other programs' doing (msnb.smoke.run.machine_load)
    preflight: dict | None = None  # the pre-flight's preflight.json, its checks given their YAML keys and lines (msnb.fullsize.preflight)


def _preflight(workdir: Path, loaded, told: dict | None = None) -> dict | None:
    """What the pre-flight found (``preflight.json``), each check with the YAML key and line it is about, mindformers'
    server-count warning with the cards a node it assumed (*told*: the spec's ``preflight``); None when it did not run."""
    said = _read_json(workdir / "preflight.json")
    if said is None:
        return None
    checks = checks_from(said, loaded)
    if told and told.get("per_node_words"):
        say_cards_a_node(checks, told["per_node_words"])
    return {"error": said.get("error", ""), "checks": checks, "stood_in": said.get("stood_in") or []}


def _launch_changes(workdir: Path) -> list:
    """The changes made at launch (outputs isolated in the scratch folder), as :class:`Change` objects for the verdict."""
    try:
        changes = json.loads((workdir / "isolate.json").read_text())
    except (OSError, ValueError):
        return []
    return [Change(c["kind"], (c["key"],), c["before"], DELETE if c.get("deleted") else c["after"], c["why"]) for c in changes]


def _log_tail(launched: Launched, watched: Watched) -> str:
    """The last lines of the run's log (or of its workers' logs when it wrote none); after a failure with several
    workers, each worker's own tail too, since the rank that failed first is not always the one the main log shows."""
    logs = launched.workdir / "logs"
    log_tail = _tail(launched.log_path) or "\n".join(_tail(p) for p in sorted(logs.glob("worker_*.log")))
    if launched.prepared.options.workers > 1 and watched.returncode not in (0, None):
        worker_tails = [f"--- {p.name}\n{_tail(p, 12)}" for p in sorted(logs.glob("worker_*.log"))]
        log_tail = "\n".join([log_tail] + worker_tails).strip()
    return log_tail


def _mindformers_run(launched: Launched, watched: Watched, outcome: ProcessOutcome, summary_read, times: dict, summary: Path) -> MindformersRun:
    """What a mindformers config's run left for its verdict: the plan and the outcome, and the files the child wrote
    (rehearsal.json, each rank's failure.json, isolate.json, preflight.json) read back from the scratch directory."""
    prepared, workdir = launched.prepared, launched.workdir
    return MindformersRun(
        plan=prepared.plan,
        outcome=outcome,
        everything=watched.everything,
        summary_read=summary_read,
        times=times,
        device_usable=prepared.device_usable,
        device_reason=prepared.device_reason,
        findings=prepared.findings,
        workdir=workdir,
        summary=summary,
        collect_freq=int(launched.spec.get("collect_freq") or 1),
        stopped_by=watched.stopped_by,
        rehearsal=_read_json(workdir / "rehearsal.json"),
        failures=[f for p in sorted(workdir.glob("failure*.json")) if (f := _read_json(p))],
        launch_changes=_launch_changes(workdir),
        busy=watched.load.busy(),
        preflight=_preflight(workdir, prepared.loaded, launched.spec.get("preflight")),
    )


def _judge_checks(launched: Launched, watched: Watched, outcome: ProcessOutcome, summary_read, times: dict, summary: Path) -> tuple[list, list]:
    """``(checks, flags)``: the judge's checks and its flags on the loss, by mindformers' judge for a config's run and
    by the built-in model's judge otherwise."""
    prepared = launched.prepared
    flags: list = []
    if prepared.plan is not None:
        checks = judge_mindformers_smoke(_mindformers_run(launched, watched, outcome, summary_read, times, summary), flags_out=flags)
    else:
        checks = judge_smoke(
            outcome,
            summary_read,
            watched.everything,
            times,
            launched.spec,
            prepared.device,
            prepared.device_reason,
            prepared.findings,
            summary,
            prepared.options.workers,
            device_usable=prepared.device_usable,
            stopped_by=watched.stopped_by,
            flags_out=flags,
            busy=watched.load.busy(),
        )
    return checks, flags


def _out_of_memory_checks(checks: list, watched: Watched, times: dict) -> list:
    """The checks when this machine ran out of memory: its limit, so nothing the run wrote is judged and nothing is
    blamed on the config (the device and cleanup checks stay, failures go) and the process check says not rehearsed."""
    checks = [c for c in checks if c.name in ("device", "cleanup") or c.status != FAIL and c.name != "process"]
    checks.append(Check("process", WARN, f"not rehearsed after {count(steps_trained(times), 'step')}: {watched.out_of_memory}"))
    return checks


def _not_rehearsed(launched: Launched, watched: Watched, passed: bool) -> str | None:
    """Why the run rehearsed nothing, or None: this machine's memory ran out, or a mindformers run that passed hit one
    of msnb's own limits (a rank's failure.json says so): ``not_rehearsed``, never ``failed``."""
    not_rehearsed = watched.out_of_memory
    if launched.prepared.plan is not None and passed and not_rehearsed is None:
        workdir = launched.workdir
        not_rehearsed = not_rehearsed_reason([f for p in sorted(workdir.glob("failure*.json")) if (f := _read_json(p))])
    return not_rehearsed


def _first_live_delay(watched: Watched, times: dict) -> float | None:
    """Seconds from the first step timed to the first figure drawn live (None when either is missing)."""
    first_step_wall = min((float(t[3][0]) for t in times.values() if t[3].size), default=None)
    return (watched.first_live_wall - first_step_wall) if watched.first_live_wall and first_step_wall else None


def _keep_or_remove_workdir(launched: Launched, watched: Watched, passed: bool, not_rehearsed: str | None) -> bool:
    """Whether the scratch directory is kept (--keep, a --summary-dir, a failure to look into, a run not rehearsed);
    it is removed when nobody needs it: a pass, or a run stopped on purpose."""
    o, workdir = launched.prepared.options, launched.workdir
    # stopped on purpose (Ctrl-C, SIGTERM, SIGHUP): nobody is waiting for a post-mortem, whichever way it was stopped
    cancelled = watched.stopped_by is not None or watched.interrupted
    kept = o.keep or o.summary_dir is not None or (not passed and not cancelled) or not_rehearsed is not None
    if (passed or cancelled) and not_rehearsed is None and not o.keep:
        shutil.rmtree(workdir, ignore_errors=True)  # logs and spec; the summaries too unless --summary-dir put them elsewhere
    return kept


def judge(launched: Launched, watched: Watched) -> SmokeResult:
    """Read what the run left on disk, judge it, draw the figures; remove the scratch directory when it is not needed.

    Args:
        launched: the run.
        watched: how it ended.

    Returns:
        The verdict with its tables and figures.
    """
    prepared, o, workdir, summary = launched.prepared, launched.prepared.options, launched.workdir, launched.summary
    if prepared.plan is not None:
        summary = summary_root(prepared.plan, workdir, summary)
    summary_read = read(summary)
    times = read_step_times(workdir)
    log_tail = _log_tail(launched, watched)
    elapsed = time.monotonic() - launched.started
    outcome = ProcessOutcome(watched.returncode, watched.interrupted, watched.timed_out, elapsed, log_tail)
    checks, flags = _judge_checks(launched, watched, outcome, summary_read, times, summary)
    figure, hist_figure, figure_checks = _draw(summary_read, times, watched.everything)
    checks += check_sink(o.sink_size, prepared.device, o.mode, times) + watched.extra_checks + figure_checks
    if watched.out_of_memory is not None:
        checks = _out_of_memory_checks(checks, watched, times)
    passed = not any(c.status == FAIL for c in checks)
    not_rehearsed = _not_rehearsed(launched, watched, passed)
    kept = _keep_or_remove_workdir(launched, watched, passed, not_rehearsed)
    return SmokeResult(
        passed=passed and not_rehearsed is None,
        not_rehearsed=not_rehearsed,
        checks=checks,
        summary_dir=str(summary),
        kept=kept,
        device=prepared.device,
        device_reason=prepared.device_reason,
        steps=int(o.steps),
        steps_trained=steps_trained(times),
        elapsed_s=elapsed,
        workdir=str(workdir),
        tables=watched.everything,
        step_times={r: t[:3] for r, t in times.items()},
        log_tail=log_tail,
        findings=prepared.findings,
        figure=figure,
        histogram_figure=hist_figure,
        first_live_delay_s=_first_live_delay(watched, times),
        ranks=sorted(times) if times else [],
        flags=flags,
    )
