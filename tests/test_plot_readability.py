"""What a person sees on msnb's figures (issue 27): every run drawn, legends that leave the data visible, text
large enough to read, no axes that magnify nothing, labels that name runs.  Checked through matplotlib's artists
on figures drawn from files the real writers wrote (tensorboardX)."""

import json

import pytest

from msnb.events.runs import read_runs
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
    assert report.notes() == ["no lr in run smoke (none of: lr, learning-rate, learning_rate)"]


def test_cli_json_draws_both_spellings(loss_two_spellings, tmp_path, run_msnb):
    out = tmp_path / "loss.png"
    proc = run_msnb("plot", *loss_two_spellings, "--tags", "loss", "--out", out, "--json", check=0)
    d = json.loads(proc.stdout)
    (panel,) = d["panels"]
    assert sorted(panel["tags"].values()) == ["loss", "loss/auto"] and panel["missing"] == [] and d["points"] == 80
    text = run_msnb("plot", *loss_two_spellings, "--tags", "loss,lr", "--out", out, check=0).stdout
    assert "note: no lr in run smoke" in text
