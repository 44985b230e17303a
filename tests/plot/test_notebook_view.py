"""What a person sees in a notebook: the verdict once, figures that show what happened, text for plain front ends.

Real smoke runs (CPU MindSpore in a child process), real files, a real kernel
from the kernelspec; figures are checked through their matplotlib artists.
"""

import re
import shutil

import numpy as np
import pytest

import msnb
from msnb import kernel
from msnb.analysis import ema
from msnb.events import ScalarTable
from msnb.plot import LiveView, plot_histograms, plot_scalars, status_line
from msnb.plot.live import steady_step_seconds
from msnb.smoke import run_smoke
from msnb.smoke.run.figures import smoke_figures
from msnb.smoke.run.finishing import read_step_times
from tests.conftest import kernel_from_spec


@pytest.fixture(scope="module")
def passing_run():
    result = run_smoke(live=False, steps=40, keep=True)
    yield result
    shutil.rmtree(result.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def diverging_run():
    result = run_smoke(live=False, steps=20, lr=1e6)  # NaN at step 3: MindSpore's LossMonitor stops the run
    yield result
    shutil.rmtree(result.workdir, ignore_errors=True)


def final_figure(result):
    """The smoke figure drawn from every source the run left (what the live view followed, and the summary)."""
    from pathlib import Path

    workdir = Path(result.workdir)
    return smoke_figures(msnb.read(result.summary_dir), read_step_times(workdir), live_read=msnb.read(workdir))


def panel(figure, title):
    return next(a for a in figure.axes if a.get_visible() and a.get_title() == title)


def lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


# 2, 7: the final figure of a failed run shows its points and its NaN, from the richest source
def test_failed_run_figure_shows_single_points_and_the_nan_where_it_happened(diverging_run):
    log = msnb.read(diverging_run.workdir).scalars
    loss_steps, loss_values = log.where(run=".", tag="loss").step, log.where(run=".", tag="loss").value
    nan_steps = loss_steps[~np.isfinite(loss_values)].tolist()
    assert nan_steps, "the diverging run should have logged a NaN loss"
    figure, _ = final_figure(diverging_run)
    loss = panel(figure, "loss")
    marks = [line for line in loss.get_lines() if line.get_marker() == "x"]
    assert len(marks) == 1 and marks[0].get_xdata().tolist() == [float(s) for s in nan_steps]
    lr = panel(figure, "lr")
    (drawn,) = [line for line in lr.get_lines() if line.get_label().startswith("smoke")]
    assert drawn.get_marker() == "o" and len(drawn.get_xdata()) >= 1  # a single point is visible
    lo, hi = lr.get_xlim()
    assert hi - lo >= 2 and all(float(t).is_integer() for t in lr.get_xticks())  # not 0.96-1.04
    # the verdict is on the figure the result carries
    assert diverging_run.figure._suptitle.get_text() == diverging_run.headline() and "FAILED" in diverging_run.headline()


def test_final_loss_is_the_richest_source_named_in_the_legend(passing_run):
    figure, histograms = final_figure(passing_run)
    log = msnb.read(passing_run.workdir).scalars.where(run=".", tag="loss")
    summary = msnb.read(passing_run.summary_dir).scalars.where(tag="loss/auto")
    assert len(log) > len(summary)
    ax = panel(figure, "loss")
    smoothed = lines(ax)["smoke (training log)"]
    np.testing.assert_allclose(smoothed.get_xdata(), log.step)
    np.testing.assert_allclose(smoothed.get_ydata(), ema(log.value, 0.6))
    # 3: the learning rate is a schedule: drawn as written, not smoothed
    lr_ax = panel(figure, "lr")
    (lr_line,) = [line for line in lr_ax.get_lines() if not line.get_label().startswith("_")]
    steps, values = msnb.read(passing_run.summary_dir).scalars.series("lr")
    np.testing.assert_allclose(lr_line.get_ydata(), values)
    assert values.max() == pytest.approx(float(lr_line.get_ydata().max()))
    # 13: the compile step does not squash the step-time panel: it is marked, and the axis fits the steady state
    # (marked when the first step took over COMPILE_RATIO times the steady median, as it does on CPU and far more on Ascend)
    from msnb.plot.scalars import COMPILE_RATIO

    st = panel(figure, "step_time_ms")
    marks = [line for line in st.get_lines() if line.get_label().startswith("compile step 1")]
    ms = passing_run.step_times[0][1]
    first = ms[0]
    if first > COMPILE_RATIO * np.median(ms[1:]):
        assert (
            len(marks) == 1
            and (st.get_ylim()[1] < first or ms[1:].max() >= first)  # fitted to the steady state, unless a later step is as slow (a loaded machine)
            and (f"{first / 1000:.1f} s" if first >= 1000 else f"{first:.0f} ms") in marks[0].get_label()
        )  # step_time_ms read as time
    else:
        assert marks == [] and st.get_ylim()[1] >= first
    # 9: each histogram tag in its own panel, weights first, step labels inside the axes
    titles = [a.get_title() for a in histograms.axes if a.get_visible()]
    tags = set(msnb.read(passing_run.summary_dir).histograms.tag.tolist())
    assert len(titles) == len(tags) and all("weight" in t for t in titles[:2]) and "(1 histograms)" not in " ".join(titles)
    for ax in histograms.axes:
        for text in ax.texts:
            x, _ = text.get_position()
            assert text.get_transform().contains_branch_seperately(ax.transAxes)[0] and 0 <= x <= 1


def test_histogram_titles_count_in_words(ms_files):
    hist = msnb.read(ms_files / "record").histograms
    one = plot_histograms(hist.take(np.array([0])))
    assert one.axes[0].get_title() == f"{hist.tag[0]} (1 histogram)"


# 3: smoothing per tag
def test_smoothing_applies_to_noisy_series_and_can_be_overridden(tb_files):
    scalars = msnb.read(tb_files).scalars.where(rank=0)
    _, lr = scalars.series("learning-rate")
    _, loss = scalars.series("loss")

    def drawn(report, title):
        ax = panel(report.figure, title)
        return [line for line in ax.get_lines() if not line.get_label().startswith("_") and line.get_marker() != "x"][0].get_ydata()

    default = plot_scalars(scalars, tags=["loss", "lr"], smooth=0.6)
    np.testing.assert_allclose(drawn(default, "learning-rate"), lr)
    np.testing.assert_allclose(drawn(default, "loss"), ema(loss, 0.6))
    forced = plot_scalars(scalars, tags=["loss", "lr"], smooth={"lr": 0.6, "loss": 0.3})
    np.testing.assert_allclose(drawn(forced, "learning-rate"), ema(lr, 0.6))
    np.testing.assert_allclose(drawn(forced, "loss"), ema(loss, 0.3))
    raw = plot_scalars(scalars, tags=["loss"], no_smooth=["loss"])
    np.testing.assert_allclose(drawn(raw, "loss"), loss)


# 5, 8: labels and the report's wording
def test_report_names_runs_by_their_label_and_says_what_was_read_and_drawn(ms_files):
    scalars = msnb.read(ms_files / "ranks").scalars
    report = plot_scalars(scalars, ranks=True, label_for_run=lambda run: "ranks" if run == "." else run)
    text = report.format_text()
    assert "run ." not in text and "run ranks: ranks 0, 1" in text and "FLAG run ranks rank 1" in text
    first = text.splitlines()[0]
    assert first.startswith(f"read {report.points:,} points of loss; drew {report.drawn_points:,}")
    assert "after downsampling" not in first and report.drawn_points <= report.points
    assert lines(report.figure.axes[0]).keys() >= {"ranks rank 0", "ranks rank 1"}


# 6: the ETA from the steady state
def test_eta_says_estimating_until_the_pace_is_known_then_follows_the_steady_state():
    # a 5 s start-up before step 1, 0.1 s steps after: the first ETA must not extrapolate the start-up
    steps = np.arange(1, 11)
    walls = 100.0 + 5.0 + 0.1 * (steps - 1)
    walls[1] += 0.5  # step 2 also slow (warm-up): the first interval is left out
    walls[2:] += 0.5
    assert steady_step_seconds(steps[:2], walls[:2]) is None
    assert steady_step_seconds(steps[:3], walls[:3]) is None
    assert steady_step_seconds(steps, walls) == pytest.approx(0.1)
    table = ScalarTable(
        run=np.full(10, "r", dtype=object), rank=np.zeros(10, dtype=int), tag=np.full(10, "loss", dtype=object), step=steps, wall_time=walls, value=1.0 / steps
    )
    assert "ETA estimating" in status_line(table.take(np.arange(2)), total=200, seconds_per_step=steady_step_seconds(steps[:2], walls[:2]))
    line = status_line(table, total=200, seconds_per_step=steady_step_seconds(steps, walls))
    assert line.startswith("step 10/200 (5%), ETA 19 s")  # 190 steps at 0.1 s
    # several ranks: a step's time is when its first rank reported it
    both = ScalarTable.concat(
        [table, ScalarTable(**{c: getattr(table, c) for c in ScalarTable.COLUMNS} | {"rank": np.ones(10, dtype=int), "wall_time": walls + 0.05})]
    )
    assert steady_step_seconds(both.step, both.wall_time) == pytest.approx(0.1)


def test_live_view_text_shows_status_before_data_and_estimating_first():
    import io

    buf = io.StringIO()
    view = LiveView(text=True, stream=buf, total=100, min_interval=0, status="starting MindSpore...")
    steps = np.arange(1, 3)
    table = ScalarTable(
        run=np.full(2, ".", dtype=object),
        rank=np.zeros(2, dtype=int),
        tag=np.full(2, "loss", dtype=object),
        step=steps,
        wall_time=np.full(2, np.nan),
        value=[1.0, 0.9],
    )
    view.update(table)
    out = buf.getvalue().splitlines()
    assert out[0] == "starting MindSpore..." and out[1].startswith("step 2/100 (2%), ETA estimating")


# 10: the whole last traceback, monospace, collapsible
def test_failed_run_shows_the_whole_last_traceback():
    # thirty distinct frames (Python folds a frame repeated more than three times into one line)
    code = "def level_0():\n    raise RuntimeError('deep failure in the model')\n"
    code += "".join(f"def level_{i}():\n    level_{i - 1}()\n" for i in range(1, 30)) + "level_29()\n"
    result = run_smoke(live=False, code=code, steps=10)
    try:
        assert not result.passed
        assert not result.log_tail.lstrip().startswith("Traceback")  # the runner's tail alone starts mid-traceback
        assert result.traceback.startswith("Traceback (most recent call last)")
        assert result.traceback.rstrip().endswith("RuntimeError: deep failure in the model")
        assert all(f"in level_{i}" in result.traceback for i in range(30))
        page = result.to_html()
        assert "<details open class='msnb-traceback'>" in page and "monospace" in page and "white-space:pre" in page
        assert "Traceback (most recent call last)" in str(result) and str(result) == result.format_text()
    finally:
        shutil.rmtree(result.workdir, ignore_errors=True)


# 1, 4, 11: in a real kernel, the verdict once, text/plain everywhere, the status line before data
KERNEL_CELLS = [
    "%mfmon_smoke --steps 20 --no-live",
    "r = %mfmon_smoke --steps 20 --no-live",
    "r",
    "print(r)",
    "from msnb.plot import LiveView\nv = LiveView(title='job', total=10, status='starting MindSpore...')",
]


def test_verdict_once_and_plain_text_in_a_real_kernel(jupyter_dirs):
    kernel.install("msnb-test-view", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-view") as kc:
        per_cell = []
        for code in KERNEL_CELLS:
            outputs = []
            reply = kc.execute_interactive(code, timeout=240, output_hook=outputs.append)
            assert reply["content"]["status"] == "ok", code
            per_cell.append([m for m in outputs if m["msg_type"] in ("display_data", "execute_result", "stream", "error")])
    for cell in per_cell:
        for m in cell:
            data = m["content"].get("data", {})
            plain = data.get("text/plain", m["content"].get("text", ""))
            assert "<IPython.core.display" not in plain and "Traceback" not in plain
            if data:
                assert "text/plain" in data  # every display carries plain text
    bare, assigned, shown_later, printed, live = per_cell
    for cell in (bare, assigned, shown_later):
        verdicts = [m for m in cell if "msnb-smoke" in m["content"].get("data", {}).get("text/html", "")]
        assert len(verdicts) == 1 and len(cell) == 1  # once, and no Out[n] beside it
        assert re.match(r"msnb smoke PASSED( with \d+ warnings?)?: 20/20 steps", verdicts[0]["content"]["data"]["text/plain"])
        assert "data:image/png;base64," in verdicts[0]["content"]["data"]["text/html"]
    assert printed[0]["msg_type"] == "stream" and printed[0]["content"]["text"].startswith("msnb smoke PASSED")
    (status,) = live
    assert status["content"]["data"]["text/plain"] == "[job] starting MindSpore..." and "msnb-status" in status["content"]["data"]["text/html"]


def test_live_legend_names_the_run_itself_in_words():
    from matplotlib.figure import Figure

    view = LiveView(text=True, status=None)
    table = ScalarTable(
        run=np.full(3, ".", dtype=object),
        rank=np.full(3, -1),
        tag=np.full(3, "loss", dtype=object),
        step=np.arange(1, 4),
        wall_time=np.full(3, np.nan),
        value=[3.0, 2.0, 1.0],
    )
    report = plot_scalars(table, tags=["loss"], figure=Figure(), label_for_run=view.label_for_run)
    assert report.labels == {".": "this run"} and "this run" in lines(report.figure.axes[0])
