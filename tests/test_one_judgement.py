"""One judgement, many views: every view of a run shows the judge's decision, never one of its own.

Over the scenario corpus (tests/scenarios: runs written by tensorboardX in mindformers' layout and by
MindSpore's SummaryRecord), each run's flags as (rank, tag, step, reason) and its pass/fail are compared
between ``msnb check --json``, ``msnb plot --json``, ``msnb runs --json``, ``msnb report --json`` (the CLI,
as users run them) and the board's model; a smoke run's judged checks are compared with the judge's
checks on what the smoke wrote.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import msnb
from msnb.analysis.judge import judge_run
from msnb.dashboard.model import BoardData
from tests.conftest import msnb_command
from tests.scenarios import build
from tests.scenarios.catalog import SCENARIOS


def _msnb(*args, check, cwd=None):
    """The msnb command as a user runs it; *check* the exit status wanted (None: any)."""
    proc = subprocess.run(msnb_command() + [str(a) for a in args], capture_output=True, text=True, timeout=600, cwd=cwd, env=dict(os.environ))
    assert check is None or proc.returncode == check, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build(tmp_path_factory.getbasetemp() / "judge_scenarios")


def _scenario(run: str) -> str:
    """The scenario a run key or label belongs to (its first path component)."""
    return run.replace("\\", "/").split("/")[0]


def _flag_set(flags) -> set:
    return {(f["rank"], f["tag"], f["step"], f["reason"]) for f in flags}


def _by_scenario(flags) -> dict:
    out: dict = {name: set() for name in SCENARIOS}
    for f in flags:
        out[_scenario(f["run"])].add((f["rank"], f["tag"], f["step"], f["reason"]))
    return out


@pytest.fixture(scope="module")
def views(corpus, tmp_path_factory):
    """Each view's per-scenario flags and pass/fail, every CLI run once over the whole corpus."""
    out = tmp_path_factory.mktemp("views")
    check = json.loads(_msnb("check", str(corpus), "--json", check=1).stdout)
    runs = json.loads(_msnb("runs", str(corpus), "--json", check=1).stdout)
    plot = json.loads(_msnb("plot", str(corpus), "--json", "--out", str(out / "plot.png"), check=None).stdout)
    report = json.loads(_msnb("report", str(corpus), "--out", str(out / "report.html"), "--json", check=1).stdout)
    board = BoardData([corpus])
    board.poll(final=True)
    return {
        "check": ({_scenario(r["run"]): r["passed"] for r in check["runs"]}, _by_scenario(check["flags"])),
        "runs": ({_scenario(r["run"]): r["passed"] for r in runs["runs"]}, _by_scenario(f for r in runs["runs"] for f in r["flags"])),
        "plot": (None, _by_scenario(plot["flags"])),
        "report": ({_scenario(r["run"]): r["passed"] for r in report["verdicts"]}, _by_scenario(report["flags"])),
        "board": (
            {_scenario(k): d.verdict.passed for k, d in board.runs.items()},
            _by_scenario(f.as_dict() for k, d in board.runs.items() for f in d.verdict.flags),
        ),
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_view_shows_the_same_judgement(views, name):
    expected = SCENARIOS[name][2]
    passed, flags = views["check"]
    assert passed[name] is expected["passed"]
    assert sorted(rank for rank, *_ in flags[name]) == sorted(rank for rank, *_ in expected["flags"])  # not agreement on nothing
    for view, (view_passed, view_flags) in views.items():
        assert view_flags[name] == flags[name], f"{view} flags {name} differently from msnb check"
        if view_passed is not None:
            assert view_passed[name] is passed[name], f"{view} judges {name} differently from msnb check"


def test_a_smoke_verdict_is_the_judges_on_what_the_smoke_wrote(tmp_path):
    """The smoke's judged checks (finite, loss_falling, loss_spikes...) are judge_run's on the summary it wrote."""
    summary = tmp_path / "smoke"
    proc = _msnb("smoke", "--steps", "60", "--no-live", "--json", "--summary-dir", str(summary), "--out", str(tmp_path / "s.png"), check=None, cwd=tmp_path)
    verdict = json.loads(proc.stdout)
    smoke = {c["name"]: c["status"] for c in verdict["checks"]}
    judged = judge_run(msnb.read(summary).scalars, ".", tag="loss")  # the summary folder is the run, "."
    shared = {c.name for c in judged.checks} & smoke.keys()
    assert {"finite", "loss_falling", "loss_stalled", "loss_spikes"} <= shared, shared
    for name in shared:
        assert smoke[name] == next(c.status for c in judged.checks if c.name == name), name
