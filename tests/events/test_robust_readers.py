"""Every intact record kept, every problem reported, nothing raised: the reproductions of issue 11 for the readers.

Each test is one adversarial input with its expected outcome (rows kept,
problem kind and offset, exit code, memory bound).  The last section is a
differential fuzz test: msnb's scanner against an independent
maximal-recovery scanner written here.
"""

import io
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msnb
from msnb.events import Follower, ProblemKind
from msnb.events.discovery import rank_in_name, rank_of_path
from msnb.events.logs import MAX_LINE, LogParser
from msnb.events.records import FrameReader
from msnb.events.runs import read_runs, run_labeller
from tests.conftest import msnb_command

REPO = Path(__file__).resolve().parents[2]


def mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", mask(crc32c(head))) + payload + struct.pack("<I", mask(crc32c(payload)))


def spans(data: bytes):
    """(start, end) of each record by plain framing of an undamaged file."""
    out, pos = [], 0
    while pos + 16 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, pos + 16 + n))
        pos += 16 + n
    return out


@pytest.fixture
def summary(ms_files, tmp_path):
    """A private copy of the SummaryRecord run: record k carries step k (record 0 is the version)."""
    dst = tmp_path / "run"
    shutil.copytree(ms_files / "record", dst)
    for f in dst.iterdir():
        os.chmod(f, 0o600)
    (path,) = dst.glob("*_MS")
    return path


def loss_steps(result):
    return result.scalars.series("loss")[0].tolist()


# ------------------------------------------------------------------ data lost or mixed up


def test_torn_record_followed_by_intact_records_loses_only_itself(summary):
    data = summary.read_bytes()
    intact = loss_steps(msnb.read(summary))
    start, end = spans(data)[10]
    summary.write_bytes(data[: start + 12 + (end - start - 16) // 3] + data[end:])  # writer died a third into record 10
    result = msnb.read(summary)
    assert loss_steps(result) == [s for s in intact if s != 10]  # it used to keep 10 of 510 points
    (problem,) = result.problems
    assert problem.kind == ProblemKind.TORN and problem.offset == start


def test_file_rewritten_in_place_is_read_again_and_old_rows_dropped(summary, ms_files, tmp_path):
    follower = Follower(summary.parent)
    follower.poll()
    before = len(follower.result.scalars)
    other = next((ms_files / "ranks" / "rank_1").glob("*_MS")).read_bytes()
    replacement = other + other[: len(other) // 2]  # more bytes than before: no size shrink to notice
    inode = os.stat(summary).st_ino
    with open(summary, "r+b") as f:  # same inode, like cp over it
        f.write(replacement)
    assert os.stat(summary).st_ino == inode
    new = follower.poll(final=True)
    assert any(p.kind == ProblemKind.REPLACED for p in new.problems)
    expected = msnb.read(summary.parent).scalars
    assert len(follower.result.scalars) == len(expected) and len(expected) != before
    assert follower.result.scalars.value.tolist()[:20] == expected.value.tolist()[:20]


def test_file_deleted_and_recreated_with_more_bytes_is_read_again(summary, ms_files):
    follower = Follower(summary.parent)
    follower.poll()
    other = next((ms_files / "ranks" / "rank_1").glob("*_MS")).read_bytes()
    os.remove(summary)
    summary.write_bytes(other * 2)
    new = follower.poll()
    assert any(p.kind == ProblemKind.REPLACED for p in new.problems)
    assert len(follower.result.scalars) == len(msnb.read(summary.parent).scalars)


def test_explicit_file_with_a_damaged_first_header_is_read_as_events(summary, tmp_path):
    data = bytearray(summary.read_bytes())
    data[3] ^= 0xFF  # the first record's length
    mystery = tmp_path / "mystery.bin"
    mystery.write_bytes(bytes(data))
    result = msnb.read(mystery)
    assert len(result.scalars) > 0
    assert [p.kind for p in result.problems] == [ProblemKind.HEADER]
    assert result.problems[0].offset == 0


def test_directory_symlink_loops_are_walked_once_and_reported(summary):
    run = summary.parent
    plain = msnb.read(run)
    (run / "again").symlink_to(".")
    (run / "twice").symlink_to(".")
    result = msnb.read(run)
    assert len(result.scalars) == len(plain.scalars)
    loops = [p for p in result.problems if p.kind == ProblemKind.LOOP]
    assert {Path(p.path).name for p in loops} == {"again", "twice"}


def test_two_runs_with_one_name_under_different_paths_stay_apart(summary, tmp_path):
    for parent in ("A", "B"):
        shutil.copytree(summary.parent, tmp_path / parent / "exp")
    paths = [str(tmp_path / "A" / "exp"), str(tmp_path / "B" / "exp")]
    result = read_runs(paths)
    assert len(result.runs) == 2
    label = run_labeller(paths, result.runs)
    assert sorted(label(r) for r in result.runs) == ["A/exp", "B/exp"]
    assert len(result.scalars.where(run=result.runs[0])) == len(msnb.read(summary.parent).scalars)


def test_the_path_that_is_the_run_is_labelled_by_its_directory(summary, monkeypatch):
    monkeypatch.chdir(summary.parent)
    result = read_runs(".")
    assert result.runs == ["."]
    assert run_labeller(".", result.runs)(".") == "run"


# ------------------------------------------------------------------ crashes and overflow


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank_3", 3),
        ("rank3", 3),
        ("rank-3", 3),
        ("device_3", 3),
        ("worker_3.log", 3),
        ("rank_10", 10),
        ("frankfurt", None),
        ("rank_10_old", None),
        ("rank_" + "9" * 30, None),
    ],
)
def test_one_rule_says_whether_a_name_names_a_rank(name, rank):
    assert rank_in_name(name) == rank


@pytest.mark.parametrize(
    ("path", "rank"),
    [("runs/rank_10", 10), ("runs/rank_1/x.log", 1), ("./frankfurt", None), ("out/device_2/summary", 2), ("logs/worker_7.log", 7), ("/", None)],
)
def test_one_rule_says_which_rank_a_path_is_for(path, rank):
    assert rank_of_path(path) == rank


def test_ranks_and_steps_beyond_int64_in_names_and_lines_never_crash(summary, tmp_path):
    huge = "9" * 25
    root = tmp_path / "tree"
    (root / f"rank_{huge}").mkdir(parents=True)
    shutil.copy(summary, root / f"rank_{huge}" / f"events.out.events.summary.1.{huge}.h_MS")
    (root / f"worker_{huge}.log").write_text(
        f"epoch: 1 step: {huge}, loss is 1.5\nepoch: {huge} step: 2, loss is 1.5\n"
        f"{{ Epoch:[  1/  2], step:[    {huge}/  {huge}], loss:[2.3/2.4], per_step_time: 1ms, lr: 0.1 }}\n"
        "epoch: 1 step: 7, loss is 0.5\n"
    )
    result = msnb.read(root)  # must not raise
    assert set(result.scalars.rank.tolist()) == {-1}
    assert 7 in result.scalars.where(tag="loss").step.tolist()
    assert max(result.scalars.step.tolist()) < 2**63


def _nested_user_defined(depth: int) -> bytes:
    inner = b""
    for _ in range(depth):
        inner = b"\x0a" + _varint(len(inner)) + inner  # UserDefinedInfo.user_info (1), nested
    return b"\x52" + _varint(len(inner)) + inner  # LineageEvent.user_defined_info (10)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_deeply_nested_lineage_is_a_decode_problem(tmp_path):
    ok = b"\x52" + _varint(0)
    path = tmp_path / "x.out.events.summary.1.h_lineage"
    path.write_bytes(frame(ok) + frame(_nested_user_defined(5000)) + frame(ok))
    result = msnb.read(path)
    assert len(result.lineage) == 2
    (problem,) = result.problems
    assert problem.kind == ProblemKind.DECODE and problem.offset == len(frame(ok))


def test_deeply_nested_evaluation_json_is_kept_as_text_and_reported(tmp_path):
    metric = ("[" * 200_000 + "]" * 200_000).encode()
    evaluation = b"\x12" + _varint(len(metric)) + metric  # EvaluationLineage.metric (2)
    event = b"\x3a" + _varint(len(evaluation)) + evaluation  # LineageEvent.evaluation_lineage (7)
    path = tmp_path / "x.out.events.summary.1.h_lineage"
    path.write_bytes(frame(event))
    result = msnb.read(path)
    (row,) = list(result.lineage.rows())
    assert row["kind"] == "evaluation" and row["fields"]["metric"] == metric.decode()
    assert [p.kind for p in result.problems] == [ProblemKind.DECODE]


def test_tensorboardx_histogram_with_a_corrupt_count_read_unverified(tb_files, tmp_path):
    (src,) = (tb_files / "tensorboard" / "rank_0").glob("*tfevents*")
    data = src.read_bytes()
    num = b"\x19" + struct.pack("<d", 500.0)  # HistogramProto.num of a 500-value histogram
    assert data.count(num) == 4
    for bad in (float("inf"), 1e300, -3.0):
        path = tmp_path / f"{bad}" / src.name
        path.parent.mkdir()
        path.write_bytes(data.replace(num, b"\x19" + struct.pack("<d", bad), 1))
        result = msnb.read(path, verify=False)
        assert len(result.histograms) == 3
        assert [p.kind for p in result.problems] == [ProblemKind.DECODE]
        assert len(result.scalars) == len(msnb.read(src).scalars)


# ------------------------------------------------------------------ memory


def _peak_rss_mb(code: str) -> float:
    """Peak RSS of a child process running *code* after importing msnb (MB)."""
    script = f"import resource, msnb\n{code}\nprint(int(next(x.split()[1] for x in open('/proc/self/status') if x.startswith('VmHWM:'))) / 1024)"  # own peak: ru_maxrss is kept across exec
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(proc.stdout.strip().splitlines()[-1])


def test_zeros_do_not_grow_memory(tmp_path):
    """256 MB of zeros after the records: the chunk never doubles (it used to reach 1.6x the file)."""
    path = tmp_path / "events.out.events.summary.1.h_MS"
    with open(path, "wb") as f:
        f.write(frame(b"\x08\x01"))
        f.truncate(256 << 20)  # sparse: zeros without writing them
    base = _peak_rss_mb("")
    peak = _peak_rss_mb(f"r = msnb.read({str(path)!r}); assert [p.kind for p in r.problems] == ['header'], r.problems")
    assert peak - base < 160, (base, peak)  # one 64 MB chunk and its scan, not the file


def test_a_declared_length_larger_than_the_file_is_never_allocated(tmp_path):
    head = struct.pack("<Q", (1 << 31) - 1)
    path = tmp_path / "events.out.tfevents.1.h"
    path.write_bytes(frame(b"\x08\x01") + head + struct.pack("<I", mask(crc32c(head))) + b"\x01" * 1000)
    base = _peak_rss_mb("")
    peak = _peak_rss_mb(f"r = msnb.read({str(path)!r}); assert [p.kind for p in r.problems] == ['truncated'], r.problems")
    assert peak - base < 64, (base, peak)


def test_a_follower_does_not_rescan_an_unchanged_damaged_tail(summary):
    with open(summary, "ab") as f:
        f.write(b"\x00" * (4 << 20))  # preallocated space after the last record
    follower = Follower(summary)
    follower.poll()
    (state,) = follower._states.values()
    reads = state.reads
    for _ in range(3):
        assert follower.poll().empty
    assert state.reads == reads  # not opened again
    assert not follower.result.problems  # the tail may still be written: not damage yet
    closed = follower.close()
    assert [p.kind for p in closed.problems] == [ProblemKind.HEADER]


# ------------------------------------------------------------------ logs


def test_log_lines_that_made_the_parser_backtrack_parse_by_their_start():
    parser = LogParser()
    hostile = ["1" * 1500 + "loss", "9" * 200_000 + " loss is", "a" * 100_000 + " epoch time: 1 ms", "lr: " + " " * 50_000 + "x loss"]
    hostile.append("{ step:[ 1/ 2], loss: " + "1" * MAX_LINE + " loss is 2")  # longer than the limit: parsed by its start
    assert parser.feed(hostile)[0][:2] == ("loss", 1) and len(parser.feed(hostile)) == 1
    assert parser.long_lines == 2 and MAX_LINE == 1 << 20  # one limit for every line (training_state's lists of heads fit)


def test_a_log_longer_than_a_chunk_streams_to_the_same_points(tmp_path, monkeypatch):
    from msnb.events import reader

    lines = [f"epoch: 1 step: {s}, loss is {1 / s:.6f}" for s in range(1, 3001)]
    lines.insert(1500, "x" * 5000)  # one line longer than the chunk below
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    whole = msnb.read(path)
    monkeypatch.setattr(reader, "LOG_CHUNK", 1024)
    chunked = msnb.read(path)
    assert chunked.scalars.step.tolist() == whole.scalars.step.tolist() == list(range(1, 3001))
    np.testing.assert_array_equal(chunked.scalars.value, whole.scalars.value)


# ------------------------------------------------------------------ export


def test_export_to_a_full_device_is_one_line_and_exit_2(summary):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(msnb_command() + ["export", str(summary.parent)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("msnb export: error: cannot write the output")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("old", "new"), [("text", "texts"), ("histogram", "histograms"), ("histograms", "histograms")])
def test_export_accepts_every_spelling_of_a_kind(tb_files, old, new):
    a = subprocess.run(msnb_command() + ["export", str(tb_files / "tensorboard"), "--kind", old], capture_output=True, text=True, timeout=120)
    b = subprocess.run(msnb_command() + ["export", str(tb_files / "tensorboard"), "--kind", new], capture_output=True, text=True, timeout=120)
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and len(a.stdout.splitlines()) > 1


def test_every_problem_kind_is_in_the_one_list(summary):
    data = summary.read_bytes()
    summary.write_bytes(data[:100] + b"\x00" * 50 + data[100:-7])
    result = msnb.read(summary.parent)
    assert result.problems and all(isinstance(p.kind, ProblemKind) for p in result.problems)


# ------------------------------------------------------------------ differential fuzz


def oracle(data: bytes) -> list:
    """Maximal recovery, the slow and obvious way: take a record where both checksums hold, else slide one byte."""
    kept, pos, end = [], 0, len(data)
    while pos + 16 <= end:
        (n,) = struct.unpack_from("<Q", data, pos)
        stop = pos + 12 + n
        if stop + 4 <= end and mask(crc32c(data[pos : pos + 8])) == struct.unpack_from("<I", data, pos + 8)[0]:
            if mask(crc32c(data[pos + 12 : stop])) == struct.unpack_from("<I", data, stop)[0]:
                kept.append((pos, n))
                pos = stop + 4
                continue
        pos += 1
    return kept


def msnb_records(data: bytes, chunk: int) -> list:
    reader = FrameReader("fuzz", chunk=chunk)
    return [(base + int(o) - 12, int(n)) for _b, base, offs, lens in reader.read(io.BytesIO(data), 0, len(data), final=True) for o, n in zip(offs, lens)]


def mutate(data: bytes, records: list, ops: list) -> bytes:
    """Apply damage a crashed or broken writer leaves: truncations, torn writes, deletions, zero runs, bit flips."""
    out = bytearray(data)
    for op, a, b in ops:
        if not out:
            break
        if op == "truncate":
            del out[a % (len(out) + 1) :]
        elif op == "torn":  # a record cut short, the next ones written after it
            start, end = records[a % len(records)]
            if end <= len(out):
                cut = start + 12 + (b % max(1, end - start - 12))
                del out[cut:end]
        elif op == "delete":
            i = a % len(out)
            del out[i : i + 1 + b % 200]
        elif op == "zeros":
            i = a % len(out)
            out[i : i + 1 + b % 300] = bytes(len(out[i : i + 1 + b % 300]))
        elif op == "insert_zeros":
            i = a % (len(out) + 1)
            out[i:i] = bytes(1 + b % 300)
        elif op == "flip":
            out[a % len(out)] ^= 1 + b % 255
    return bytes(out)


OPS = st.lists(
    st.tuples(st.sampled_from(["truncate", "torn", "delete", "zeros", "insert_zeros", "flip"]), st.integers(0, 10**9), st.integers(0, 10**9)),
    min_size=1,
    max_size=5,
)


@pytest.fixture(scope="module")
def originals(ms_files, tb_files):
    ms = next((ms_files / "record").glob("*_MS")).read_bytes()
    tb = next((tb_files / "tensorboard" / "rank_0").glob("*tfevents*")).read_bytes()
    return {"ms": (ms, spans(ms)), "tb": (tb, spans(tb))}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["ms", "tb"]), ops=OPS, chunk=st.sampled_from([64, 257, 4096, 1 << 20]))
def test_scanner_keeps_exactly_what_maximal_recovery_keeps(originals, which, ops, chunk):
    data, records = originals[which]
    damaged = mutate(data, records, ops)
    assert msnb_records(damaged, chunk) == oracle(damaged)


def test_fuzz_helpers_recover_an_undamaged_file_whole(originals):
    for data, records in originals.values():
        assert [(s, e - s - 16) for s, e in records] == oracle(data) == msnb_records(data, 1 << 20)


def test_a_fifo_named_like_an_event_file_is_named_never_opened(tmp_path):
    # opening a FIFO for reading blocks until a writer comes: in a tree or given directly it must become a Problem
    from tests.writers.team_runs import write_tbx_run

    write_tbx_run(str(tmp_path / "run"), (0,), 20)
    fifo = tmp_path / "run" / "rank_0" / "events.out.tfevents.2.host"
    os.mkfifo(fifo)
    code = "import sys, msnb; r = msnb.read(sys.argv[1]); print(len(r.scalars)); [print(p.kind, p) for p in r.problems]"
    for path, rows in ((tmp_path, "60"), (fifo, "0")):  # 20 steps x 3 tags
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
        assert out == [rows, f"unreadable {fifo}: not a regular file (a FIFO, socket, device or broken link); not read"], out
    text = msnb.runs(tmp_path).format_text()
    assert text.count(str(fifo)) == 1, text  # the base's walk and the run's reader both meet it: said once
