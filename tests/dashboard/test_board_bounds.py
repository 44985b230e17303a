"""The board's bounds: panels drawn, bytes one follow step reads, and a Stop that never waits for a read of everything.

Reproductions: selecting all 10,000 tags ended in ``std::bad_alloc`` after
155 s; following a file growing at 60 MB/s peaked at 5.8 GB and Stop took 23 s.
Memory is the child's own peak RSS; no time is asserted.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from msnb.dashboard.model import FOLLOW_STEP_BYTES, BoardData
from msnb.dashboard.render import MAX_PANELS
from tests.conftest import REPO


def many_tags(path: Path, tags: int, points: int = 5) -> Path:
    """One event file with *tags* scalar tags of *points* points each (framing checked against tensorboardX)."""
    sys.path.insert(0, str(REPO / "tests"))
    from writers.training_state import FastEvents, check_against_tensorboardx

    checks: list = []
    ev = FastEvents(str(path), checks)
    steps = np.arange(1, points + 1)
    for i in range(tags):
        ev.add(f"metric/{i:05d}", steps, 1.0 / (steps + i))
    ev.close()
    check_against_tensorboardx(checks)
    return path


def child_peak_mb(code: str) -> tuple[str, int]:
    """Run *code* in a child Python with this checkout first; its stdout and its own peak RSS (VmHWM, read as it ends:
    ru_maxrss is kept across exec, so a child of a large pytest process would start at the parent's size)."""
    tail = '\nprint("VmHWM", next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))\n'
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + tail], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    return "\n".join(lines[:-1]), int(lines[-1].split()[1]) // 1024


def test_choosing_ten_thousand_tags_draws_a_bounded_number_of_panels_and_says_how_many_were_left_out(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    many_tags(run, 10_000)
    out, peak_mb = child_peak_mb(f"""
        import msnb
        b = msnb.board({str(run)!r})
        names = list(b.controls["tags"].options)
        b.controls["tags"].value = tuple(names)
        b.redraw()
        axes = [ax for ax in b.figure.axes if ax.get_title()]
        notes = [t.get_text() for t in b.figure.texts]
        print(len(names), len(axes), notes)
    """)
    chosen, drawn, notes = out.strip().splitlines()[-1].split(" ", 2)
    assert int(chosen) == 10_000 and int(drawn) == MAX_PANELS
    assert f"{10_000 - MAX_PANELS:,} more chosen tags not drawn" in notes
    assert peak_mb < 1500, peak_mb


def test_one_follow_step_reads_a_bounded_slice_of_a_growing_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    many_tags(run, 40, points=120_000)  # ~ 5 M records: several steps' worth
    size = sum(p.stat().st_size for p in run.iterdir())
    assert size > 3 * FOLLOW_STEP_BYTES
    data = BoardData(run)
    data.poll(bounded=True)
    (state,) = data._followers[0]._states.values()
    assert 0 < state.pos <= FOLLOW_STEP_BYTES
    assert not data.problems  # a step cut inside a record is not damage: the rest is read at the next step
    steps = 1
    while state.pos < size:
        before = state.pos
        data.poll(bounded=True)
        assert 0 < state.pos - before <= FOLLOW_STEP_BYTES
        steps += 1
    assert steps >= 3
    whole = BoardData(run)
    whole.poll(final=True)
    assert len(whole.runs["."].scalars) == len(data.runs["."].scalars) == 40 * 120_000


def test_stop_while_a_writer_appends_reads_a_bounded_slice_and_returns(tmp_path):
    """Stop's last read is bounded too, and a follow thread still in its step is not waited for beyond a moment."""
    import msnb

    run = tmp_path / "run"
    run.mkdir()
    many_tags(run, 4, points=200)
    path = next(run.iterdir())
    raw = path.read_bytes()
    first = 12 + struct.unpack("<Q", raw[:8])[0] + 4  # the file_version record; what follows is whole scalar records
    tail = raw[first:]
    done = threading.Event()

    def writer():
        with open(path, "ab") as f:
            while not done.is_set():
                f.write(tail * max(1, (1 << 20) // len(tail)))  # about 1 MB a write, whole records
                f.flush()
                done.wait(0.016)  # about 60 MB/s, as in the reproduction

    t = threading.Thread(target=writer, daemon=True)
    b = msnb.board(run, every=0.05)
    t.start()
    try:
        while path.stat().st_size < 4 * FOLLOW_STEP_BYTES:
            time.sleep(0.01)
        (state,) = b.data._followers[0]._states.values()
        before = state.pos
        b.stop()
        assert not b.following and b._thread is None
        assert state.pos - before <= 3 * FOLLOW_STEP_BYTES  # the step ending, the one in progress, the last read: each bounded
    finally:
        done.set()
        t.join()
