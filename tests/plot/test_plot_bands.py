"""Cross-rank bands on many-rank runs written by tensorboardX: numbers against a numpy oracle, the lines
drawn against the judge's flags, the default switch at 17 ranks, the figure, the CLI and the magic."""

import json
import subprocess
import sys
import warnings

import matplotlib
import numpy as np
import pytest

import msnb
from msnb.analysis.bands import BANDS_ABOVE, band_statistics, judged_flags, rank_bands
from msnb.cli import main
from msnb.options import BANDS_HELP
from msnb.plot import plot_scalars
from tests.conftest import REPO, WRITERS

matplotlib.use("Agg")


def _tree(root, ranks: int, steps: int):
    out = root / f"r{ranks}x{steps}"
    proc = subprocess.run([sys.executable, str(WRITERS / "rank_bands.py"), str(out), str(ranks), str(steps)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, np.load(out / "values.npy"), json.loads((out / "roles.json").read_text())


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return _tree(tmp_path_factory.mktemp("bands"), 64, 300)


@pytest.fixture(scope="module")
def read_big(big):
    return msnb.read(big[0])


def test_bands_equal_a_numpy_oracle(big, read_big):
    _path, values, roles = big
    (b,) = rank_bands(read_big.scalars, "loss")
    assert b.ranks == list(range(64)) and b.steps.tolist() == list(range(1, 301))
    keep = np.array([r not in b.outliers for r in range(64)])
    m = values.astype(np.float64)[keep]  # what tensorboardX wrote, the drawn ranks left out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = [np.nanmin(m, 0), np.nanquantile(m, 0.1, 0), np.nanmedian(m, 0), np.nanquantile(m, 0.9, 0), np.nanmax(m, 0)]
    for got, expected in zip((b.low, b.q_low, b.median, b.q_high, b.high), want):
        np.testing.assert_array_equal(got, expected)
    assert b.counted.tolist() == keep.sum().repeat(300).tolist()


def test_band_statistics_skip_nan_and_inf_like_numpy():
    rng = np.random.default_rng(3)
    m = rng.normal(size=(33, 50))
    m[rng.random(m.shape) < 0.2] = np.nan
    m[0, :5] = np.inf
    m[:, 7] = np.nan  # a step no rank has a finite value at
    finite = np.where(np.isfinite(m), m, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = [np.nanmin(finite, 0), np.nanquantile(finite, 0.25, 0), np.nanmedian(finite, 0), np.nanquantile(finite, 0.75, 0), np.nanmax(finite, 0)]
    for got, expected in zip(band_statistics(m, (0.25, 0.75))[:5], want):
        np.testing.assert_array_equal(got, expected)


def test_lines_are_exactly_the_judges_flags(big, read_big):
    _path, _values, roles = big
    flags = judged_flags(read_big.scalars, "loss")
    (b,) = rank_bands(read_big.scalars, "loss", flags=flags)
    assert b.outliers == sorted({f.rank for f in flags}) == sorted([roles["bad"], roles["nan"]])
    assert roles["noisy"] not in b.outliers
    at = b.ranks.index
    # the noisy rank strays outside the 10-90 band far more than a typical rank, and still draws no line
    assert b.outside_steps[at(roles["noisy"])] > 2 * np.median(b.outside_steps)
    assert b.longest_outside[at(roles["bad"])] > b.longest_outside[at(roles["noisy"])]
    assert b.nonfinite_steps[roles["nan"]].tolist() == [roles["nan_step"]]


def test_figure_draws_bands_lines_and_the_nan(big, read_big, tmp_path):
    _path, _values, roles = big
    report = plot_scalars(read_big.scalars, tags=["loss"])
    ax = report.figure.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "min-max of 62 ranks" in labels and "10-90 % of ranks" in labels and "median" in labels
    assert any(label.startswith(f"rank {roles['bad']} (departs from step") for label in labels)
    assert any(label.startswith(f"rank {roles['nan']} (NaN/Inf") for label in labels)
    assert not any(f"rank {roles['noisy']} " in label for label in labels)
    assert len(ax.collections) == 2  # the two bands, not 64 lines
    cross = next(line for line in ax.get_lines() if line.get_label() == f"NaN/Inf (rank {roles['nan']})")
    assert cross.get_xdata().tolist() == [roles["nan_step"]]
    out = tmp_path / "bands.png"
    report.figure.savefig(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "bands of loss, run tensorboard: 62 of 64 ranks" in report.format_text()


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    root = tmp_path_factory.mktemp("bands-edge")
    return {n: _tree(root, n, 60)[0] for n in (BANDS_ABOVE, BANDS_ABOVE + 1)}


def test_bands_by_default_from_17_ranks(edge):
    assert BANDS_ABOVE == 16 and str(BANDS_ABOVE) in BANDS_HELP
    sixteen, seventeen = (msnb.read(edge[n]).scalars for n in (16, 17))
    assert plot_scalars(sixteen, tags=["loss"]).bands == []
    assert [b.ranks for b in plot_scalars(seventeen, tags=["loss"]).bands] == [list(range(17))]
    assert len(plot_scalars(sixteen, tags=["loss"], bands=True).bands) == 1
    no = plot_scalars(seventeen, tags=["loss"], bands=False, ranks=True)
    assert no.bands == [] and len(no.figure.axes[0].collections) == 0


def test_cli_json_says_what_was_drawn(edge, tmp_path, capsys):
    out = tmp_path / "p.png"
    assert main(["plot", str(edge[17]), "--tags", "loss", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bands"] is True
    (detail,) = report["band_details"]
    assert detail["ranks"] == 17 and [o["rank"] for o in detail["outliers"]] == sorted({f["rank"] for f in report["flags"]})
    assert 2 in [o["rank"] for o in detail["outliers"]]  # the rank with a NaN
    assert main(["plot", str(edge[17]), "--tags", "loss", "--json", "--no-bands", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["bands"] is False
    assert main(["plot", str(edge[16]), "--tags", "loss", "--json", "--bands", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["bands"] is True


def test_magic_takes_bands_and_no_bands(edge):
    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "from IPython.utils.capture import capture_output\n"
        "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
        "with capture_output():\n"
        f"    on = ip.run_line_magic('mfmon_plot', '{edge[16]} --tags loss --bands')\n"
        f"    off = ip.run_line_magic('mfmon_plot', '{edge[17]} --tags loss --no-bands')\n"
        "print(json.dumps([on.as_dict()['bands'], off.as_dict()['bands']]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, False]


def test_ranks_without_a_common_step_are_drawn_as_lines():
    """Bands need steps every rank logged; ranks that logged disjoint steps keep their lines, nothing vanishes."""
    from msnb.events import ScalarTable

    steps = np.concatenate([np.arange(10) + 100 * r for r in range(3)])
    table = ScalarTable(
        run=np.full(30, ".", dtype=object),
        rank=np.repeat(np.arange(3), 10),
        tag=np.full(30, "loss", dtype=object),
        step=steps,
        wall_time=steps.astype(float),
        value=np.ones(30),
    )
    report = plot_scalars(table, bands=True, ranks=True, smooth=0.0)
    assert report.bands == [] and len(report.figure.axes[0].get_lines()) == 3


def _write_ranks(root, name, ranks, steps_of, value_of):
    from tensorboardX import SummaryWriter

    for r in ranks:
        with SummaryWriter(str(root / name / f"rank_{r}")) as w:
            for s in steps_of(r):
                w.add_scalar("loss", value_of(r, s), s)
    return root / name


def test_bands_asked_for_ranks_without_a_common_step_say_so(tmp_path):
    """Three ranks at disjoint steps cannot make a band: the report says they were drawn as lines instead."""
    run = _write_ranks(tmp_path, "disjoint", (0, 1, 2), lambda r: range(1 + 1000 * r, 60 + 1000 * r), lambda r, s: 1.0 / s)
    report = plot_scalars(msnb.read(run).scalars, tags=["loss"], bands=True)
    assert not report.bands and report.unbanded == [(".", "loss")]
    assert "no bands of loss, run .: its ranks share no step (drawn as lines)" in report.format_text()
    assert report.as_dict()["unbanded"] == [{"run": ".", "tag": "loss"}]


def test_a_band_of_flagged_ranks_says_what_it_covers(tmp_path):
    """Every rank NaN: the band is over all ranks, and the text and legend agree on it."""
    run = _write_ranks(tmp_path, "allnan", (0, 1, 2), lambda r: range(1, 60), lambda r, s: float("nan") if s > 30 else 2.0 / s)
    report = plot_scalars(msnb.read(run).scalars, tags=["loss"], bands=True)
    (b,) = report.bands
    assert b.outliers == [0, 1, 2]
    assert "all 3 ranks (every rank flagged)" in report.format_text()
    legend = [t.get_text() for t in report.figure.axes[0].get_legend().get_texts()]
    assert "min-max of 3 ranks" in legend
