"""The built-in and the mindformers smoke judge how the process ended, the disk cost and the config lint by one rule.

The facts (the process outcome, the step times, the bytes written, the lint findings) are fed to both real judges
directly: this is a unit of the judge, the runs that produce such facts are tested in test_smoke*.py.
"""

import itertools

import numpy as np
import pytest

from msnb.events import read
from msnb.findings import ERROR, WARNING, Finding
from msnb.smoke.builtin.judging import judge_smoke
from msnb.smoke.mindformers.judging import judge_mindformers_smoke
from msnb.smoke.mindformers.plan import ModelPlan
from msnb.smoke.run.runner import MindformersRun
from msnb.smoke.shared.judge_skeleton import steps_trained
from msnb.smoke.shared.verdict import FAIL, PASS, WARN, ProcessOutcome

SHARED = ("process", "config_lint", "disk_per_day", "step_time", "monitor_overhead")
STEPS = 40
OUTCOMES = {
    "ended": dict(returncode=0, interrupted=False, timed_out=False, stopped_by=None),
    "exit 1": dict(returncode=1, interrupted=False, timed_out=False, stopped_by=None),
    "timed out": dict(returncode=None, interrupted=False, timed_out=True, stopped_by=None),
    "Ctrl-C": dict(returncode=None, interrupted=True, timed_out=False, stopped_by=None),
    "SIGTERM": dict(returncode=None, interrupted=False, timed_out=False, stopped_by="SIGTERM"),
}
FINDINGS = {
    "clean": [],
    "warning": [Finding("summary-collect-freq", WARNING, "collect_freq 1 writes every step", key="monitor_config.collect_freq")],
    "error": [
        Finding("tensorboard-scale-sense", ERROR, "mindformers' TensorBoard writer needs it", key="runner_wrapper.scale_sense"),
        Finding("summary-collect-freq", WARNING, "collect_freq 1 writes every step", key="monitor_config.collect_freq"),
    ],
}
WRITTEN = {"little": 1_000, "a lot": 400_000}  # bytes for 40 steps of 10 ms: ~0.2 and ~86 GB a day


def step_times(steps: int = STEPS) -> dict:
    step = np.arange(1, steps + 1)
    ms = 10.0 + 0.1 * np.sin(step)  # stable
    collected = step % 5 == 0
    return {0: (step, ms + 0.3 * collected, collected, 1000.0 + np.cumsum(ms) / 1000)}


def shared(checks) -> dict:
    return {c.name: c.status for c in checks if c.name.split("[")[0] in SHARED}


@pytest.fixture
def facts(tmp_path):
    def make(outcome: str, findings: str, written: str):
        o = OUTCOMES[outcome]
        summary = tmp_path / outcome / findings / written / "summary"
        summary.mkdir(parents=True)
        (summary / "written.bin").write_bytes(b"\0" * WRITTEN[written])
        process = ProcessOutcome(o["returncode"], o["interrupted"], o["timed_out"], 12.0, "Traceback ...\nValueError: a broken dataset")
        return process, o["stopped_by"], FINDINGS[findings], summary

    return make


def nothing_read(summary):
    """What the readers give for a folder the run wrote no summary, log or event file to."""
    (summary.parent / "nothing").mkdir(exist_ok=True)
    return read(summary.parent / "nothing")


def builtin_checks(process, stopped_by, findings, summary, times):
    empty = nothing_read(summary)
    spec = {"code": "net = ...", "collect_freq": 5}  # the user's own model: disk and overhead judged, not only reported
    return judge_smoke(process, empty, empty, times, spec, "CPU", "CPU: asked for", findings, summary, 1, stopped_by=stopped_by)


def mindformers_checks(process, stopped_by, findings, summary, times):
    empty = nothing_read(summary)
    plan = ModelPlan(family="Qwen3", legacy=False, source="qwen3.yaml", shrunk=False, before={}, after={}, config={}, callbacks=["MFLossMonitor"])
    run = MindformersRun(
        plan=plan,
        outcome=process,
        everything=empty,
        summary_read=empty,
        times=times,
        device_usable=True,
        device_reason="CPU: asked for",
        findings=findings,
        workdir=summary.parent,
        summary=summary,
        collect_freq=5,
        stopped_by=stopped_by,
        rehearsal=None,
        failures=[],
        launch_changes=[],
    )
    return judge_mindformers_smoke(run)


def test_both_smokes_give_the_same_verdict_on_the_same_process_disk_and_lint_facts(facts):
    times = step_times()
    assert steps_trained(times) == STEPS and steps_trained({}) == 0
    for outcome, findings, written in itertools.product(OUTCOMES, FINDINGS, WRITTEN):
        process, stopped_by, found, summary = facts(outcome, findings, written)
        builtin = shared(builtin_checks(process, stopped_by, found, summary, times))
        mindformers = shared(mindformers_checks(process, stopped_by, found, summary, times))
        case = (outcome, findings, written)
        assert builtin == mindformers, case
        assert set(builtin) == {"process", "config_lint", "disk_per_day", "step_time", "monitor_overhead"}, case
        assert builtin["process"] == (PASS if outcome == "ended" else FAIL), case
        assert builtin["config_lint"] == {"clean": PASS, "warning": WARN, "error": FAIL}[findings], case  # an error never passes
        assert builtin["disk_per_day"] == {"little": PASS, "a lot": WARN}[written], case
        assert builtin["step_time"] == PASS, case


def test_the_process_check_names_what_ended_the_run_in_each_smokes_words(facts):
    process, stopped_by, found, summary = facts("SIGTERM", "clean", "little")
    times = step_times()
    builtin = {c.name: c for c in builtin_checks(process, stopped_by, found, summary, times)}["process"]
    mindformers = {c.name: c for c in mindformers_checks(process, stopped_by, found, summary, times)}["process"]
    assert builtin.detail == "stopped by SIGTERM after 40 steps; the child and its workers were stopped"
    assert mindformers.detail == "stopped by SIGTERM after 40 steps; the training was stopped"
