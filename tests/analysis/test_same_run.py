"""One job's train.log, info.log and TensorBoard files hold the same losses: ``msnb check`` judges them as one run.

The files come from the real writers: mindformers' MFLossMonitor and its TensorBoard writer training a small
network on CPU (tests/writers/mindformers_monitor.py), its console captured as ``train.log`` the way
``msnb smoke`` captures a mindformers child's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import msnb

WRITER = Path(__file__).resolve().parent.parent / "writers" / "mindformers_monitor.py"


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job")
    with open(out / "train.log", "wb") as log:
        proc = subprocess.run([sys.executable, str(WRITER), str(out)], stdout=log, stderr=subprocess.STDOUT, cwd=str(out), timeout=600, check=False)
    assert proc.returncode == 0, (out / "train.log").read_text(errors="replace")[-3000:]
    return out


def test_the_three_files_of_one_job_are_one_run_and_the_kept_one_is_named(job):
    seen = msnb.read(job).scalars
    assert len({r for r in seen.run.tolist() if "loss" in set(seen.where(run=r).tag.tolist())}) == 3  # what discovery finds

    result = msnb.check(job)

    assert len(result.runs) == 1
    kept = result.runs[0].run
    assert "tensorboard" in kept  # the TensorBoard run has the most tags
    assert len(result.counted_once) == 2 and set(result.counted_once.values()) == {kept}
    text = result.format_text()
    assert text.count(f"counted once, as {kept}") == 2
    assert result.as_dict()["counted_once"] == result.counted_once


def test_a_log_whose_losses_differ_is_another_run(job, tmp_path):
    other = tmp_path / "job"
    shutil.copytree(job, other)
    info = other / "output" / "log" / "rank_0" / "info.log"
    # another training: every printed loss one unit higher (the TensorBoard file and train.log keep the first's)
    info.write_text(re.sub(r"loss:\[ ?(\d+)\.", lambda m: f"loss:[{int(m.group(1)) + 1}.", info.read_text()))

    result = msnb.check(other)

    assert len(result.runs) == 2
    assert len(result.counted_once) == 1
