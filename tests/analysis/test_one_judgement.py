"""One judgement, many views: every view of a run shows the judge's decision, never one of its own.

Over the scenario corpus (tests/scenarios: runs written by tensorboardX in mindformers' layout and by
MindSpore's SummaryRecord) and the notebooks' data (written by the notebooks' own cells: SummaryRecord,
tensorboardX with add_scalars head folders, mindformers and Megatron logs, a cut file), each run's flags
as (rank, tag, step, reason), its pass/fail and its checks' statuses are compared between ``msnb check
--json``, ``msnb plot --json``, ``msnb runs --json``, ``msnb report --json`` (the CLI, as users run them)
and the board's model; a smoke run's judged checks and flags are compared with the judge's on what the
smoke wrote.  The smoke trains while the corpus is written and the views run (one run, side by side).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import msnb
from msnb.analysis.health import health
from msnb.analysis.judge import judge_run
from msnb.dashboard.model import BoardData
from tests.conftest import msnb_command
from tests.scenarios import build
from tests.scenarios.catalog import SCENARIOS

NOTEBOOKS = ("02_reading_summaries", "07_where_it_broke", "08_precision_alignment", "10_board")
# what the judge must say about some notebook runs (so that agreement is never agreement on nothing)
NOTEBOOK_FLAGS = {
    "notebooks/10_board/nan_rank": {(2, "loss", 150)},
    # one job (its logs and TensorBoard files): the logs' global_norm is judged beside TensorBoard's grad-norm
    "notebooks/07_where_it_broke/small": {(0, "global_norm", 261), (0, "grad-norm", 261), (1, "grad-norm", 261), (1, "loss", 261)},
}
NOTEBOOK_PASSED = {"notebooks/08_precision_alignment/aligned": True, "notebooks/10_board/healthy": True}
# the judge's note of where a failed run started, from per-parameter series: views that read only the judged tags
# (msnb runs, the board) have none to scan, so it is left out of the comparison (the health test below checks it)
ADDED = ("first_anomaly",)


def _start(*args, cwd=None):
    """The msnb command as a user runs it, started (several run side by side)."""
    cmd = msnb_command() + [str(a) for a in args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=dict(os.environ))


def _json(proc, *codes):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode in codes, f"{proc.args[1:3]}: exit {proc.returncode}\n{out[-2000:]}\n{err[-2000:]}"
    return json.loads(out)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One built-in smoke run whose loss goes NaN (lr 1e6), started first: it trains while the rest is written and read."""
    where = tmp_path_factory.mktemp("smoke")
    proc = _start("smoke", "--steps", "40", "--lr", "1e6", "--no-live", "--json", "--summary-dir", where / "summary", "--out", where / "s.png", cwd=where)
    yield where, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def corpus(smoke, tmp_path_factory):
    return build(tmp_path_factory.getbasetemp() / "judge_scenarios", notebooks=True)


def _group(run: str) -> str:
    """The scenario or notebook a run belongs to."""
    parts = run.split("/")
    return parts[1] if parts[0] == "notebooks" else parts[0]


def _namer(paths: list):
    """A view's run name -> the run's path under the corpus (check and report name runs by their shortest distinct tail)."""

    def name(label: str) -> str:
        if label in paths:  # msnb runs and the board name a run by its path under the base
            return label
        found = [p for p in paths if p.endswith("/" + label) or label == f"judge_scenarios/{p}"]  # a label may need the base's name
        assert len(found) == 1, f"{label!r} names {found}"
        return found[0]

    return name


def _checks(checks) -> tuple:
    return tuple(sorted((c["name"], c["status"]) for c in checks if not c["name"].startswith(ADDED)))


def _flags(flags, name) -> dict:
    out: dict = {}
    for f in flags:
        out.setdefault(name(f["run"]), set()).add((f["rank"], f["tag"], f["step"], f["reason"]))
    return out


@pytest.fixture(scope="module")
def views(corpus, tmp_path_factory):
    """Each view's runs: path -> (passed, checks' statuses or None, flags), every CLI run once over the whole corpus."""
    out = tmp_path_factory.mktemp("views")
    started = {
        "runs": _start("runs", corpus, "--json"),
        "check": _start("check", corpus, "--json"),
        "plot": _start("plot", corpus, "--json", "--out", out / "plot.png"),
        "report": _start("report", corpus, "--out", out / "report.html", "--json"),
    }
    board = BoardData([corpus])  # the board's model, in this process while the CLI runs
    board.poll(final=True)
    docs = {view: _json(proc, 0, 1) for view, proc in started.items()}
    paths = [r["run"] for r in docs["runs"]["runs"]]  # msnb runs names a run by its path under the base
    name = _namer(paths)
    got = {}
    for view, runs, flags in (
        ("check", docs["check"]["runs"], docs["check"]["flags"]),
        ("report", docs["report"]["verdicts"], docs["report"]["flags"]),
        ("plot", docs["plot"]["verdicts"], docs["plot"]["flags"]),
        ("runs", docs["runs"]["runs"], [f for r in docs["runs"]["runs"] for f in r["flags"]]),
        ("board", [{"run": k, **d.verdict.as_dict()} for k, d in board.runs.items() if d.verdict], [f.as_dict() for f in board.flags()]),
    ):
        by_run = _flags(flags, name)
        got[view] = {name(r["run"]): (r["passed"], _checks(r["checks"]) if "checks" in r else None, by_run.get(name(r["run"]), set())) for r in runs}
    return got


def _compare(views, group):
    """Every view's judgement of the group's runs equals msnb check's; returns check's."""
    ref = {run: v for run, v in views["check"].items() if _group(run) == group}
    assert ref, f"msnb check judged no run of {group}"
    for view, runs in views.items():
        mine = {run: v for run, v in runs.items() if _group(run) == group and run in ref}
        assert mine.keys() == ref.keys(), f"{view} shows runs {sorted(mine)} of {group}, msnb check {sorted(ref)}"
        for run, (passed, checks, flags) in mine.items():
            assert flags == ref[run][2], f"{view} flags {run} differently from msnb check"
            assert passed is ref[run][0], f"{view} judges {run} differently from msnb check"
            assert checks is None or checks == ref[run][1], f"{view}'s checks of {run} differ from msnb check's"
    return ref


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_view_shows_the_same_judgement(views, name):
    ref = _compare(views, name)
    expected = SCENARIOS[name][2]
    ((passed, _checks_, flags),) = ref.values()
    assert passed is expected["passed"]
    assert sorted(rank for rank, *_ in flags) == sorted(rank for rank, *_ in expected["flags"])  # not agreement on nothing


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_view_judges_the_notebooks_data_alike(views, notebook):
    ref = _compare(views, notebook)
    for run, want in NOTEBOOK_FLAGS.items():
        if _group(run) == notebook:
            assert {(rank, tag, step) for rank, tag, step, _ in ref[run][2]} == want, run
    for run, passed in NOTEBOOK_PASSED.items():
        if _group(run) == notebook:
            assert ref[run][0] is passed and not ref[run][2], run
    # add_scalars' head folders are their run's series, in every view, never runs of their own
    assert not [run for view in views.values() for run in view if "head_" in run]


def _loss_records(scalars, run) -> int:
    tag = scalars.where(run=run).resolve_tag("loss")
    return 0 if tag is None else len(scalars.where(run=run, tag=tag))


def test_a_smoke_verdict_is_the_judges_on_what_the_smoke_wrote(smoke, views):
    """The smoke's judged checks (finite, loss_falling, loss_spikes...) and its flags are judge_run's on what it wrote:
    the summary, or its training log, whichever recorded the loss on more steps (here the log: the step whose
    loss was NaN stopped the training before the summary recorded it)."""
    where, proc = smoke
    verdict = _json(proc, 1)  # the loss went NaN: the smoke fails, and keeps its scratch folder with the log
    assert verdict["workdir"], "a failed smoke keeps its logs"
    try:
        written = [(msnb.read(where / "summary").scalars, "."), *((log.scalars, run) for log in [msnb.read(verdict["workdir"])] for run in log.runs)]
        scalars, run = max(written, key=lambda sr: _loss_records(*sr))
        judged = judge_run(scalars, run, tag="loss")
    finally:
        shutil.rmtree(verdict["workdir"], ignore_errors=True)
    smoke_checks = {c["name"]: c for c in verdict["checks"]}
    shared = {c.name for c in judged.checks} & smoke_checks.keys()
    assert {"finite", "loss_falling", "loss_stalled", "loss_spikes"} <= shared, shared
    for c in judged.checks:
        if c.name in shared:
            assert (smoke_checks[c.name]["status"], smoke_checks[c.name]["detail"]) == (c.status, c.detail), c.name
    assert smoke_checks["finite"]["status"] == "fail"
    flags = {(f["rank"], f["tag"], f["step"], f["reason"]) for f in verdict["flags"]}
    assert flags and flags == {(f.rank, f.tag, f.step, f.reason) for f in judged.flags}


def test_a_loss_tag_named_and_missing_fails_the_run_on_the_board_as_in_msnb_runs(corpus):
    """Naming a loss tag the run lacks fails it (msnb check --tag, msnb runs --tag); the board judges it the same way."""
    board = BoardData([corpus / "healthy_2"], tag="val_loss")
    board.poll(final=True)
    (data,) = board.runs.values()
    (row,) = msnb.runs(corpus / "healthy_2", tag="val_loss").rows
    assert data.verdict.passed is False and row.passed is False
    assert [(c.name, c.status) for c in data.verdict.checks] == [(c.name, c.status) for c in row.verdict.checks] == [("tags", "fail")]


def test_every_value_the_judge_flags_non_finite_is_a_health_anomaly(corpus, views):
    """``msnb health`` answers where a run went bad first; each NaN/Inf the judge flags is one of its anomalies
    (same run, rank and tag), at that step or earlier (the series left its history before it broke)."""
    report = health(corpus, max_cascade=10**6)
    name = _namer(list(views["runs"]))
    first = {}
    for a in [report.first, *report.cascade]:
        first.setdefault((name(a.run), a.rank, a.tag), a.step)
    nonfinite = [
        (run, rank, tag, step) for run, (_p, _c, flags) in views["check"].items() for rank, tag, step, reason in flags if reason.startswith(f"{tag} is ")
    ]
    assert len({run for run, *_ in nonfinite}) >= 3, nonfinite  # the corpus has NaN runs: never agreement on nothing
    for run, rank, tag, step in nonfinite:
        assert (run, rank, tag) in first, f"health misses {tag} on rank {rank} of {run}"
        assert first[(run, rank, tag)] <= step, (run, rank, tag)
