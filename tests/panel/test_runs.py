"""`msnb runs`, `msnb.runs`, `watch_runs` and `%mfmon_runs` on a base of runs written by tensorboardX and MindSpore.

The base (tests/writers/team_runs.py) holds healthy noisy runs, a NaN rank at a
known step, a missing rank, a nested experiment, a run whose only file is
damaged, and a MindSpore run whose ranks are named in its file names.  The
panel must say what the scenario was built to show, and agree with ``msnb
check`` (read by another code path) on every run both judge.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import msnb
from msnb import kernel
from msnb.errors import NothingReadable, UsageError
from msnb.panel import RunsBoard, watch_runs
from msnb.panel.rows import MISSING_LISTED
from tests.conftest import REPO, WRITERS, kernel_from_spec

ROW_KEYS = {"run", "status", "ranks", "missing_ranks", "last_step", "last_loss", "passed", "flags", "bytes", "last_write", "judged_from", "memory"}


def write(out, which):
    proc = subprocess.run([sys.executable, str(WRITERS / "team_runs.py"), str(out), which], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="session")
def team(tmp_path_factory):
    base = tmp_path_factory.mktemp("team")
    write(base, "tbx")
    write(base, "ms")
    return base


@pytest.fixture(scope="session")
def expected(team):
    return json.loads((team / "expected.json").read_text())


def tbx_run(path, ranks, steps, start=1):
    """A few more healthy records with tensorboardX (the writer mindformers uses), in this process."""
    from tensorboardX import SummaryWriter

    for rank in ranks:
        w = SummaryWriter(os.path.join(path, f"rank_{rank}"))
        for s in range(start, start + steps):
            w.add_scalar("loss", 3.0 / s**0.5 * (1 + 0.01 * (s % 3)), s)
        w.close()


def row_of(doc, run):
    (row,) = [r for r in doc["runs"] if r["run"] == run]
    return row


def test_cli_json_contract_and_exit_codes(team, expected, run_msnb, tmp_path):
    proc = run_msnb("runs", team, "--json", check=1)  # nan_rank fails
    doc = json.loads(proc.stdout)  # one JSON document on stdout; the damaged file's problems go to stderr
    assert set(doc) == {"runs"}
    assert [r["run"] for r in doc["runs"]] == sorted(expected)
    for row in doc["runs"]:
        assert set(row) == ROW_KEYS
        assert row["status"] in ("active", "idle", "failed") and isinstance(row["passed"], bool)
        assert isinstance(row["bytes"], int) and row["bytes"] > 0 and isinstance(row["last_write"], float)
        for f in row["flags"]:
            assert set(f) == {"run", "rank", "tag", "step", "reason"} and f["run"] == row["run"]
        want = expected[row["run"]]
        assert row["passed"] is want["passed"], row
        assert row["ranks"] == want["ranks"] and row["missing_ranks"] == want["missing_ranks"] and row["last_step"] == want["last_step"], row
        assert (row["status"] == "failed") is (not want["passed"])
    assert "damaged" in proc.stderr and "checksum" in proc.stderr

    ok = run_msnb("runs", team / "exp", "--json", check=0)  # a nested experiment alone: healthy
    assert [r["run"] for r in json.loads(ok.stdout)["runs"]] == ["a/run"]

    (tmp_path / "empty").mkdir()
    empty = run_msnb("runs", tmp_path / "empty", check=2)
    assert empty.stdout == "" and empty.stderr.startswith("msnb runs: error: no runs under") and str(tmp_path / "empty") in empty.stderr
    missing = run_msnb("runs", tmp_path / "nope", check=2)
    assert str(tmp_path / "nope") in missing.stderr and "no such directory" in missing.stderr
    a_file = next((team / "healthy" / "rank_0").iterdir())
    assert "not a directory" in run_msnb("runs", a_file, check=2).stderr
    assert "--active-within" in run_msnb("runs", team, "--active-within", "-5", check=2).stderr
    run_msnb("runs", check=2)  # no BASE: argparse usage
    run_msnb("runs", team / "healthy", "--tag", "no-such-tag", check=1)  # a named tag the run lacks fails it, as in msnb check


def test_nan_rank_flagged_at_its_step_and_missing_rank_found(team):
    table = msnb.runs(team)
    rows = {r.run: r for r in table.rows}
    nan = rows["nan_rank"]
    assert not nan.passed and nan.status == "failed" and nan.light == "red"
    assert {(f.rank, f.tag, f.step) for f in nan.flags} == {(2, "loss", 150), (2, "grad-norm", 150)}
    gap = rows["missing_rank"]
    assert gap.ranks == [0, 1, 3] and gap.missing_ranks == [2] and gap.passed and gap.light == "amber"
    assert "FLAG nan_rank rank 2 loss from step 150" in table.format_text()


def test_no_false_flags_on_healthy_noisy_runs(team):
    rows = {r.run: r for r in msnb.runs(team).rows}
    for name in ("healthy", "exp/a/run", "ms_run"):
        row = rows[name]
        assert row.passed and row.flags == [] and row.light == "green" and row.trend == "falling", (name, row.verdict.checks)
        assert 0 < row.smoothed_loss < row.curve[0] and row.last_loss is not None
    assert rows["ms_run"].ranks == [0, 1]  # ranks from MindSpore's file names (device id), one folder for both


def test_damaged_only_run_shows_its_problems(team):
    row = {r.run: r for r in msnb.runs(team).rows}["damaged"]
    assert row.last_step is None and row.last_loss is None and row.trend == "-"
    assert row.problems and all("damaged" in p.path for p in row.problems)
    assert row.passed and row.light == "amber"  # the judge warns: no loss to judge
    assert any(c.name == "tags" and c.status == "warn" for c in row.verdict.checks)


def test_panel_agrees_with_msnb_check(team):
    """msnb check reads the whole base at once and labels runs its own way; the verdicts must be the same."""
    panel = {r.run: r for r in msnb.runs(team).rows}
    checked = msnb.check(team).runs
    assert checked
    for verdict in checked:
        (name,) = [n for n in panel if n == verdict.run or n.endswith("/" + verdict.run)]
        row = panel[name]
        assert row.passed == verdict.passed
        assert [(f.rank, f.tag, f.step, f.reason) for f in row.flags] == [(f.rank, f.tag, f.step, f.reason) for f in verdict.flags]
        assert [c.as_dict() for c in row.verdict.checks] == [c.as_dict() for c in verdict.checks]


def test_status_active_and_idle(team, tmp_path):
    base = tmp_path / "base"
    for name in ("healthy", "missing_rank", "nan_rank"):
        shutil.copytree(team / name, base / name)
    old = time.time() - 3600
    for name in ("healthy", "nan_rank"):
        for path in (base / name).rglob("*"):
            os.utime(path, (old, old))
    rows = {r.run: r for r in msnb.runs(base, active_within=600).rows}
    assert rows["missing_rank"].status == "active" and rows["healthy"].status == "idle"
    assert rows["nan_rank"].status == "failed"  # failing shows whatever the activity
    assert abs(rows["healthy"].last_write - old) < 1 and rows["healthy"].age() > 3500
    assert {r.status for r in msnb.runs(base, active_within=7200).rows} == {"active", "failed"}


def test_html_has_one_sparkline_per_run_and_status_colours(team):
    table = msnb.runs(team)
    page = table._repr_html_()
    assert page.count("<svg") == len(table.rows) == 6
    assert page.count("<polyline") == 5  # the damaged run has no curve: a dashed line instead
    for colour in ("#cf222e", "#bf8700", "#1a7f37"):  # red, amber, green
        assert f"background:{colour}" in page
    assert "<script" not in page
    bundle = table.mime_bundle()
    assert bundle["text/plain"] == table.format_text() and bundle["text/html"] == page


def test_symlink_loops_and_unlistable_folders_are_reported(team, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(team / "healthy", base / "healthy")
    (base / "healthy" / "again").symlink_to(base, target_is_directory=True)
    # a folder deeper than PATH_MAX: no one, root included, can list it by its path
    fd = os.open(base, os.O_RDONLY)
    for _ in range(30):
        os.mkdir("d" * 200, dir_fd=fd)
        nxt = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    table = msnb.runs(base)
    assert [r.run for r in table.rows] == ["healthy"]
    kinds = {str(p.kind) for p in table.problems}
    assert {"loop", "unreadable"} <= kinds
    (locked,) = [p for p in table.problems if p.kind == "unreadable"]
    assert locked.path.startswith(str(base / ("d" * 200))) and "cannot list" in locked.message
    assert "cannot list this directory" in table.format_text()


def test_python_api_errors(tmp_path):
    with pytest.raises(NothingReadable, match="no runs under"):
        msnb.runs(tmp_path)
    with pytest.raises(UsageError, match="no such directory"):
        msnb.runs(tmp_path / "nope")
    with pytest.raises(UsageError, match="--every"):
        watch_runs(tmp_path, every=0)


def test_watch_reads_only_what_was_added_and_picks_up_new_runs(tmp_path):
    # a job still writing: the bytes tensorboardX wrote, appended in two parts cut inside a record
    tbx_run(tmp_path / "scratch", [0], 80)
    (written,) = (tmp_path / "scratch" / "rank_0").iterdir()
    data = written.read_bytes()
    cut = int(len(data) * 0.6)
    base = tmp_path / "base"
    tbx_run(base / "steady", [0, 1], 60)
    (base / "growing" / "rank_0").mkdir(parents=True)
    growing = base / "growing" / "rank_0" / written.name
    growing.write_bytes(data[:cut])

    board = RunsBoard(base)
    first = board.poll()
    assert sorted(board.changed) == ["growing", "steady"]
    steps = {r.run: r.last_step for r in first.rows}
    assert steps["steady"] == 60 and 30 < steps["growing"] < 80
    assert not first.all_problems  # the record cut in two is waited for, not reported as damage

    assert board.poll().rows and board.changed == []  # nothing written: nothing read, nothing judged again

    with open(growing, "ab") as f:
        f.write(data[cut:])
    tbx_run(base / "exp" / "late", [0], 30)
    table = board.poll()
    assert sorted(board.changed) == ["exp/late", "growing"]  # the steady run was not read again
    assert {r.run: r.last_step for r in table.rows} == {"exp/late": 30, "growing": 80, "steady": 60}
    # what the polls built equals one fresh read of the same files
    fresh = {r.run: (r.last_step, r.last_loss, r.verdict.as_dict()) for r in msnb.runs(base).rows}
    assert {r.run: (r.last_step, r.last_loss, r.verdict.as_dict()) for r in board.poll(final=True).rows} == fresh

    shutil.rmtree(base / "exp")
    assert [r.run for r in board.poll().rows] == ["growing", "steady"]  # a deleted run leaves the table


def test_a_log_at_the_base_is_a_run_of_its_own_and_reads_no_other_run(tmp_path):
    base = tmp_path / "base"
    tbx_run(base / "job", [0], 40)
    (base / "launch.log").write_text("launching job on 1 device\n")  # what a launcher leaves beside its runs
    board = RunsBoard(base)
    rows = {r.run: r for r in board.poll().rows}
    assert sorted(rows) == [".", "job"] and rows["."].files == [str(base / "launch.log")] and rows["."].last_step is None
    tbx_run(base / "job", [1], 40)
    board.poll()
    assert board.changed == ["job"]  # the base's own run never opens the files of the runs below it


class Recorder:
    """A display that keeps what it was shown; the second call stands for the user pressing stop."""

    def __init__(self, interrupt_at=None):
        self.shown = []
        self.interrupt_at = interrupt_at

    def show(self, table, changed):
        self.shown.append(table)
        if len(self.shown) == self.interrupt_at:
            raise KeyboardInterrupt


def test_watch_stops_on_time_and_on_interrupt(tmp_path):
    tbx_run(tmp_path / "run", [0], 30)
    shown = Recorder()
    last = watch_runs(tmp_path, every=0.2, duration=0.7, display=shown)
    # one table per poll (as many as the machine's speed allows), then the last one again saying why it stopped
    polls = int(re.fullmatch(r"stopped after 1 s \((\d+) polls?\)", last.note).group(1))
    assert polls >= 1 and len(shown.shown) == polls + 1 and shown.shown[-1] is last
    assert [t.note for t in shown.shown[:-2]] == [f"watching: poll {i}, every 0.2 s" for i in range(1, polls)]
    stopped = Recorder(interrupt_at=2)
    last = watch_runs(tmp_path, every=0.05, duration=60, display=stopped)
    assert last.note.startswith("interrupted") and [r.run for r in last.rows] == ["run"]


def test_magic_in_a_real_ipython_shell(team, tmp_path):
    (tmp_path / "empty").mkdir()
    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
        f"t = ip.run_line_magic('mfmon_runs', '{team} --active-within 60')\n"
        f"w = ip.run_line_magic('mfmon_runs', '{team / 'exp'} --every 0.2 --for 0.5')\n"
        f"bad = ip.run_cell('%mfmon_runs {tmp_path / 'empty'}')\n"
        "print(json.dumps({'doc': t.as_dict(), 'watched': w.as_dict(), 'note': w.note, 'failed': not bad.success, 'error': type(bad.error_in_exec).__name__}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(answer["doc"]["runs"]) == 6 and [r["run"] for r in answer["watched"]["runs"]] == ["a/run"]
    assert answer["note"].startswith("stopped after") and answer["failed"] and answer["error"] == "UsageError"


def test_watch_in_a_real_kernel_updates_one_display_in_place(team, jupyter_dirs):
    kernel.install("msnb-test-runs", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-runs") as kc:
        outputs = []
        reply = kc.execute_interactive(f"%mfmon_runs {team / 'exp'} --every 0.3 --for 1.2", timeout=180, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok"
    shown = [m for m in outputs if m["msg_type"] in ("display_data", "update_display_data", "execute_result")]
    first, *updates = shown
    assert first["msg_type"] == "display_data" and updates, [m["msg_type"] for m in shown]
    ident = first["content"]["transient"]["display_id"]
    assert all(m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == ident for m in updates)  # no second copy as Out[n]
    for m in shown:
        data = m["content"]["data"]
        assert data["text/html"].count("<svg") == 1 and "a/run" in data["text/plain"]
    assert re.search(r"stopped after \d+ s", updates[-1]["content"]["data"]["text/plain"])


def test_the_sparkline_keeps_a_spike_that_thinning_would_drop():
    """The panel's curve is the loss's M4 envelope: a one-point spike among 10,000 points is still drawn."""
    import numpy as np

    from msnb.panel.rows import SPARK_POINTS, _thin

    steps = np.arange(1, 10_001)
    values = np.linspace(3.0, 1.0, steps.size)
    values[5_003] = 9.0
    curve = _thin(steps, values)
    assert max(curve) == 9.0 and curve[0] == 3.0 and curve[-1] == 1.0
    assert len(curve) <= SPARK_POINTS + SPARK_POINTS // 4
    assert _thin(steps[:50], values[:50]) == values[:50].tolist()  # short curves are kept whole


def test_a_huge_rank_number_in_a_folder_name_lists_a_bounded_gap(tmp_path):
    # rank_9000000000 fits int64, so it names a rank: the gap below it must not be built as one set of 9e9 ints
    tbx_run(tmp_path / "run", (0, 1), 5)
    tbx_run(tmp_path / "run", (9_000_000_000,), 5)
    (row,) = msnb.runs(tmp_path).rows
    assert row.ranks == [0, 1, 9_000_000_000]
    assert row.missing_ranks == list(range(2, 2 + MISSING_LISTED)) and row.missing_more == 9_000_000_000 - 2 - MISSING_LISTED
    assert row.light == "amber"
    assert f"+{row.missing_more:,} more" in msnb.runs(tmp_path).format_text()


def test_a_one_shot_table_equals_a_kept_board_and_a_board_polled_after_it_reads_again(team):
    """``msnb runs`` hands each reader's rows over (one copy in memory): its rows are the kept board's, and a later poll of such a board reads every run afresh."""
    kept = RunsBoard(team).poll(final=True)
    board = RunsBoard(team)
    once = board.poll(final=True, last=True)
    assert not board._readers  # nothing kept
    again = board.poll(final=True)
    for table in (once, again, msnb.runs(team)):
        assert [r.as_dict() for r in table.rows] == [r.as_dict() for r in kept.rows]
        assert [(r.curve, r.smoothed_loss, r.trend, [str(p) for p in r.problems]) for r in table.rows] == [
            (r.curve, r.smoothed_loss, r.trend, [str(p) for p in r.problems]) for r in kept.rows
        ]


def test_add_scalars_head_folders_belong_to_their_run(tmp_path):
    """tensorboardX's add_scalars writes ``rank_N/<tag>/head_<i>`` folders: the panel lists the job once, as msnb check does,
    with its heads among its series, instead of a phantom run per head folder that cannot be found on disk."""
    code = "import sys; sys.path.insert(0, sys.argv[2]); from writers.training_state import write_small_run; write_small_run(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "small"), str(REPO / "tests")], check=True, capture_output=True, timeout=300)
    assert list((tmp_path / "small" / "tensorboard" / "rank_0" / "max_attention_logit").rglob("head_*"))  # the folders are there
    table = msnb.runs(tmp_path / "small")
    assert [r.run for r in table.rows] == ["."]  # one job: its log, output/log and tensorboard folders are its writers
    assert not [p for p in table.all_problems if p.kind != "copy"], table.all_problems
    assert len(msnb.check(tmp_path / "small").runs) == 1  # the judge's runs too
    from msnb.panel.collect import find_runs, read_run

    (tb,) = find_runs(tmp_path / "small")
    heads = [t for t in read_run(tb)[1].scalars.tags() if "/head_" in t]
    assert heads == ["max_attention_logit/model.layers.0.attention/head_0", "max_attention_logit/model.layers.0.attention/head_1"]
