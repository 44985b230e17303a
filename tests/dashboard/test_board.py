"""``msnb.board`` and ``%mfmon_board`` on runs written by tensorboardX: each control, asserted on the figure it draws.

The runs are the scenario corpus's curves (tests/scenarios/catalog.py): a
healthy run that spells its loss ``lm-loss``, a run with a NaN on rank 2 from
step 150 and a run whose rank 1 drifts away from step 200, each with a
learning rate and a gradient norm, and histograms on one rank.  Lines are
found by the ``gid`` the board gives each (``smooth|run|rank|tag`` ...), never
by colour or legend order.
"""

import asyncio
import base64
import os
import shutil
import threading
import time

import numpy as np
import pytest

import msnb
from msnb.dashboard import Board
from msnb.dashboard.widgets import HOW_TO
from msnb.errors import NothingReadable, UsageError
from tests.scenarios.catalog import _drift, _healthy, _nan_rank, _resumed
from tests.test_browser import _kernel_idle, _wait, browser, lab, open_notebook  # noqa: F401  (fixtures, used by name)


def write_run(path, curves, *, loss_tag="loss", histograms=False):
    """One run in mindformers' layout (``rank_N`` folders) with tensorboardX: loss, a warm-up learning rate, a gradient norm."""
    from tensorboardX import SummaryWriter

    for rank, segments in curves.items():
        for i, (steps, values) in enumerate(segments):
            with SummaryWriter(os.path.join(path, f"rank_{rank}"), filename_suffix=f".part{i}") as w:  # a resumed job: a file per segment
                for s, v in zip(steps.tolist(), values.tolist()):
                    w.add_scalar(loss_tag, v, s)
                    w.add_scalar("learning-rate", 1e-4 * min(1.0, s / 50), s)
                    w.add_scalar("grad-norm", 1.0 + 0.1 * np.sin(s / 7), s)
                    if histograms and rank == 0 and s % 50 == 0:
                        w.add_histogram("fc.weight", np.random.default_rng(s).normal(0, 1 + s / 300, 400), s)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("board")
    write_run(root / "healthy", _healthy(2, 0.2, steps=300, seed=1), loss_tag="lm-loss", histograms=True)
    write_run(root / "nan_rank", _nan_rank())
    write_run(root / "drifting", _drift(4, 0.05, 200, 0.005))
    return root


@pytest.fixture
def board(base):
    return msnb.board(base)


def lines(fig, prefix, panel="loss"):
    """gid -> Line2D of the lines in *panel* whose gid starts with *prefix*."""
    ax = next(a for a in fig.axes if a.get_visible() and a.get_title().split(" (")[0] == panel)
    return {line.get_gid(): line for line in ax.lines if (line.get_gid() or "").startswith(prefix)}


def panel(fig, name="loss"):
    return next(a for a in fig.axes if a.get_visible() and a.get_title().split(" (")[0] == name)


def test_one_smoothed_line_per_checked_run_in_its_swatch_colour(board):
    c = board.controls
    assert c["runs"].value == ("drifting", "healthy", "nan_rank")
    assert set(c["tags"].options) >= {"loss", "lr", "grad_norm"} and c["tags"].value == ("loss", "lr", "grad_norm")
    smooth = lines(board.figure, "smooth|")
    assert set(smooth) == {"smooth|drifting|mean|loss", "smooth|healthy|mean|lm-loss", "smooth|nan_rank|mean|loss"}
    assert panel(board.figure).get_title() == "loss (lm-loss, loss)"  # one meaning, two spellings, one panel
    colors = {gid.split("|")[1]: line.get_color() for gid, line in smooth.items()}
    assert colors == {run: board.data.color(run) for run in colors} and len(set(colors.values())) == 3
    assert board.data.color("healthy") in c["runs"].children[1].children[0].value  # the swatch beside the checkbox

    c["runs"].checkbox("healthy").value = False
    assert c["runs"].value == ("drifting", "nan_rank")
    smooth = lines(board.figure, "smooth|")
    assert set(smooth) == {"smooth|drifting|mean|loss", "smooth|nan_rank|mean|loss"}
    assert {gid.split("|")[1]: line.get_color() for gid, line in smooth.items()} == {r: colors[r] for r in ("drifting", "nan_rank")}
    c["runs"].value = ("healthy",)
    assert set(lines(board.figure, "smooth|")) == {"smooth|healthy|mean|lm-loss"}
    with pytest.raises(Exception, match="no run 'nope' on this board"):
        c["runs"].value = ("nope",)


def test_lights_are_the_judges_verdicts(board):
    verdicts = {r.run: r.passed for r in msnb.check(board.data.paths[0]).runs}
    lights = {key: board.data.runs[key].verdict.passed for key in board.data.order}
    assert lights == verdicts == {"healthy": True, "nan_rank": False, "drifting": False}
    badges = [row.children[0].value for row in board.controls["runs"].children]
    assert "#cf222e" in badges[0] and "#1a7f37" in badges[1] and "#cf222e" in badges[2]  # drifting, healthy, nan_rank


def test_smoothing_moves_the_solid_line_and_not_the_faint_one(board):
    c = board.controls
    c["runs"].value = ("healthy",)
    before = board.renders
    raw = lines(board.figure, "raw|")["raw|healthy|mean|lm-loss"].get_ydata().copy()
    smooth = lines(board.figure, "smooth|")["smooth|healthy|mean|lm-loss"].get_ydata().copy()
    c["smoothing"].value = 0.95
    assert board.renders == before + 1  # redrawn before the assignment returned
    raw2 = lines(board.figure, "raw|")["raw|healthy|mean|lm-loss"].get_ydata()
    smooth2 = lines(board.figure, "smooth|")["smooth|healthy|mean|lm-loss"].get_ydata()
    np.testing.assert_array_equal(raw, raw2)
    assert not np.allclose(smooth, smooth2)
    assert np.std(np.diff(smooth2)) < np.std(np.diff(smooth)) < np.std(np.diff(raw))  # heavier smoothing, calmer line
    assert lines(board.figure, "raw|")["raw|healthy|mean|lm-loss"].get_alpha() == 0.25
    c["smoothing"].value = 0.0
    drawn = lines(board.figure, "")
    assert "smooth|healthy|mean|lm-loss" not in drawn and drawn["raw|healthy|mean|lm-loss"].get_alpha() is None  # raw, solid
    c["tags"].value = ("lr",)
    c["smoothing"].value = 0.9
    assert set(lines(board.figure, "", panel="lr")) == {"raw|healthy|mean|learning-rate"}  # a schedule is never smoothed


def test_x_axis_log_scale_and_ignore_outliers(board):
    c = board.controls
    c["x"].value = "relative"
    ax = panel(board.figure)
    assert ax.get_xlabel() == "seconds since start"
    x = lines(board.figure, "smooth|")["smooth|healthy|mean|lm-loss"].get_xdata()
    assert x.min() >= 0 and x.max() < 600
    c["x"].value = "wall"
    assert panel(board.figure).get_xlabel().startswith("wall-clock time")
    assert lines(board.figure, "smooth|")["smooth|healthy|mean|lm-loss"].get_xdata().min() > 19000  # matplotlib dates: days since 1970
    c["x"].value = "step"
    c["log"].value = True
    assert panel(board.figure).get_yscale() == "log" and panel(board.figure, "lr").get_yscale() == "log"
    c["log"].value = False
    c["ranks"].value = "all"
    c["runs"].value = ("drifting",)
    top = max(line.get_ydata().max() for line in lines(board.figure, "raw|").values())
    assert panel(board.figure).get_ylim()[1] >= top
    c["outliers"].value = True
    assert panel(board.figure).get_ylim()[1] < top  # the drifting rank's far end runs off the top


def test_step_range_cuts_every_line(board):
    c = board.controls
    assert (c["steps"].min, c["steps"].max) == (1, 400)
    c["steps"].value = (100, 150)
    ax = panel(board.figure)
    assert ax.get_xlim() == (100, 150)
    for line in lines(board.figure, "").values():
        if line.get_gid().startswith(("raw|", "smooth|")):
            x = line.get_xdata()
            assert x.min() >= 100 and x.max() <= 150, line.get_gid()
    assert "flag|nan_rank|2|150" in lines(board.figure, "flag|")
    assert "flag|drifting|1|" not in " ".join(lines(board.figure, "flag|"))  # that flag lies after step 150


def test_ranks_as_lines_and_as_bands_with_the_flagged_rank_drawn_out(board):
    c = board.controls
    c["runs"].value = ("drifting",)
    c["ranks"].value = "all"
    assert set(lines(board.figure, "smooth|")) == {f"smooth|drifting|{r}|loss" for r in range(4)}
    c["ranks"].value = "bands"
    ax = panel(board.figure)
    bands = [coll for coll in ax.collections if (coll.get_gid() or "").startswith("band|drifting|loss")]
    assert len(bands) == 2  # min-max and 10-90 %
    drawn = lines(board.figure, "")
    assert "smooth|drifting|median|loss" in drawn and "smooth|drifting|1|loss" in drawn  # the judge's flagged rank, as a line
    assert not any(gid.startswith("smooth|drifting|0|") for gid in drawn)
    c["ranks"].value = "mean"
    assert set(lines(board.figure, "smooth|")) == {"smooth|drifting|mean|loss"}


def test_a_thousand_rank_job_draws_a_sample_of_rank_lines_and_says_so(tmp_path):
    from msnb.dashboard.render import MAX_RANK_LINES

    ranks = MAX_RANK_LINES + 6
    curves = _healthy(ranks, 0.1, steps=12, seed=8)
    curves[ranks - 1][0][1][5:] = np.nan  # the last rank goes bad: it must be among the lines drawn
    write_run(tmp_path / "wide", curves)
    b = msnb.board(tmp_path / "wide")
    assert b.controls["ranks"].value == "bands"  # more than 16 ranks: bands by default
    b.controls["ranks"].value = "all"
    drawn = {int(gid.split("|")[2]) for gid in lines(b.figure, "raw|")}
    assert len(drawn) == MAX_RANK_LINES and {0, ranks - 1} <= drawn
    (note,) = lines(b.figure, "note|").values()
    assert note.get_label() == f"wide: {MAX_RANK_LINES} of {ranks} ranks drawn (bands show them all)"


def test_choosing_a_flag_zooms_to_its_step_and_rank(board):
    c = board.controls
    c["runs"].value = ("healthy",)
    c["tags"].value = ("lr",)
    options = dict(c["flags"].options)
    label = next(text for text in options if text.startswith("drifting | rank 1 |"))
    flag = board.data.flags()[options[label]]
    c["flags"].value = options[label]
    assert "drifting" in c["runs"].value and c["tags"].value[0] == "loss"
    lo, hi = c["steps"].value
    assert lo < flag.step < hi and hi - lo <= 100
    ax = panel(board.figure)
    assert lo <= ax.get_xlim()[0] and ax.get_xlim()[1] <= hi
    focus = lines(board.figure, "smooth|focus|")
    assert set(focus) == {"smooth|focus|drifting|1|loss"} and "rank 1 (chosen flag)" in focus["smooth|focus|drifting|1|loss"].get_label()
    assert f"flag|drifting|1|{flag.step}" in lines(board.figure, "flag|")
    board.show_all()
    assert c["steps"].value == (1, 400) and not lines(board.figure, "smooth|focus|")


def test_histograms_tab(board):
    c = board.controls
    assert c["histogram"].value == "fc.weight" and c["histogram_run"].value == "healthy"
    board.tabs.selected_index = 1
    fig = board.histogram_figure
    assert fig.axes[0].get_title() == "fc.weight (6 histograms)"
    c["histogram_mode"].value = "heatmap"
    assert board.histogram_figure.axes[0].images  # a heatmap is one image
    c["steps"].value = (100, 200)
    board.redraw_histograms()
    assert board.histogram_figure.axes[0].get_title() == "fc.weight (3 histograms)"
    assert bytes(board.histogram_image.value).startswith(b"\x89PNG")


def test_without_a_widget_front_end_the_figure_and_a_line_on_the_controls(board):
    bundle = board._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    text = bundle["text/plain"]
    assert text.splitlines()[0] == "msnb board: 3 runs (drifting fail, healthy pass, nan_rank fail); tags loss, lr, grad_norm; 2 flags"
    assert HOW_TO in text and "/" not in text.splitlines()[0]


def test_redraws_inside_an_event_loop_are_debounced(board):
    c = board.controls

    async def burst():
        start = board.renders
        for weight in (0.1, 0.2, 0.3, 0.4):
            c["smoothing"].value = weight
        during = board.renders
        await asyncio.sleep(0.6)  # the loop runs the one pending redraw first (its deadline is earlier)
        return start, during, board.renders

    start, during, after = asyncio.run(burst())
    assert during == start and after == start + 1
    assert board.view().smoothing == 0.4


def wait_for(condition, what, timeout=60.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_following_picks_up_a_new_run_and_stop_ends_it(tmp_path):
    root = tmp_path / "live"
    write_run(root / "first", _healthy(2, 0.2, steps=60, seed=3))
    b = msnb.board(root, every=0.1)
    assert b.following and b.controls["runs"].value == ("first",)
    write_run(root / "second", _healthy(2, 0.2, steps=60, seed=4))
    wait_for(lambda: "second" in b.controls["runs"].value, "the new run in the list")
    wait_for(lambda: "smooth|second|mean|loss" in lines(b.figure, "smooth|"), "the new run's line")
    assert b.data.color("second") != b.data.color("first")
    b.controls["stop"].click()
    assert not b.following and b.controls["stop"].disabled
    wait_for(lambda: not [t for t in threading.enumerate() if t.name == "msnb-board-follow"], "the follow thread gone")  # Stop never waits long for it
    polls = b.data.polls
    time.sleep(0.3)
    assert b.data.polls == polls

    again = msnb.board(root, every=0.1)  # the cell run again: the board it replaces stops following
    newer = msnb.board(root, every=0.1)
    assert not again.following and newer.following
    newer.stop()


def test_following_on_an_event_loop_stops_with_the_button(tmp_path):
    root = tmp_path / "loop"
    root.mkdir()

    async def follow():
        b = msnb.board(root, every=0.05)  # an empty base is fine when following: runs may come
        assert b.controls["runs"].value == ()
        write_run(root / "late", _healthy(1, 0.2, steps=40, seed=5))
        for _ in range(1200):
            if "late" in b.controls["runs"].value:
                break
            await asyncio.sleep(0.05)
        b.controls["stop"].click()
        polls = b.data.polls
        await asyncio.sleep(0.3)
        return b, polls

    b, polls = asyncio.run(follow())
    assert b.controls["runs"].value == ("late",) and not b.following and b.data.polls == polls


def test_every_row_is_kept_whatever_file_it_came_from(tmp_path):
    """A resumed job writes a second file per rank: one run, one tag, rows from several files (each with its own name objects)."""
    root = tmp_path / "resumed"
    write_run(root / "job", _resumed())
    write_run(root / "other", _healthy(3, 0.1, steps=50, seed=7))
    b = msnb.board(root)
    assert b.data.points() == len(msnb.read(root).scalars)
    job = b.data.runs["job"]
    assert job.ranks == [0, 1] and [len(list((root / "job" / f"rank_{r}").iterdir())) for r in (0, 1)] == [2, 2]
    assert job.series("loss", None).steps.tolist() == list(range(1, 351))
    first, second = _resumed()[0]
    rank0 = job.series("loss", 0)
    assert rank0.steps.tolist() == list(range(1, 351))  # one value per step: the restart at 150 replaced 150-200
    np.testing.assert_allclose(rank0.values[:149], first[1][:149].astype(np.float32))
    np.testing.assert_allclose(rank0.values[149:], second[1].astype(np.float32))
    assert b.data.runs["other"].ranks == [0, 1, 2]


def test_bad_calls_fail_with_one_clear_line(tmp_path):
    with pytest.raises(UsageError, match="no such file or directory"):
        msnb.board(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NothingReadable, match="nothing to draw under"):
        msnb.board(tmp_path / "empty")
    with pytest.raises(UsageError, match="--every must be a positive number"):
        msnb.board(tmp_path / "empty", every=float("nan"))
    for bad in (float("inf"), -1, 0, 1e12, "soon"):
        with pytest.raises(UsageError, match="--every must be a"):
            msnb.board(tmp_path / "empty", every=bad)
    with pytest.raises(UsageError, match="at least one path"):
        msnb.board()


def test_hostile_run_names_and_damaged_files(base, tmp_path):
    root = tmp_path / "hostile"
    name = "<img src=x onerror=alert(1)>$\\x{$"
    shutil.copytree(base / "healthy", root / name)
    damaged = next((root / name / "rank_1").iterdir())
    damaged.write_bytes(damaged.read_bytes()[:-7] + b"\xff" * 40)  # a torn last record, then garbage
    b = msnb.board(root)
    assert b.controls["runs"].value == (name,)
    assert b.controls["runs"].checkbox(name).description == name and not b.controls["runs"].checkbox(name).description_allow_html
    assert "<img" not in b.status.value and "problem" in b.status.value and "while reading" in b.status.value
    assert bytes(b.image.value).startswith(b"\x89PNG")  # drawn, the name as written (no TeX parsed)


def test_the_magic(base):
    from IPython.core.error import UsageError as IPythonUsageError
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("msnb")
    b = ip.run_line_magic("mfmon_board", f"{base / 'healthy'} {base / 'drifting'}")
    assert isinstance(b, Board) and b.controls["runs"].value == tuple(sorted(str(base / r) for r in ("drifting", "healthy")))
    assert [b.data.label(k) for k in b.controls["runs"].value] == ["drifting", "healthy"]
    with pytest.raises(IPythonUsageError, match="msnb: .*no such file or directory"):
        ip.run_line_magic("mfmon_board", f"{base / 'nope'}")
    with pytest.raises(IPythonUsageError, match="--every must be a positive number"):
        ip.run_line_magic("mfmon_board", f"{base} --every -1")


BOARD_PROBE = """
const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[arguments[0]];
const area = cell.querySelector('.jp-OutputArea');
const imgs = area ? [...area.querySelectorAll('.jupyter-widgets img')] : [];
const shown = imgs.filter(i => i.offsetParent !== null);
return {
  prompt: cell.querySelector('.jp-InputPrompt').textContent,
  widgets: area ? area.querySelectorAll('.jupyter-widgets').length : 0,
  images: shown.map(i => [i.src, i.naturalWidth, i.naturalHeight, i.complete]),
  checkboxes: area ? [...area.querySelectorAll('.widget-checkbox')].map(c => c.textContent.replace(/\u200b/g, '').trim()) : [],
  errors: area ? area.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"], .jp-RenderedText[data-mime-type*="error"]').length : 0,
  text: area ? area.textContent : ''
};
"""


def test_board_in_jupyterlab(lab, browser, base, tmp_path):  # noqa: F811
    """The board in JupyterLab with headless Chromium: drag the smoothing slider, untick a run; the figure changes each time, no error."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shots = tmp_path / "screenshots"
    shots.mkdir()
    open_notebook(browser, lab, "board.ipynb", f"board = %mfmon_board {base}\nboard")
    probe = lambda: browser.execute_script(BOARD_PROBE, 0)  # noqa: E731
    try:
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180, "the notebook's cells")
        _wait(lambda: _kernel_idle(lab), 180, "an idle kernel")
        browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")[0].find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").click()
        ActionChains(browser).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
        first = _wait(lambda: (s := probe())["images"] and s["images"][0][3] and s["images"][0][1] > 0 and "*" not in s["prompt"] and s, 180, "the board")
        browser.save_screenshot(str(shots / "1-opened.png"))

        handle = browser.find_element(By.CSS_SELECTOR, ".jp-OutputArea .widget-hslider .noUi-handle")
        ActionChains(browser).click_and_hold(handle).move_by_offset(60, 0).release().perform()
        smoothed = _wait(lambda: (s := probe())["images"][0][0] != first["images"][0][0] and s["images"][0][3] and s, 30, "a new figure after the slider moved")
        browser.save_screenshot(str(shots / "2-smoothed.png"))

        box = next(c for c in browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea .widget-checkbox") if c.text.strip() == "healthy")
        box.find_element(By.CSS_SELECTOR, "input").click()
        unticked = _wait(lambda: (s := probe())["images"][0][0] != smoothed["images"][0][0] and s["images"][0][3] and s, 30, "a new figure after unticking")
        browser.save_screenshot(str(shots / "3-unticked.png"))
    except BaseException:
        browser.save_screenshot(str(shots / "failure.png"))
        raise
    finally:
        keep = os.environ.get("MSNB_KEEP_SCREENSHOTS")
        if keep:
            shutil.copytree(shots, keep, dirs_exist_ok=True)

    assert first["widgets"] >= 1 and {"drifting", "healthy", "nan_rank", "log scale y", "ignore outliers"} <= set(first["checkboxes"])
    for state in (first, smoothed, unticked):
        assert state["errors"] == 0 and "Traceback" not in state["text"] and "Error displaying widget" not in state["text"], state["text"][:500]
        assert state["images"][0][1] > 600 and state["images"][0][2] > 200  # a figure, not an empty frame


def _tick_boxes(fig, ax, axis: str):
    """The drawn tick labels of *axis* ('x' or 'y') of *ax*: (text, window extent), after a draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)
    return [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_visible() and t.get_text()]


def test_time_axes_and_log_labels_are_readable(board):
    """Wall-clock ticks short and apart (not ``39:58.800000`` each), a log axis's labels inside the figure, plain."""
    c = board.controls
    c["x"].value = "wall"
    for name in ("loss", "lr"):
        boxes = _tick_boxes(board.figure, panel(board.figure, name), "x")
        assert len(boxes) >= 2 and all(len(text) <= 8 for text, _ in boxes), [t for t, _ in boxes]
        ordered = sorted((box for _, box in boxes), key=lambda b: b.x0)
        assert all(a.x1 < b.x0 for (a, b) in zip(ordered, ordered[1:])), "wall-clock tick labels overlap"
    c["x"].value = "step"
    c["log"].value = True
    for name in ("loss", "lr", "grad_norm"):
        boxes = _tick_boxes(board.figure, panel(board.figure, name), "y")
        assert boxes and all(box.x0 >= 0 for _, box in boxes), [(t, box.x0) for t, box in boxes]  # none cut at the left edge
        assert not any("\\" in text or "$" in text for text, _ in boxes)  # no TeX: plain numbers


def test_runs_are_named_once_above_the_panels(board):
    """The runs' names, then what the lines say (NaN, flagged ranks), in one legend above the panels: inside a panel
    a legend covered the curves (the lr and grad-norm curves; in bands mode the drifting rank, under its corner)."""
    fig = board.figure
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()][:3] == ["drifting", "healthy", "nan_rank"]
    for name in ("loss", "lr", "grad_norm"):
        assert panel(fig, name).get_legend() is None
    kept = [t.get_text() for t in fig.legends[0].get_texts()][3:]  # what the run list does not say
    assert kept and all("NaN/Inf" in t or "flagged" in t for t in kept), kept


def test_bands_with_a_chosen_flag_name_each_line_once_and_the_chosen_rank(board):
    """Bands mode, a flag chosen: every entry once (a rank's NaN and its run's mean's NaN are one NaN), the chosen
    rank named as chosen, and the legend above the panels, clear of every curve."""
    c = board.controls
    c["runs"].value = ("drifting", "nan_rank")
    c["ranks"].value = "bands"
    flags = [text for text, _ in c["flags"].options]
    c["flags"].value = next(i for i, text in enumerate(flags) if text.startswith("nan_rank"))
    fig = board.figure
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(texts) == len(set(texts)), texts
    assert "nan_rank rank 2 (chosen flag)" in texts and sum(t.startswith("NaN/Inf") for t in texts) == 1, texts
    assert not any(ax.get_legend() for ax in fig.axes)
    fig.canvas.draw()
    top = min(ax.get_window_extent().y1 + ax.title.get_window_extent().height for ax in fig.axes)
    assert fig.legends[0].get_window_extent().y0 >= top - 1, (fig.legends[0].get_window_extent(), top)


def test_a_flag_line_on_a_time_axis_lies_on_the_data(board):
    """The dashed line of a flag at the flagged step's time on the line drawn, inside the drawn x range."""
    c = board.controls
    c["runs"].value = ("drifting",)
    for x in ("relative", "wall"):
        c["x"].value = x
        drawn = lines(board.figure, "smooth|drifting|")
        xs = np.concatenate([line.get_xdata() for line in drawn.values()])
        flags = lines(board.figure, "flag|drifting|")
        assert flags
        for line in flags.values():
            at = line.get_xdata()[0]
            assert xs.min() <= at <= xs.max(), (x, at, xs.min(), xs.max())


def test_heatmap_has_a_colour_bar_and_long_names_keep_both_ends():
    from msnb.events import HistogramTable
    from msnb.plot.histograms import plot_histograms

    name = "network.model.transformer.layers.11.attention.query_key_value.weight"
    rng = np.random.default_rng(0)
    rows = []
    for step in (10, 20, 30):
        counts, edges = np.histogram(rng.normal(size=500), bins=20)
        rows.append((step, edges[:-1], edges[1:], counts.astype(float)))
    n = len(rows)
    table = HistogramTable(
        run=np.array(["r"] * n, dtype=object),
        rank=np.zeros(n, dtype=int),
        tag=np.array([name] * n, dtype=object),
        step=np.array([r[0] for r in rows]),
        wall_time=np.zeros(n),
        left=[r[1] for r in rows],
        right=[r[2] for r in rows],
        counts=[r[3] for r in rows],
        min=np.array([r[1][0] for r in rows]),
        max=np.array([r[2][-1] for r in rows]),
        **{k: np.zeros(n) for k in ("sum", "count", "nan_count", "pos_inf_count", "neg_inf_count")},
    )
    fig = plot_histograms(table, name, mode="heatmap")
    main, bar = fig.axes[0], fig.axes[1]
    assert main.images and bar.get_ylabel() == "count"  # a colour says how many
    title = main.get_title().replace("\n", "")
    assert title.startswith("network.model.transformer.layers.11.") and "query_key_value.weight" in title


def test_the_view_prints_as_words(board):
    """``print(board.view())`` (and a notebook's Out[n]) reads as settings, not the dataclass's one long line."""
    from IPython.lib.pretty import pretty

    text = str(board.view())
    assert text == "runs drifting, healthy, nan_rank; tags loss, lr, grad_norm; smoothing 0.60; x axis step; linear y; ranks as the mean over ranks; all steps"
    assert pretty(board.view()) == text
    board.controls["flags"].value = next(i for t, i in board.controls["flags"].options if t.startswith("nan_rank"))
    assert str(board.view()).endswith("steps 121-179; zoomed on nan_rank rank 2 at step 150")


def test_a_following_board_shows_itself_in_a_notebook_cell_that_goes_on(base, jupyter_dirs):
    """In a real kernel: ``live = msnb.board(path, every=...)`` in a cell that then awaits and ends on another value
    (notebook 10's follow cell) displays the board at once, Stop button and figure with it; a board made and given
    as the cell's value is shown once, not twice."""
    from msnb import kernel
    from tests.conftest import kernel_from_spec

    def run(kc, code):
        outputs = []
        reply = kc.execute_interactive(code, timeout=120, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok", reply["content"]
        boards = [m["content"]["data"] for m in outputs if m["msg_type"] in ("display_data", "execute_result")]
        return [b for b in boards if "application/vnd.jupyter.widget-view+json" in b], outputs

    kernel.install("msnb-test-board", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-board") as kc:
        shown, outputs = run(kc, f"import asyncio, msnb\nlive = msnb.board({str(base)!r}, every=0.5)\nawait asyncio.sleep(1.0)\nlive.following")
        assert len(shown) == 1 and "image/png" in shown[0], outputs
        opened = [m["content"]["data"]["state"] for m in outputs if m["msg_type"] == "comm_open"]
        assert any(s.get("description") == "Stop" for s in opened), "no Stop button was sent to the front end"
        shown, outputs = run(kc, f"again = msnb.board({str(base)!r}, every=0.5)\nagain")
        assert len(shown) == 1, outputs
        run(kc, "live.stop(); again.stop()")


def test_a_chosen_flag_reads_whole_once_on_a_time_axis_with_its_line_in_the_legend(board):
    """The chosen flag's reason whole above the figure it zooms to; its dashed line named in a 9 pt legend; on a wall
    clock its rank drawn once, on its run's line; ticks ``HH:MM`` with the day in the axis label, no offset; no button
    narrower than its word."""
    from msnb.dashboard.render import FLAG_LABEL

    c = board.controls
    c["runs"].value = ("drifting",)
    c["ranks"].value = "mean"
    c["flags"].value = next(i for i, (text, _) in enumerate(c["flags"].options) if text.startswith("drifting"))
    reason = board._flags[c["flags"].value].reason
    assert reason in board.focus_note.value.replace("&#x27;", "'").replace("&quot;", '"') and "\u2026" not in board.focus_note.value
    fig = board.figure
    legend = fig.legends[0]
    assert FLAG_LABEL in [t.get_text() for t in legend.get_texts()]
    assert all(t.get_fontsize() >= 9 for t in legend.get_texts())
    c["x"].value = "wall"
    ax = panel(board.figure, "loss")
    board.figure.canvas.draw()
    # the fixture's steps are milliseconds apart: the seconds past the minute the label names, each tick its own
    assert ax.get_xlabel().startswith("wall-clock time: seconds past ") and ax.xaxis.get_offset_text().get_text() == ""
    ticks = [t for t, _ in _tick_boxes(board.figure, ax, "x")]
    assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
    focus = lines(board.figure, "focus|drifting|")
    mean = lines(board.figure, "smooth|drifting|mean|")
    for f in focus.values():
        xs = f.get_xdata()
        m = next(iter(mean.values())).get_xdata()
        assert xs.min() >= m.min() - 1e-9 and xs.max() <= m.max() + 1e-9  # one run at one place on the clock
    assert all(s.button_width == "auto" for s in (c["x"].style, c["ranks"].style, c["histogram_mode"].style))


def test_wall_clock_ticks_as_fine_as_their_spacing():
    """Minutes apart: ``HH:MM``; seconds apart: ``HH:MM:SS``; the day in the label, no offset text."""
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    from msnb.dashboard.render import _clock_ticks

    for span_s, pattern in ((3600, r"^\d\d:\d\d$"), (40, r"^\d\d:\d\d:\d\d$")):
        ax = Figure().add_subplot()
        start = mdates.date2num(np.datetime64("2026-12-06T10:41:00"))
        ax.plot([start, start + span_s / 86400], [0, 1])
        _clock_ticks(ax)
        ax.figure.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert labels and all(__import__("re").match(pattern, t) for t in labels) and len(set(labels)) == len(labels), labels
        assert ax.get_xlabel() == "wall-clock time (UTC, 2026-12-06)" and ax.xaxis.get_offset_text().get_text() == ""
