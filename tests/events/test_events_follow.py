"""Following a job that is still writing: only new bytes, partial records held back, new files and ranks, replaced files."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import msnb
from msnb.events import Follower
from tests.writers.framing import payloads


def source_file(ms_files) -> Path:
    (path,) = (ms_files / "record").glob("*_MS")
    return path


def steps_of(result, tag="loss"):
    return result.scalars.series(tag)[0].tolist()


def test_growing_file_is_read_incrementally(ms_files, tmp_path):
    src = source_file(ms_files)
    data = src.read_bytes()
    records = [(pos, pos + 16 + len(p)) for pos, p in payloads(src)]
    dst = tmp_path / "rank_0" / src.name
    dst.parent.mkdir()
    follower = Follower(tmp_path)

    # the writer has written 10 records and half of the 11th
    cut = records[10][0] + 7
    dst.write_bytes(data[:cut])
    new = follower.poll()
    assert steps_of(new) == list(range(1, 10))  # record k carries step k; record 0 is the version
    assert new.problems == []  # a partial record while following is not damage
    state = next(iter(follower._states.values()))
    assert state.pos == records[10][0]  # held back at the partial record's first byte

    # the rest of that record and 20 more arrive
    with open(dst, "ab") as f:
        f.write(data[cut : records[30][1]])
    new = follower.poll()
    assert steps_of(new) == list(range(10, 31))
    assert steps_of(follower.result) == list(range(1, 31))

    # nothing new: nothing read, no file opened
    opened = state.reads
    assert follower.poll().empty
    assert state.reads == opened

    with open(dst, "ab") as f:
        f.write(data[records[30][1] :])
    follower.poll()
    final = follower.close()
    assert final.problems == []
    assert steps_of(follower.result) == list(range(1, 121))
    assert len(follower.result.histograms) == 3


def test_new_rank_directories_and_files_are_picked_up(ms_files, tmp_path):
    ranks = ms_files / "ranks"
    follower = Follower(tmp_path)
    assert follower.poll().empty
    shutil.copytree(ranks / "rank_0", tmp_path / "rank_0")
    assert sorted(set(follower.poll().scalars.rank.tolist())) == [0]
    shutil.copytree(ranks / "rank_1", tmp_path / "rank_1")
    new = follower.poll()
    assert sorted(set(new.scalars.rank.tolist())) == [1] and len(new.scalars) == 50
    assert sorted(set(follower.result.scalars.rank.tolist())) == [0, 1]


def test_replaced_file_is_read_again(ms_files, tmp_path):
    a = source_file(ms_files)
    (b,) = (ms_files / "record_custom").glob("*_custom")
    target = tmp_path / a.name
    shutil.copyfile(a, target)
    follower = Follower(tmp_path)
    assert len(follower.poll().scalars) == 240
    # a new file is moved over the old name (new inode), as a restarted writer would
    tmp = tmp_path / "incoming"
    shutil.copyfile(b, tmp)
    os.replace(tmp, target)
    new = follower.poll()
    assert [p.kind for p in new.problems] == ["replaced"]
    assert new.scalars.tags() == ["metric"]
    assert follower.result.scalars.tags() == ["metric"]  # the old file's rows are gone


def test_log_lines_are_held_back_until_complete(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("epoch: 1 step: 1, loss is 3.5\nepoch: 1 step: 2, loss is 3.")
    follower = Follower(tmp_path)
    new = follower.poll()
    assert new.scalars.series("loss")[1].tolist() == [3.5]
    with open(log, "a") as f:
        f.write("25\n")
    assert follower.poll().scalars.series("loss")[1].tolist() == [3.25]


def test_read_equals_follow_then_close(ms_files):
    once = msnb.read(ms_files)
    follower = Follower(ms_files)
    follower.poll()
    follower.close()
    again = follower.result
    assert len(again.scalars) == len(once.scalars)
    assert again.scalars.value.tolist()[:50] == once.scalars.value.tolist()[:50]


def test_files_larger_than_one_read_chunk(ms_files, monkeypatch):
    """Big files are read in chunks (64 MB by default): every chunk's records are kept, none twice."""
    from msnb.events import records

    whole = msnb.read(ms_files)
    monkeypatch.setattr(records, "CHUNK", 1000)  # far smaller than the files; smaller than an image record, too
    chunked = msnb.read(ms_files)
    assert chunked.problems == []
    for table in ("scalars", "histograms", "tensors", "images", "lineage", "markers"):
        a, b = getattr(whole, table), getattr(chunked, table)
        assert len(a) == len(b), table
    import numpy as np

    np.testing.assert_array_equal(chunked.scalars.value, whole.scalars.value)  # NaN equals NaN here
    assert chunked.scalars.step.tolist() == whole.scalars.step.tolist()


def test_a_file_swapped_for_a_fifo_between_polls_is_named_not_opened(tmp_path):
    # opening a FIFO blocks until a writer comes: the poll ran in a child so a hang fails the test instead of stopping it
    from tests.writers.team_runs import write_tbx_run

    write_tbx_run(str(tmp_path / "run"), (0, 1), 20)
    code = """
import os, sys
from msnb.events import Follower
f = Follower(sys.argv[1])
print(len(f.poll().scalars))
path = f.result.files[0]["path"]
os.unlink(path)
os.mkfifo(path)
for _ in range(2):
    new = f.poll()
    print(len(new.scalars), [f"{p.kind}: {p.message}" for p in new.problems if p.path == path])
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    irregular = "unreadable: not a regular file (a FIFO, socket, device or broken link); not read"
    assert out.stdout.splitlines() == ["120", f"0 ['{irregular}']", "0 []"], out.stdout  # said once, never opened
