"""What a person sees on msnb's figures (issue 27): every run drawn, legends that leave the data visible, text
large enough to read, no axes that magnify nothing, labels that name runs.  Checked through matplotlib's artists
on figures drawn from files the real writers wrote (tensorboardX)."""

import json

import numpy as np
import pytest

from msnb.events.runs import read_runs
from msnb.plot.render import figure_png
from msnb.plot.scalars import plot_read


def _write(path, series: dict) -> str:
    """One tensorboardX run: tag -> [(step, value)]."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(path))
    for tag, points in series.items():
        for step, value in points:
            w.add_scalar(tag, value, step)
    w.close()
    return str(path)


def _data_lines(ax):
    """The lines that carry data (not flags' vertical lines, not NaN marks)."""
    return [ln for ln in ax.get_lines() if ln.get_marker() != "x" and len(ln.get_xdata()) and ln.get_linestyle() != "--"]


@pytest.fixture(scope="module")
def loss_two_spellings(tmp_path_factory):
    """A kept smoke directory's summary logs loss/auto; the training's log writer logs loss."""
    root = tmp_path_factory.mktemp("spellings")
    smoke = _write(root / "smoke" / "summary", {"loss/auto": [(s, 3.0 / s) for s in range(1, 41)]})
    train = _write(root / "train" / "tensorboard", {"loss": [(s, 3.1 / s) for s in range(1, 41)], "lr": [(s, 1e-4) for s in range(1, 41)]})
    return [smoke, train]


def test_loss_and_loss_auto_of_two_runs_are_one_panel_with_both_curves(loss_two_spellings):
    result = read_runs(loss_two_spellings)
    report = plot_read(result, loss_two_spellings, tags="loss", smooth=0)
    (ax,) = [a for a in report.figure.axes if a.get_visible()]
    lines = _data_lines(ax)
    assert len(lines) == 2, "both runs have a curve"
    assert sorted(ln.get_label() for ln in lines) == ["smoke (loss/auto)", "train (loss)"]
    assert sorted(report.tags) == ["loss", "loss/auto"] and report.points == 80
    # asking by either spelling resolves run by run, as the report does: the same single panel
    again = plot_read(result, loss_two_spellings, tags="loss/auto,loss", smooth=0)
    assert len([a for a in again.figure.axes if a.get_visible()]) == 1 and len(_data_lines(again.figure.axes[0])) == 2


def test_a_run_without_the_tag_is_named(loss_two_spellings):
    result = read_runs(loss_two_spellings)
    report = plot_read(result, loss_two_spellings, tags="loss,lr", smooth=0)
    lr_ax = report.figure.axes[1]
    assert len(_data_lines(lr_ax)) == 1
    assert "no lr in smoke" in lr_ax.get_title()
    assert report.as_dict()["missing"] == [{"panel": "lr", "run": result.runs[0], "label": "smoke"}]
    assert report.notes() == ["no lr in run smoke (none of: lr, learning-rate, learning_rate, learning rate)"]


def test_cli_json_draws_both_spellings(loss_two_spellings, tmp_path, run_msnb):
    out = tmp_path / "loss.png"
    proc = run_msnb("plot", *loss_two_spellings, "--tags", "loss", "--out", out, "--json", check=0)
    d = json.loads(proc.stdout)
    (panel,) = d["panels"]
    assert sorted(panel["tags"].values()) == ["loss", "loss/auto"] and panel["missing"] == [] and d["points"] == 80
    text = run_msnb("plot", *loss_two_spellings, "--tags", "loss,lr", "--out", out, check=0).stdout
    assert "note: no lr in run smoke" in text


# ---------------------------------------------------------------- many runs in one figure

REPORT_DPI = 80  # msnb.html_report.build.DPI: the figures of the report are saved at it


@pytest.fixture(scope="module")
def three_jobs(tmp_path_factory):
    """3 mindformers jobs x 4 ranks, each .../job_X/output/tensorboard/rank_N; job_b's rank 2 logs NaN at five steps;
    the learning rate is constant; plus one run of a single file (no rank)."""
    root = tmp_path_factory.mktemp("jobs")
    rng = np.random.default_rng(0)
    paths = []
    for j, job in enumerate("abc"):
        base = root / f"job_{job}" / "output" / "tensorboard"
        for rank in range(4):
            loss = [(s, (0.1 + 3 / np.sqrt(s)) * np.exp(0.08 * rng.standard_normal()) + 0.2 * j) for s in range(1, 201)]
            if job == "b" and rank == 2:
                loss = [(s, float("nan") if s in (120, 121, 122, 160, 190) else v) for s, v in loss]
            grad = [(s, 1.5 + 0.2 * rng.standard_normal()) for s in range(1, 201)]
            _write(base / f"rank_{rank}", {"loss": loss, "learning-rate": [(s, 1e-4) for s in range(1, 201)], "grad-norm": grad})
        paths.append(str(base))
    return paths


def _visible(fig):
    return [a for a in fig.axes if a.get_visible()]


def _drawn(fig, dpi):
    """Render at *dpi* (as the report saves) and return the renderer, for the artists' boxes in pixels."""
    figure_png(fig, dpi=dpi)
    return fig.canvas.get_renderer()


def test_three_runs_of_four_ranks_have_one_legend_outside_the_data(three_jobs):
    result = read_runs(three_jobs)
    report = plot_read(result, three_jobs, ranks=True)  # the report draws 3 x 4 ranks as one line per rank
    fig = report.figure
    renderer = _drawn(fig, REPORT_DPI)
    assert all(ax.get_legend() is None for ax in fig.axes), "no legend inside a panel"
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in _visible(fig):
        assert not box.overlaps(ax.get_window_extent(renderer)), f"the legend covers the {ax.get_title()} panel"
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, "the legend fits the figure's width"
    one = plot_read(result, three_jobs, tags="loss", ranks=True).figure  # one panel: a narrow figure
    renderer_one = _drawn(one, REPORT_DPI)
    narrow = one.legends[0].get_window_extent(renderer_one)
    assert one.bbox.x0 <= narrow.x0 and narrow.x1 <= one.bbox.x1 and not narrow.overlaps(one.axes[0].get_window_extent(renderer_one))
    texts = [t.get_text() for t in legend.get_texts()]
    runs = [t for t in texts if t.startswith("job_")]
    assert runs == ["job_a (4 ranks)", "job_b (4 ranks)", "job_c (4 ranks)"], texts
    assert all(t.startswith(("NaN/Inf", "rank ")) for t in texts if t not in runs), "besides the runs: marks and flags only"
    for t in legend.get_texts():
        assert t.get_fontsize() * REPORT_DPI / 72 >= 9, f"legend text {t.get_fontsize()} pt is under 9 px at {REPORT_DPI} dpi"
    # one colour per run: the ranks of a run share it, runs differ
    loss = _visible(fig)[0]
    colour = {}
    for ln in _data_lines(loss):
        job = ln.get_label().lstrip("_").split(" ")[0]
        colour.setdefault(job, set()).add(ln.get_color())
    assert all(len(c) == 1 for c in colour.values()) and len({next(iter(c)) for c in colour.values()}) == 3, colour


def test_a_constant_series_is_drawn_flat_on_a_sensible_axis(three_jobs):
    report = plot_read(read_runs(three_jobs), three_jobs, tags="lr", ranks=True)
    (ax,) = _visible(report.figure)
    lo, hi = ax.get_ylim()
    assert lo < 1e-4 < hi and hi - lo >= 0.5e-4, (lo, hi)  # matplotlib alone gives 1e-4 +- 4e-9
    assert any(t.get_text().startswith("constant: 0.0001") for t in ax.texts)


def test_a_constant_rate_read_in_two_precisions_reads_as_one_number_and_flops_have_their_own_panel():
    """0.005 as float32 from one file and float64 from another: one tick reading 0.005, no offset; samples/s and
    FLOP/s (mindformers writes both) each on their own axis, so neither is flattened by the other's scale."""
    from msnb.events.tables import ScalarTable
    from msnb.plot import plot_scalars

    n = 30

    def table(tag, values):
        return ScalarTable(
            run=np.full(n, "smoke", dtype=object), rank=np.full(n, -1), tag=np.full(n, tag, dtype=object),
            step=np.arange(1, n + 1), wall_time=np.zeros(n), value=np.asarray(values, float),
        )  # fmt: skip

    lr = np.full(n, 0.005)
    lr[::2] = np.float32(0.005)  # 0.004999999888
    steps = np.arange(n)
    tables = [table("lr", lr), table("throughput", 120.0 + steps), table("model-flops-throughput-per-npu", 1.3 + 0.01 * steps)]
    report = plot_scalars(ScalarTable.concat(tables))
    assert [p.title for p in report.panels] == ["lr", "throughput", "model-flops-throughput-per-npu"]
    lr_ax, samples_ax, flops_ax = _visible(report.figure)
    report.figure.canvas.draw()
    assert [t.get_text() for t in lr_ax.get_yticklabels()] == ["0.005"] and lr_ax.yaxis.get_offset_text().get_text() == ""
    assert any(t.get_text() == "constant: 0.005 at all 30 points" for t in lr_ax.texts)
    assert samples_ax.get_ylim()[0] > 100 and flops_ax.get_ylim()[1] < 2
    # each rate says its unit (mindformers prints samples/s/p and TFLOP/s a device); a learning rate has none
    assert (lr_ax.get_ylabel(), samples_ax.get_ylabel(), flops_ax.get_ylabel()) == ("", "samples/s per device", "TFLOP/s per device")


def test_no_rank_minus_one_in_labels(three_jobs, tmp_path):
    """A run without ranks (one file) among runs with ranks: its lines, legend and titles never say rank -1."""
    single = _write(tmp_path / "solo" / "summary", {"loss": [(s, 2.0 / s) for s in range(1, 201)]})
    paths = [*three_jobs, single]
    report = plot_read(read_runs(paths), paths, ranks=True)
    fig = report.figure
    _drawn(fig, 100)
    texts = [ln.get_label() for ax in fig.axes for ln in ax.get_lines()]
    texts += [t.get_text() for lg in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()] for t in lg.get_texts()]
    texts += [ax.get_title() for ax in fig.axes]
    assert "solo" in [t for t in texts if t.startswith("solo")], texts
    assert not [t for t in texts if "-1" in t], [t for t in texts if "-1" in t]


def test_few_points_get_an_axis_that_does_not_magnify_nothing(tmp_path):
    run = _write(tmp_path / "short" / "tensorboard", {"step_time_ms": [(1, 66.4), (2, 66.5)], "learning-rate": [(2, 1e-4)]})
    report = plot_read(read_runs(run), [run])
    st, lr = (next(a for a in _visible(report.figure) if a.get_title() == t) for t in ("step_time_ms", "learning-rate"))
    lo, hi = st.get_ylim()
    assert hi - lo >= 0.05 * 66.45, (lo, hi)  # not 66.35-66.55
    assert any("2 points within" in t.get_text() for t in st.texts)
    lo, hi = lr.get_ylim()
    assert hi - lo >= 0.5e-4 and any(t.get_text().startswith("1 point") for t in lr.texts)
    assert report.labels == {".": "short"}  # named after the folder that tells it apart, not "tensorboard"


# ---------------------------------------------------------------- heatmaps


@pytest.fixture(scope="module")
def late_fault(tmp_path_factory):
    """8 ranks, loss logged every 20th step of 2,000; the last rank leaves the others near the end of the run."""
    root = tmp_path_factory.mktemp("heat") / "tensorboard"
    rng = np.random.default_rng(1)
    for rank in range(8):
        points = []
        for s in range(0, 2000, 20):
            v = 2 + 0.01 * rng.standard_normal()
            points.append((s, v * (1 + (s - 1900) / 20) if rank == 7 and s >= 1920 else v))
        _write(root / f"rank_{rank}", {"loss": points})
    return root


def test_heatmap_anomaly_label_stays_inside_and_title_counts_truthfully(late_fault):
    import msnb
    from msnb.plot.heatmaps import rank_heatmap

    health = msnb.health(late_fault)
    assert health.first is not None and health.first.rank == 7 and health.first.step >= 1920
    result = msnb.read(late_fault)
    h = rank_heatmap(result, "loss", anomaly=health)
    renderer = _drawn(h.figure, 100)
    (note,) = [t for ax in h.figure.axes for t in ax.texts if t.get_text().startswith("first anomaly")]
    box, page = note.get_window_extent(renderer), h.figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)
    plot = h.figure.axes[0].get_window_extent(renderer)  # nor over the colour bar: inside the heatmap itself
    assert plot.x0 <= box.x0 and box.x1 <= plot.x1 and plot.y0 <= box.y0 and box.y1 <= plot.y1, (box, plot)
    title = h.figure.axes[0].get_title()
    assert "8 ranks x 100 logged steps (0-1,980, every 20th)" in title and "columns" not in title
    binned = rank_heatmap(result, "loss", anomaly=health, max_cols=40)
    assert binned.cells.shape[1] == 34
    assert "100 logged steps (0-1,980, every 20th), in 34 columns of up to 3" in binned.figure.axes[0].get_title()


def test_heatmap_of_a_file_without_rank_says_no_rank(tmp_path):
    from msnb.plot.heatmaps import rank_heatmap

    run = _write(tmp_path / "one", {"loss": [(s, 1.0 + 0.01 * s) for s in range(50)]})
    h = rank_heatmap(read_runs(run), "loss")
    assert h.rows == ["no rank"]


# ---------------------------------------------------------------- histograms


def test_bias_histograms_are_drawn_as_values_with_a_reason_and_weights_as_shapes(tmp_path):
    """A bias still at zero and one equal within each step have no distribution: drawn as their value over steps,
    with a note; a weight's ridge lines are resampled onto equal bins (no needle from TensorBoard's tiny buckets)."""
    from tensorboardX import SummaryWriter

    from msnb.events import read
    from msnb.plot import plot_histograms

    rng = np.random.default_rng(0)
    w = SummaryWriter(str(tmp_path / "hist"))
    for s in range(0, 100, 10):
        w.add_histogram("layer.weight", rng.standard_normal(1000), s)
        w.add_histogram("layer.bias", np.zeros(64), s)
        w.add_histogram("layer2.bias", np.full(64, 0.01 + 1e-4 * s), s)
    w.close()
    fig = plot_histograms(read(tmp_path / "hist").histograms)
    renderer = _drawn(fig, REPORT_DPI)
    panels = {ax.get_title().split(" (")[0]: ax for ax in _visible(fig)}
    zero, growing, weight = panels["layer.bias"], panels["layer2.bias"], panels["layer.weight"]
    assert zero.get_xlabel() == "step" and [t.get_text() for t in zero.texts] == ["every value is 0 at every step\n(no distribution to draw)"]
    lo, hi = zero.get_ylim()
    assert lo < 0 < hi and hi - lo >= 1
    (line,) = growing.get_lines()
    np.testing.assert_allclose(line.get_ydata(), 0.01 + 1e-4 * np.arange(0, 100, 10), rtol=1e-6)
    assert "no distribution to draw" in growing.texts[0].get_text()
    # the weight: ten ridges of equal-width bins, the tallest under three ridge gaps (a needle would be the only thing seen)
    ridges = [ln for ln in weight.get_lines()]
    assert len(ridges) == 10 and all(np.allclose(np.diff(np.diff(ln.get_xdata())), 0, atol=1e-9) for ln in ridges)
    heights = [float(np.max(ln.get_ydata()) - k / 10) for k, ln in enumerate(ridges)]
    assert min(heights) > 0.1, "every ridge has a visible shape"
    for ax in _visible(fig):
        for t in ax.texts:
            assert t.get_fontsize() * REPORT_DPI / 72 >= 9, (t.get_text(), t.get_fontsize())
            assert ax.get_window_extent(renderer).contains(*t.get_window_extent(renderer).p0)


def test_a_panel_with_no_finite_value_says_so(tmp_path):
    run = _write(tmp_path / "log", {"loss": [(s, 3.0 / s) for s in range(1, 21)], "step_time_ms": [(s, float("nan")) for s in range(1, 21)]})
    report = plot_read(read_runs(run), [run], tags="loss,step_time")
    st = next(a for a in _visible(report.figure) if a.get_title() == "step_time_ms")
    assert [t.get_text() for t in st.texts] == ["nothing to draw: no finite value of step_time_ms"] and list(st.get_yticks()) == []


def test_consecutive_nan_steps_are_one_span_not_a_bar_of_crosses(three_jobs):
    """job_b rank 2 logs NaN at 120, 121, 122, 160 and 190: one shaded span (120-122) and three crosses drawn,
    while the crosses' line still holds every NaN step."""
    report = plot_read(read_runs(three_jobs), three_jobs, tags="loss", ranks=True)
    (ax,) = _visible(report.figure)
    (cross,) = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    assert cross.get_xdata().tolist() == [120.0, 121.0, 122.0, 160.0, 190.0]
    assert list(cross.get_markevery()) == [0, 3, 4]
    spans = [p for p in ax.patches if p.get_facecolor()[:3] == (1.0, 0.0, 0.0)]
    assert len(spans) == 1
    assert (spans[0].get_x(), spans[0].get_x() + spans[0].get_width()) == (120.0, 122.0)


def test_a_crowded_figure_names_each_run_once_whatever_its_loss_is_called(tmp_path):
    """The report's figure: runs with several ranks (one legend above the panels), one spelling its loss ``lm-loss``.
    Each run is one entry (not "healthy (lm-loss) (2 ranks)" beside "healthy (2 ranks)"); the title says the spellings."""
    curves = {"healthy": ("lm-loss", 2), "nan_rank": ("loss", 4), "drifting": ("loss", 4)}
    for run, (loss_tag, ranks) in curves.items():
        for rank in range(ranks):
            _write(tmp_path / run / f"rank_{rank}", {loss_tag: [(s, 3.0 / s + rank * 0.01) for s in range(1, 41)], "lr": [(s, 1e-4) for s in range(1, 41)]})
    result = read_runs(str(tmp_path))
    report = plot_read(result, str(tmp_path), tags="loss,lr", ranks=True)
    (legend,) = report.figure.legends
    texts = [t.get_text() for t in legend.get_texts()]
    runs = [t for t in texts if t.split(" ")[0] in curves]
    assert sorted(runs) == ["drifting (4 ranks)", "healthy (2 ranks)", "nan_rank (4 ranks)"], texts
    titles = [a.get_title() for a in report.figure.axes if a.get_visible()]
    assert "loss (lm-loss, loss)" in titles, titles
