"""MindSpore's memory report judged and shown: check, runs, report, health and the board give each rank's peak and
headroom; a rank near its limit and an imbalance over 20 % are warnings naming the ranks; JSON carries every figure."""

from __future__ import annotations

import json

from msnb.analysis.check import check
from msnb.analysis.health import health
from msnb.analysis.memory import ranks_words
from msnb.analysis.rules import PASS, WARN
from msnb.dashboard.model import BoardData
from msnb.html_report.build import report
from msnb.panel.board import runs
from tests.events.test_memory_lines import mf_line, write


def report_lines(limit=58178, used=40000, actual=41000) -> list[str]:
    return [
        "Device MOC memory size: 62420M",
        f"MindSpore Used memory size: {limit}M",
        f"Used peak memory usage (without fragments): {used}M",
        f"Actual peak memory usage (with fragments): {actual}M",
    ]


def job(root, peaks: dict, silent=()) -> None:
    """A job of msrun worker logs: rank -> (used, actual) peaks; ranks in *silent* have a log without the report."""
    for rank in sorted(set(peaks) | set(silent)):
        lines = [mf_line(s, 11 - s / 100) for s in range(1, 31)]
        if rank in peaks:
            lines += report_lines(used=peaks[rank][0], actual=peaks[rank][1])
        write(root / "msrun_log" / f"worker_{rank}.log", lines)


def memory_check(result, run=None):
    (r,) = [r for r in result.runs if run is None or r.run == run]
    (c,) = [c for c in r.checks if c.name == "memory"]
    return c


def test_balanced_ranks_with_room_pass_and_each_figure_is_in_the_json(tmp_path):
    job(tmp_path / "job", {0: (40000, 41000), 1: (40500, 41500), 2: (39000, 40000), 3: (40000, 41200)})
    result = check(tmp_path / "job")
    c = memory_check(result)
    assert c.status == PASS and "highest peak 40.5 GiB on rank 1" in c.detail and "28.7% left" in c.detail
    doc = json.loads(result.to_json())
    ranks = doc["memory"]["job"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert ranks[1] | {"path": None} == ranks[1] | {
        "path": None,
        "device_mb": 62420.0,
        "limit_mb": 58178.0,
        "used_peak_mb": 40500.0,
        "actual_peak_mb": 41500.0,
        "peak_mb": 41500.0,
        "headroom_mb": 16678.0,
    }
    assert "rank 1 40.5 GiB (28.7% left)" in result.format_text()


def test_a_rank_near_its_limit_and_an_imbalance_are_warnings_naming_the_ranks(tmp_path):
    job(tmp_path / "job", {0: (55405, 57400), 1: (55000, 57000), 2: (40000, 41000), 3: (40000, 41000)})
    result = check(tmp_path / "job")
    c = memory_check(result)
    assert c.status == WARN and result.passed  # warnings: the job ran
    assert "ranks 0-1 within 5% of MindSpore's limit" in c.detail
    assert "peaks differ by 40%" in c.detail and "ranks 0-1 up to 56.1 GiB" in c.detail and "ranks 2-3 from 40.0 GiB" in c.detail


def test_a_rank_without_the_report_is_named_never_zero(tmp_path):
    job(tmp_path / "job", {0: (40000, 41000), 1: (40000, 41000)}, silent=(2,))
    result = check(tmp_path / "job")
    c = memory_check(result)
    assert c.status == WARN and "rank 2: no memory report in the log (headroom unknown, not counted as 0)" in c.detail
    doc = result.as_dict()["memory"]["job"]
    assert doc["missing_ranks"] == [2] and [r["rank"] for r in doc["ranks"]] == [0, 1]


def test_runs_without_the_report_get_no_memory_check(tmp_path):
    job(tmp_path / "job", {}, silent=(0,))
    result = check(tmp_path / "job")
    assert not [c for r in result.runs for c in r.checks if c.name == "memory"] and result.as_dict()["memory"] == {}


def test_runs_report_health_and_board_show_it(tmp_path):
    job(tmp_path / "base" / "a", {0: (55405, 57400), 1: (40000, 41000)})
    table = runs(tmp_path / "base")
    assert "56.1 GiB, 1.3% left" in table.format_text()
    (row,) = table.as_dict()["runs"]
    assert row["memory"]["ranks"][0]["actual_peak_mb"] == 57400.0 and row["status"] and row["passed"]
    rep = health(tmp_path / "base" / "a")
    assert "memory: warning: rank 0 within 5%" in rep.format_text()
    assert rep.as_dict()["memory"]["a"]["ranks"][1]["used_peak_mb"] == 40000.0
    out = tmp_path / "r.html"
    report(tmp_path / "base" / "a", out=out)
    page = out.read_text()
    assert "Memory per rank" in page and "57,400" in page
    board = BoardData([tmp_path / "base" / "a"])
    board.poll(final=True)
    (data,) = board.runs.values()
    assert [c.status for c in data.verdict.checks if c.name == "memory"] == [WARN] and data.memory.highest.rank == 0


def test_rank_words():
    assert ranks_words([3]) == "rank 3" and ranks_words([0, 1, 2, 3, 7]) == "ranks 0-3, 7" and ranks_words([-1]) == "the log without a rank"
