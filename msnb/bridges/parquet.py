"""What msnb reads, as a Hive-partitioned Parquet dataset that DuckDB, Spark, Dask and Polars read in parallel.

Layout: ``DIR/run=<run>/rank=<rank>/kind=<kind>/part-<time>-<n>.parquet`` (the
run URI-escaped, so ``a/b`` is ``a%2Fb``; the path exported when it is itself
one run is named after its directory, never ``.``; an unknown rank is ``-1``).  One
table per kind, typed columns (``step`` int64, ``wall_time`` float64 seconds,
``value`` float64, ``tag`` dictionary-encoded; histogram edges and counts as
list columns).  Files are written in row groups and renamed into place when
complete, so a reader never sees half a file; a later write adds files and
never rewrites old ones.

Kinds have different columns, so read one kind at a time
(DuckDB: ``read_parquet('DIR/**/kind=scalars/*.parquet', hive_partitioning=true)``);
a glob over every kind needs ``union_by_name=true`` (missing columns read as NULL).

pyarrow is an optional extra (``pip install 'msnb[parquet]'``); the core reader
does not need it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import MissingDependency, NothingReadable, UsageError
from ..events.objects import download, is_url, local, upload
from ..events.runs import run_labeller
from ..safe_files import inside
from ..words import count
from .ledger import LOCK_WAIT, Ledger, destination_lock, prepare_destination

ROW_GROUP = 256 * 1024  # rows per row group: a reader holds one group of one column at a time
KIND_DIRS = {
    "scalars": "scalars",
    "histograms": "histograms",
    "tensors": "tensors",
    "images": "images",
    "texts": "text",
    "lineage": "lineage",
    "markers": "markers",
}
LEDGER_FILE = "_msnb_export.json"  # a leading underscore: Parquet readers skip it
LOCK_FILE = "_msnb_export.lock"  # held by the export writing into this folder (another one waits)
_counter = itertools.count()


def _pa():
    try:
        # optional: pyarrow (the parquet extra), and slow to import
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependency("Parquet export needs pyarrow: pip install 'msnb[parquet]'") from exc
    return pa, pq


@dataclass
class ParquetReport:
    """Rows and files written, by kind."""

    out: str
    rows: dict = field(default_factory=lambda: dict.fromkeys(KIND_DIRS.values(), 0))
    files: list = field(default_factory=list)
    unchanged: int = 0
    problems: list = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def as_dict(self) -> dict:
        return {
            "out": self.out,
            "rows": dict(self.rows),
            "files": list(self.files),
            "unchanged": self.unchanged,
            "problems": [p.as_dict() for p in self.problems],
        }

    def format_text(self) -> str:
        if not self.total:
            return f"nothing new to export to {self.out}" + (f" ({count(self.unchanged, 'file')} unchanged since the last export)" if self.unchanged else "")
        kinds = ", ".join(f"{n} {k}" for k, n in self.rows.items() if n)
        return f"wrote {kinds} in {count(len(self.files), 'Parquet file')} under {self.out}"


# ---------------------------------------------------------------- columns
def _tags(pa, tags: np.ndarray):
    return pa.array(tags, type=pa.string()).dictionary_encode()


def _lists(pa, arrays, dtype):
    arrays = [np.asarray(a, dtype=dtype).ravel() for a in arrays]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum([a.size for a in arrays], out=offsets[1:])
    flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))


def _numeric(values) -> np.ndarray | None:
    arr = np.asarray(values)
    return arr.astype(np.float64).ravel() if arr.dtype.kind in "biuf" else None


def arrow_table(kind: str, t):
    """One kind's msnb table as an Arrow table (run and rank live in the path, not the file).

    Args:
        kind: a :data:`KIND_DIRS` key (``scalars``, ``histograms``, ... the ``ReadResult`` attribute).
        t: the table of that kind.

    Returns:
        A ``pyarrow.Table`` with typed columns.
    """
    pa, _ = _pa()
    n = len(t)
    cols = {}
    if kind != "lineage":
        cols["tag"] = _tags(pa, t.tag)
    cols["step"] = pa.array(t.step.astype(np.int64))
    cols["wall_time"] = pa.array(t.wall_time.astype(np.float64))
    if kind == "scalars":
        cols["value"] = pa.array(t.value.astype(np.float64))
    elif kind == "histograms":
        for c in ("min", "max", "sum"):
            cols[c] = pa.array(t[c].astype(np.float64))
        for c in ("count", "nan_count", "pos_inf_count", "neg_inf_count"):
            cols[c] = pa.array(t[c].astype(np.int64))
        for c in ("left", "right", "counts"):
            cols[c] = _lists(pa, t[c], np.float64)
    elif kind == "tensors":
        cols["dims"] = _lists(pa, [np.asarray(d, dtype=np.int64) for d in t.dims], np.int64)
        cols["dtype"] = pa.array([str(d) for d in t.dtype], type=pa.string())
        flat = [_numeric(v) for v in t["values"]]
        cols["values"] = pa.array([None if v is None else v for v in flat], type=pa.list_(pa.float64()))
    elif kind == "images":
        for c in ("height", "width", "colorspace"):
            cols[c] = pa.array(t[c].astype(np.int64))
        cols["png"] = pa.array([bytes(b) for b in t.png], type=pa.binary())
    elif kind == "texts":
        cols["text"] = pa.array([str(x) for x in t.text], type=pa.string())
    elif kind == "lineage":
        cols["lineage_kind"] = pa.array([str(x) for x in t.kind], type=pa.string())
        cols["fields"] = pa.array([json.dumps(f, sort_keys=True, default=str) for f in t.fields], type=pa.string())
    elif kind == "markers":
        cols["marker"] = pa.array([str(x) for x in t.kind], type=pa.string())
        cols["bytes"] = pa.array(t.bytes.astype(np.int64))
    table = pa.table(cols)
    assert table.num_rows == n
    return table


# ---------------------------------------------------------------- writing
def partition_dir(run: str, rank: int, kind: str) -> str:
    """``run=<run>/rank=<rank>/kind=<kind>``, the run URI-escaped as Hive partitioning expects.

    Readers require a partition value that is UTF-8 once unescaped, so a run
    folder whose name is not UTF-8 (Python holds its bytes as surrogates) is
    written as the report shows it: ``caf\\xe9`` becomes ``caf\\udce9`` (the
    surrogate backslash-escaped), never a traceback.
    """
    text = run.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"run={urllib.parse.quote(text, safe='')}/rank={int(rank)}/kind={KIND_DIRS[kind]}"


def _tmp_name(path: Path) -> Path:
    return path.with_name("." + path.name + ".tmp")  # hidden until complete: readers skip dot files


def _write_file(pq, table, path: Path, row_group_size: int, *, land: bool = True) -> Path:
    """Write *table* to *path*'s hidden temporary name, then rename it into place (or leave that to the caller)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    with pq.ParquetWriter(str(tmp), table.schema, compression="zstd") as w:
        for start in range(0, max(table.num_rows, 1), row_group_size):
            w.write_table(table.slice(start, row_group_size), row_group_size=row_group_size)
    if land:
        os.replace(tmp, path)
    return tmp


def _partitions(t):
    """``(run, rank, rows)`` per partition, in first-seen order (one file's rows are usually one partition)."""
    if (t.run == t.run[0]).all() and (t.rank == t.rank[0]).all():
        yield t.run[0], int(t.rank[0]), t
        return
    keys = np.asarray([f"{r}\0{k}" for r, k in zip(t.run.tolist(), t.rank.tolist())], dtype=object)
    for key in dict.fromkeys(keys.tolist()):
        run, rank = key.split("\0")
        yield run, int(rank), t.take(keys == key)


def write_result(
    result, out, *, row_group_size: int = ROW_GROUP, report: ParquetReport | None = None, staged: list | None = None, this_run: str | None = None
) -> ParquetReport:
    """Add *result*'s rows to the dataset under *out* as new part files, one per run, rank and kind.

    Args:
        result: a :class:`~msnb.events.ReadResult` (e.g. what a Follower poll returned).
        out: the dataset's root directory (created if missing).
        row_group_size: rows per Parquet row group.
        report: a report to add to (the ledger-driven export passes its own).
        staged: when given, parts are left under their hidden temporary names and ``(tmp, final)`` pairs are
            appended here, for the caller to record in its ledger before renaming them (:func:`export`).
        this_run: the name of the run ``"."`` (the path read *is* the run): its partition is ``run=<this_run>``,
            never ``run=.``, which readers would show as a run called ".".

    Returns:
        The :class:`ParquetReport`.

    Raises:
        UsageError: a partition folder inside *out* is a symlink that leads out of it.
    """
    pa, pq = _pa()
    out = Path(out)
    report = report or ParquetReport(str(out))
    stamp = time.time_ns()
    for kind in KIND_DIRS:
        t = getattr(result, kind)
        if not len(t):
            continue
        for run, rank, rows in _partitions(t):
            name = this_run if run == "." and this_run else run
            path = out / partition_dir(name, int(rank), kind) / f"part-{stamp}-{os.getpid()}-{next(_counter):05d}.parquet"
            if not inside(path.parent, out):
                raise UsageError(f"{path.parent} leads outside {out} (a symlink): msnb writes only inside the dataset")
            tmp = _write_file(pq, arrow_table(kind, rows), path, row_group_size, land=staged is None)
            if staged is not None:
                staged.append((tmp, path))
            report.rows[KIND_DIRS[kind]] += len(rows)
            report.files.append(str(path))
    report.problems.extend(result.problems)
    return report


def _this_run_name(result) -> str | None:
    """The directory name of the run ``"."`` from the files it was read from (a ``rank_N`` folder stands for its parent)."""
    dirs = [os.path.dirname(os.path.abspath(f["path"])) for f in getattr(result, "files", []) if isinstance(f, dict) and f.get("run") == "." and f.get("path")]
    if not dirs:
        return None
    common = os.path.commonpath(dirs)
    if len(set(dirs)) == 1 and re.fullmatch(r"rank_?\d+", os.path.basename(common)):
        common = os.path.dirname(common)
    return os.path.basename(common) or None


def to_parquet(result, out, *, row_group_size: int = ROW_GROUP, this_run: str | None = None) -> ParquetReport:
    """Write a :class:`~msnb.events.ReadResult` as a Hive-partitioned Parquet dataset (``msnb.to_parquet``).

    Every call adds new files: pass only new rows (a Follower poll's) to append
    without duplicates, or use :func:`export` for a tree that grows.

    Args:
        result: what :func:`msnb.read` (or a Follower poll) returned.
        out: the dataset's root directory.
        row_group_size: rows per Parquet row group.
        this_run: the name of the run ``"."`` (what was read was one run): by default the directory of the files
            read when they share one run directory, else ``.``.

    Returns:
        A :class:`ParquetReport` with the rows and files written per kind.

    Raises:
        UsageError: *out* is on a kernel pseudo-filesystem, is not a directory, or cannot be created.
    """
    out = prepare_destination(None, out, what="the dataset directory")  # /proc, a file, a path that cannot be made: one line
    if this_run is None:
        this_run = _this_run_name(result)
    return write_result(result, out, row_group_size=row_group_size, this_run=this_run)


def open_dataset(out, kind: str = "scalars"):
    """One kind of the dataset under *out* as a ``pyarrow.dataset.Dataset``, with run, rank and kind columns.

    Kinds have different columns, so a dataset opens one kind at a time
    (DuckDB: ``read_parquet('OUT/**/kind=scalars/*.parquet', hive_partitioning=true)``; every kind at once:
    ``read_parquet('OUT/**/*.parquet', hive_partitioning=true, union_by_name=true)``).

    Args:
        out: the dataset's root directory.
        kind: ``scalars``, ``histograms``, ``tensors``, ``images``, ``text``, ``lineage`` or ``markers``.

    Returns:
        A ``pyarrow.dataset.Dataset`` (empty files list raises :class:`NothingReadable`).
    """
    _pa()
    import pyarrow.dataset as ds  # optional: pyarrow (the parquet extra)

    if kind not in KIND_DIRS.values():
        raise UsageError(f"unknown kind {kind!r}; choose one of {', '.join(KIND_DIRS.values())}")
    files = sorted(str(p) for p in Path(out).glob(f"run=*/rank=*/kind={kind}/*.parquet"))
    if not files:
        raise NothingReadable(f"no {kind} in the Parquet dataset at {out}")
    return ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(out))


def export(path, out, *, verify: bool = True, row_group_size: int = ROW_GROUP, wait: float = LOCK_WAIT, on_wait=None) -> ParquetReport:
    """Export everything under *path* into the dataset at *out*, one source file at a time.

    Memory stays bounded by the largest source file, not the tree.  A ledger
    (``out/_msnb_export.json``) makes it incremental: exporting again writes
    only the rows the sources added since, as new files.

    Args:
        path: a file, a run directory or a tree of runs.
        out: the dataset's root directory.
        verify: check record CRCs while reading.
        row_group_size: rows per Parquet row group.
        wait: seconds to wait for another export's lock on *out* before stopping (:data:`LOCK_WAIT` by default).
        on_wait: called once with a line naming the lock's holder when the wait begins (the CLI prints it).

    Returns:
        A :class:`ParquetReport`.

    Each source's new parts and its ledger entry land together (:func:`_land`), so
    an export interrupted anywhere (Ctrl-C, SIGTERM, SIGKILL) and run again holds
    every row once and leaves no temporary part behind.  Exports into one folder
    take turns (``out/_msnb_export.lock``): a second one waits for the first (at most
    *wait* seconds, then :class:`UsageError` naming the holder), then writes only the rows that are new since.

    Raises:
        NothingReadable: *path* holds nothing msnb can read.
        MissingDependency: pyarrow is not installed.
        UsageError: *out* holds *path*, is not a directory, is on a pseudo-filesystem or cannot be written, or its
            ``_msnb_export.json`` is not a ledger msnb wrote, or another export held its lock longer than *wait*.
    """

    _pa()
    if not Path(local(path)).exists():  # a bucket's prefix: its mirror (msnb.events.objects)
        raise UsageError(f"no such file or directory: {path}")
    if is_url(out):
        return _export_to_bucket(path, str(out), verify=verify, row_group_size=row_group_size)
    out = prepare_destination(path, out, what="--out")
    with destination_lock(out, LOCK_FILE, wait=wait, on_wait=on_wait):
        return _export_locked(path, out, verify=verify, row_group_size=row_group_size)


def _export_to_bucket(path, url: str, *, verify: bool, row_group_size: int) -> ParquetReport:
    """The dataset written under an object-store prefix: built in a private folder that holds the prefix's ledger,
    then each new part put, the ledger last (an export cut short puts its rows again next time, never loses them).

    Object storage has no lock: one export at a time into a prefix.
    """
    with tempfile.TemporaryDirectory(prefix="msnb-export-") as stage:
        ledger = download(f"{url.rstrip('/')}/{LEDGER_FILE}")
        if ledger is not None:
            (Path(stage) / LEDGER_FILE).write_bytes(ledger)
        report = export(path, stage, verify=verify, row_group_size=row_group_size)
        upload(Path(stage), url, last=(LEDGER_FILE,), skip=(LOCK_FILE,))
    report.out = url.rstrip("/")
    report.files = [f"{report.out}/{os.path.relpath(f, stage)}" if os.path.isabs(f) else f for f in report.files]
    return report


def _export_locked(path, out: Path, *, verify: bool, row_group_size: int) -> ParquetReport:
    """:func:`export`'s work, done while this process alone holds the dataset folder's lock."""
    ledger = Ledger(path, out / LEDGER_FILE, verify=verify, exclude=out)
    problem = _finish_pending(ledger, out)
    if problem:
        raise ledger.refuse(problem)
    report = ParquetReport(str(out))
    this_run = run_labeller(path)(".")  # the path that is one run: its partition is named after its directory
    try:
        for _src, new in ledger.new_rows(ledger.discover(), final=True):
            new.problems = []  # the ledger keeps every problem, including those of files with nothing new
            staged: list = []
            write_result(new, out, row_group_size=row_group_size, report=report, staged=staged, this_run=this_run)
            _land(ledger, out, staged)
        report.problems = list(ledger.problems)
        report.unchanged = ledger.unchanged
        if not ledger.ever_written:
            raise NothingReadable(f"nothing msnb can read in {path}")
        ledger.save()
    except OSError as exc:  # the dataset folder refused a write (full, read-only): sources are read as problems, never raised
        raise UsageError(f"cannot write under {out}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")) from None
    return report


def _land(ledger, out: Path, staged: list) -> None:
    """Record one source's new parts in the ledger, then rename them into place: both land, or neither is seen.

    The ledger (its counts already past these rows) is saved first with the
    parts listed as pending; a process killed after that has its parts
    renamed by the next export (:func:`_finish_pending`), one killed before
    it leaves only hidden temporary files, deleted next time, and the rows
    are exported again.  So a re-run after any interruption holds every row
    once.
    """
    if not staged:
        return
    ledger.state["pending"] = [[os.path.relpath(tmp, out), os.path.relpath(final, out)] for tmp, final in staged]
    ledger.save()
    for tmp, final in staged:
        os.replace(tmp, final)
    ledger.state["pending"] = []


_TMP_PART = re.compile(r"^\.part-\d+-(\d+)-\d+\.parquet\.tmp$")


def _finish_pending(ledger, out: Path) -> str | None:
    """Land the parts an interrupted export recorded, and delete the temporary parts it never recorded.

    Returns:
        What is wrong with the ledger's pending list (None: nothing, or it was finished).
    """
    pending = ledger.state.get("pending", [])
    if not (isinstance(pending, list) and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pending)):
        return "has a 'pending' entry that is not a list of (temporary, final) part names"
    for tmp_rel, final_rel in pending:
        tmp, final = out / tmp_rel, out / final_rel
        if not (tmp.parent == final.parent and inside(tmp, out) and inside(final, out) and _TMP_PART.match(tmp.name) and final.name.endswith(".parquet")):
            return f"has a pending part {final_rel!r} outside the dataset or not named as msnb names them"
        if tmp.is_file() and not tmp.is_symlink():
            os.replace(tmp, final)
    for tmp in out.glob("run=*/rank=*/kind=*/.part-*.parquet.tmp"):
        m = _TMP_PART.match(tmp.name)
        if m and not _alive(int(m.group(1))) and tmp.is_file() and not tmp.is_symlink():
            tmp.unlink()  # written by an export that died before its ledger counted the rows: they are exported again
    if pending:
        ledger.state["pending"] = []
        ledger.save()
    return None


def _alive(pid: int) -> bool:
    """Whether process *pid* still runs (another export writing beside this one keeps its temporary parts)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
