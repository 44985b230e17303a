"""The first anomaly across ranks x parameters x steps, from mindformers' TrainingStateMonitor data.

Runs come from ``tests/writers/training_state.py``: tensorboardX in mindformers'
layout (and the same values as TrainingStateMonitor's log lines), with the
injected fault's truth in ``expected.json``.
"""

import json
import logging
import math
import statistics
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msnb
from msnb.analysis.health import DEPARTURE, NAN, NEG_INF, POS_INF, Settings, first_anomaly, first_departures, scan_cube, scan_scalars
from msnb.errors import NothingReadable, UsageError
from msnb.events import ScalarTable, read
from msnb.events.training_state import MAX_LINE, fold_head_runs, parse_line
from tests.conftest import _run_writer, ipython_json, load_expected


@pytest.fixture(scope="session")
def ts_runs(tmp_path_factory):
    """Every run of writers/training_state.py, written once per session."""
    return _run_writer("training_state.py", tmp_path_factory.mktemp("training_state"))


@pytest.fixture(scope="session")
def fault_report(ts_runs):
    return msnb.health(ts_runs / "fault")


# ---------------------------------------------------------------- the log lines


def _mf_line(fmt: str, epoch, epochs, step, per_epoch, tag, data) -> str:
    """A line as mindformers' logger writes it (formats of mindformers/tools/logger.py, message of _to_log)."""
    rec = logging.makeLogRecord(
        {
            "name": "mindformers",
            "levelname": "INFO",
            "msg": "Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s",
            "args": (epoch, epochs, step, per_epoch, tag, data),
            "lineno": 1496,
            "funcName": "_to_log",
            "filepath": "mindformers/core/callback/callback.py",
            "created": 1.7e9,
        }
    )
    return logging.Formatter(fmt).format(rec)


FORMATS = (
    "%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s - %(message)s",
    "[%(levelname)s] %(asctime)s [%(filepath)s:%(lineno)d] %(funcName)s: %(message)s",
)
TAG = st.from_regex(r"[a-z_]{1,12}(/[a-z0-9_.]{1,30}){0,2}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    fmt=st.sampled_from(FORMATS),
    epoch=st.integers(1, 999),
    step=st.integers(1, 99999),
    per_epoch=st.integers(1, 99999),
    tag=TAG,
    value=st.floats(allow_nan=True, allow_infinity=True, width=32),
)
def test_a_logged_scalar_reads_back_as_its_tag_step_and_value(fmt, epoch, step, per_epoch, tag, value):
    line = _mf_line(fmt, epoch, 1000, step, per_epoch, tag, np.float32(value))
    points = parse_line(line)
    assert points is not None and len(points) == 1
    got_tag, got_step, got = points[0]
    assert got_tag == tag
    assert got_step == (epoch - 1) * per_epoch + step
    assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(float(np.float32(value)), rel=1e-6)


@settings(max_examples=100, deadline=None)
@given(heads=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40), numpy_style=st.booleans())
def test_a_logged_list_of_heads_becomes_one_tag_per_head(heads, numpy_style):
    data = np.array(heads) if numpy_style else list(heads)
    line = _mf_line(FORMATS[0], 1, 1, 7, 100, "max_attention_logit/model.layers.3.attention", data)
    points = parse_line(line)
    assert [p[0] for p in points] == [f"max_attention_logit/model.layers.3.attention/head_{i}" for i in range(len(heads))]
    assert [p[2] for p in points] == pytest.approx([float(x) for x in data], rel=1e-6, abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Epoch:[] /,step0123456789.-ainf\t{}")), max_size=300))
def test_any_text_is_parsed_or_refused_without_raising(text):
    points = parse_line(text)
    assert points is None or all(isinstance(t, str) and isinstance(s, int) for t, s, _v in points)


def test_other_lines_and_hostile_lines_are_refused():
    mf = "2024-05-01 12:00:00,123 - mindformers[x.py:747] - INFO - { Epoch:[  1/  2], step:[    5/  100], loss:[2.3/2.4], per_step_time: 1ms"
    assert parse_line(mf) is None  # MFLossMonitor's line belongs to the loss reader
    assert parse_line("Epoch:[  1/  2], step:[    5/  100] local_norm/a: not-a-number") is None
    assert parse_line("Epoch:[" * 200_000) is None  # many anchors, none complete: one failed match
    long_line = "Epoch:[  1/  2], step:[    5/  100] t: 1.0" + " " * MAX_LINE
    assert parse_line(long_line) is None
    assert parse_line("Epoch:[  1/  2], step:[    5/  100] t: [1.0, x]") is None
    assert parse_line("Epoch:[  0/  2], step:[    5/  100] t: 1.0") is None


def test_log_lines_and_tensorboard_give_the_same_series(ts_runs):
    tb = read(ts_runs / "small" / "tensorboard").scalars  # the reader folds add_scalars' head folders itself
    logs = read(ts_runs / "small" / "log").scalars  # worker_0.log: rank 0
    files = read(ts_runs / "small" / "output").scalars  # output/log/rank_1/info.log: rank 1
    assert set(logs.rank.tolist()) == {0} and set(files.rank.tolist()) == {1}
    assert set(tb.run.tolist()) == {"."}, "add_scalars' head folders fold back into the run"
    tree = read(ts_runs / "small").scalars
    assert set(tree.run.tolist()) == {"tensorboard", "log", "output/log"}
    assert fold_head_runs(tree) is tree  # nothing left to fold: every command sees one run per job
    import msnb

    assert len(msnb.check(ts_runs / "small" / "tensorboard").runs) == 1  # msnb check judges the job, not each head folder
    both = [t for t in tb.tags() if t.startswith(("local_norm/", "max_attention_logit/"))]
    assert len(both) == 4 + 2 + 2
    for table, rank in ((logs, 0), (files, 1)):
        assert [t for t in table.tags() if t.startswith(("local_norm/", "max_attention_logit/"))] == both
        for tag in both:
            s_tb, v_tb = tb.series(tag, rank=rank)
            s_log, v_log = table.series(tag, rank=rank)
            assert s_log.tolist() == s_tb.tolist()
            np.testing.assert_allclose(v_log, v_tb, rtol=1e-6, equal_nan=True)
        assert "micro_local_lm_loss" in table.tags()  # written to the log only
    assert "local_lm_loss" in tb.tags()


# ---------------------------------------------------------------- the detector against a slow oracle


def _reference(row, s: Settings):
    """One series judged point by point in plain Python: the oracle for first_departures."""
    row = [float(v) for v in row]
    block = min(s.block, s.min_history)  # a block never outlasts the history a point needs
    first = math.ceil(s.min_history / block) * block
    for j, v in enumerate(row):
        if not math.isfinite(v):
            return j, {True: NAN}.get(math.isnan(v), POS_INF if v > 0 else NEG_INF)
        if j < first:
            continue
        start = first + (j - first) // block * block  # the block's start: its window ends there
        ref = row[max(0, start - s.window) : start]
        med = statistics.median(ref)
        mad = statistics.median(abs(x - med) for x in ref)
        scale = max(1.4826 * mad, s.rel_floor * abs(med), np.finfo(float).tiny)
        if abs(v - med) / scale > s.threshold:
            return j, DEPARTURE
    return -1, 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 9),
    t=st.integers(1, 400),
    window=st.integers(4, 80),
    block=st.integers(1, 40),
    min_history=st.integers(4, 60),
    threshold=st.floats(2.0, 12.0),
)
def test_first_departures_agrees_with_a_point_by_point_oracle(seed, n, t, window, block, min_history, threshold):
    rng = np.random.default_rng(seed)
    x = 1.0 + 0.1 * rng.standard_normal((n, t))
    for i in range(n):  # faults of every kind at random places, some rows clean
        kind = rng.integers(0, 5)
        at = int(rng.integers(0, t))
        if kind == 1:
            x[i, at:] *= np.exp(0.2 * np.arange(t - at))
        elif kind == 2:
            x[i, at] = rng.choice([np.nan, np.inf, -np.inf])
        elif kind == 3:
            x[i, at] += 50
        elif kind == 4:
            x[i, : t // 2] = 3.0  # a flat stretch: the relative floor keeps it quiet
    s = Settings(window=window, block=block, threshold=threshold, min_history=min_history)
    index, z, codes = first_departures(x, s)
    for i in range(n):
        want_index, want_code = _reference(x[i], s)
        assert (int(index[i]), int(codes[i])) == (want_index, want_code), f"row {i}"
        if want_code == DEPARTURE:
            assert abs(z[i]) > threshold


def test_float32_cube_and_table_give_the_same_answer():
    rng = np.random.default_rng(7)
    cube = (1 + 0.05 * rng.standard_normal((3, 5, 300))).astype(np.float32)
    cube[2, 4, 200:] *= np.exp(0.1 * np.arange(100, dtype=np.float32))
    cube[2, 4, 260] = np.nan
    rep = scan_cube(cube, np.arange(1, 301), tags=[f"local_norm/p{i}" for i in range(5)], ranks=[4, 5, 6])
    assert (rep.first.rank, rep.first.tag) == (6, "local_norm/p4")
    assert 201 <= rep.first.step < 260 and rep.first.reason.startswith("departure")
    assert rep.as_dict()["ranks"] == [4, 5, 6] and rep.as_dict()["tags_scanned"] == 5


def test_bad_settings_are_usage_errors():
    with pytest.raises(UsageError):
        Settings(window=2).check()
    with pytest.raises(UsageError):
        Settings(threshold=float("nan")).check()


# ---------------------------------------------------------------- the runs


def test_the_injected_fault_is_found_where_it_started(ts_runs, fault_report):
    truth = load_expected(ts_runs)["fault"]
    fault = truth["fault"]
    first = fault_report.first
    assert (first.rank, first.tag) == (fault["rank"], "local_norm/" + fault["param"])
    assert fault["grow_from"] <= first.step < fault["nan_at"]
    assert first.reason.startswith("departure") and math.isfinite(first.value)
    by = {(a.rank, a.tag): a for a in fault_report.cascade}
    assert fault_report.cascade_total == len(fault_report.cascade) or len(fault_report.cascade) == 200
    loss = by[(fault["rank"], "loss")]
    assert loss.step > first.step and loss.step <= fault["nan_at"] + 1
    grad = [by[(r, "grad-norm")] for r in range(truth["ranks"]) if (r, "grad-norm") in by]
    assert len(grad) == truth["ranks"], "every rank's all-reduced grad-norm follows"
    assert all(g.step > first.step for g in grad)
    steps = [a.step for a in fault_report.cascade]
    assert steps == sorted(steps)
    assert fault_report.ranks == list(range(truth["ranks"]))
    assert fault_report.tags_scanned == truth["params"] + 4  # local_norm/*, loss, grad-norm, device_local_norm, local_lm_loss


def test_the_report_as_json_text_and_html(fault_report):
    d = fault_report.as_dict()
    assert set(d) == {"first", "cascade", "ranks", "tags_scanned", "read_from", "judged_failed", "evaluation", "memory"} and d["memory"] == {}
    (failed,) = d["judged_failed"]  # the judge fails the run too (msnb check's verdict), naming the series and its file
    assert failed["run"] == "fault" and "finite" in [c["name"] for c in failed["failed"]] and d["evaluation"] == []
    assert d["read_from"] == {"fault": {"tensorboard/rank_*": fault_report.tags_scanned}}  # (the run as msnb check names it)
    assert set(d["first"]) == {"run", "step", "rank", "tag", "value", "reason"}
    assert all(set(c) == {"run", "step", "rank", "tag", "reason"} for c in d["cascade"])
    json.loads(json.dumps(d, allow_nan=False))  # strict JSON: no NaN anywhere
    text = fault_report.format_text()
    assert text.startswith(f"first anomaly: step {fault_report.first.step:,}, rank {fault_report.first.rank}, {fault_report.first.tag}")
    assert text.splitlines()[0].endswith("(read from tensorboard/rank_*)") and "\nread from tensorboard/rank_* (205 tags)" in text
    assert "local_norm/* (" in text, "a family of parameters going bad at one step is one line"
    html = fault_report._repr_html_()
    assert "<table>" in html and fault_report.first.tag in html


def test_a_healthy_run_with_warm_up_and_noise_has_no_anomaly(ts_runs):
    truth = load_expected(ts_runs)["healthy"]
    report = msnb.health(ts_runs / "healthy")
    assert report.first is None and not report.anomalous, report.format_text()
    series = truth["ranks"] * (truth["params"] + 4)
    assert report.series_scanned == series and report.as_dict()["first"] is None
    assert report.format_text().startswith(f"no anomaly: {series:,} series")


def test_logs_and_tensorboard_agree_on_the_first_anomaly(ts_runs):
    truth = load_expected(ts_runs)["small"]["fault"]
    tb = msnb.health(ts_runs / "small" / "tensorboard", tag_prefix="local_norm")
    log = msnb.health(ts_runs / "small" / "output", tag_prefix="local_norm")  # rank 1's log
    assert tb.first.as_dict(value=False) == log.first.as_dict(value=False)
    assert tb.first.value == pytest.approx(log.first.value, rel=1e-6)  # float32 in the event, its str() in the log
    assert (tb.first.rank, tb.first.tag) == (truth["rank"], "local_norm/" + truth["param"])
    assert {(a.step, a.tag) for a in tb.cascade if a.rank == 1} == {(a.step, a.tag) for a in log.cascade}


def test_abnormal_global_norm_json_is_an_anomaly(ts_runs):
    report = msnb.health(ts_runs / "spike")
    assert report.anomalous and report.first.step == 300 and "abnormal_global_norm.json" in report.first.reason
    assert [r for _p, r in report.global_norm_records] == [{300: [12.5], 600: [41.0, 42.5]}]


def test_first_anomaly_for_the_judge(ts_runs):
    assert first_anomaly(read(ts_runs / "healthy")) is None
    a = first_anomaly(read(ts_runs / "small" / "tensorboard"))
    assert a.rank == 1 and a.tag.startswith("local_norm/")


def test_unreadable_paths(tmp_path):
    with pytest.raises(NothingReadable):
        msnb.health(tmp_path / "missing")
    with pytest.raises(NothingReadable):
        msnb.health(tmp_path)


# ---------------------------------------------------------------- CLI and magic


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "msnb.cli", "health", *map(str, args)], capture_output=True, text=True, timeout=300)


def test_cli_exit_codes_and_json(ts_runs, tmp_path):
    p = _cli(ts_runs / "small" / "tensorboard", "--json", "--tag-prefix", "local_norm")
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    assert d["first"]["rank"] == 1 and all(c["tag"].startswith("local_norm/") for c in d["cascade"])
    assert d["tags_scanned"] == 4
    p = _cli(ts_runs / "healthy")
    assert p.returncode == 0 and p.stdout.startswith("no anomaly"), p.stderr
    p = _cli(tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("msnb health: error:") and len(p.stderr.strip().splitlines()) == 1
    p = _cli(ts_runs / "healthy", "--tag-prefix", "no_such_family")
    assert p.returncode == 2 and "no tag starts with 'no_such_family'" in p.stderr
    p = _cli(ts_runs / "healthy", "--window", "1")
    assert p.returncode == 2 and "window" in p.stderr


def test_magic_returns_the_report(ts_runs):
    out = ipython_json(
        f"r = ip.run_line_magic('mfmon_health', {str(ts_runs / 'small' / 'tensorboard')!r})\n"
        "try:\n"
        "    ip.run_line_magic('mfmon_health', '/no/such/dir')\n"
        "    err = None\n"
        "except UsageError as e:\n"
        "    err = str(e)\n"
        "print(json.dumps({'first': r.as_dict()['first'], 'html': '<table>' in r._repr_html_(), 'err': err}))\n",
        timeout=120,
    )
    assert out["first"]["rank"] == 1 and out["html"]
    assert out["err"].startswith("msnb: ") and "no such file" in out["err"]


# ---------------------------------------------------------------- heatmaps


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.sampled_from(["attention.wq", "attention.wk", "feed_forward.w1"])), min_size=1, max_size=30, unique=True))
def test_natural_order_is_model_order(layers):
    from msnb.plot.heatmaps import natural_key

    names = [f"model.layers.{i}.{p}.weight" for i, p in layers]
    ordered = sorted(names, key=natural_key)
    assert ordered == [f"model.layers.{i}.{p}.weight" for i, p in sorted(layers)]


def _images(fig):
    return [im for ax in fig.axes for im in ax.get_images()]


def test_parameter_heatmap_shows_the_fault_and_marks_it(ts_runs, fault_report):
    from msnb.plot.heatmaps import NONFINITE, parameter_heatmap

    fault = load_expected(ts_runs)["fault"]["fault"]
    result = read(ts_runs / "fault")
    h = parameter_heatmap(result, anomaly=fault_report)
    assert len(_images(h.figure)) == 1, "one image, never an artist per cell"
    row = h.rows.index(fault["param"])
    cols = (h.steps >= fault["grow_from"] + 150) & (h.steps < fault["nan_at"])
    assert (h.cells[row, cols] > 0.5).all(), "the growing parameter is red (over 3x its median)"
    others = np.delete(h.cells, row, axis=0)[:, h.steps < fault["nan_at"]]
    assert np.median(np.abs(others)) < 0.05, "every other parameter stays white"
    assert (h.cells[:, h.steps > fault["nan_at"] + 60] >= NONFINITE).all(), "NaN everywhere once it spread"
    marks = [ln for ax in h.figure.axes for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(marks) == 1 and marks[0].get_xdata()[0] == fault_report.first.step and marks[0].get_ydata()[0] == row
    one = parameter_heatmap(result, rank=0, anomaly=fault_report)
    assert not [ln for ax in one.figure.axes for ln in ax.get_lines() if ln.get_marker() == "o"], "rank 0 is not where it started"
    with pytest.raises(UsageError):
        parameter_heatmap(result, rank=99)
    with pytest.raises(UsageError):
        parameter_heatmap(result, prefix="no_such/")


def test_rank_heatmap_singles_out_the_rank(ts_runs, fault_report):
    from msnb.plot.heatmaps import NONFINITE, rank_heatmap

    fault = load_expected(ts_runs)["fault"]["fault"]
    h = rank_heatmap(read(ts_runs / "fault"), "loss", anomaly=fault_report)
    assert h.rows == [f"rank {r}" for r in range(8)] and len(_images(h.figure)) == 1
    before = (h.steps > fault["grow_from"] + 100) & (h.steps < fault["nan_at"])
    assert h.cells[fault["rank"], before].min() > np.abs(np.delete(h.cells, fault["rank"], axis=0)[:, before]).max()
    assert (h.cells[fault["rank"], h.steps > fault["nan_at"] + 1] >= NONFINITE).all()


def test_heatmaps_aggregate_before_drawing_and_keep_what_matters():
    from msnb.plot.heatmaps import NONFINITE, parameter_heatmap_from_cube

    rng = np.random.default_rng(0)
    cube = (1 + 0.02 * rng.standard_normal((2, 1500, 6000))).astype(np.float32)
    cube[1, 700, 3333] = np.nan  # one non-finite cell among 18 million
    cube[0, 1200, 5000] = 40.0  # one spike
    params = [f"layers.{i}.w" for i in range(1500)]
    h = parameter_heatmap_from_cube(cube, np.arange(6000), params, max_cols=1000, max_rows=300)
    assert h.cells.shape == (300, 1000) and _images(h.figure)[0].get_array().shape[:2] == (300, 1000)
    assert (h.cells >= NONFINITE).sum() == 1 and h.cells[700 // 5, 3333 // 6] >= NONFINITE
    assert h.cells[1200 // 5, 5000 // 6] == pytest.approx(np.log10(40), abs=0.05)


def test_a_failed_check_names_where_it_started(ts_runs):
    """msnb check on the fault run fails on its loss and says which rank and parameter went bad first."""
    fault = load_expected(ts_runs)["fault"]["fault"]
    result = msnb.check(ts_runs / "fault")
    assert not result.passed
    (run,) = result.runs
    where = [c for c in run.checks if c.name == "first_anomaly"]
    assert len(where) == 1 and where[0].status == "warn", run.checks
    assert f"rank {fault['rank']}, local_norm/{fault['param']}" in where[0].detail
    assert "first_anomaly" in result.format_text() and not result.as_dict()["passed"]


def test_a_passing_check_adds_nothing(ts_runs):
    result = msnb.check(ts_runs / "healthy")
    assert result.passed and not any(c.name == "first_anomaly" for r in result.runs for c in r.checks)


def test_a_nan_rewritten_at_its_step_is_still_the_first_anomaly():
    """A retried step writes NaN, then a finite value: the last write is the step's value, but the NaN stays an anomaly
    (the judge's ``finite`` check flags it; the scan must not hide it)."""
    steps = np.concatenate([np.arange(1, 81), [80], np.arange(81, 201)])
    values = np.concatenate([np.linspace(3, 2, 80), [1.9], np.linspace(1.9, 1.5, 120)])
    values[79] = np.nan  # step 80's first write
    table = ScalarTable(
        run=np.full(steps.size, ".", dtype=object),
        rank=np.ones(steps.size, dtype=np.int64),
        tag=np.full(steps.size, "loss", dtype=object),
        step=steps,
        wall_time=steps * 1.0,
        value=values,
    )
    first = scan_scalars(table).first
    assert (first.step, first.rank, first.tag, first.reason) == (80, 1, "loss", "non-finite (nan)")
    values[79] = 1.95  # the same log without the NaN: nothing to find
    assert scan_scalars(table).first is None


def test_the_cascade_of_several_runs_never_merges_their_ranks():
    """Rank 0 of one run and rank 1 of another breaking at one step are two lines, each naming its run, not 'ranks 0-1'."""
    n = 100
    steps = np.arange(1, n + 1)
    rows = []
    for run, rank in (("job_a", 0), ("job_b", 1), ("job_c", 0)):
        v = np.linspace(3, 2, n)
        if run != "job_c":
            v[60:] = np.nan
        rows.append((run, rank, v))
    table = ScalarTable(
        run=np.array([r for r, _, _ in rows for _ in steps], dtype=object),
        rank=np.concatenate([np.full(n, k, dtype=np.int64) for _, k, _ in rows]),
        tag=np.full(3 * n, "loss", dtype=object),
        step=np.tile(steps, 3),
        wall_time=np.tile(steps * 1.0, 3),
        value=np.concatenate([v for *_, v in rows]),
    )
    report = scan_scalars(table)
    assert (report.first.run, report.first.step) == ("job_a", 61) and report.several_runs
    assert report.cascade_groups() == [(61, "run job_b: loss", "non-finite", [1])]
    assert "run job_b: loss" in report.format_text()


def test_mindformers_copies_against_samples_are_not_scanned_and_the_steps_said_are_the_runs(tmp_path):
    """mindformers writes each series again against consumed samples (``loss vs samples``, stored by tensorboardX as
    ``loss_vs_samples``): x is samples there, so a 40-step run at batch 2 read 'steps 1-80' when they were scanned."""
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path / "rank_0")) as w:
        for step in range(1, 41):
            w.add_scalar("loss", 5.0 / step, step)
            w.add_scalar("loss vs samples", 5.0 / step, step * 2)
    report = msnb.health(tmp_path)
    assert "_vs_samples" in " ".join(msnb.read(tmp_path).scalars.tags()) or "loss vs samples" in msnb.read(tmp_path).scalars.tags()
    assert report.tags_scanned == 1 and "steps 1-40" in report.format_text(), report.format_text()


def test_a_job_of_logs_and_tensorboard_says_which_writer_each_scanned_tag_came_from(ts_runs):
    # the small job: TensorBoard folders of two ranks, a worker log and rank 1's info.log, read as one run
    report = msnb.health(ts_runs / "small")
    writers = report.read_from["small"]
    assert sum(writers.values()) == report.tags_scanned  # every scanned tag from exactly one writer
    assert set(writers) == {"tensorboard/rank_*", "log/worker_0.log", "output/log/rank_1/info.log"}  # head folders are their writer's
    assert report.first_from() == "tensorboard/rank_*" and report.first.tag.startswith("local_norm/")
    assert "read from tensorboard/rank_* (" in report.format_text() and "read from" in report._repr_html_()
