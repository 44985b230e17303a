"""The judge on the scenario corpus: runs written by tensorboardX (mindformers' rank_N layout) and MindSpore's
SummaryRecord, read back with msnb.read, judged with msnb.check.  Each scenario states its decision, the flagged
rank and the step window (tests/scenarios/catalog.py)."""

import pytest

import msnb
from tests.scenarios import build
from tests.scenarios.catalog import SCENARIOS


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return build(tmp_path_factory.getbasetemp() / "judge_scenarios")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_verdict(corpus, name):
    _writer, _make, expect = SCENARIOS[name]
    result = msnb.check(corpus / name)
    (run,) = result.runs
    assert run.passed is expect["passed"] and result.passed is expect["passed"], result.format_text()
    got = [(f.rank, f.step) for f in result.flags]
    assert len(got) == len(expect["flags"]), result.format_text()
    for (rank, step), (want_rank, lo, hi) in zip(got, expect["flags"]):
        assert rank == want_rank and lo <= step <= hi, result.format_text()
    checks = {c.name: c for c in run.checks}
    for check_name, words in expect.get("checks", {}).items():
        assert words in checks[check_name].detail, result.format_text()
    for check_name, status in expect.get("status", {}).items():
        assert checks[check_name].status == status
    if len(run.ranks) > 1 and not expect["flags"]:
        assert checks["rank_divergence"].status == "pass"


def test_two_healthy_ranks_not_flagged_beside_a_bad_shard(corpus):
    """One call over two runs: the healthy 2-rank run passes, the drifting one fails with rank 1 flagged."""
    result = msnb.check([corpus / "healthy_2", corpus / "drift_2"])
    by_run = {r.run: r for r in result.runs}
    assert by_run["healthy_2"].passed and not by_run["healthy_2"].flags
    assert not by_run["drift_2"].passed
    assert [(f.run, f.rank) for f in result.flags] == [("drift_2", 1)]
    assert not result.passed and result.exit_code == 1


def test_nan_beside_finite_is_seen_by_every_view(corpus):
    """SummaryRecord wrote step 80 twice on rank 1 (NaN, then finite): the table keeps both, the judge and the plot report it."""
    r = msnb.read(corpus / "nan_beside_finite")
    steps, values = r.scalars.series("loss", rank=1)
    assert (steps == 80).sum() == 2
    from msnb.plot import plot_scalars

    for ranks in (False, True):
        report = plot_scalars(r.scalars, ranks=ranks)
        assert [(n["rank"], n["step"]) for n in report.nonfinite] == [(1, 80)]
        assert [(f.rank, f.step) for f in report.flags] == [(1, 80)]


def test_restart_replaces_earlier_records(corpus):
    """The resumed run's first file blew up after step 150; its second file restarts at 150: the judge uses the later records."""
    from msnb.analysis import curves

    r = msnb.read(corpus / "resumed")
    (c0, c1) = curves(r.scalars, "loss")
    assert c0.restarts == [150] and c0.steps.tolist() == list(range(1, 351))
    last_of_step = {}
    for s, v in zip(*r.scalars.series("loss", rank=0)):
        last_of_step[int(s)] = v  # read order: the later file's record wins
    assert c0.values.tolist() == [last_of_step[s] for s in range(1, 351)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_plot_draws_the_judges_flags(corpus, name):
    """msnb plot's flags are msnb check's (spikes included), rank, tag, step and reason, on every scenario."""
    from msnb.analysis.check import read_labelled
    from msnb.plot import plot_scalars

    result = read_labelled([corpus / name])
    checked = msnb.check(result)
    for ranks in (False, True):
        report = plot_scalars(result.scalars, ranks=ranks)
        assert [f.as_dict() for f in report.flags] == [f.as_dict() for f in checked.flags]
