"""Hostile inputs, round four: a file link out of a run folder, large text files in a walk, outputs on /dev,
a signal during a save, torn rows of msprobe's files.  One test per reproduction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import msnb
from msnb.events.discovery import HEAD_BYTES, discover, walk

REPO = Path(__file__).resolve().parents[1]
LOSS_LINES = "".join(f"epoch: 1 step: {i}, loss is {2.0 / i}\n" for i in range(1, 6))


def test_a_file_symlink_leading_out_of_a_run_folder_is_named_and_never_read(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.log").write_text(LOSS_LINES)
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "train.log").write_text(LOSS_LINES)
    (run / "other.log").symlink_to(outside / "secret.log")
    (run / "inside.log").symlink_to(run / "train.log")  # a link that stays inside is read as any file
    problems: list = []
    found = discover(tmp_path / "runs", problems=problems)
    assert sorted(Path(s.path).name for s in found) == ["inside.log", "train.log"]
    assert [(Path(p.path).name, "outside" in p.message and "not read" in p.message) for p in problems] == [("other.log", True)]
    r = msnb.read(tmp_path / "runs")
    assert not any("secret" in f["path"] or f["path"].endswith("other.log") for f in r.files)
    assert any(p.path.endswith("other.log") and str(outside / "secret.log") in p.message for p in r.problems)
    left: list = []
    names = [n for _, ns in walk(tmp_path / "runs", left) for n in ns]
    assert "other.log" not in names and "train.log" in names and [Path(p.path).name for p in left] == ["other.log"]


def test_a_walk_sniffs_only_a_small_head_of_a_large_text_file(tmp_path):
    """A training line beyond the sniffed head of a file whose head holds no trainer's output: not a log (bounded cost)."""
    chatter = b"dataset shard 000123 loaded in 0.52 s\n"
    late = tmp_path / "late.txt"
    late.write_bytes(chatter * (2 * HEAD_BYTES // len(chatter)) + LOSS_LINES.encode())
    megatron = tmp_path / "stdout.txt"  # Megatron's arguments run to megabytes: their lines mark a log from its head
    megatron.write_text("".join(f"  argument_{i} ........................................ {i}\n" for i in range(100_000)) + LOSS_LINES)
    assert os.path.getsize(megatron) > 4 << 20
    (tmp_path / "README.txt").write_text("Contents\n  Install ........ 1\n  Usage .......... 2\n  [INFO] levels ... 3\n")  # no trainer's
    assert [(Path(s.path).name, s.kind) for s in discover(tmp_path)] == [("stdout.txt", "log")]
    assert msnb.read(late).scalars.series("loss")[0].tolist() == [1, 2, 3, 4, 5]  # named explicitly: read whole


def test_keep_and_summary_dir_on_dev_are_refused_before_anything_starts_and_nothing_is_created(tmp_path):
    """``--keep /dev/x`` trained into /dev; ``--summary-dir /dev/x`` made the folder, then refused."""
    from tests.test_robust_commands import msnb as msnb_cli
    from tests.test_robust_commands import one_line_error

    for option, where in (("--keep", f"/dev/msnb-keep-{os.getpid()}"), ("--summary-dir", f"/dev/shm/msnb-summary-{os.getpid()}/run")):
        proc = msnb_cli("smoke", "--steps", 3, "--no-live", option, where, cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
        one_line_error(proc, f"{option} {where}", "kernel's")
        assert proc.returncode == 2
        assert not os.path.lexists(where) and not os.path.lexists(os.path.dirname(where) if option == "--summary-dir" else where)
    assert list(tmp_path.iterdir()) == []  # nothing started: no scratch folder


SAVER = """
import os, sys, time
from msnb.outputs import write_file

def write(f):
    f.write(b"half a figure")
    f.flush()
    open(sys.argv[2], "w").close()  # the parent may signal now
    time.sleep(60)

write_file(sys.argv[1], write)
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_signal_during_a_save_leaves_no_temporary_file_and_still_ends_the_process(tmp_path, signame):
    out, ready = tmp_path / "fig.png", tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", SAVER, str(out), str(ready)], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), "the child never began its save"
        child.send_signal(getattr(signal, signame))
        assert child.wait(timeout=30) == -getattr(signal, signame)  # ended by the signal, as it would have been
    finally:
        child.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]  # no .fig.png.*.msnb-tmp, no fig.png


def test_a_signal_the_process_handles_during_a_save_reaches_its_handler_and_the_save_is_said_not_done(tmp_path):
    from msnb.errors import UsageError
    from msnb.outputs import write_file

    got: list = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with pytest.raises(UsageError, match="not written: SIGTERM"):
            write_file(str(tmp_path / "fig.png"), lambda f: (f.write(b"x"), os.kill(os.getpid(), signal.SIGTERM), time.sleep(1)))
        assert got == [signal.SIGTERM]  # the process's own handler ran, once
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL and list(tmp_path.iterdir()) == []
    finally:
        signal.signal(signal.SIGTERM, old)


def test_the_commands_page_states_the_readers_real_bounds():
    """docs/COMMANDS.md said JSON was read up to 512 MB (and lines to 16,384 characters) long after the code changed."""
    from msnb.events import logs, table_files

    text = " ".join((REPO / "docs" / "COMMANDS.md").read_text().split())
    assert table_files.MAX_LINE == logs.MAX_LINE
    assert f"a line parsed by its first {table_files.MAX_LINE:,} characters" in text
    assert f"`trainer_state.json` read up to {table_files.MAX_JSON_BYTES >> 20} MiB" in text and table_files.MAX_JSON_BYTES % (1 << 20) == 0
    assert "512 MB" not in text


MSPROBE_V1_HEADER = "vpp_stage,name,step,min,max,mean,norm,nans,zeros,shape,dtype\n"


def test_msprobe_torn_rows_one_column_short_are_skipped_and_said_not_repaired_into_a_new_series(tmp_path):
    """The repair of msprobe 26.2.0's short optimizer-state rows made 'grad_reduced/c1.weight/...' of shifted values."""
    good = '0,fc1.weight,{s},-1,1,0,{n},0.0,0.0,"(32, 16)",Float32\n'
    torn = 'c1.weight,0.5,3,0.7,0.9,0.1,0.0,0.0,"(32, 16)",Float32\n'  # a crash cut the line's head: as many fields as 26.2.0's short rows
    folder = tmp_path / "run" / "Dec05_02-31-03-rank3-88949a87"
    folder.mkdir(parents=True)
    (folder / "grad_reduced_0-2.csv").write_text(MSPROBE_V1_HEADER + good.format(s=0, n=1.0) + torn + good.format(s=1, n=2.0))
    (folder / "exp_avg_0-1.csv").write_text(  # in an optimizer-state file, only a row with the state's own name is 26.2.0's
        MSPROBE_V1_HEADER + 'exp_avg.fc1.weight,-0.5,0,0.25,0.01,0.9,0.0,0.0,"(32, 16)",Float32\n' + torn.replace(",3,", ",1,")
    )
    r = msnb.read(tmp_path / "run")
    tags = set(r.scalars.tag.tolist())
    assert not any("c1.weight" in t and "fc1.weight" not in t for t in tags), sorted(tags)
    assert r.scalars.series("grad_reduced/fc1.weight/norm")[1].tolist() == [1.0, 2.0]
    assert r.scalars.series("exp_avg/fc1.weight/norm")[1].tolist() == [0.9]  # the real short row, read as meant
    said = {(os.path.basename(p.path), p.kind, p.message) for p in r.problems}
    assert {(name, kind) for name, kind, _ in said} == {("grad_reduced_0-2.csv", "decode"), ("exp_avg_0-1.csv", "decode"), ("exp_avg_0-1.csv", "repaired")}
    assert all("1 row skipped (torn or short: 10 fields where the header has 11)" in m for _, k, m in said if k == "decode")
