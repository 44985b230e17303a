"""No copy outvotes a failing one: every training series of a job is judged, and a table never stands in for one.

The job is written by the real writers (mindformers' MFLossMonitor and its TensorBoard writer training a small network
on CPU, its console captured as ``train.log``: tests/writers/mindformers_monitor.py); the failing cases change the
printed losses of one writer's copy.  The Megatron-style log is the layout Megatron-LM prints (written as
tests/analysis/test_compare.py writes it), the evaluation table a CSV written by Python's ``csv`` module.  Each case
is asked of ``msnb check`` (the API and the CLI), ``msnb runs``, ``msnb report``, ``msnb health``, the board and
``msnb compare``: one judgement, many views.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msnb
from msnb.analysis.health import health
from msnb.dashboard.model import BoardData
from msnb.events.problems import ProblemKind
from tests.analysis.test_compare import run_values, write_megatron_log
from tests.conftest import msnb_command

WRITER = Path(__file__).resolve().parent.parent / "writers" / "mindformers_monitor.py"
LOSS = re.compile(r"loss:\[ ?[0-9.]+/ ?[0-9.]+\]")


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job")
    with open(out / "train.log", "wb") as log:
        proc = subprocess.run([sys.executable, str(WRITER), str(out)], stdout=log, stderr=subprocess.STDOUT, cwd=str(out), timeout=600, check=False)
    assert proc.returncode == 0, (out / "train.log").read_text(errors="replace")[-3000:]
    return out


def _losses(text: str, values) -> str:
    """*text* with its printed losses (``loss:[x/avg]``) replaced, one after the other, by *values*."""
    it = iter(values)
    out = LOSS.sub(lambda m: f"loss:[{(v := next(it)):.6f}/{v:.6f}]", text)
    return out


def _verdicts(path: Path, tmp_path: Path) -> dict:
    """Every view's pass of the one run under *path*."""
    cli = subprocess.run(msnb_command() + ["check", str(path)], capture_output=True, text=True, timeout=300, check=False)
    board = BoardData([path])
    board.poll(final=True)
    (row,) = msnb.runs(path).rows
    return {
        "check": msnb.check(path).passed,
        "cli": cli.returncode == 0,
        "runs": row.passed,
        "report": msnb.report(path, out=tmp_path / "r.html").passed,
        "board": all(d.verdict.passed for d in board.runs.values() if d.verdict is not None),
    }


def test_a_copy_that_rises_fails_the_job_beside_a_healthy_log_and_names_its_file(job, tmp_path):
    case = tmp_path / "job"
    shutil.copytree(job, case)
    log = case / "train.log"
    n = len(LOSS.findall(log.read_text()))
    log.write_text(_losses(log.read_text(), 1.0 + 0.5 * np.arange(1, n + 1)))  # the console's copy rises all along
    alone = msnb.check(log)
    assert not alone.passed

    result = msnb.check(case)

    assert not result.passed, result.format_text()
    (run,) = result.runs
    series = next(c for c in run.checks if c.name == "series")
    assert series.status == "warn" and "from output/log/rank_0/info.log: passed" in series.detail
    assert "train/loss from train.log: failed" in series.detail and run.tag == "train/loss"
    assert run.judged_from.startswith("train.log: train/loss")
    assert any(p.kind == ProblemKind.COPY and "judged too" in p.message for p in result.problems)
    assert _verdicts(case, tmp_path) == dict.fromkeys(("check", "cli", "runs", "report", "board"), False)
    _the_rising_copy_is_compared_too(case)
    _health_names_the_failing_copy(case)


def _health(path: Path) -> tuple:
    """``msnb health`` of *path*: the Python call's report, and the CLI's exit status and JSON."""
    cli = subprocess.run(msnb_command() + ["health", str(path), "--json"], capture_output=True, text=True, timeout=300, check=False)
    return health(path), cli.returncode, json.loads(cli.stdout)


def _health_names_the_failing_copy(case: Path) -> None:
    """The rising copy leaves no history of its own (it rises from its first point): health still fails the job as
    the judge does, and names the copy and its file."""
    said, rc, doc = _health(case)
    assert not said.passed and rc == 1, said.format_text()
    text = said.format_text()
    assert text.startswith("no anomaly left its own history, but the judge fails 1 run:")
    assert "'train/loss' from train.log failed (loss_falling, loss_spikes)" in text
    (failed,) = doc["judged_failed"]
    assert failed["tag"] == "train/loss" and failed["from"] == "train.log" and "loss_falling" in [c["name"] for c in failed["failed"]]


def _the_rising_copy_is_compared_too(case: Path) -> None:
    """``msnb compare`` against the healthy info.log: each differing copy compared, the worse result standing, named."""
    baseline = case / "output" / "log" / "rank_0" / "info.log"
    compared = msnb.compare(baseline, case)
    assert not compared.passed, compared.format_text()
    series = compared.check("series")
    assert series.status == "warn" and "candidate 'loss' from output/log/rank_0/info.log: aligned" in series.detail
    assert "candidate 'train/loss' from train.log: not aligned (first_loss, mean_error)" in series.detail
    assert compared.tags["loss"]["candidate"] == "train/loss" and "train/loss read from train.log" in compared.format_text()
    cli = subprocess.run(msnb_command() + ["compare", str(baseline), str(case), "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert cli.returncode == 1 and json.loads(cli.stdout)["passed"] is False, cli.stdout + cli.stderr
    backwards = msnb.compare(case, baseline)  # the job as the baseline: its rising copy is compared as well
    assert not backwards.passed and "baseline 'train/loss' from train.log: not aligned" in backwards.check("series").detail


def test_equal_copies_stay_one_and_the_job_passes(job, tmp_path):
    result = msnb.check(job)
    assert result.passed, result.format_text()
    assert not any(c.name == "series" for c in result.runs[0].checks)  # train.log and TensorBoard copy info.log: one series
    assert _verdicts(job, tmp_path) == dict.fromkeys(("check", "cli", "runs", "report", "board"), True)
    said, rc, doc = _health(job)
    assert said.passed and rc == 0 and doc["judged_failed"] == [] and doc["evaluation"] == [], said.format_text()
    compared = msnb.compare(job / "output" / "log" / "rank_0" / "info.log", job)
    assert compared.passed and compared.check("series") is None, compared.format_text()  # one series, compared once
    assert "loss read from output/log/rank_0/info.log" in compared.format_text()


def _eval_table(path: Path, steps, nan_from: int | None = None) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "accuracy"])
        for s in steps:
            w.writerow([s, "nan" if nan_from is not None and s >= nan_from else 3.0 - s / 1000, 0.5])


def test_a_table_s_finite_loss_never_stands_in_for_a_megatron_log_whose_lm_loss_turns_nan(tmp_path):
    run = run_values(200)
    run["loss"][149:] = np.nan  # lm loss NaN from step 150
    case = tmp_path / "megatron"
    case.mkdir()
    write_megatron_log(case / "train.log", run)
    _eval_table(case / "eval_results.csv", range(10, 201, 10))

    result = msnb.check(case)

    assert not result.passed, result.format_text()
    (verdict,) = result.runs
    assert verdict.tag == "lm loss" and verdict.judged_from.startswith("train.log: lm loss")
    finite = next(c for c in verdict.checks if c.name == "finite")
    assert finite.status == "fail" and "lm loss is nan" in finite.detail and "51 of 200 records" in finite.detail
    evaluation = next(c for c in verdict.checks if c.name == "evaluation")
    assert evaluation.status == "pass" and evaluation.detail.startswith("eval_results.csv")
    assert _verdicts(case, tmp_path) == dict.fromkeys(("check", "cli", "runs", "report", "board"), False)
    said, rc, doc = _health(case)
    assert said.first is not None and said.first.tag == "lm loss" and said.first.step == 150 and said.first_from() == "train.log"
    assert rc == 1 and [f["tag"] for f in doc["judged_failed"]] == ["lm loss"] and doc["first"]["tag"] == "lm loss"
    assert "judged: run megatron: 'lm loss' from train.log failed (finite) (msnb check)" in said.format_text()
    healthy = tmp_path / "healthy.log"
    write_megatron_log(healthy, run_values(200))
    compared = msnb.compare(healthy, case)
    assert not compared.passed and "lm loss" in compared.format_text()


def test_an_evaluation_table_turning_nan_beside_a_healthy_log_is_a_warning_naming_the_file(tmp_path):
    case = tmp_path / "megatron"
    case.mkdir()
    write_megatron_log(case / "train.log", run_values(200))
    _eval_table(case / "eval_results.csv", range(10, 201, 10), nan_from=150)

    result = msnb.check(case)

    assert result.passed, result.format_text()  # the training is healthy: an evaluation's NaN does not fail it ...
    evaluation = next(c for c in result.runs[0].checks if c.name == "evaluation")
    assert evaluation.status == "warn" and evaluation.detail.startswith("eval_results.csv: ")  # ... and is never silent
    assert "loss is nan" in evaluation.detail and "from step 150" in evaluation.detail
    assert "WARN  evaluation: eval_results.csv" in result.format_text()
    assert _verdicts(case, tmp_path) == dict.fromkeys(("check", "cli", "runs", "report", "board"), True)
    said, rc, doc = _health(case)  # health agrees: the evaluation's NaN is a warning naming the file, exit 0
    assert said.passed and said.first is None and rc == 0, said.format_text()
    text = said.format_text()
    assert text.startswith("no anomaly in a training series; 1 table series beside them went bad (a warning, as in msnb check):")
    assert "warning: eval_results.csv: step 150, rank ?, loss = nan: non-finite (nan) (a table's series, judged as evaluation)" in text
    assert doc["first"] is None and [(a["tag"], a["step"], a["from"]) for a in doc["evaluation"]] == [("loss", 150, "eval_results.csv")]
    healthy = tmp_path / "healthy.log"
    write_megatron_log(healthy, run_values(200))
    compared = msnb.compare(healthy, case)  # the table's loss is no copy of the training's: not compared
    assert compared.passed and compared.tags["loss"]["candidate"] == "lm loss" and compared.check("series") is None, compared.format_text()


# ---- the differential: a job's verdict is never better than its worst copy's alone --------------------------------


def _rank(result) -> int:
    """0 passed without warnings, 1 passed with warnings, 2 failed: the order "never better" is read in (a check's,
    a comparison's or a health report's)."""
    if not result.passed:
        return 2
    if hasattr(result, "evaluation"):  # a health report: an evaluation table's anomaly is its warning
        return 1 if result.evaluation else 0
    checks = result.checks if hasattr(result, "first_divergence") else [c for r in result.runs for c in r.checks]
    return 1 if any(c.status == "warn" for c in checks) else 0


@pytest.fixture(scope="module")
def lines(job) -> list:
    return [line for line in (job / "output" / "log" / "rank_0" / "info.log").read_text().splitlines(keepends=True) if "loss:[" in line]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    split=st.lists(st.integers(0, 1), min_size=20, max_size=20),
    shape=st.sampled_from(["as trained", "rising", "nan", "spike"]),
    data=st.data(),
)
def test_for_any_split_of_a_job_s_lines_no_view_is_better_than_the_worst_copy_s(lines, tmp_path_factory, split, shape, data):
    """The job's check, its comparison against the healthy run and its health report, each against the same view of
    every copy alone."""
    n = len(lines)
    text = "".join(lines)
    if shape == "rising":
        text = _losses(text, 1.0 + 0.5 * np.arange(1, n + 1))
    elif shape in ("nan", "spike"):
        at = data.draw(st.integers(1, n - 1), label="at")
        values = [float(m.group(0)[6:].split("/")[0]) for m in LOSS.finditer(text)]
        values[at:] = [float("nan") if shape == "nan" else 50.0 * v for v in values[at:]]
        text = _losses(text, values)
    mine = text.splitlines(keepends=True)
    base = tmp_path_factory.mktemp("split")
    (base / "output" / "log" / "rank_0").mkdir(parents=True)
    copies = [base / "output" / "log" / "rank_0" / "info.log", base / "train.log"]
    for i, path in enumerate(copies):
        path.write_text("".join(line for line, side in zip(mine, split[:n]) if side == i))
    baseline = base.parent / f"{base.name}_as_trained.log"
    baseline.write_text("".join(lines))
    views = {
        "check": msnb.check,
        "compare": lambda path: msnb.compare(baseline, path),
        "health": health,
    }
    for name, view in views.items():
        alone = [view(p) for p in copies if "loss:[" in p.read_text()]
        job_said = view(base)
        assert _rank(job_said) >= max(_rank(r) for r in alone), (name, job_said.format_text(), [r.format_text() for r in alone])
