"""Odd and huge inputs to the table and log readers: right answers, no tracebacks, memory bounded (a child's peak measured)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msnb
from msnb.events.discovery import LOG, discover

REPO = Path(__file__).resolve().parents[2]


def megatron_lines(steps: int) -> list[str]:
    return [
        f" [2024-06-01 10:00:00] iteration {i:8d}/ {steps:8d} | learning rate: 1.0E-04 | lm loss: {1.0 + i / 1e6:.6E} | grad norm: 1.0 |"
        for i in range(1, steps + 1)
    ]


def test_cr_only_line_ends_read_line_by_line_across_chunks(tmp_path):
    steps = 90_000  # about 11 MB: more than one chunk of the log reader, and not a single LF in it
    path = tmp_path / "megatron_cr.log"
    path.write_bytes("\r".join(megatron_lines(steps)).encode() + b"\r")
    r = msnb.read(path)
    s, v = r.scalars.series("loss")
    assert s.tolist() == list(range(1, steps + 1))
    assert abs(v[0] - 1.000001) < 1e-9 and abs(v[-1] - (1.0 + steps / 1e6)) < 1e-9  # step 1 has its own loss
    mixed = tmp_path / "mixed.log"
    lines = megatron_lines(4)
    mixed.write_bytes((lines[0] + "\r\n" + lines[1] + "\r" + lines[2] + "\n" + lines[3]).encode())
    assert msnb.read(mixed).scalars.series("loss")[0].tolist() == [1, 2, 3, 4]


def test_a_megatron_log_after_four_megabytes_of_preamble_is_found_in_a_tree(tmp_path):
    path = tmp_path / "job" / "stdout.txt"
    path.parent.mkdir()
    preamble = "".join(f"  argument_{i} ........................................ {i}\n" for i in range(70_000))
    assert len(preamble) > 4 << 20
    path.write_text(preamble + "\n".join(megatron_lines(5)) + "\n")
    assert [(Path(s.path).name, s.kind) for s in discover(tmp_path)] == [("stdout.txt", LOG)]
    assert msnb.read(tmp_path).scalars.series("loss")[0].tolist() == [1, 2, 3, 4, 5]


def test_huge_numbers_and_ranks_are_problems_not_overflow_errors(tmp_path):
    big = "9" * 400
    (tmp_path / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": ' + big + "}]}")
    r = msnb.read(tmp_path / "trainer_state.json")
    assert r.scalars.series("loss")[0].tolist() == [1]
    assert any("beyond any float" in p.message for p in r.problems)
    rows = [
        {"step": 1, "tag": "loss", "value": 2.0, "rank": 10**30},
        {"step": 2, "tag": "loss", "value": int(big)},
        {"step": 3, "tag": "loss", "value": 1.0, "rank": 3},
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    r = msnb.read(tmp_path / "t.jsonl")
    assert r.scalars.step.tolist() == [1, 3] and r.scalars.rank.tolist() == [-1, 3]
    (tmp_path / "t.csv").write_text(f"step,tag,value,rank\n1,loss,2.0,{10**30}\n2,loss,1.5,2\n")
    r = msnb.read(tmp_path / "t.csv")
    assert r.scalars.step.tolist() == [1, 2] and r.scalars.rank.tolist() == [-1, 2]


PEAK = r"""
import resource, sys, msnb
from msnb.analysis.compare_sides import read_side, wanted_tags
path, how = sys.argv[1], sys.argv[2]
if how == "compare":
    r, _ = read_side(path, tags=wanted_tags("loss"))
else:
    r = msnb.read(path)
print(len(r.scalars), sum(p.kind in ("line", "foreign") for p in r.problems), int(next(x.split()[1] for x in open("/proc/self/status") if x.startswith("VmHWM:"))) // 1024)  # this process's own peak (ru_maxrss is kept across exec)
"""


def child_peak(path: Path, how: str) -> tuple[int, int, int]:
    """(rows, problems of a cut or refused file, peak resident MiB) of reading *path* in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", PEAK, str(path), how], capture_output=True, text=True, env=env, timeout=600, check=True)
    rows, problems, peak = map(int, out.stdout.split())
    return rows, problems, peak


def test_a_wide_csv_of_4000_columns_reads_in_bounded_memory(tmp_path):
    path = tmp_path / "wide.csv"
    columns = 4000
    header = "step,loss," + ",".join(f"c{i}" for i in range(columns - 2)) + "\n"
    with open(path, "w") as f:
        f.write(header)
        row = ",".join(["1.2345"] * (columns - 1)) + "\n"
        for step in range(1, 6001):
            f.write(f"{step}," + row)
    assert path.stat().st_size > 40 << 20
    rows, _, peak = child_peak(path, "compare")  # the compared tags only: one column of 4,000
    assert rows == 6000 and peak < 600, peak
    rows, cut, peak = child_peak(path, "read")  # everything: at most MAX_TABLE_POINTS, the cut said
    assert rows <= 2_000_000 + columns and cut == 1 and peak < 1200, peak


def test_a_huge_trainer_state_is_refused_by_name_in_bounded_memory(tmp_path):
    path = tmp_path / "trainer_state.json"
    with open(path, "wb") as f:  # 480 MB without writing them: the size alone refuses it
        f.write(b'{"log_history": [')
        f.truncate(480 << 20)
    rows, refused, peak = child_peak(path, "read")
    assert rows == 0 and refused >= 1 and peak < 400, peak
    r = msnb.read(path)
    assert any("trainer_state.json" in p.path and "larger than" in p.message for p in r.problems)
