"""Figures drawn from real files: what is on them (lines, labels, markers, flags), not only that a PNG exists."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msnb
from msnb.analysis import ema, rank_divergence
from msnb.events import ScalarTable
from msnb.plot import m4, plot_scalars


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_mindspore_ranks_overlaid_smoothed_and_flagged(ms_files):
    result = msnb.read(ms_files / "ranks")
    report = plot_scalars(result.scalars, ranks=True, smooth=0.6)
    (ax,) = [a for a in report.figure.axes if a.get_visible()]
    assert ax.get_title() == "loss" and ax.get_xlabel() == "step"
    lines = lines_by_label(ax)
    assert {". rank 0", ". rank 1"} <= set(lines)
    steps, values = result.scalars.series("loss", rank=1)
    smoothed = lines[". rank 1"]
    np.testing.assert_allclose(smoothed.get_xdata(), steps)
    np.testing.assert_allclose(smoothed.get_ydata(), ema(values, 0.6))
    raw = [l for l in ax.get_lines() if l.get_alpha() == 0.25]
    assert len(raw) == 2 and any(np.allclose(l.get_ydata(), values) for l in raw)
    # rank 1's loss is rank 0's plus one: it is the one flagged, from the first common step
    assert [(f.rank, f.step) for f in report.flags] == [(1, 1)]
    assert any(label.startswith("rank 1 flagged from step 1") for label in lines)
    assert report.points == 100 and report.runs == ["."] and report.ranks == {".": [0, 1]}


def test_mean_over_ranks_by_default(ms_files):
    result = msnb.read(ms_files / "ranks")
    report = plot_scalars(result.scalars, smooth=0)
    ax = report.figure.axes[0]
    (line,) = [l for l in ax.get_lines() if l.get_label() == "."]
    r0 = result.scalars.series("loss", rank=0)[1]
    r1 = result.scalars.series("loss", rank=1)[1]
    np.testing.assert_allclose(line.get_ydata(), (r0 + r1) / 2, rtol=1e-6)


def test_tensorboardx_nan_is_marked_where_it_happened(tb_files):
    result = msnb.read(tb_files)
    report = plot_scalars(result.scalars, tags=["loss", "lr", "grad_norm"], ranks=True)
    titles = [a.get_title() for a in report.figure.axes if a.get_visible()]
    assert titles == ["loss", "learning-rate", "grad-norm"]  # panel names resolve to mindformers' tags
    loss_ax = report.figure.axes[0]
    (marker,) = [l for l in loss_ax.get_lines() if l.get_marker() == "x"]
    assert marker.get_xdata().tolist() == [60.0] and "rank 1" in marker.get_label()
    assert report.nonfinite == [{"run": "tensorboard", "rank": 1, "tag": "loss", "value": "nan", "step": 60, "last_step": 60, "steps": 1}]
    assert [(f.rank, f.step, "alone" in f.reason) for f in report.flags] == [(1, 60, True)]


def test_x_axes_and_log_scale(mf_files):
    result = msnb.read(mf_files / "tensorboard")
    for kind, label in (("relative", "since start"), ("wall", "wall-clock time"), ("step", "step")):
        report = plot_scalars(result.scalars, tags=["loss"], x=kind, log=True)
        ax = report.figure.axes[0]
        assert label in ax.get_xlabel() and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="no tag 'nope'"):
        plot_scalars(result.scalars, tags=["nope"])


def test_three_ranks_one_departs(tmp_path):
    """Three ranks; rank 2's loss starts climbing at step 60: flagged there, the others not."""
    steps = np.arange(1, 121)
    rng = np.random.default_rng(3)
    rows = []
    for rank in range(3):
        loss = 2.0 / np.sqrt(steps) + rng.normal(0, 0.01, steps.size)
        if rank == 2:
            loss = np.where(steps >= 60, loss * (1 + 0.05 * (steps - 59)), loss)
        rows.append((rank, loss))
    table = ScalarTable(
        run=np.array(["exp"] * 360, dtype=object),
        rank=np.repeat([0, 1, 2], 120),
        tag=np.array(["loss"] * 360, dtype=object),
        step=np.tile(steps, 3),
        wall_time=np.zeros(360),
        value=np.concatenate([r[1] for r in rows]),
    )
    flags = rank_divergence(table, "loss", threshold=0.2)
    assert [f.rank for f in flags] == [2]
    assert 60 <= flags[0].step <= 66


def test_m4_keeps_spikes_and_bounds_points():
    n = 1_000_000
    x = np.arange(n)
    y = np.sin(x / 5000.0)
    y[123_457] = 40.0
    y[876_543] = -40.0
    xs, ys = m4(x, y, 2000)
    assert xs.size <= 8000 and ys.max() == 40.0 and ys.min() == -40.0
    assert 123_457 in xs and 876_543 in xs and xs[0] == 0 and xs[-1] == n - 1
    assert np.all(np.diff(xs) > 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf)), min_size=0, max_size=700), st.floats(0, 0.99))
def test_ema_equals_tensorboards_loop(values, weight):
    out = ema(values, weight)
    last, count = 0.0, 0
    expected = []
    finite_values = [v for v in values if math.isfinite(v)]
    constant = len(set(finite_values)) <= 1
    for v in values:
        if not math.isfinite(v) or weight == 0 or constant:
            expected.append(v)
            continue
        last = last * weight + (1 - weight) * v
        count += 1
        expected.append(last / (1 - weight**count))
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-6)


def test_plot_cli(tb_files, tmp_path, run_msnb):
    out = tmp_path / "curves.png"
    proc = run_msnb("plot", tb_files, "--ranks", "--out", out, "--json", check=0)
    report = json.loads(proc.stdout)
    assert {"runs", "tags", "points", "flags"} <= set(report)
    assert report["flags"][0] == {"run": ".", "rank": 1, "tag": "loss", "step": 60, "reason": "loss is nan on rank 1 alone from step 60"}
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "curves.svg"
    text = run_msnb("plot", tb_files, "--tags", "loss", "--out", svg, check=0).stdout
    # the run is tb_files itself (its "tensorboard" folder names none): labelled after the folder given
    assert f"FLAG run {tb_files.name} rank 1" in text and svg.read_text().lstrip().startswith("<?xml")
    run_msnb("plot", tmp_path / "nothing", "--out", tmp_path / "x.png", check=2)


def test_plot_magic_returns_the_report(tb_files):
    import subprocess
    import sys

    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "from IPython.utils.capture import capture_output\n"
        "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
        "with capture_output() as cap:\n"
        f"    r = ip.run_line_magic('mfmon_plot', '{tb_files} --tags loss --ranks --smooth 0.3')\n"
        "kinds = [sorted(o.data) for o in cap.outputs]\n"
        "print(json.dumps({'report': r.as_dict(), 'kinds': kinds, 'text': cap.stdout}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["report"]["tags"] == ["loss"] and answer["report"]["flags"][0]["rank"] == 1
    # the figure is shown as a PNG even in a kernel that never set up a matplotlib backend
    assert answer["kinds"] == [["image/png", "text/plain"]]
    assert f"FLAG run {tb_files.name} rank 1" in answer["text"]  # labelled by its informative folder


def test_histograms_over_steps(ms_files):
    from matplotlib.collections import PolyCollection

    from msnb.plot import plot_histograms

    hist = msnb.read(ms_files / "record").histograms
    fig = plot_histograms(hist, "fc.weight", mode="ridge")
    ax = fig.axes[0]
    assert ax.get_title() == "fc.weight (3 histograms)"
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 3
    assert [t.get_text() for t in ax.texts] == ["step 40", "step 80", "step 120"]
    fig = plot_histograms(hist, mode="heatmap")
    (image,) = fig.axes[0].get_images()
    assert image.get_array().sum() == pytest.approx(float(hist.count.sum()), rel=0.01)
    with pytest.raises(ValueError, match="no histogram 'nope'"):
        plot_histograms(hist, "nope")


def test_step_time_distribution_leaves_compilation_out(mf_files):
    from msnb.plot import plot_step_time

    scalars = msnb.read(mf_files / "output").scalars
    fig, stats = plot_step_time(scalars, skip_first=1)
    _, times = scalars.series("step_time_ms")
    assert stats["tag"] == "step_time_ms" and stats["count"] == len(times) - 1
    assert stats["median"] == pytest.approx(float(np.median(times[1:])))
    assert fig.axes[0].get_title() == "step_time_ms (first 1 left out)"


def test_repeated_marker_entries_are_merged_in_the_legend():
    """NaN markers of many series make one legend entry, not one per rank; a single one keeps its own words."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from msnb.plot.scalars import _legend

    ax = Figure().subplots()
    for r in range(8):
        ax.plot([1, 2], [r, r], label=f"rank {r}")
        ax.plot([1], [0.9], "x", label=f"NaN/Inf (rank {r})")
    ax.plot([1], [1.0], "^", label="compile step 1: 900 (off scale)")
    _legend(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == [f"rank {r}" for r in range(8)] + ["NaN/Inf in 8 series (red x at the top)", "compile step 1: 900 (off scale)"]


def test_a_tag_that_looks_like_tex_is_drawn_as_written(tmp_path, run_msnb):
    """Tag names come from files: one holding ``$...$`` that is no valid TeX must not stop ``msnb plot --out``."""
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.summary_pb2 import Summary

    tag = "$\\notacommand{$"
    with SummaryWriter(str(tmp_path / "run")) as w:  # add_scalar would clean the tag; another writer might not
        for step in range(1, 30):
            w._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, simple_value=1.0 / step)]), step)
    out = tmp_path / "curves.png"
    run_msnb("plot", tmp_path / "run", "--tags", tag, "--out", out, check=0)
    assert out.stat().st_size > 1000


def test_a_huge_tag_name_is_drawn_cut_short(tmp_path):
    """A 400 KB tag name (any writer may write one) was drawn glyph by glyph: the figure's texts are cut, the start kept."""
    from matplotlib.text import Text
    from tensorboardX import SummaryWriter

    from msnb.plot.render import MAX_TEXT_CHARS, figure_png

    tag = "huge/" + "y" * 400_000
    with SummaryWriter(str(tmp_path / "run")) as w:
        for step in range(1, 20):
            w.add_scalar(tag, 1.0 / step, step)
    report = plot_scalars(msnb.read(tmp_path / "run").scalars, tags=[tag])
    assert figure_png(report.figure)[:4] == b"\x89PNG"
    texts = [t.get_text() for t in report.figure.findobj(Text)]
    assert max(map(len, texts)) == MAX_TEXT_CHARS
    assert any(t.startswith("huge/yyy") and t.endswith("\u2026") for t in texts)


@pytest.mark.parametrize(
    "out, dpi, message",
    [
        ("{tmp}/missing/curves.png", "100", "the directory {tmp}/missing does not exist"),
        ("/proc/curves.png", "100", "lies under /proc, a kernel folder of devices and processes"),
        ("{tmp}/curves.bogus", "100", "matplotlib cannot write '.bogus' figures"),
        ("{tmp}/curves.png", "0", "--dpi must be a whole number from 1 to 1200, not 0"),
        ("{tmp}/curves.png", "100000", "--dpi must be a whole number from 1 to 1200, not 100000"),
        ("{tmp}", "100", "is a directory; name the file to write in it"),
    ],
)
def test_a_bad_out_or_dpi_is_one_line_before_any_reading(tmp_path, run_msnb, out, dpi, message):
    proc = run_msnb("plot", tmp_path / "no_run_needed", "--out", out.format(tmp=tmp_path), "--dpi", dpi, check=2)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("msnb plot: error: ") and message.format(tmp=tmp_path) in line


def test_an_out_without_a_format_says_the_file_it_wrote(tmp_path, run_msnb, mf_files):
    proc = run_msnb("plot", mf_files, "--out", tmp_path / "curves", check=0)
    assert proc.stdout.startswith(f"wrote {tmp_path / 'curves.png'}: ") and (tmp_path / "curves.png").stat().st_size > 1000


def test_the_figure_formats_are_matplotlibs():
    from matplotlib.backend_bases import FigureCanvasBase

    from msnb.outputs import FIGURE_FORMATS

    assert set(FIGURE_FORMATS) == set(FigureCanvasBase.get_supported_filetypes())
