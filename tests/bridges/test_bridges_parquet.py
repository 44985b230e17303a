"""The Parquet dataset, queried by DuckDB and pyarrow.dataset, holds what ``msnb.read`` reads; appends add files only."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import msnb
from msnb.bridges.parquet import LEDGER_FILE, export, open_dataset
from msnb.errors import UsageError
from msnb.events import Follower, ReadResult, ScalarTable

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def q(out, kind, select, order):
    sql = f"select {select} from read_parquet('{out}/*/*/kind={kind}/*.parquet', hive_partitioning=true) order by {order}"
    return duckdb.sql(sql).fetchall()


def nan_eq(a, b) -> bool:
    return np.array_equal(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), equal_nan=True)


def sort_key(row):
    """Rows in a total order even where wall_time or value is NaN."""
    return tuple((1, 0.0) if isinstance(x, float) and x != x else (0, x) for x in row)


def source_tree(ms_files, tmp_path):
    """The writers' summaries plus a nested run (``group/one``), so a run name with a slash is exported too."""
    src = tmp_path / "src"
    shutil.copytree(ms_files, src)
    shutil.copytree(ms_files / "ranks", src / "group" / "one")
    return src


def test_duckdb_reads_the_same_counts_and_values_as_msnb_read(ms_files, tmp_path):
    src = source_tree(ms_files, tmp_path)
    out = tmp_path / "ds"
    report = export(src, out)
    result = msnb.read(src)
    assert report.rows["scalars"] == len(result.scalars) and report.rows["histograms"] == len(result.histograms)

    s = result.scalars
    mine = sorted(zip(s.run.tolist(), s.rank.tolist(), s.tag.tolist(), s.step.tolist(), s.wall_time.tolist(), s.value.tolist()), key=sort_key)
    got = sorted(q(out, "scalars", "run, rank, tag, step, wall_time, value", "run, rank, tag, step"), key=sort_key)
    assert len(got) == len(mine)
    assert [r[:4] for r in got] == [r[:4] for r in mine]
    assert nan_eq([r[4:] for r in got], [r[4:] for r in mine])  # float64 kept exactly, NaN and Inf included
    assert "group/one" in {r[0] for r in got}  # the URI-escaped run name comes back whole

    counts = dict(
        ((r, k, t), n)
        for r, k, t, n in duckdb.sql(
            f"select run, rank, tag, count(*) from read_parquet('{out}/*/*/kind=scalars/*.parquet', hive_partitioning=true) group by all"
        ).fetchall()
    )
    for (run, rank, tag), n in counts.items():
        assert n == len(s.where(run=run, rank=rank, tag=tag))

    h = result.histograms
    got = q(out, "histograms", 'run, rank, tag, step, count, "left", "right", counts', "run, rank, tag, step")
    mine = sorted(zip(h.run.tolist(), h.rank.tolist(), h.tag.tolist(), h.step.tolist(), h.count.tolist(), h.left, h.right, h.counts), key=lambda r: r[:4])
    assert len(got) == len(mine) > 0
    for g, m in zip(got, mine):
        assert g[:5] == m[:5] and g[5] == m[5].tolist() and g[6] == m[6].tolist() and g[7] == m[7].tolist()

    im = result.images
    got = q(out, "images", "tag, step, height, width, png", "tag, step")
    assert [(t, st, hh, w, bytes(p)) for t, st, hh, w, p in got] == sorted(
        zip(im.tag.tolist(), im.step.tolist(), im.height.tolist(), im.width.tolist(), im.png.tolist())
    )

    t = result.tensors
    got = q(out, "tensors", 'tag, step, dims, dtype, "values"', "tag, step")
    mine = sorted(zip(t.tag.tolist(), t.step.tolist(), t.dims, t.dtype, t["values"]), key=lambda r: r[:2])
    assert len(got) == len(mine) > 0
    for g, m in zip(got, mine):
        assert g[:2] == m[:2] and tuple(g[2]) == tuple(m[2]) and g[3] == m[3] and nan_eq(g[4], np.asarray(m[4]).ravel())

    lin = result.lineage
    got = q(out, "lineage", "run, rank, step, lineage_kind, fields", "run, rank, lineage_kind, step")
    assert len(got) == len(lin) > 0
    assert sorted((r, k, st, kind, json.dumps(json.loads(f), sort_keys=True)) for r, k, st, kind, f in got) == sorted(
        (r, k, st, kind, json.dumps(f, sort_keys=True, default=str))
        for r, k, st, kind, f in zip(lin.run.tolist(), lin.rank.tolist(), lin.step.tolist(), lin.kind.tolist(), lin.fields.tolist())
    )
    assert duckdb.sql(f"select count(*) from read_parquet('{out}/*/*/kind=markers/*.parquet', hive_partitioning=true)").fetchall()[0][0] == len(result.markers)


def test_typed_columns_and_pyarrow_dataset(ms_files, tmp_path):
    out = tmp_path / "ds"
    export(ms_files / "record", out)
    scalars = open_dataset(out, "scalars")
    schema = scalars.schema
    assert schema.field("step").type == pa.int64() and schema.field("wall_time").type == pa.float64() and schema.field("value").type == pa.float64()
    assert pa.types.is_dictionary(schema.field("tag").type)
    table = scalars.to_table(filter=pa.dataset.field("tag") == "lr")
    steps, values = msnb.read(ms_files / "record").scalars.series("lr")
    order = np.argsort(table["step"].to_numpy())
    assert table["step"].to_numpy()[order].tolist() == steps.tolist() and table["value"].to_numpy()[order].tolist() == values.tolist()
    hist = open_dataset(out, "histograms").schema
    assert hist.field("right").type == pa.list_(pa.float64()) and hist.field("count").type == pa.int64()


def test_row_groups_bound_memory(tmp_path):
    n = 100_000
    rng = np.random.default_rng(1)
    tags = np.array(["loss", "lr", "grad_norm"], dtype=object)[rng.integers(0, 3, n)]
    result = ReadResult(
        scalars=ScalarTable(
            run=np.full(n, "big", dtype=object),
            rank=np.zeros(n, dtype=np.int64),
            tag=tags,
            step=np.arange(n),
            wall_time=np.arange(n) * 0.1,
            value=rng.standard_normal(n),
        )
    )
    report = msnb.to_parquet(result, tmp_path / "ds", row_group_size=8192)
    (path,) = report.files
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == n and meta.num_row_groups == -(-n // 8192)
    assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == 8192
    total = duckdb.sql(f"select count(*), sum(value) from read_parquet('{tmp_path}/ds/*/*/kind=scalars/*.parquet')").fetchall()[0]
    assert total[0] == n and np.isclose(total[1], result.scalars.value.sum())


def digest(files) -> dict:
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in files}


def test_appending_adds_files_and_never_rewrites(ms_files, tmp_path):
    (orig,) = (ms_files / "record").glob("*_MS")
    data = orig.read_bytes()
    job = tmp_path / "job"
    job.mkdir()
    path = job / orig.name
    cut = len(data) // 3 + 5
    path.write_bytes(data[:cut])
    out = tmp_path / "ds"
    first = export(job, out)
    old = digest(list(out.rglob("*.parquet")))
    assert first.rows["scalars"] > 0

    assert export(job, out).total == 0 and digest(list(out.rglob("*.parquet"))) == old  # unchanged source: nothing written

    with open(path, "ab") as f:
        f.write(data[cut:])
    grown = export(job, out)
    now = digest(list(out.rglob("*.parquet")))
    assert {k: now[k] for k in old} == old  # old files untouched
    assert set(now) - set(old) == set(grown.files) and grown.files
    full = msnb.read(job)
    rows = q(out, "scalars", "tag, step, value", "tag, step")
    assert len(rows) == len(full.scalars)  # no duplicates, nothing lost
    assert sorted(zip(full.scalars.tag.tolist(), full.scalars.step.tolist())) == [r[:2] for r in rows]
    assert json.loads((out / LEDGER_FILE).read_text())["sources"]

    # a Follower's polls, appended one by one, give the same dataset as one read
    live = tmp_path / "live"
    follower = Follower(job)
    msnb.to_parquet(follower.poll(), live)
    msnb.to_parquet(follower.close(), live)
    assert duckdb.sql(f"select count(*) from read_parquet('{live}/*/*/kind=scalars/*.parquet')").fetchall()[0][0] == len(full.scalars)


def test_cli_export_parquet(ms_files, tmp_path, run_msnb):
    proc = run_msnb("export", ms_files / "ranks", "--format", "parquet", "--out", tmp_path / "ds", check=0)
    assert proc.stdout.startswith("wrote 100 scalars")
    assert "nothing new" in run_msnb("export", ms_files / "ranks", "--format", "parquet", "--out", tmp_path / "ds", check=0).stdout
    proc = run_msnb("export", ms_files / "ranks", "--format", "parquet", check=2)
    assert proc.stderr.strip() == "msnb export: error: --format parquet writes a dataset directory: give it with --out DIR"

    damaged = tmp_path / "damaged"
    shutil.copytree(ms_files / "ranks" / "rank_0", damaged)
    (f,) = damaged.glob("*_MS")
    f.chmod(0o600)
    f.write_bytes(f.read_bytes()[:-9])
    proc = run_msnb("export", damaged, "--format", "parquet", "--out", tmp_path / "ds2", "--strict", check=3)
    assert "truncated" in proc.stderr


def test_without_pyarrow_the_error_names_the_extra(ms_files, tmp_path):
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "import msnb\n"
        "from msnb.errors import UsageError\n"
        f"r = msnb.read({str(ms_files / 'ranks')!r})\n"
        "try:\n    msnb.to_parquet(r, 'x')\nexcept UsageError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.stdout.strip() == "Parquet export needs pyarrow: pip install 'msnb[parquet]'", proc.stderr


def test_one_run_is_named_after_its_directory_and_kinds_are_read_one_at_a_time(ms_files, tmp_path):
    """Exporting the run itself writes ``run=<its directory>``, never ``run=.``; each kind's glob reads on its own,
    and all kinds at once need DuckDB's ``union_by_name`` (their columns differ)."""
    run = tmp_path / "job_4711"
    shutil.copytree(ms_files / "record", run)  # scalars, histograms, tensors, images, lineage: kinds with different columns
    out = tmp_path / "ds"
    report = export(run, out)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["run=job_4711"]
    assert {r for (r,) in duckdb.sql(f"select distinct run from read_parquet('{out}/*/*/kind=scalars/*.parquet', hive_partitioning=true)").fetchall()} == {
        "job_4711"
    }
    written = {kind: n for kind, n in report.rows.items() if n}
    assert len(written) > 1  # kinds with different columns: the case a single glob over all of them fails on
    for kind, n in written.items():
        assert duckdb.sql(f"select count(*) from read_parquet('{out}/**/kind={kind}/*.parquet', hive_partitioning=true)").fetchall()[0][0] == n
    every = f"{out}/**/*.parquet"
    with pytest.raises(duckdb.Error):
        duckdb.sql(f"select * from read_parquet('{every}', hive_partitioning=true)").fetchall()
    together = duckdb.sql(f"select kind, count(*) from read_parquet('{every}', hive_partitioning=true, union_by_name=true) group by kind").fetchall()
    assert dict(together) == written

    again = tmp_path / "again"
    msnb.to_parquet(msnb.read(run), again)  # msnb.to_parquet names it the same way
    assert sorted(p.name for p in again.iterdir() if p.is_dir()) == ["run=job_4711"]


def test_a_dataset_directory_that_cannot_be_one_is_refused_in_one_line(ms_files, tmp_path):
    result = msnb.read(ms_files / "ranks")
    (tmp_path / "file").write_text("x")
    for bad, words in (("/proc/msnb-x", "kernel's proc filesystem"), (tmp_path / "file", "not a directory"), (tmp_path / "file" / "sub", "cannot be created")):
        with pytest.raises(UsageError, match=words):
            msnb.to_parquet(result, bad)


EXPORT_IN_A_CHILD = "import json, sys; from msnb.bridges.parquet import export; print(json.dumps(export(sys.argv[1], sys.argv[2]).rows))"


def test_two_exports_into_one_folder_take_turns_and_hold_every_row_once(ms_files, tmp_path):
    src = tmp_path / "src"
    for n in range(4):  # enough source files that the two processes' exports overlap
        shutil.copytree(ms_files, src / f"job{n}")
    out = tmp_path / "ds"
    children = [
        subprocess.Popen([sys.executable, "-c", EXPORT_IN_A_CHILD, str(src), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = [child.communicate(timeout=300) for child in children]
    assert [child.returncode for child in children] == [0, 0], said
    rows = [json.loads(stdout) for stdout, _ in said]
    full = msnb.read(src)
    assert len(full.scalars) > 0
    for kind, table in (("scalars", full.scalars), ("histograms", full.histograms)):
        written = duckdb.sql(f"select count(*) from read_parquet('{out}/*/*/kind={kind}/*.parquet')").fetchall()[0][0]
        assert written == len(table)  # no row twice, none lost
        assert sum(r.get(kind, 0) for r in rows) == len(table)  # the second wrote only what the first had not
    assert not list(out.rglob("*.tmp"))
    assert json.loads((out / LEDGER_FILE).read_text())["pending"] == []


def test_a_lock_file_that_is_no_regular_file_is_refused_in_one_line(ms_files, tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    os.mkfifo(out / "_msnb_export.lock")  # opened for the lock, a FIFO would block or feed nothing: refused
    with pytest.raises(UsageError, match=r"_msnb_export.lock: is not a regular file"):
        export(ms_files, out)
    (out / "_msnb_export.lock").unlink()
    (out / "_msnb_export.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match=r"_msnb_export.lock: cannot be opened"):
        export(ms_files, out)
    assert not (tmp_path / "elsewhere").exists()


def test_a_held_lock_is_waited_on_for_a_bounded_time_naming_its_holder_then_one_line(ms_files, tmp_path, run_msnb):
    out = tmp_path / "ds"
    out.mkdir()
    holder = subprocess.Popen(  # another process holds the folder's lock, as an export in progress does
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from msnb.bridges.ledger import destination_lock\n"
            f"with destination_lock(Path({str(out)!r}), '_msnb_export.lock'):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = run_msnb("export", ms_files / "ranks", "--format", "parquet", "--out", out, "--wait", "1", check=2)
        assert f"held by pid {holder.pid} on " in proc.stderr and "msnb export: waiting up to 1 s for" in proc.stderr
        (error,) = [line for line in proc.stderr.splitlines() if "error" in line]
        assert error.startswith("msnb export: error: ") and "for more than 1 s" in error
        assert not list(out.glob("run=*"))  # nothing written while another export held the folder
    finally:
        holder.kill()
        holder.wait()
    assert run_msnb("export", ms_files / "ranks", "--format", "parquet", "--out", out, "--wait", "1", check=0).stdout.startswith("wrote 100 scalars")
