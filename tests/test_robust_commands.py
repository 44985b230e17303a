"""The newer commands (health, convert, export, report, runs, doctor --kernel, config) against hostile input.

One test per reproduction: each command runs in a child process, as a user
runs it, with a timeout that bounds its time; memory is measured in the child
(an address-space limit, or its own peak RSS), never timed.  Data files are
written by tensorboardX, MindSpore's SummaryRecord (the ``ms_files`` fixture)
or the framing writer checked against tensorboardX (``writers.training_state``).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from msnb.safe_files import MAX_JSON_DEPTH, json_depth, load_json, pseudo_filesystem, read_small

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def msnb(*args, timeout=120, env=None, cwd=None, preexec=None) -> subprocess.CompletedProcess:
    """``python -m msnb.cli ARGS`` with this checkout first on the path."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "msnb.cli", *map(str, args)], capture_output=True, text=True, env=full, timeout=timeout, cwd=cwd, preexec_fn=preexec
    )


def one_line_error(proc, *needles, code=2) -> str:
    """The command failed with *code* and one line on stderr holding every needle, and no traceback."""
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def tbx_run(path: Path, steps: int = 200, *, tag: str = "loss", text: str | None = None) -> Path:
    """A small run written by tensorboardX's SummaryWriter."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(path))
    for i in range(steps):
        w.add_scalar(tag, 1.0 / (i + 1), i)
    if text is not None:
        w.add_text("notes", text, 0)
    w.close()
    return path


def fast_run(path: Path, steps: int, tag: str = "loss") -> None:
    """*steps* scalar points in one event file, framed like tensorboardX (checked against it)."""
    from writers.training_state import FastEvents, check_against_tensorboardx

    checks: list = []
    ev = FastEvents(str(path), checks)
    s = np.arange(1, steps + 1)
    ev.add(tag, s, 1.0 / s)
    ev.close()
    check_against_tensorboardx(checks)


def hashes(root: Path, skip: Path) -> dict:
    """sha256 of every file under *root* except those under *skip* (symlinks hashed as their target text)."""
    out = {}
    for d, dirs, files in os.walk(root):
        if Path(d) == skip or skip in Path(d).parents:
            dirs[:] = []
            continue
        for name in files:
            p = Path(d) / name
            out[str(p)] = os.readlink(p) if p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ------------------------------------------------------------------ the one place small files are read


def test_safe_files_refuse_devices_fifos_size_and_depth(tmp_path):
    """The rules every small file gets: a device, a FIFO, an oversized or 100,000-deep file is one UnsafeFile."""
    from msnb.errors import UnsafeFile

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    for path, kwargs, why in (
        ("/dev/zero", {}, "character device"),
        (fifo, {}, "FIFO"),
        (deep, {}, "nested 100000 deep"),
        (big, {"limit": 1024}, "larger than"),
        (tmp_path, {}, "directory"),
    ):
        with pytest.raises(UnsafeFile, match=why):
            load_json(path, **kwargs)
    assert read_small(tmp_path / "absent", missing_ok=True) is None
    assert json_depth(b'{"a": "[[[[", "b": [[1], {"c": "\\"]]]"}]}') == 3
    assert load_json(_write(tmp_path / "ok.json", json.dumps({"a": [[1]] * 3})))["a"] == [[1]] * 3
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(_write(tmp_path / "edge.json", nested)) is not None
    assert pseudo_filesystem("/proc/self") == "proc" and pseudo_filesystem(tmp_path) is None


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ------------------------------------------------------------------ 1. health


@pytest.mark.parametrize("hostile", ["dev-zero", "fifo", "deep"])
def test_health_reads_a_hostile_global_norm_file_as_a_problem(tmp_path, hostile):
    """abnormal_global_norm.json as a symlink to /dev/zero (grew to 23 GB), a FIFO (hung) or 100,000-deep JSON."""
    run = tbx_run(tmp_path / "run")
    record = run / "abnormal_global_norm.json"
    if hostile == "dev-zero":
        record.symlink_to("/dev/zero")
    elif hostile == "fifo":
        os.mkfifo(record)
    else:
        record.write_text("{" * 0 + "[" * 100_000 + "]" * 100_000)
    limit = 1 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = msnb("health", run, timeout=120, preexec=cap)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "abnormal_global_norm.json could not be read" in proc.stdout + proc.stderr
    # a link leading out of the run folder is not opened at all (docs/GUARANTEES.md: a walk stays inside the folder)
    assert {"dev-zero": "a symlink to /dev/zero, outside", "fifo": "FIFO", "deep": "nested 100000 deep"}[hostile] in proc.stdout + proc.stderr


# ------------------------------------------------------------------ 2. convert's ledger


def _convert_src(ms_files, tmp_path) -> Path:
    src = tmp_path / "work" / "job"
    src.mkdir(parents=True)
    for f in (ms_files / "record").iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    return src


def test_convert_under_a_tampered_ledger_writes_nothing_outside_dst(ms_files, tmp_path):
    """A ledger naming ``../../victim.txt`` (or an absolute path, or a symlink planted in DST) makes convert
    append outside DST no more: one line, exit 2, and every file outside DST byte-identical."""
    src = _convert_src(ms_files, tmp_path)
    dst = tmp_path / "work" / "tb"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    assert msnb("convert", src, "--to", "tensorboard", dst).returncode == 0
    ledger_path = dst / ".msnb-convert.json"
    good = json.loads(ledger_path.read_text())
    rel = next(iter(good["outputs"]))
    real_file = dst / rel / good["outputs"][rel]["file"]

    def tampered(file=None, rel_to=None):
        state = json.loads(json.dumps(good))
        rec = state["outputs"].pop(rel)
        if file is not None:
            rec["file"] = file
            rec["size"] = victim.stat().st_size
        state["outputs"][rel_to or rel] = rec
        state["sources"] = {}  # convert everything again: it would append to the named file
        return state

    cases = {
        "dot-dot": tampered(os.path.relpath(victim, dst / rel)),
        "absolute": tampered(str(victim)),
        "folder": tampered(rel_to="../../" + victim.parent.name),
        "int": 7,
        "list": [1, 2],
        "outputs-list": {**good, "outputs": ["../victim.txt"]},
        "version": {**good, "version": 99},
    }
    for name, state in cases.items():
        ledger_path.write_text(json.dumps(state))
        before = hashes(tmp_path, dst)
        proc = msnb("convert", src, "--to", "tensorboard", dst)
        one_line_error(proc, str(ledger_path))
        assert hashes(tmp_path, dst) == before, name

    # a symlink planted in DST in place of the output file, the ledger otherwise intact
    ledger_path.write_text(json.dumps({**good, "sources": {}}))
    real_file.unlink()
    real_file.symlink_to(victim)
    before = hashes(tmp_path, dst)
    one_line_error(msnb("convert", src, "--to", "tensorboard", dst), "outside the destination")
    assert hashes(tmp_path, dst) == before
    assert victim.read_text() == "precious\n"

    # the ledger's temporary name planted as a symlink: the ledger is written beside it, never through it
    real_file.unlink()
    ledger_path.write_text(json.dumps(good))
    (dst / ".msnb-convert.json.tmp").symlink_to(victim)
    before = hashes(tmp_path, dst)
    assert msnb("convert", src, "--to", "tensorboard", dst).returncode == 0
    assert hashes(tmp_path, dst) == before and victim.read_text() == "precious\n"

    # a directory where the ledger should be, and a FIFO: one line each, never a hang or a traceback
    ledger_path.unlink()
    ledger_path.mkdir()
    one_line_error(msnb("convert", src, "--to", "tensorboard", dst), "directory")
    ledger_path.rmdir()
    os.mkfifo(ledger_path)
    one_line_error(msnb("convert", src, "--to", "tensorboard", dst, timeout=60), "FIFO")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_an_export_to_standard_output_refuses_an_out_it_would_leave_unused(tmp_path, fmt):
    """``--out`` is the Parquet dataset's folder; with csv or jsonl it was ignored and the rows went to stdout, no file."""
    src = tbx_run(tmp_path / "runs" / "a")
    proc = msnb("export", src, "--format", fmt, "--out", tmp_path / "rows.csv")
    one_line_error(proc, "--out is the Parquet dataset's directory", f"{fmt} goes to standard output")
    assert proc.stdout == "" and not (tmp_path / "rows.csv").exists()


def test_parquet_export_refuses_a_foreign_ledger_instead_of_overwriting_it(tmp_path):
    pytest.importorskip("pyarrow")
    src = tbx_run(tmp_path / "runs" / "a")
    out = tmp_path / "dataset"
    out.mkdir()
    foreign = out / "_msnb_export.json"
    foreign.write_text('{"somebody": "else"}')
    one_line_error(msnb("export", src, "--format", "parquet", "--out", out), str(foreign), "not a ledger msnb wrote")
    assert foreign.read_text() == '{"somebody": "else"}'
    foreign.write_text(json.dumps({"version": 1, "sources": {}, "pending": [["../../.part-1-1-1.parquet.tmp", "../../x.parquet"]]}))
    one_line_error(msnb("export", src, "--format", "parquet", "--out", out), "outside the dataset")


# ------------------------------------------------------------------ 3. report memory and a long tag


def test_report_memory_does_not_grow_with_the_longest_tag(tmp_path):
    """40,000 points and one 20,000-character tag: fixed-width strings would need 3.2 GB (rows x longest tag x 4)."""
    run = tmp_path / "run"
    fast_run(run, 40_000)
    tbx_run(run, 1, tag="x" * 20_000)
    limit = 1500 << 20

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = msnb("report", run, "--out", tmp_path / "r.html", timeout=300, preexec=cap)
    assert proc.returncode in (0, 1) and "wrote" in proc.stdout, proc.stderr[-3000:]  # 1: written, the run not judged
    assert "x" * 200 in (tmp_path / "r.html").read_text()


# ------------------------------------------------------------------ 4. an interrupted Parquet export


def _parquet_rows(out: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in out.glob("run=*/rank=*/kind=scalars/*.parquet"))


def test_interrupted_parquet_export_holds_every_row_once(tmp_path):
    """Killed (SIGKILL, no clean-up at all) at several moments, then run again: every row once, no hidden part left."""
    pytest.importorskip("pyarrow")
    import msnb as lib
    from msnb.bridges.parquet import open_dataset

    src = tmp_path / "runs"
    for i in range(24):
        fast_run(src / f"run{i:02d}", 20_000)
    total = len(lib.read(src).scalars)
    out = tmp_path / "dataset"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for delay in (0.0, 0.3, 0.8):
        proc = subprocess.Popen([sys.executable, "-m", "msnb.cli", "export", str(src), "--format", "parquet", "--out", str(out)], env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not list(out.glob("run=*/rank=*/kind=*/.*.tmp")):
            time.sleep(0.005)  # wait until a part is being written, then a little longer
        time.sleep(delay)
        proc.kill()
        proc.wait(timeout=60)
        assert _parquet_rows(out) <= total
    assert msnb("export", src, "--format", "parquet", "--out", out, timeout=300).returncode == 0
    assert _parquet_rows(out) == total
    assert not list(out.rglob("*.tmp")), list(out.rglob("*.tmp"))
    table = open_dataset(out).to_table(columns=["run", "step"]).to_pandas()
    assert not table.duplicated().any() and len(table) == total


def test_a_part_recorded_but_not_renamed_lands_on_the_next_export(tmp_path, monkeypatch):
    """The window between the ledger's save and the rename: the next export renames the recorded parts."""
    pytest.importorskip("pyarrow")
    from msnb.bridges import parquet

    src = tmp_path / "runs"
    for i in range(3):
        tbx_run(src / f"r{i}", 50)
    out = tmp_path / "dataset"
    real = os.replace
    landed = []

    def crash_on_second_rename(a, b):
        if str(b).endswith(".parquet"):
            landed.append(b)
            if len(landed) == 2:
                raise KeyboardInterrupt  # the process stops here (Ctrl-C)
        return real(a, b)

    monkeypatch.setattr(parquet.os, "replace", crash_on_second_rename)
    with pytest.raises(KeyboardInterrupt):
        parquet.export(src, out)
    monkeypatch.setattr(parquet.os, "replace", real)
    assert list(out.rglob(".*.tmp"))
    parquet.export(src, out)
    assert _parquet_rows(out) == 150 and not list(out.rglob("*.tmp"))


# ------------------------------------------------------------------ 5. run folders that are not UTF-8


def test_parquet_export_of_a_run_folder_that_is_not_utf8(tmp_path):
    pytest.importorskip("pyarrow")
    from msnb.bridges.parquet import open_dataset

    src = tmp_path / "runs"
    src.mkdir()
    tbx_run(Path(os.fsdecode(os.fsencode(src) + b"/caf\xe9-run")), 30)
    out = tmp_path / "dataset"
    proc = msnb("export", src, "--format", "parquet", "--out", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [p.name for p in out.glob("run=*")] == ["run=caf%5Cudce9-run"]
    table = open_dataset(out).to_table()
    assert table.num_rows == 30 and set(table.column("run").to_pylist()) == {"caf\\udce9-run"}


# ------------------------------------------------------------------ 6. report file modes


def test_report_follows_the_umask_and_keeps_a_replaced_files_mode(tmp_path):
    run = tbx_run(tmp_path / "run")
    private = tmp_path / "private.html"
    private.write_text("old")
    private.chmod(0o600)
    for out, mask, want in ((tmp_path / "new-077.html", 0o077, 0o600), (tmp_path / "new-022.html", 0o022, 0o644), (private, 0o022, 0o600)):
        proc = msnb("report", run, "--out", out, preexec=lambda m=mask: os.umask(m))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert stat.S_IMODE(out.stat().st_mode) == want, (out.name, oct(out.stat().st_mode))


# ------------------------------------------------------------------ 7. runs stays inside BASE


def test_runs_does_not_walk_out_of_base(tmp_path):
    """A symlink to / inside BASE walked the machine (1,115 runs, 34 s): now reported, not followed."""
    base = tmp_path / "base"
    tbx_run(base / "job")
    (base / "root").symlink_to("/")
    (base / "alias").symlink_to(base / "job")  # a link that stays inside BASE is followed (discovery reads it once)
    deep = base.joinpath(*[f"d{i}" for i in range(34)])
    tbx_run(deep)
    proc = msnb("runs", base, "--json", timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    names = sorted(row["run"] for row in json.loads(proc.stdout)["runs"])
    assert names == ["job"], names
    assert "a symlink to /, outside" in proc.stderr and "levels below" in proc.stderr
    one_line_error(msnb("runs", "/proc", timeout=60), "proc filesystem")


# ------------------------------------------------------------------ 8. doctor --kernel: bounded output, nothing left running


def _fake_kernel(tmp_path: Path, name: str, script: str, jupyter_dirs) -> None:
    spec_dir = jupyter_dirs["data"] / "kernels" / name
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.py").write_text(textwrap.dedent(script))
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": [sys.executable, str(spec_dir / "kernel.py"), "{connection_file}"], "display_name": name}))


def test_doctor_kernel_keeps_a_bounded_tail_and_ends_a_setsid_daemon(tmp_path, jupyter_dirs):
    """A kernel that prints 300 MB and leaves a ``setsid`` daemon: the check's memory stays small, the daemon ends."""
    pidfile = tmp_path / "daemon.pid"
    _fake_kernel(
        tmp_path,
        "noisy",
        f"""
        import os, subprocess
        d = subprocess.Popen(["setsid", "sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open({str(pidfile)!r}, "w").write(str(d.pid))
        chunk = b"x" * (1 << 20) + b"\\n"
        for _ in range(300):
            os.write(1, chunk)
        os.write(2, b"the last words of the kernel\\n")
        """,
        jupyter_dirs,
    )
    code = textwrap.dedent(
        """
        import json, sys
        from msnb.kernel_check import check_kernel

        def high_water_mb():
            # VmHWM is this process's own peak; ru_maxrss is not (Linux keeps it across exec, so a child
            # of a big pytest process reports pytest's peak)
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024

        before = high_water_mb()
        r = check_kernel("noisy", startup_timeout=60, shell_env={})
        print(json.dumps({"growth_mb": high_water_mb() - before, "text": r.format_text()}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["growth_mb"] < 100, got["growth_mb"]  # the old check read all 300 MB of output into one string (and decoded it)
    assert "the last words of the kernel" in got["text"]
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.1)
    assert not _running(pid), f"the kernel's setsid daemon {pid} outlived the check"


def test_probe_output_keeps_the_answer_and_a_bounded_tail():
    """What the kernel prints over iopub (512 MB of JSON once): the answer line whole, of the rest only a tail."""
    from msnb.kernel_check import MARK, MAX_OUTPUT_TAIL, MAX_PROBE_ANSWER, _ProbeOutput, _Tail

    out = _ProbeOutput()
    junk = ("{" + "x" * 999 + "\n") * 1024  # 1 MB of lines that are not the answer
    for _ in range(64):
        out.feed(junk)
    answer = json.dumps({"python": "3.11", "env": {"K": "v" * 1000}})
    for piece in (MARK[:5], MARK[5:] + answer[:10], answer[10:] + "\nafter\n"):  # split across messages, as iopub does
        out.feed(piece)
    out.feed("y" * (MAX_PROBE_ANSWER + 10))  # a line longer than any answer: dropped, never kept whole
    out.finish()
    assert out.answer == answer
    assert len(out.tail.text()) <= MAX_OUTPUT_TAIL and sum(len(p) for p in out._pieces) <= MAX_PROBE_ANSWER
    huge = _ProbeOutput()
    huge.feed(MARK + "[" + "1," * (MAX_PROBE_ANSWER // 2 + 10))
    huge.finish()
    assert huge.answer is None and huge.too_big
    tail = _Tail(100)
    for i in range(10_000):
        tail.add(f"line {i}\n")
    assert tail.text().endswith("line 9999\n") and len(tail.text()) == 100


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent has not collected it yet


@pytest.mark.parametrize("env", [["A=1"], "deep"])
def test_doctor_kernel_with_a_malformed_kernel_json_is_one_line(tmp_path, jupyter_dirs, env):
    spec_dir = jupyter_dirs["data"] / "kernels" / "bad"
    spec_dir.mkdir(parents=True)
    argv = json.dumps([sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    if env == "deep":
        (spec_dir / "kernel.json").write_text('{"argv": ' + argv + ', "display_name": "bad", "env": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        (spec_dir / "kernel.json").write_text(json.dumps({"argv": json.loads(argv), "display_name": "bad", "env": env}))
    jenv = {k: str(v) for k, v in (("JUPYTER_DATA_DIR", jupyter_dirs["data"]), ("JUPYTER_PATH", jupyter_dirs["prefix"] / "share" / "jupyter"))}
    one_line_error(msnb("doctor", "--kernel", "bad", env=jenv, timeout=120), "kernel.json", "deep" if env == "deep" else "env")
    listed = msnb("list-kernels", env=jenv, timeout=120)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr and "unreadable" in listed.stdout, listed.stderr[-2000:]


# ------------------------------------------------------------------ 9. a destination above the source


def test_destination_that_holds_the_source_is_refused_with_the_reason(ms_files, tmp_path):
    src = _convert_src(ms_files, tmp_path)
    before = hashes(tmp_path, tmp_path / "nothing")
    one_line_error(msnb("convert", src, "--to", "tensorboard", src.parent), "holds the source")
    if _has_pyarrow():
        one_line_error(msnb("export", src, "--format", "parquet", "--out", src.parent), "holds the source")
    assert hashes(tmp_path, tmp_path / "nothing") == before


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------ 10. one line instead of a traceback


def test_bad_destinations_and_outputs_are_one_line(ms_files, tmp_path):
    src = _convert_src(ms_files, tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for dst, why in ((a_file, "not a directory"), (a_file / "under", "cannot be created"), ("/proc/self/tb", "proc filesystem")):
        one_line_error(msnb("convert", src, "--to", "tensorboard", dst), why)
        if _has_pyarrow():
            one_line_error(msnb("export", src, "--format", "parquet", "--out", dst), why)
    # --out in a folder that cannot be written
    run = tbx_run(tmp_path / "run")
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        one_line_error(msnb("report", run, "--out", locked / "r.html"), "not writable")
    elif os.path.isdir("/sys/kernel"):  # root writes through a 0555 folder; the one output rule refuses /sys before trying
        one_line_error(msnb("report", run, "--out", "/sys/kernel/msnb-report.html"), "/sys/kernel", "kernel folder")


@pytest.mark.parametrize("command", ["runs", "report"])
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, command):
    """SIGINT to the whole process group, as a terminal sends it, while the command reads."""
    base = tmp_path / "runs"
    for i in range(3):
        fast_run(base / f"r{i}", 300_000)
    args = ["runs", base] if command == "runs" else ["report", base, "--out", tmp_path / "r.html"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "msnb.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not _reads_under(proc.pid, str(base)):
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert err.strip() == f"msnb {command}: interrupted", err[-3000:]


def _reads_under(pgid: int, base: str) -> bool:
    """Whether a process of group *pgid* has a file under *base* open (the command is past its imports, reading)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pgid:
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(base):
                    return True
        except OSError:
            continue
    return False


# ------------------------------------------------------------------ 11. export streams


def test_csv_export_memory_beside_the_table_stays_small(tmp_path):
    """1,000,000 points: turning every cell into a Python object at once added ~57 MB (1.1 GB for a 311 MB log).

    Measured in a child: its peak RSS is reset after the read (``/proc/self/clear_refs``), so the peak
    read back after the export is the export's own, whatever the read's transient peak was.
    """
    run = tmp_path / "run"
    fast_run(run / "rank_0", 1_000_000)  # a rank: every row's rank becomes a Python int
    code = textwrap.dedent(
        f"""
        import os, msnb
        from msnb.events.export import write

        def status(field):
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

        r = msnb.read({str(run)!r})
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
        before = status("VmRSS")
        with open(os.devnull, "w") as f:
            n = write(r, "scalars", "csv", f)
        print(n, status("VmHWM") - before)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    n, grown = proc.stdout.split()
    assert int(n) == 1_000_000
    assert float(grown) < 25, f"the export grew the peak by {grown} MB beside the table"


# ------------------------------------------------------------------ 12. ${} fan-out bombs


@pytest.mark.parametrize("levels,first", [(31, "xxxxxxxxxx"), (24, "")])
def test_reference_fan_out_bomb_is_refused_before_resolving(tmp_path, levels, first):
    """31 levels was a MemoryError; 24 levels of empty strings ran for minutes (OmegaConf resolves each use again)."""
    lines = [f'a0: "{first}"'] + [f'a{i}: "${{a{i - 1}}}${{a{i - 1}}}"' for i in range(1, levels + 1)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    line = one_line_error(msnb("config", path, timeout=60), str(path), "key 'a")
    assert "references" in line
    ok = tmp_path / "ok.yaml"
    ok.write_text("\n".join(lines[:8]) + "\n")  # 7 levels: a real config's use of references
    assert msnb("config", ok, timeout=60).returncode in (0, 1)


# ------------------------------------------------------------------ 13. NUL characters in the page


def test_report_html_holds_no_nul(tmp_path):
    run = tbx_run(tmp_path / "run", text="before\0after")
    out = tmp_path / "r.html"
    proc = msnb("report", run, "--out", out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = out.read_bytes()
    assert b"\0" not in page and "before\ufffdafter" in page.decode("utf-8")
