"""One job is one run in every view, each tag read from one writer and said; two folders are never one run.

The files come from the real writers: mindformers' MFLossMonitor and its TensorBoard writer training a small
network on CPU (tests/writers/mindformers_monitor.py), its console captured as ``train.log`` the way
``msnb smoke`` captures a mindformers child's.  The failing cases change one printed value of those files.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import msnb
from msnb.dashboard.model import BoardData
from msnb.dashboard.widgets import _badge
from msnb.events.problems import ProblemKind
from msnb.events.runs import read_runs
from msnb.plot.scalars import plot_read

WRITER = Path(__file__).resolve().parent.parent / "writers" / "mindformers_monitor.py"


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job")
    with open(out / "train.log", "wb") as log:
        proc = subprocess.run([sys.executable, str(WRITER), str(out)], stdout=log, stderr=subprocess.STDOUT, cwd=str(out), timeout=600, check=False)
    assert proc.returncode == 0, (out / "train.log").read_text(errors="replace")[-3000:]
    return out


def _nan_at(text: str, field: str, n: int) -> str:
    """*text* with the *n*-th printed value of *field* (``loss:[2.1/`` or ``global_norm: 2.1``) made ``nan``."""
    pattern = re.compile(rf"({field}: ?\[? ?)[0-9.]+")
    seen = [0]

    def swap(m):
        seen[0] += 1
        return m.group(1) + "nan" if seen[0] == n else m.group(0)

    out = pattern.sub(swap, text)
    assert out != text, field
    return out


def _table(path: Path, nan_step: int | None = None) -> None:
    """An evaluation's table beside the log: step,loss (finite, or NaN at one step)."""
    path.write_text("step,loss\n" + "".join(f"{s},{'nan' if s == nan_step else 1.5 - s * 0.01}\n" for s in range(1, 21)))


@pytest.fixture(scope="module")
def cases(job, tmp_path_factory) -> Path:
    """``a``/``b``: two copies of the job, b's info.log with one NaN global_norm; ``run``: a NaN loss in train.log
    beside a finite eval_results.csv; ``rev``: the reverse; ``deep/rank_0/sub/train.log``: the NaN log a rank deep."""
    base = tmp_path_factory.mktemp("cases")
    log = (job / "train.log").read_text()
    for name in ("a", "b"):
        shutil.copytree(job, base / name)
    info = base / "b" / "output" / "log" / "rank_0" / "info.log"
    info.write_text(_nan_at(info.read_text(), "global_norm", 12))
    (base / "run").mkdir()
    (base / "run" / "train.log").write_text(_nan_at(log, "loss", 15))
    _table(base / "run" / "eval_results.csv")
    (base / "rev").mkdir()
    (base / "rev" / "train.log").write_text(log)
    _table(base / "rev" / "eval_results.csv", nan_step=10)
    deep = base / "deep" / "rank_0" / "sub"
    deep.mkdir(parents=True)
    (deep / "train.log").write_text(_nan_at(log, "loss", 15))
    return base


def test_one_job_is_one_run_in_check_plot_report_board_and_runs(job, tmp_path):
    seen = msnb.read(job).scalars  # the runs as discovered: one per writer's folder
    assert len({r for r in seen.run.tolist() if "loss" in set(seen.where(run=r).tag.tolist())}) == 3

    checked = msnb.check(job)
    assert [r.run for r in checked.runs] == [job.name] and checked.passed, checked.format_text()
    assert checked.runs[0].judged_from.startswith("output/log/rank_0/info.log: loss, global_norm"), checked.runs[0].judged_from
    copies = [p for p in checked.problems if p.kind == ProblemKind.COPY]
    assert {Path(p.path).name for p in copies} == {"train.log"} | {Path(p.path).name for p in copies if "tfevents" in p.path}
    assert any("tfevents" in p.path for p in copies) and all("read once, from output/log/rank_0/info.log" in p.message for p in copies)
    text = checked.format_text()
    assert "judged from output/log/rank_0/info.log: loss, global_norm" in text and text.count("read once") == 2
    assert checked.as_dict()["runs"][0]["judged_from"] == checked.runs[0].judged_from

    assert plot_read(read_runs([job], labelled=True), [job]).runs == [job.name]
    report = msnb.report(job, out=tmp_path / "r.html")
    assert report.runs == [job.name] and "judged from output/log/rank_0/info.log" in report.html
    # the header says a writer's copy as a note, not as a problem while reading
    assert f"0 problems while reading; {len(copies)} notes: a series two writers of one job keep, read once" in report.html
    board = BoardData([job])
    assert board.poll(final=True) == ["."] and board.runs["."].verdict.judged_from == checked.runs[0].judged_from
    assert "judged from output/log/rank_0/info.log" in _badge(board, ".")  # the board's light says it in its tooltip
    table = msnb.runs(job)
    assert [r.run for r in table.rows] == ["."] and table.rows[0].passed


def test_a_copy_whose_global_norm_is_nan_fails_beside_its_twin(cases, tmp_path):
    checked = msnb.check([cases / "a", cases / "b"])
    by_run = {r.run: r for r in checked.runs}
    assert set(by_run) == {"a", "b"} and by_run["a"].passed and not by_run["b"].passed
    assert not checked.passed and checked.exit_code == 1
    assert checked.same_series == {"b": "a"} and "each judged on its own" in checked.format_text()
    report = msnb.report([cases / "a", cases / "b"], out=tmp_path / "r.html")
    assert report.passed is False
    rows = {r.run: r for r in msnb.runs(cases).rows}
    assert not rows["b"].passed and rows["a"].passed


def test_a_table_beside_the_log_never_stands_in_for_the_training_loss(cases, job):
    failing = msnb.check(cases / "run")
    assert not failing.passed, failing.format_text()
    assert failing.runs[0].judged_from.startswith("train.log: loss")
    assert any(p.kind == ProblemKind.COPY and "kept apart as eval_results/loss" in p.message for p in failing.problems)
    healthy = msnb.check(cases / "rev")
    assert healthy.passed, healthy.format_text()
    assert "eval_results/loss" in msnb.read(cases / "rev", jobs=True).scalars.tags()
    compared = msnb.compare(job / "train.log", cases / "rev")  # the same training log on both sides
    assert compared.passed, compared.format_text()
    rows = {r.run: r for r in msnb.runs(cases).rows}
    assert not rows["run"].passed and rows["rev"].passed


def test_a_log_a_rank_deep_is_its_job_s_and_fails(cases):
    table = msnb.runs(cases)
    rows = {r.run: r for r in table.rows}
    assert "deep" in rows and not rows["deep"].passed and "deep/sub" not in rows
    assert not any(p.kind == ProblemKind.MISSING for p in table.all_problems), table.format_text()
    assert table.as_dict()["runs"][[r.run for r in table.rows].index("deep")]["judged_from"].startswith("rank_0/sub/train.log: loss")
    assert not msnb.check(cases / "deep").passed


def test_a_writer_whose_losses_differ_is_kept_apart_and_said(job, tmp_path):
    other = tmp_path / "job"
    shutil.copytree(job, other)
    info = other / "output" / "log" / "rank_0" / "info.log"
    # every printed loss one unit higher (the TensorBoard file and train.log keep the training's)
    info.write_text(re.sub(r"loss:\[ ?(\d+)\.", lambda m: f"loss:[{int(m.group(1)) + 1}.", info.read_text()))

    result = msnb.check(other)

    assert len(result.runs) == 1
    differ = [p for p in result.problems if p.kind == ProblemKind.COPY and "another series" in p.message]
    assert differ and all(p.severity == "warning" for p in differ), result.format_text()
    tags = msnb.read(other, jobs=True).scalars.tags()
    assert "loss" in tags and any(t.endswith("/loss") for t in tags)
