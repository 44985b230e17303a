"""A log that holds no training line yet is followed once its lines come (``nohup.out`` at a job's start).

A directory's mtime does not change when a file in it grows, so a follower's cached listing must sniff such a file
again when it grows; the Follower, the board (``msnb.board(every=...)``) and ``msnb runs --watch`` all follow through it.
"""

from __future__ import annotations

import pytest

import msnb
from msnb.dashboard.model import BoardData
from msnb.events.reader import Follower
from msnb.panel.board import RunsBoard

LINE = (
    "2026-12-05 08:00:{s:02d},100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - {{ Epoch:[  1/  1], "
    "step:[{i:5d}/   50], loss: {loss:.6f}, per_step_time: 120ms, lr: 0.0001, overflow cond: False, loss_scale: 1024.0, "
    "global_norm: [1.5], train_throughput_per_npu: 12.5T\n"
)
STARTS = {
    "empty": "",
    "nohup's own line": "nohup: ignoring input\n",
    "mindformers' start": "2026-12-05 08:00:00,000 - mindformers[mindformers/trainer/base_trainer.py:120] - INFO - Load config\n",
}


@pytest.mark.parametrize("start", STARTS)
def test_a_nohup_out_with_no_training_line_yet_is_followed_by_the_follower_the_board_and_runs(tmp_path, start):
    job = tmp_path / "job"
    job.mkdir()
    log = job / "nohup.out"
    log.write_text(STARTS[start])
    follower, board, runs = Follower(tmp_path), BoardData([tmp_path]), RunsBoard(tmp_path)
    assert len(follower.poll().scalars) == 0
    board.poll()
    runs.poll()
    with open(log, "a") as f:
        f.write("".join(LINE.format(s=i % 60, i=i, loss=3.0 - i / 50) for i in range(1, 51)))
    whole = len(msnb.read(tmp_path).scalars)
    assert whole == 50 * 6  # loss, step time, lr, loss scale, global norm, TFLOPS
    follower.poll()
    assert len(follower.result.scalars) == whole
    assert board.poll() and sum(len(r.scalars) for r in board.runs.values()) == whole
    table = runs.poll()
    assert [row.last_step for row in table.rows] == [50]


def test_a_followed_log_that_could_be_mindformers_1_9s_names_the_unit_fault_once_not_once_a_poll(tmp_path):
    log = tmp_path / "worker_0.log"
    line = "{{ step:[{i:5d}/   10], loss: {loss:10.6f}, per_step_time: {ms:6d}ms, grad_norm: {n:10.6f}, throughput: {t:6.2f}T }}\n"
    follower = Follower(tmp_path)
    for i in range(1, 4):
        with open(log, "a") as f:
            f.write(line.format(i=i, loss=2.0 / i, ms=700, n=1.5, t=25.92))
        follower.poll()
    assert follower.result.scalars.series("model-flops-throughput-per-npu")[1].tolist() == [25.92] * 3  # as printed
    assert [p.kind for p in follower.result.problems] == ["unit"]
