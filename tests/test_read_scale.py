"""Reading only some tags, and reading in worker processes: the same answer as the plain read, always.

Differential tests: ``read(tags=T)`` must equal the full read with other tags'
rows left out, and ``read(workers=N)`` must equal ``read(workers=1)`` (rows,
their order, problems, file facts), on files written by tensorboardX and by
MindSpore's SummaryRecord, damaged or not.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboardX import SummaryWriter

import msnb
from msnb.events import parallel
from msnb.events.reader import Follower, ReadResult
from msnb.events.tags import spellings

from .writers.framing import payloads


def _same_column(a, b, where):
    assert len(a) == len(b), where
    if a.dtype != object:
        assert a.dtype == b.dtype, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
        return
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{where}[{i}]"
        else:
            assert x == y or (x != x and y != y), f"{where}[{i}]: {x!r} != {y!r}"


def assert_same(a: ReadResult, b: ReadResult, *, files=True):
    for t in ReadResult.TABLES:
        ta, tb = getattr(a, t), getattr(b, t)
        for c in ta.COLUMNS:
            _same_column(ta[c], tb[c], f"{t}.{c}")
    assert [str(p) for p in a.problems] == [str(p) for p in b.problems]
    if files:
        assert a.files == b.files


def only_tags(full: ReadResult, tags) -> ReadResult:
    """The oracle: the full read with the rows of other tags left out (lineage has no tag and stays)."""
    keep = spellings(tags)
    out = ReadResult(problems=list(full.problems), files=list(full.files))
    for t in ReadResult.TABLES:
        table = getattr(full, t)
        setattr(out, t, table.take(np.isin(table.tag, list(keep))) if "tag" in table.COLUMNS else table)
    return out


def writable_copy(src, dst):
    shutil.copytree(src, dst)
    for d, _, names in os.walk(dst):
        for n in names:
            os.chmod(os.path.join(d, n), 0o600)  # MindSpore leaves closed summaries read-only
    return dst


@pytest.fixture(scope="module")
def same_length_tags(tmp_path_factory):
    """A mindformers-like tensorboardX file where several tags share one record length (only their bytes differ)."""
    out = tmp_path_factory.mktemp("samelen") / "tensorboard" / "rank_0"
    w = SummaryWriter(str(out), max_queue=10_000, flush_secs=3600)
    for step in range(1, 301):
        w.add_scalar("loss", 2.0 / step, step)
        w.add_scalar("grad-norm", 1.0 + 1.0 / step, step)
        for name in ("local_norm/wq", "local_norm/wk", "local_norm/wv"):  # equal lengths: told apart by their bytes alone
            w.add_scalar(name, float(step % 7), step)
        w.add_scalar("learning-rate", 1e-4, step)
    w.close()
    return out.parent.parent


CASES = [
    ("tb", ["loss"]),
    ("tb", ["lr", "grad_norm"]),  # meanings: learning-rate, grad-norm
    ("tb", ["weight_norm_hist", "config"]),  # a histogram and a text
    ("tb", ["nothing-like-this"]),
    ("ms", ["loss"]),  # loss (SummaryRecord) and loss/auto (SummaryCollector)
    ("ms", ["lr", "fc.weight", "probe"]),  # mixed records: scalars beside histograms and tensors
    ("ms", ["step_time"]),  # from the training log
    ("same", ["local_norm/wk"]),
    ("same", ["loss", "local_norm/wq", "local_norm/wv"]),
]


@pytest.mark.parametrize("which,tags", CASES)
def test_tags_equal_the_full_read_filtered(which, tags, tb_files, ms_files, same_length_tags):
    root = {"tb": tb_files, "ms": ms_files, "same": same_length_tags}[which]
    full = msnb.read(root, workers=1)
    part = msnb.read(root, tags=tags, workers=1)
    assert_same(part, only_tags(full, tags))
    if which == "same":
        assert set(part.scalars.tags()) == set(tags)
        assert len(part.scalars) == 300 * len(tags)


def test_aliases_find_the_spelling_the_data_holds(ms_files):
    r = msnb.read(ms_files / "collector", tags=["loss"], workers=1)
    assert r.scalars.tags() == ["loss", "loss/auto"]  # the training log's loss and SummaryCollector's


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tags_on_damaged_files(data, same_length_tags, tb_files, tmp_path_factory):
    """Flipped bytes, torn and cut records: the tag read still equals the full read filtered, problems included."""
    root = writable_copy(same_length_tags, tmp_path_factory.mktemp("damaged") / "job")
    shutil.copytree(tb_files / "tensorboard" / "rank_1", root / "tensorboard" / "rank_1")
    files = sorted(p for p in root.rglob("events.out.tfevents.*"))
    for f in files:
        os.chmod(f, 0o600)
        raw = bytearray(f.read_bytes())
        for _ in range(data.draw(st.integers(0, 4))):
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] ^= data.draw(st.integers(1, 255))
        if data.draw(st.booleans()):
            raw = raw[: data.draw(st.integers(0, len(raw)))]
        f.write_bytes(bytes(raw))
    tags = data.draw(st.lists(st.sampled_from(["loss", "lr", "grad_norm", "local_norm/wq", "local_norm/wk", "weight_norm_hist", "config"]), min_size=1))
    full = msnb.read(root, workers=1)
    assert_same(msnb.read(root, tags=tags, workers=1), only_tags(full, tags))


def test_a_record_rewritten_with_another_tag_of_the_same_length_is_not_skipped(same_length_tags, tmp_path):
    """A valid record whose tag bytes differ from its neighbours' matches none of their templates: it is decoded."""
    root = writable_copy(same_length_tags, tmp_path / "job")
    (f,) = root.rglob("events.out.tfevents.*")
    raw = bytearray(f.read_bytes())
    recs = list(payloads(f))
    pos, payload = recs[100]
    at = payload.find(b"local_norm/")
    if at < 0:
        pos, payload = recs[101]
        at = payload.find(b"local_norm/")
    body = bytearray(payload)
    body[at + 11 : at + 13] = b"zz"  # local_norm/zz: same length, a tag no other record has
    from msnb.bridges.tfevents import frame

    raw[pos : pos + 16 + len(payload)] = frame(bytes(body))
    f.write_bytes(bytes(raw))
    part = msnb.read(root, tags=["local_norm/zz"], workers=1)
    assert part.scalars.tags() == ["local_norm/zz"] and len(part.scalars) == 1
    assert_same(part, only_tags(msnb.read(root, workers=1), ["local_norm/zz"]))


# ---------------------------------------------------------------- workers
@pytest.fixture
def everything(ms_files, tb_files, same_length_tags, tmp_path):
    """One tree holding MindSpore summaries, lineage, a log, tensorboardX files and a damaged copy."""
    root = tmp_path / "all"
    writable_copy(ms_files, root / "ms")
    writable_copy(tb_files, root / "tb")
    writable_copy(same_length_tags, root / "same")
    (f,) = (root / "same").rglob("events.out.tfevents.*")
    damaged = root / "damaged" / "rank_3" / f.name
    damaged.parent.mkdir(parents=True)
    raw = bytearray(f.read_bytes())
    raw[5000] ^= 0x40
    damaged.write_bytes(bytes(raw[:-7]))
    return root


def test_workers_give_the_one_process_result(everything, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)  # this small tree would otherwise be read in-process
    monkeypatch.setattr(parallel, "TASK_BYTES", 1)  # one file a task: the most interleaving
    one = msnb.read(everything, workers=1)
    assert one.problems and len(one.files) > 10
    assert parallel.plan([(i, 10) for i in range(len(one.files))], 3)
    for tags in (None, ["loss", "lr"]):
        assert_same(msnb.read(everything, workers=3, tags=tags), msnb.read(everything, workers=1, tags=tags))


def test_workers_asked_for_where_no_python_can_be_started_read_in_process(everything, monkeypatch):
    # an embedded interpreter (a host application's Python) may have an empty sys.executable: workers=3 must not crash
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    one = msnb.read(everything, workers=1)
    monkeypatch.setattr(sys, "executable", "")
    assert_same(msnb.read(everything, workers=3), one)


def test_small_trees_are_read_in_process():
    assert parallel.plan([(0, 1 << 20), (1, 1 << 20)], 8) == []
    assert parallel.plan([(0, 1 << 30)], 8) == []
    assert parallel.plan([(0, 1 << 30), (1, 1 << 30)], 1) == []
    tasks = parallel.plan([(i, 32 << 20) for i in range(10)], 4)
    assert [i for t in tasks for i in t] == list(range(10))


def test_a_follower_with_workers_matches_one_without(everything, tmp_path, monkeypatch):
    """Polls with data appended between them: the worker-read follower stays equal to the plain one."""
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    live = tmp_path / "live" / "rank_0"
    w = SummaryWriter(str(live), max_queue=1, flush_secs=1)
    plain = Follower(tmp_path / "live", tags=["loss"])
    pooled = Follower(tmp_path / "live", tags=["loss"], workers=2)
    other = tmp_path / "live" / "rank_1" / "events.out.tfevents.1.host"
    other.parent.mkdir(parents=True)
    other.write_bytes(next(everything.rglob("events.out.tfevents.*")).read_bytes())
    for round_ in range(3):
        for step in range(round_ * 50 + 1, round_ * 50 + 51):
            w.add_scalar("loss", 1.0 / step, step)
            w.add_scalar("grad-norm", 2.0, step)
        w.flush()
        assert_same(pooled.poll(), plain.poll())
        assert_same(pooled.result, plain.result)
    w.close()
    assert_same(pooled.close(), plain.close())
    assert_same(pooled.result, plain.result)
    assert set(pooled.result.scalars.tags()) == {"loss"}


def test_workers_end_with_their_parent(tmp_path):
    """A parent killed mid-read leaves no worker behind."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from msnb.events import parallel
        procs = parallel._start(2)
        print(" ".join(str(p.pid) for p in procs), flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(msnb.__file__))}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    pids = [int(x) for x in parent.stdout.readline().split()]
    assert len(pids) == 2
    parent.kill()
    parent.wait()
    import time

    deadline = time.monotonic() + 20
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if os.path.exists(f"/proc/{p}") and "Z" not in open(f"/proc/{p}/stat").read().split(")")[-1].split()[0]]
        time.sleep(0.1)
    assert not alive


def test_a_failing_worker_raises_with_its_traceback(tb_files):
    """A bug in a worker is not swallowed: the parent raises with the worker's traceback, and no worker is left."""
    from msnb.events.discovery import discover
    from msnb.events.reader import FileState

    states = [FileState(src) for src in discover(tb_files)]
    states[1].source = None  # a state no reader would build: polling it fails inside the worker
    with pytest.raises(parallel.WorkerError, match="AttributeError"):
        parallel.poll_states(states, [[0], [1]], 2, final=True)
    assert states[0].results == [] or len(states[0].results) == 1  # whatever finished is kept in order, nothing doubled
