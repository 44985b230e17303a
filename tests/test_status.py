"""One presentation layer: status words and colours written once (msnb/status.py), one result protocol, one option list per command."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from msnb.analysis.check import CheckResult
from msnb.analysis.compare_result import CompareCheck, CompareResult
from msnb.analysis.health import Anomaly, HealthReport
from msnb.cli import build_parser
from msnb.doctor import Report
from msnb.findings import ERROR, WARNING, Finding
from msnb.html_report.build import ReportResult
from msnb.kernel_check import KernelReadiness
from msnb.magics import MsnbMagics
from msnb.options import CHECK_OPTIONS, HEALTH_OPTIONS, PLOT_OPTIONS, REPORT_OPTIONS, RUNS_OPTIONS
from msnb.panel.table import RunsTable
from msnb.plot.scalars import PlotReport
from msnb.smoke.run.result import SmokeResult
from msnb.status import COLORS, FAIL, PASS, WARN, Result, ResultView, status_word

ROOT = Path(__file__).resolve().parents[1]
RESULTS = [CheckResult, CompareResult, SmokeResult, RunsTable, ReportResult, HealthReport, Report, KernelReadiness, PlotReport]


def test_the_status_colours_are_spelled_only_in_msnb_status():
    """The pass/warn/fail palette lives in msnb/status.py; figures (msnb/plot) keep their own line colours."""
    hexes = [c.lstrip("#").lower() for c in COLORS.values()]
    spelled = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "msnb").rglob("*.py")
        if p.name != "status.py" and "plot" not in p.parts and any(h in p.read_text().lower() for h in hexes)
    }
    assert spelled == set()


@pytest.mark.parametrize("cls", RESULTS, ids=lambda c: c.__name__)
def test_every_result_follows_the_protocol(cls):
    assert issubclass(cls, ResultView)
    for name in ("passed", "as_dict", "format_text", "exit_code", "to_json"):
        assert hasattr(cls, name) or name in getattr(cls, "__dataclass_fields__", {}), name


def test_exit_codes_come_from_passed():
    anomaly = Anomaly(step=7, rank=1, tag="loss", value=float("nan"), reason="NaN")
    assert HealthReport(first=None).exit_code == 0 and HealthReport(first=anomaly).exit_code == 1
    assert isinstance(HealthReport(first=anomaly), Result)
    doctor = Report(python="3", executable="python", platform="linux", packages={}, findings=[Finding("r", WARNING, "m")])
    assert doctor.exit_code == 0
    doctor.findings.append(Finding("protobuf-too-new", ERROR, "m"))
    assert doctor.exit_code == 1 and '"blocking": true' in doctor.to_json()
    kernel = KernelReadiness(name="k", path="/k", python="python", findings=[Finding("r", ERROR, "m")])
    assert kernel.exit_code == 1
    for passed, code in ((True, 0), (False, 1), (None, 1)):  # a report with no judged run is not a pass
        assert ReportResult(path="r.html", bytes=1, runs=[], passed=passed, html="").exit_code == code
    compare = CompareResult([], [], 0, {}, [CompareCheck("coverage", WARN, "few steps")], None)
    assert compare.exit_code == 0
    compare.checks.append(CompareCheck("first_loss", FAIL, "off"))
    assert compare.exit_code == 1 and '"out": "f.png"' in compare.to_json(out="f.png")
    assert CheckResult([]).exit_code == 0


def test_status_words_and_colours_agree_between_views():
    check = CompareCheck("finite", FAIL, "NaN at step 3")
    compare = CompareResult(["b"], ["c"], 10, {}, [check, CompareCheck("coverage", PASS, "all")], None)
    assert f"{status_word(FAIL)}  finite" in compare.format_text()
    assert f'color:{COLORS[FAIL]};font-weight:bold">{status_word(FAIL)}' in compare._repr_html_()


def test_a_pass_with_warnings_is_one_colour_in_the_header_and_the_figure_title():
    """'PASSED with 2 warnings' was amber in the smoke's verdict header and green in its figure's title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from msnb.smoke.shared.verdict import Check

    for statuses, want in (((PASS, WARN, WARN), WARN), ((PASS, PASS), PASS), ((WARN, FAIL), FAIL)):
        figure = plt.figure()
        checks = [Check(f"c{i}", s, "detail") for i, s in enumerate(statuses)]
        result = SmokeResult(FAIL not in statuses, checks, "/s", False, "CPU", "", 10, 10, 1.0, "", figure=figure)
        assert result.verdict_status == want
        assert matplotlib.colors.to_hex(figure._suptitle.get_color()) == COLORS[want]
        assert f"style='color:{COLORS[want]}'>msnb smoke {result.verdict_word}</b>" in result.to_html(figures=False)
        plt.close(figure)
    assert "PASSED with 2 warnings" in SmokeResult(True, [Check("a", WARN, ""), Check("b", WARN, "")], "/s", False, "CPU", "", 1, 1, 1.0, "").headline()


def test_the_report_line_says_it_wrote_and_then_the_runs_verdict():
    """'msnb report FAILED: wrote ...' read as if the writing had failed."""
    for passed, word in ((True, "PASSED"), (False, "FAILED"), (None, "NOT JUDGED")):
        text = ReportResult(path="r.html", bytes=2048, runs=["a"], passed=passed, html="").format_text()
        assert text == f"msnb report: wrote r.html (2 KB), 1 run: a; the runs' verdict: {word}"


def _options(parser) -> dict:
    return {a.option_strings[0] if a.option_strings else a.dest: a for a in parser._actions if a.dest != "help"}


@pytest.mark.parametrize(
    "command, options",
    [("plot", PLOT_OPTIONS), ("check", CHECK_OPTIONS), ("runs", RUNS_OPTIONS), ("health", HEALTH_OPTIONS), ("report", REPORT_OPTIONS)],
)
def test_the_cli_and_the_magic_are_built_from_one_option_list(command, options):
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    cli, magic = _options(sub), _options(getattr(MsnbMagics, f"mfmon_{command}").parser)
    assert set(cli) == {o.flags[0] for o in options if o.where != "magic"}
    assert set(magic) == {o.flags[0] for o in options if o.where != "cli"}
    for name in set(cli) & set(magic):  # help and default written once
        assert (cli[name].help, cli[name].default) == (magic[name].help, magic[name].default), name


def test_the_magics_do_not_import_the_cli():
    code = "import sys, msnb.magics; print('msnb.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "False"
    assert not re.search(r"^from \.cli import|^from msnb\.cli import", (ROOT / "msnb" / "magics.py").read_text(), re.M)
