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
from msnb.events.reader import FileState, Follower, ReadResult
from msnb.events.tags import spellings
from tests.writers.framing import payloads


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


def test_workers_count_the_cores_others_keep_busy_now(monkeypatch):
    running = parallel.running_processes()
    assert running is None or running >= 1  # this test's own process is running
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(parallel, "MAX_WORKERS", 64)
    monkeypatch.setattr(os, "getloadavg", lambda: (cores + 5.0, 0.0, 0.0))
    monkeypatch.setattr(parallel, "running_processes", lambda: 1)  # the last minute was busy (a job that just ended), now only we run
    assert parallel.default_workers() == cores
    monkeypatch.setattr(parallel, "running_processes", lambda: cores + 5)  # others still run
    assert parallel.default_workers() == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a burst that the last minute did not see: not counted
    assert parallel.default_workers() == cores
    monkeypatch.setattr(parallel, "running_processes", lambda: None)  # no /proc
    assert parallel.default_workers() == cores


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
    states[0].source = None  # a state no reader would build; the first task goes to the worker, where polling it fails
    with pytest.raises(parallel.WorkerError, match="AttributeError"):
        parallel.poll_states(states, [[0], [1]], 2, final=True)
    assert states[1].results == [] or len(states[1].results) == 1  # whatever finished is kept in order, nothing doubled
    assert not _children_reading()


def test_a_failure_in_this_process_share_raises_as_itself_and_ends_the_workers(tb_files):
    from msnb.events.discovery import discover
    from msnb.events.reader import FileState

    states = [FileState(src) for src in discover(tb_files)]
    states[-1].source = None  # the last task is this process's own: the error of a one-process read, not a WorkerError
    tasks = [[i] for i in range(len(states))]
    with pytest.raises(AttributeError):
        parallel.poll_states(states, tasks, 2, final=True)
    assert not _children_reading()


def test_this_process_reads_beside_its_workers(everything, monkeypatch):
    """With N workers asked for, N - 1 processes are started: this one reads too, with the same result."""
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "TASK_BYTES", 1)
    started, real_start = [], parallel._start
    monkeypatch.setattr(parallel, "_start", lambda n: started.append(n) or real_start(n))
    read_here, real_poll = [], FileState.poll
    monkeypatch.setattr(FileState, "poll", lambda self, **kw: read_here.append(self.source.path) or real_poll(self, **kw))
    many = msnb.read(everything, workers=3)
    assert started == [2] and read_here  # two workers, and files read in this process too
    monkeypatch.setattr(FileState, "poll", real_poll)
    assert_same(many, msnb.read(everything, workers=1))


def _children_reading() -> list:
    """This process's children still running a reading worker (zombies not counted)."""
    import psutil

    return [c for c in psutil.Process().children() if c.status() != psutil.STATUS_ZOMBIE and "parallel import serve" in " ".join(c.cmdline())]


# ---------------------------------------------------------------- what workers send back
def _bits(col):
    """A column's exact contents: its dtype and every byte (or, for objects, every object and its type)."""
    if col.dtype == object:
        return col.dtype, [(type(x), x.tobytes() if isinstance(x, np.ndarray) else x) for x in col.tolist()]
    return col.dtype, col.tobytes()


def _round_trip(table):
    import pickle

    back = pickle.loads(parallel.dumps(table))
    assert type(back) is type(table)
    for c in table.COLUMNS:
        assert _bits(back[c]) == _bits(table[c]), c
    return back


NAN_PAYLOAD = np.array([0x7FF8000000000001], dtype=np.uint64).view(np.float64)[0]  # lost in a float32
SIGNALLING_NAN = np.array([0x7FF0000000000001], dtype=np.uint64).view(np.float64)[0]
FLOAT32_NAN = np.array([0x7FC00001], dtype=np.uint32).view(np.float32).astype(np.float64)[0]  # a float32 NaN payload survives


@pytest.mark.parametrize(
    "values",
    [
        [1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 0.1],  # 0.1 is no float32: all travel as float64
        [1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, FLOAT32_NAN],  # all float32: they travel as such
        [1.5, 2.5, NAN_PAYLOAD],
        [1.5, 2.5, SIGNALLING_NAN],
        [-0.0, -0.0, -0.0],
        [NAN_PAYLOAD] * 3,
        [1e300, 1e-300, 3.0],  # out of float32's range, and below it
    ],
)
def test_compact_transfer_gives_every_bit_back(values):
    from msnb.events.tables import ScalarTable

    n = len(values)
    names = np.array(["loss", "lr", "grad-norm"], dtype=object)
    for steps in ([1, 2, 3], [2**40, 2**40 + 1, -(2**62)], [np.iinfo(np.int64).max] * 3, [-1, 0, 2**31]):
        steps = (steps * n)[:n]
        run = np.empty(n, dtype=object)
        run.fill("job/\udcff\udcfe")  # a run directory whose name is no UTF-8 (os.fsdecode's surrogates)
        table = ScalarTable(run=run, rank=np.arange(n) - 1, tag=names[np.arange(n) % 3], step=steps, wall_time=np.full(n, 1.7e9), value=values)
        _round_trip(table)


def test_compact_transfer_of_every_kind_of_column():
    from msnb.events.tables import HistogramTable, ScalarTable, TextTable

    _round_trip(ScalarTable())  # empty
    many = np.array([f"tag{i}" for i in range(5000)], dtype=object)  # more distinct objects than codes: sent as they are
    rng = np.random.default_rng(0)
    lots = np.array([f"t{i}" for i in range(300)], dtype=object)[rng.integers(0, 300, 20000)]  # a few hundred tags: sorted into codes
    equal_not_same = np.array(["loss", "".join(["lo", "ss"]), "".join(["l", "oss"])], dtype=object)  # equal strings, distinct objects: each kept
    mixed = np.array(["a", 1, None, ("x", "y"), b"\xff", 2.5], dtype=object)
    strided = np.array(["a", "b"] * 10, dtype=object)[::2]  # not contiguous
    for tag in (many, lots, equal_not_same, mixed, strided):
        n = len(tag)
        table = TextTable(run=np.full(n, "r", dtype=object), rank=np.full(n, 3), tag=tag, step=np.arange(n), wall_time=np.arange(n) / 7, text=tag)
        back = _round_trip(table)
        if tag is equal_not_same:
            assert len({id(x) for x in back.tag.tolist()}) == len({id(x) for x in tag.tolist()}) == 3
    arrays = np.empty(3, dtype=object)
    for i in range(3):
        arrays[i] = np.arange(i + 2, dtype=np.float64)
    shared = np.empty(4, dtype=object)
    shared.fill(np.array([1.0, np.nan]))  # one array object in every row: sent once, every row still holds an array
    for counts in (arrays, shared):
        n = len(counts)
        h = HistogramTable(
            run=np.full(n, "r", dtype=object),
            rank=np.full(n, -1),
            tag=np.full(n, "h", dtype=object),
            step=np.arange(n),
            wall_time=np.zeros(n),
            min=np.zeros(n),
            max=np.ones(n),
            sum=np.ones(n),
            count=np.full(n, 2**40),
            nan_count=np.zeros(n, dtype=np.int64),
            pos_inf_count=np.zeros(n, dtype=np.int64),
            neg_inf_count=np.zeros(n, dtype=np.int64),
            left=counts,
            right=counts,
            counts=counts,
        )
        back = _round_trip(h)
        assert all(isinstance(x, np.ndarray) for x in back.counts.tolist())
    assert _round_trip(ScalarTable(run=["a"], rank=[0], tag=["t"], step=[5], wall_time=[1.0], value=[np.nan]))


def test_workers_give_the_one_process_result_bit_for_bit(tmp_path, monkeypatch):
    """Steps past int32, NaN, -0.0 and a run whose name is no UTF-8: read in workers, every byte is the one-process read's."""
    from msnb.bridges.tfevents import scalar_records

    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "TASK_BYTES", 1)
    base = os.fsencode(tmp_path) + b"/job\xff"
    tags = ["loss", "grad-norm", "learning-rate"]
    for rank in range(3):
        d = base + b"/rank_%d" % rank
        os.makedirs(d)
        steps = np.repeat(np.arange(2**33, 2**33 + 200, dtype=np.int64), len(tags))
        values = np.float32(np.random.default_rng(rank).normal(size=steps.size)).astype(np.float64)
        values[::7] = -0.0
        values[5 + rank :: 11] = np.nan
        walls = 1.7e9 + np.arange(steps.size) * 0.1
        with open(d + b"/events.out.tfevents.1.host", "wb") as f:
            f.write(scalar_records(tags * 200, steps, walls, values))
    root = tmp_path  # the runs are named from here: job\udcff
    for want in (None, ["loss", "grad_norm"]):
        one, many = msnb.read(root, tags=want, workers=1), msnb.read(root, tags=want, workers=3)
        assert_same(many, one)
        for c in one.scalars.COLUMNS:
            assert _bits(many.scalars[c]) == _bits(one.scalars[c]), c
        assert int(one.scalars.step.max()) == 2**33 + 199 and "\udcff" in one.scalars.run[0]


def test_distinct_objects_of_a_column_are_the_set_of_its_rows():
    """Grouping rows by the object they hold (tags(), the judge's runs) gives ``set(col.tolist())``, however the column was built."""
    from msnb.events.tables import distinct, distinct_integers, object_codes

    rng = np.random.default_rng(5)
    parts = []  # a merged table: each file brings its own str objects for the same tags
    for _ in range(40):
        names = np.array(["".join(["lo", "ss"]), "".join(["grad", "-norm"]), "".join(["l", "r"])], dtype=object)
        parts.append(names[rng.integers(0, 3, 3000)])
    merged = np.concatenate(parts)
    columns = [
        merged,
        np.full(100_000, "run", dtype=object),  # np.full: a str object per row
        np.array([1, 1.0, True, "1", None, ("a",), 2.5, 2.5], dtype=object)[rng.integers(0, 8, 70_000)],  # equal across types: the set keeps the first
        merged[::3],  # not contiguous
        np.zeros(0, dtype=object),
        np.array(["only"], dtype=object),
    ]
    for col in columns:
        got = distinct(col)
        want = set(col.tolist())
        assert got == want and [type(x) for x in sorted(got, key=repr)] == [type(x) for x in sorted(want, key=repr)]
        coded = object_codes(col, limit=None)
        if coded is not None:
            objects, codes = coded
            table = np.empty(len(objects), dtype=object)
            for i, obj in enumerate(objects):
                table[i] = obj
            assert all(a is b for a, b in zip(table[codes].tolist(), col.tolist()))
    assert object_codes(merged, limit=100) is None  # 120 objects
    for ranks in (np.repeat(np.arange(50), 1000), rng.integers(-1, 9, 5000), np.zeros(0, dtype=np.int64), np.array([2**40, -5, 2**40])):
        assert np.array_equal(distinct_integers(ranks), np.unique(ranks))
